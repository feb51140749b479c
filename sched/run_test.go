package sched

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"rosetop/engine"
)

// TestRunCancelClose drives the real loop: submissions from several goroutines through tokenize
// workers, cancels racing with the run, a wake-up after the loop went idle, then ctx cancel and
// Close. Every request ends exactly once, the pool ends empty, and no goroutine is left.
func TestRunCancelClose(t *testing.T) {
	defer goleak.VerifyNone(t)
	clock := newFakeClock()
	be := newFakeBackend(t, clock, 4)
	s, err := New(Options{Backend: be, Layout: engine.KVLayout{BlockSize: 4, NumBlocks: 40, Paged: true},
		PrefixCache: true, MaxSeqLen: 64, Tokenizer: &byteTokenizer{}, TokenizeWorkers: 2, Clock: clock, EOS: -1,
		Config: Config{MaxBatch: 6, PrefillMaxBatch: 3}})
	if err != nil {
		t.Fatal(err)
	}
	cancel, out, ran := runLoop(s)

	records := map[RequestID]*Record{}
	collect := func(want int) {
		t.Helper()
		for len(records) < want {
			o := <-out
			for _, e := range o.Events {
				if e.Kind != EventFinished {
					continue
				}
				if records[e.ID] != nil {
					t.Fatalf("request %d finished twice", e.ID)
				}
				records[e.ID] = e.Record
			}
		}
	}
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := range 10 {
				id, err := s.Submit(Request{Text: fmt.Sprintf("prompt %d.%d", g, i), MaxNewTokens: 5 + i})
				if err != nil {
					t.Errorf("Submit: %v", err)
					return
				}
				if i%3 == 0 {
					s.Cancel(id)
				}
			}
		})
	}
	wg.Wait()
	collect(40)
	// The loop is (or is about to be) idle; a new request must wake it.
	if _, err := s.Submit(Request{Tokens: []int32{1, 2, 3}, MaxNewTokens: 3}); err != nil {
		t.Fatal(err)
	}
	collect(41)
	cancel()
	if err := <-ran; !errors.Is(err, context.Canceled) {
		t.Fatalf("Run returned %v, want context.Canceled", err)
	}
	s.Close()
	s.Close() // idempotent
	for _, e := range be.errs {
		t.Error(e)
	}
	var cancelled int
	for _, r := range records {
		switch r.Reason {
		case FinishCancelled:
			cancelled++
		case FinishLength:
		default:
			t.Errorf("request %d ended %s (%v)", r.ID, r.Reason, r.Err)
		}
	}
	if snap := s.Snapshot(); snap.KVUsed != 0 || snap.Running != 0 || snap.Waiting != 0 || snap.Finished != 41 {
		t.Fatalf("after the run: %+v", snap)
	}
	t.Logf("%d of 41 cancelled before finishing", cancelled)
}

// TestRunBackendError: Run delivers the failed step's output, then returns the error.
func TestRunBackendError(t *testing.T) {
	defer goleak.VerifyNone(t)
	clock := newFakeClock()
	be := newFakeBackend(t, clock, 4)
	be.fail = func(call int) bool { return call == 2 }
	s, err := New(Options{Backend: be, Layout: engine.KVLayout{BlockSize: 4, NumBlocks: 8, Paged: true},
		MaxSeqLen: 32, Clock: clock, Config: Config{MaxBatch: 2, PrefillMaxBatch: 2}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	id, _ := s.Submit(Request{Tokens: []int32{1, 2}, MaxNewTokens: 4})
	out := make(chan StepOutput, 8)
	if err := s.Run(context.Background(), out); !errors.Is(err, errFake) {
		t.Fatalf("Run returned %v, want the backend's error", err)
	}
	close(out)
	var failed bool
	for o := range out {
		for _, e := range o.Events {
			failed = failed || (e.Kind == EventFinished && e.ID == id && e.Record.Reason == FinishError)
		}
	}
	if !failed {
		t.Fatal("the failed request's record was not delivered")
	}
}

// TestTokenizeWorkersFIFO: with tokenize workers, admission follows submission order even when a
// later prompt is tokenized first: the head of the queue holds the line until it is ready.
func TestTokenizeWorkersFIFO(t *testing.T) {
	defer goleak.VerifyNone(t)
	tok := &byteTokenizer{gates: map[string]chan struct{}{"A slow one": make(chan struct{})}}
	o := pagedOptions(64, Config{MaxBatch: 4, PrefillMaxBatch: 4})
	o.Tokenizer, o.TokenizeWorkers = tok, 2
	h := newHarness(t, o)
	a, err := h.s.Submit(Request{Text: "A slow one", MaxNewTokens: 3})
	if err != nil {
		t.Fatal(err)
	}
	b, err := h.s.Submit(Request{Text: "B", MaxNewTokens: 3})
	if err != nil {
		t.Fatal(err)
	}
	h.order = append(h.order, a, b)
	// Step until B's tokens have reached the loop (no engine work can happen meanwhile).
	for {
		out := h.step()
		if out.Snapshot.Admitted != 0 || out.Snapshot.Waiting != 2 {
			t.Fatalf("admitted past a prompt still tokenizing: %+v", out.Snapshot)
		}
		if out.Snapshot.Tokenizing == 1 {
			break
		}
		runtime.Gosched()
	}
	close(tok.gates["A slow one"])
	for h.step().Snapshot.Admitted == 0 {
		runtime.Gosched()
	}
	if len(h.be.admits) != 2 || h.be.admits[0] != 'A' || h.be.admits[1] != 'B' {
		t.Fatalf("admission order %q, want A then B", h.be.admits)
	}
	h.drain(100)
	ra, rb := h.records[a].Times, h.records[b].Times
	if !(rb.Tokenized < ra.Tokenized && ra.Admitted <= rb.Admitted) {
		t.Fatalf("tokenized B %v < A %v, admitted A %v <= B %v: want both", rb.Tokenized, ra.Tokenized, ra.Admitted, rb.Admitted)
	}
	h.s.Close()
}

// TestCloseFailsPendingTokenize: prompts still queued for a worker at Close end with an error.
func TestCloseFailsPendingTokenize(t *testing.T) {
	defer goleak.VerifyNone(t)
	gate := make(chan struct{})
	tok := &byteTokenizer{gates: map[string]chan struct{}{"stuck": gate}}
	o := pagedOptions(64, Config{MaxBatch: 4, PrefillMaxBatch: 4})
	o.Tokenizer, o.TokenizeWorkers = tok, 1
	h := newHarness(t, o)
	h.order = append(h.order, must(h.s.Submit(Request{Text: "stuck", MaxNewTokens: 2})))
	queued := must(h.s.Submit(Request{Text: "queued", MaxNewTokens: 2}))
	h.order = append(h.order, queued)
	closed := make(chan struct{})
	go func() { h.s.Close(); close(closed) }()
	// Close waits for the worker, stuck in Encode; "queued" never reached it.
	for {
		h.s.mu.Lock()
		c := h.s.closed
		h.s.mu.Unlock()
		if c {
			break
		}
		runtime.Gosched()
	}
	close(gate)
	<-closed
	h.drain(100)
	if r := h.records[queued]; r.Reason != FinishError || !errors.Is(r.Err, ErrClosed) {
		t.Fatalf("queued prompt ended %s (%v), want an error wrapping ErrClosed", r.Reason, r.Err)
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// TestBurstStartsTogether: requests submitted back to back to a loop that holds none, with
// Config.BurstQuiet set, start in one step wherever the loop was when they came: it gathers
// arrivals until none has come for BurstQuiet on the scheduler's clock, which stands still here
// until the whole burst is in. Without BurstQuiet the loop does not wait for the clock.
func TestBurstStartsTogether(t *testing.T) {
	defer goleak.VerifyNone(t)
	for _, quiet := range []time.Duration{0, 100 * time.Microsecond} {
		clock := newFakeClock()
		clock.still.Store(true)
		be := newFakeBackend(t, clock, 4)
		s, err := New(Options{Backend: be, Layout: engine.KVLayout{BlockSize: 4, NumBlocks: 64, Paged: true},
			MaxSeqLen: 64, Clock: clock, EOS: -1, Config: Config{MaxBatch: 16, PrefillMaxBatch: 16, BurstQuiet: quiet}})
		if err != nil {
			t.Fatal(err)
		}
		cancel, out, ran := runLoop(s)
		const burst = 12
		for i := range burst {
			if _, err := s.Submit(Request{Tokens: []int32{int32(i + 1), 7}, MaxNewTokens: 2}); err != nil {
				t.Fatal(err)
			}
		}
		if quiet == 0 { // nothing to wait for: the steps run with the clock still
			admitted := 0
			for admitted < burst {
				admitted += (<-out).Snapshot.Admitted
			}
		} else {
			// The burst is in: move the clock on until the loop's quiet spell ends and it steps.
			var first StepOutput
			for stepped := false; !stepped; {
				select {
				case first = <-out:
					stepped = true
				default:
					clock.Advance(quiet / 4)
					runtime.Gosched()
				}
			}
			if got := first.Snapshot.Admitted; got != burst {
				t.Errorf("the first step after a burst of %d admitted %d", burst, got)
			}
		}
		cancel()
		go func() { // drain until the loop returns
			for range out {
			}
		}()
		if err := <-ran; !errors.Is(err, context.Canceled) {
			t.Errorf("Run returned %v, want context.Canceled", err)
		}
		close(out)
		s.Close()
	}
}

// runLoop starts s.Run on a goroutine: its steps come on out, what it returns on ran, and
// cancel stops it.
func runLoop(s *Scheduler) (cancel context.CancelFunc, out chan StepOutput, ran chan error) {
	ctx, cancel := context.WithCancel(context.Background())
	out, ran = make(chan StepOutput), make(chan error, 1)
	go func() { ran <- s.Run(ctx, out) }()
	return cancel, out, ran
}
