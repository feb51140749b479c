package sched

import (
	"context"
	"os"
	"slices"
	"testing"
	"time"

	"rosetop/engine"
)

// TestProfileCUDAStepsAheadGPT2 runs decode-heavy's shape through the scheduler on the CUDA
// backend (random GPT-2 124M weights, paged, graphs; 64 requests of 2-token prompts, 256 new
// tokens each, batch 64) one step at a time and with the steps queued ahead, each twice in turn:
// the outputs must be the same, and the log has each run's wall time per step. Set
// ROSETOP_GPU_PROFILE=1.
func TestProfileCUDAStepsAheadGPT2(t *testing.T) {
	if os.Getenv("ROSETOP_GPU_PROFILE") == "" {
		t.Skip("ROSETOP_GPU_PROFILE is not set")
	}
	m, err := engine.LoadModel(context.Background(), "random:gpt2", engine.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	const B, newTokens, maxSeq = 64, 256, 272
	e, err := engine.New(m, engine.Options{Device: "cuda", Paged: true, CUDAGraph: true, MaxBatch: B, MaxSeqLen: maxSeq})
	if err != nil {
		t.Skipf("no CUDA engine: %v", err)
	}
	defer e.Close()
	sp, ok := e.Backend.(speculator)
	if !ok {
		t.Fatalf("the CUDA backend %T does not queue steps ahead", e.Backend)
	}
	var reqs []Request
	for i := range B {
		reqs = append(reqs, Request{Tokens: []int32{int32(100 + i), int32(200 + i)}, MaxNewTokens: newTokens})
	}
	run := func(be engine.Backend) ([][]int32, time.Duration) {
		s, err := New(Options{Backend: be, Layout: e.Layout, MaxSeqLen: maxSeq, EOS: m.Tokenizer.EOS(), Clock: newFakeClock(),
			BatchLimit: B, Config: Config{MaxBatch: B, PrefillMaxBatch: B}})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		ids := make([]RequestID, B)
		for i, r := range reqs {
			if ids[i], err = s.Submit(r); err != nil {
				t.Fatal(err)
			}
		}
		out := map[RequestID][]int32{}
		t0 := time.Now()
		for step := 0; len(out) < B; step++ {
			o, err := s.Step()
			if err != nil || step > 2*newTokens {
				t.Fatalf("step %d: %v", step, err)
			}
			for _, ev := range o.Events {
				if ev.Kind == EventFinished {
					out[ev.ID] = ev.Record.Output
				}
			}
		}
		d := time.Since(t0)
		res := make([][]int32, B)
		for i, id := range ids {
			res[i] = out[id]
		}
		return res, d
	}
	var want [][]int32
	for round := range 2 {
		for _, v := range []struct {
			name string
			be   engine.Backend
		}{{"one step at a time", plainBackend{e.Backend}}, {"steps ahead", &countAhead{Backend: e.Backend, sp: sp}}} {
			got, d := run(v.be)
			if want == nil {
				want = got
			} else if !slices.EqualFunc(got, want, slices.Equal[[]int32]) {
				t.Errorf("round %d, %s: outputs differ from the first run's", round, v.name)
			}
			t.Logf("round %d, %s: %.1f us a step (%d steps in %v)", round, v.name, float64(d.Microseconds())/newTokens, newTokens, d)
		}
	}
}
