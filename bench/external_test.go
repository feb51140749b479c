package bench

import (
	"context"
	"errors"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"rosetop/sched"
)

// externalSession starts an external session on the real engine (embedded model, CPU) whose
// steps' snapshots go to snaps (the latest is kept when the consumer lags).
func externalSession(t *testing.T, window int) (*Session, *snapTap) {
	t.Helper()
	tap := &snapTap{published: make(chan struct{}, 1)}
	notify := func() {
		select {
		case tap.published <- struct{}{}:
		default:
		}
	}
	cfg := testConfig(requests(window, 8), func(c *Config) { c.Sched.MaxBatch, c.Sched.PrefillMaxBatch = 8, 8 })
	s, err := NewSession(context.Background(), cfg, SessionOptions{Provider: cpuEngine(2), External: true, OnStep: tap.observe, onPublish: notify})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return s, tap
}

// snapTap keeps the latest step snapshot (an OnStep hook); published gets a token after every
// new View.
type snapTap struct {
	mu        sync.Mutex
	last      sched.Snapshot // guarded by mu
	steps     int            // guarded by mu
	published chan struct{}
}

func (p *snapTap) observe(so *sched.StepOutput) {
	p.mu.Lock()
	p.last, p.steps = so.Snapshot, p.steps+1
	p.mu.Unlock()
}

func (p *snapTap) latest() (sched.Snapshot, int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.last, p.steps
}

// drainStream reads st to its end and returns its token ids and record.
func drainStream(t *testing.T, st *Stream) ([]int32, *sched.Record) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var toks []int32
	for {
		e, err := st.Next(ctx)
		if errors.Is(err, io.EOF) {
			t.Fatal("stream ended without a finished event")
		}
		if err != nil {
			t.Fatal(err)
		}
		switch e.Kind {
		case sched.EventTokens:
			toks = append(toks, e.Tokens...)
		case sched.EventFinished:
			if _, err := st.Next(ctx); !errors.Is(err, io.EOF) {
				t.Errorf("after the finished event Next returned %v, want io.EOF", err)
			}
			return toks, e.Record
		}
	}
}

// TestExternalSubmitStreams: requests submitted from many goroutines each get exactly their own
// tokens, in order, then their record; the finished requests fill windows that become runs, the
// first of them the cold run.
func TestExternalSubmitStreams(t *testing.T) {
	s, tap := externalSession(t, 4)
	const n = 10
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			st, err := s.Submit(context.Background(), sched.Request{Text: "Hello world " + string(rune('a'+i)), MaxNewTokens: 5})
			if err != nil {
				errs <- err
				return
			}
			toks, rec := drainStream(t, st)
			if rec.Reason != sched.FinishLength || len(toks) != 5 || len(rec.Output) != 5 {
				t.Errorf("request %d: %d streamed tokens, record %s with %d outputs", i, len(toks), rec.Reason, len(rec.Output))
			}
			for j := range toks {
				if j < len(rec.Output) && toks[j] != rec.Output[j] {
					t.Errorf("request %d: streamed token %d = %d, record has %d", i, j, toks[j], rec.Output[j])
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if w := s.Waiting(); w != 0 {
		t.Errorf("Waiting() = %d after every request finished", w)
	}
	v := waitFor(t, s, tap.published, "a cold and a steady window", func(v *View) bool { return v.Cold != nil && len(v.Steady) >= 1 })
	if v.Cold.Requests != 4 || v.Steady[0].Requests != 4 || v.Cold.Label != "requests 1-4 (cold, engine 1)" || v.Header.Schedule != "external" {
		t.Errorf("windows: cold %+v steady %+v schedule %q", v.Cold, v.Steady[0], v.Header.Schedule)
	}
	if _, err := s.Do(ActTogglePause); !errors.Is(err, ErrExternalLoad) {
		t.Errorf("pause on an external session: %v, want ErrExternalLoad", err)
	}
}

// TestExternalCancelFreesBlocks: cancelling a request mid-stream ends it with reason cancelled
// and returns every KV block (the scheduler's snapshot shows none in use).
func TestExternalCancelFreesBlocks(t *testing.T) {
	s, tap := externalSession(t, 64)
	st, err := s.Submit(context.Background(), sched.Request{Text: "Hello", MaxNewTokens: 100})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if e, err := st.Next(ctx); err != nil || e.Kind != sched.EventTokens {
		t.Fatalf("first event %+v %v, want tokens", e, err)
	}
	if snap, _ := tap.latest(); snap.KVUsed == 0 {
		t.Fatalf("a running request holds no KV block: %+v", snap)
	}
	st.Cancel()
	st.Cancel() // idempotent
	_, rec := drainStream(t, st)
	if rec.Reason != sched.FinishCancelled {
		t.Fatalf("reason %s, want cancelled", rec.Reason)
	}
	if snap, _ := tap.latest(); snap.KVUsed != 0 {
		t.Errorf("after the cancel %d KV blocks are still in use", snap.KVUsed)
	}
}

// TestExternalStopCompletes: a request its caller stops on a stop string of its own ends with
// reason stop, frees its blocks and counts as completed in its window (measured, not cancelled).
func TestExternalStopCompletes(t *testing.T) {
	s, tap := externalSession(t, 1)
	st, err := s.Submit(context.Background(), sched.Request{Text: "Hello", MaxNewTokens: 100})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if e, err := st.Next(ctx); err != nil || e.Kind != sched.EventTokens {
		t.Fatalf("first event %+v %v, want tokens", e, err)
	}
	st.Stop()
	st.Cancel() // a later cancel does not change the reason
	_, rec := drainStream(t, st)
	if rec.Reason != sched.FinishStop || len(rec.Output) == 0 || len(rec.Output) >= 100 {
		t.Fatalf("reason %s after %d outputs, want stop before the length", rec.Reason, len(rec.Output))
	}
	if snap, _ := tap.latest(); snap.KVUsed != 0 {
		t.Errorf("after the stop %d KV blocks are still in use", snap.KVUsed)
	}
	v := waitFor(t, s, tap.published, "the cold window", func(v *View) bool { return v.Cold != nil })
	if c := v.Cold; c.Requests != 1 || c.Cancelled != 0 || c.Failed != 0 || c.TTFT.N != 1 || c.CompletionTokens != len(rec.Output) {
		t.Errorf("cold window %+v: want the stopped request completed and measured", c)
	}
}

// TestExternalRebuildDrains: an engine rebuild lets the request in flight finish on the old
// engine, and a request submitted meanwhile finishes (on whichever engine took it).
func TestExternalRebuildDrains(t *testing.T) {
	s, tap := externalSession(t, 64)
	st, err := s.Submit(context.Background(), sched.Request{Text: "Hello", MaxNewTokens: 40})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Do(ActTogglePaged); err != nil {
		t.Fatal(err)
	}
	second := make(chan *Stream, 1)
	go func() {
		st2, err := s.Submit(context.Background(), sched.Request{Text: "Hi", MaxNewTokens: 3})
		if err != nil {
			t.Error(err)
		}
		second <- st2
	}()
	if _, rec := drainStream(t, st); rec.Reason != sched.FinishLength || len(rec.Output) != 40 {
		t.Errorf("the request in flight during a rebuild ended %s with %d tokens, want all 40", rec.Reason, len(rec.Output))
	}
	st2 := <-second
	if st2 == nil {
		t.FailNow()
	}
	if _, rec := drainStream(t, st2); rec.Reason != sched.FinishLength {
		t.Errorf("request submitted during the rebuild: %s", rec.Reason)
	}
	waitFor(t, s, tap.published, "the rebuilt engine (paged)", func(v *View) bool { return v.Header.Paged && v.Header.Phase == PhaseLive })
}

// TestExternalCloseEndsStreams: closing the session ends every stream (cancelled or abandoned)
// and refuses new submissions.
func TestExternalCloseEndsStreams(t *testing.T) {
	tap := &snapTap{}
	s, err := NewSession(context.Background(), testConfig(requests(64, 8)), SessionOptions{Provider: cpuEngine(2), External: true, OnStep: tap.observe})
	if err != nil {
		t.Fatal(err)
	}
	st, err := s.Submit(context.Background(), sched.Request{Text: "Hello", MaxNewTokens: 500})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, rec := drainStream(t, st); rec.Reason == sched.FinishLength {
		t.Error("a 500-token request finished although the session closed")
	}
	if _, err := s.Submit(context.Background(), sched.Request{Text: "Hello", MaxNewTokens: 1}); !errors.Is(err, ErrStopped) {
		t.Errorf("Submit after Close: %v, want ErrStopped", err)
	}
	var b strings.Builder
	if err := s.Report(&b); err != nil {
		t.Fatal(err)
	}
	if r := b.String(); !strings.Contains(r, "cut short (requests 1-1 (cold, engine 1)): 0 finished, 1 cancelled") {
		t.Errorf("the partial window is not in the report:\n%s", r)
	}
}
