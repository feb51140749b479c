package sched

import (
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
	m, err := engine.LoadTiny()
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	e, err := engine.New(m, engine.Options{Device: "cuda", Paged: true, CUDAGraph: true, MaxBatch: 4, MaxSeqLen: 64})
	if err != nil {
		if os.Getenv("ROSETOP_REQUIRE_GPU") == "1" {
			t.Fatalf("ROSETOP_REQUIRE_GPU=1 but no CUDA engine: %v", err)
		}
		t.Skipf("no CUDA engine: %v", err)
	}
	defer e.Close()
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
	ids := make([]RequestID, len(reqs))
	for i, r := range reqs {
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
