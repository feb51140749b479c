package sched

import (
	"errors"
	"os"
	"slices"
	"testing"

	"rosetop/engine"
)

// TestRealEngine runs the scheduler over the CPU backend and the embedded tiny GPT-2: a KV pool
// so small that sequences are preempted and recomputed (with prefix-cache hits), and a contiguous
// engine, must both give every request exactly the tokens of an unconstrained paged run. Sampled
// requests too: the backend keys each draw by (seed, position), so a recompute draws the same.
func TestRealEngine(t *testing.T) {
	m, err := engine.LoadTiny()
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	reqs := realRequests(m)
	run := func(name string, paged bool, blocks int, prefix bool) ([][]int32, Snapshot, int) {
		e, err := engine.New(m, engine.Options{Device: "cpu", Paged: paged, MaxBatch: 4, MaxSeqLen: 64, Threads: 2})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		defer e.Close()
		return runReal(t, name, e.Backend, e.Layout, m.Tokenizer.EOS(), reqs, blocks, prefix)
	}
	want, _, _ := run("paged", true, 0, false)
	tiny, snap, cached := run("tiny pool with prefix cache", true, 6, true)
	if snap.Preemptions == 0 || cached == 0 {
		t.Fatalf("tiny pool: %d preemptions, %d cached tokens: want both > 0", snap.Preemptions, cached)
	}
	contiguous, _, _ := run("contiguous", false, 0, false)
	for i := range reqs {
		if !slices.Equal(tiny[i], want[i]) || !slices.Equal(contiguous[i], want[i]) {
			t.Errorf("request %d: paged %v, tiny pool %v, contiguous %v", i, want[i], tiny[i], contiguous[i])
		}
	}
	t.Logf("tiny pool: %d preemptions, %d prompt tokens from the prefix cache", snap.Preemptions, cached)
}

// TestRealEngineCUDAStepsAhead runs TestRealEngine's requests over the CUDA backend (paged, CUDA
// graphs) with the steps queued ahead (the hint engine.Batch.Repeats) and without, with the whole pool and
// with a pool so small that sequences are preempted and recomputed: the outputs must be the same,
// and steps must have been queued ahead. Skips without a GPU (fails with ROSETOP_REQUIRE_GPU=1).
func TestRealEngineCUDAStepsAhead(t *testing.T) {
	m, e := tinyCUDAEngine(t)
	sp, ok := e.Backend.(speculator)
	if !ok {
		t.Fatalf("the CUDA backend %T does not queue steps ahead", e.Backend)
	}
	reqs := realRequests(m)
	counted := &countAhead{Backend: e.Backend, sp: sp}
	for _, c := range []struct {
		name   string
		blocks int
		prefix bool
	}{{"whole pool", 0, false}, {"tiny pool with prefix cache", 6, true}} {
		want, _, _ := runReal(t, c.name+", one step at a time", plainBackend{e.Backend}, e.Layout, m.Tokenizer.EOS(), reqs, c.blocks, c.prefix)
		got, snap, _ := runReal(t, c.name+", ahead", counted, e.Layout, m.Tokenizer.EOS(), reqs, c.blocks, c.prefix)
		for i := range reqs {
			if !slices.Equal(got[i], want[i]) {
				t.Errorf("%s: request %d: %v with steps ahead, %v without", c.name, i, got[i], want[i])
			}
		}
		t.Logf("%s: %d preemptions", c.name, snap.Preemptions)
	}
	if counted.calls == 0 {
		t.Fatal("the scheduler queued no step ahead")
	}
}

// plainBackend drops the Repeats hint and hides MaxAhead: the backend runs one step at a time.
type plainBackend struct{ engine.Backend }

func (p plainBackend) Step(b *engine.Batch, next []int32) error {
	one := *b
	one.Repeats = 0
	return p.Backend.Step(&one, next)
}

// countAhead counts the steps it passes on with a Repeats hint.
type countAhead struct {
	engine.Backend
	sp    speculator
	calls int
}

func (c *countAhead) MaxAhead() int { return c.sp.MaxAhead() }

func (c *countAhead) Step(b *engine.Batch, next []int32) error {
	if b.Repeats > 0 {
		c.calls++
	}
	return c.Backend.Step(b, next)
}

// realRequests are TestRealEngine's requests: prompts that share prefixes, greedy and sampled.
func realRequests(m *engine.Model) []Request {
	hobbit := "In a hole in the ground there lived a hobbit. Not a nasty, dirty, wet hole, filled with"
	texts := []string{hobbit, "Hello", hobbit, "1, 2, 3, 4, 5, 6, 7, 8,", hobbit + " the ends of worms", "Hello"}
	var reqs []Request
	for i, text := range texts {
		r := Request{Tokens: m.Tokenizer.Encode(text), MaxNewTokens: 12 + 3*i}
		if i%2 == 1 {
			r.Sampling = engine.SamplingParams{Temperature: 0.8, TopK: 40, Seed: uint64(i)}
		}
		reqs = append(reqs, r)
	}
	return reqs
}

// runReal runs reqs to the end through a scheduler over be (its pool cut to blocks when > 0)
// and returns each request's output, the last snapshot and the prompt tokens the prefix cache
// served.
func runReal(t *testing.T, name string, be engine.Backend, layout engine.KVLayout, eos int32, reqs []Request, blocks int, prefix bool) ([][]int32, Snapshot, int) {
	t.Helper()
	if blocks > 0 {
		layout.NumBlocks = blocks // a prefix of the backend's pool
	}
	s, err := New(Options{Backend: be, Layout: layout, PrefixCache: prefix, MaxSeqLen: 64, EOS: eos,
		Clock: newFakeClock(), BatchLimit: 4, Config: Config{MaxBatch: 4, PrefillMaxBatch: 2}})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	defer s.Close()
	return runRealOn(t, name, s, reqs)
}

// runRealOn is runReal on the scheduler s.
func runRealOn(t *testing.T, name string, s *Scheduler, reqs []Request) ([][]int32, Snapshot, int) {
	t.Helper()
	ids := make([]RequestID, len(reqs))
	for i, r := range reqs {
		var err error
		if ids[i], err = s.Submit(r); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}
	out := map[RequestID][]int32{}
	cached := 0
	for step := 0; len(out) < len(reqs); step++ {
		o, err := s.Step()
		if err != nil || step > 2000 {
			t.Fatalf("%s: step %d: %v", name, step, err)
		}
		cached += o.Snapshot.CachedTokens
		for _, e := range o.Events {
			if e.Kind == EventFinished {
				if e.Record.Reason != FinishLength {
					t.Fatalf("%s: request %d ended %s (%v)", name, e.ID, e.Record.Reason, e.Record.Err)
				}
				out[e.ID] = e.Record.Output
			}
		}
	}
	snap := s.Snapshot()
	if snap.KVUsed != 0 {
		t.Fatalf("%s: %d blocks in use after the run", name, snap.KVUsed)
	}
	res := make([][]int32, len(reqs))
	for i, id := range ids {
		res[i] = out[id]
	}
	return res, snap, cached
}

// TestCancelStopsCall runs the CPU backend with requests cancelled during its calls: when every
// request of a call is cancelled, the backend stops (engine.ErrStopped) and they end cancelled
// in that step with their blocks released; when one is left, the call runs to its end and the
// others end at the next step. Either way the same prompts then give an undisturbed run's tokens.
func TestCancelStopsCall(t *testing.T) {
	m, err := engine.LoadTiny()
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	newEngine := func() *engine.Engine {
		e, err := engine.New(m, engine.Options{Device: "cpu", Paged: true, MaxBatch: 4, MaxSeqLen: 64, Threads: 2})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { e.Close() })
		return e
	}
	reqs := realRequests(m)[:4]
	e := newEngine()
	want, _, _ := runReal(t, "undisturbed", e.Backend, e.Layout, m.Tokenizer.EOS(), reqs, 0, true)

	for _, c := range []struct {
		name    string
		call    int   // the backend call (1: the prefill of reqs[0] and reqs[1], 2: their decode)
		cancel  []int // which of the two are cancelled during it
		stop    []int // which of the two are ended by Stopped during it (after the cancels)
		stopped bool
	}{
		{"prefill, both cancelled", 1, []int{0, 1}, nil, true},
		{"prefill, one cancelled", 1, []int{0}, nil, false},
		{"decode, both cancelled", 2, []int{1, 0}, nil, true},
		{"decode, one cancelled", 2, []int{1}, nil, false},
		{"prefill, one stopped", 1, nil, []int{1}, false},
		{"decode, one cancelled and one stopped", 2, []int{1}, []int{0}, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := newEngine() // a zeroed pool: no earlier run's entries to hide a stale block
			be := &hookBackend{Backend: e.Backend}
			s, err := New(Options{Backend: be, Layout: e.Layout, PrefixCache: true, MaxSeqLen: 64, EOS: m.Tokenizer.EOS(),
				Clock: newFakeClock(), BatchLimit: 4, Config: Config{MaxBatch: 4, PrefillMaxBatch: 2}})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			var ids [2]RequestID
			for i := range ids {
				if ids[i], err = s.Submit(reqs[i]); err != nil {
					t.Fatal(err)
				}
			}
			be.hook = func(call int, _ *engine.Batch) {
				if call == c.call {
					for _, i := range c.cancel {
						s.Cancel(ids[i])
					}
					for _, i := range c.stop {
						s.Stopped(ids[i])
					}
				}
			}
			ended := map[RequestID]FinishReason{}
			var stepOut StepOutput // the step of call c.call
			captured := false
			for len(ended) < len(ids) {
				o, err := s.Step()
				if err != nil {
					t.Fatal(err)
				}
				if !captured && be.calls >= c.call {
					stepOut, captured = o, true
				}
				for _, ev := range o.Events {
					if ev.Kind == EventFinished {
						ended[ev.ID] = ev.Record.Reason
					}
				}
			}
			if got := errors.Is(be.errs[c.call-1], engine.ErrStopped); got != c.stopped {
				t.Fatalf("call %d returned %v: stopped %v, want %v", c.call, be.errs[c.call-1], got, c.stopped)
			}
			if c.stopped && (len(stepOut.Finished) != 2 || stepOut.Snapshot.KVUsed != 0) {
				t.Fatalf("the stopping step finished %v with %d blocks in use: want both requests and none", stepOut.Finished, stepOut.Snapshot.KVUsed)
			}
			for k, i := range []int{0, 1} {
				wantReason := FinishLength
				switch {
				case slices.Contains(c.cancel, i):
					wantReason = FinishCancelled
				case slices.Contains(c.stop, i):
					wantReason = FinishStop
				}
				if ended[ids[k]] != wantReason {
					t.Errorf("request %d ended %s, want %s", i, ended[ids[k]], wantReason)
				}
			}
			be.hook = nil
			got, snap, _ := runRealOn(t, "afterwards", s, reqs)
			for i := range reqs {
				if !slices.Equal(got[i], want[i]) {
					t.Errorf("request %d afterwards: %v, want %v", i, got[i], want[i])
				}
			}
			if snap.KVUsed != 0 {
				t.Errorf("%d blocks in use at the end", snap.KVUsed)
			}
		})
	}
}

// hookBackend runs hook inside each call, with its batch, before the engine, and keeps each
// call's error.
type hookBackend struct {
	engine.Backend
	hook  func(call int, b *engine.Batch)
	calls int
	errs  []error
}

func (h *hookBackend) Step(b *engine.Batch, next []int32) error {
	h.calls++
	if h.hook != nil {
		h.hook(h.calls, b)
	}
	err := h.Backend.Step(b, next)
	h.errs = append(h.errs, err)
	return err
}

// tinyCUDAEngine is the embedded tiny model on the CUDA backend (paged, CUDA graphs, 4 sequences
// of up to 64 positions), both closed when t ends; it skips t without a GPU (fails it with
// ROSETOP_REQUIRE_GPU=1).
func tinyCUDAEngine(t *testing.T) (*engine.Model, *engine.Engine) {
	t.Helper()
	m, err := engine.LoadTiny()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	e, err := engine.New(m, engine.Options{Device: "cuda", Paged: true, CUDAGraph: true, MaxBatch: 4, MaxSeqLen: 64})
	if err != nil {
		if os.Getenv("ROSETOP_REQUIRE_GPU") == "1" {
			t.Fatalf("ROSETOP_REQUIRE_GPU=1 but no CUDA engine: %v", err)
		}
		t.Skipf("no CUDA engine: %v", err)
	}
	t.Cleanup(func() { e.Close() })
	return m, e
}
