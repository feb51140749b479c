package sched

import (
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
	run := func(name string, paged bool, blocks int, prefix bool) ([][]int32, Snapshot, int) {
		e, err := engine.New(m, engine.Options{Device: "cpu", Paged: paged, MaxBatch: 4, MaxSeqLen: 64, Threads: 2})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		defer e.Close()
		layout := e.Layout
		if blocks > 0 {
			layout.NumBlocks = blocks // a prefix of the backend's pool
		}
		s, err := New(Options{Backend: e.Backend, Layout: layout, PrefixCache: prefix, MaxSeqLen: 64, EOS: m.Tokenizer.EOS(),
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
