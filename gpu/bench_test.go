package gpu

import (
	"fmt"
	"os"
	"testing"
	"time"
)

var gpt2Cfg = Config{NLayer: 12, NHead: 12, NEmbd: 768, NPositions: 1024, VocabSize: 50257, Inner: 3072, Eps: 1e-5}

// BenchmarkDecodeGPT2 times one greedy decode step of a GPT-2-124M-shaped model at context 128
// in every mode, at batch 1 and 64 (ns/op is one step).
func BenchmarkDecodeGPT2(b *testing.B) {
	needGPU(b)
	w := testModel(gpt2Cfg, 1)
	for _, m := range modes {
		for _, B := range []int{1, 64} {
			b.Run(fmt.Sprintf("%v/batch=%d", m, B), func(b *testing.B) {
				r, err := Open(gpt2Cfg, w, Options{MaxBatch: 64, MaxSeqLen: 1024, Paged: m.paged, Graphs: m.graphs, MemoryFraction: 0.1})
				if err != nil {
					b.Fatal(err)
				}
				defer r.Close()
				st := decodeStep(B, 128, tablesFor(r, B))
				for i := range st.Temperature {
					st.Temperature[i] = 0
				}
				next := make([]int32, B)
				if err := r.Step(st, next); err != nil {
					b.Fatal(err)
				}
				b.ResetTimer()
				for b.Loop() {
					if err := r.Step(st, next); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(B)*float64(b.N)/b.Elapsed().Seconds(), "tokens/s")
			})
		}
	}
}

// BenchmarkDecodeGPT2Sampling is the batch-64 paged graph step with temperature 0.8, top-k 40
// and top-p 0.9 sampling on the GPU (compare with the greedy step above).
func BenchmarkDecodeGPT2Sampling(b *testing.B) {
	needGPU(b)
	w := testModel(gpt2Cfg, 1)
	r, err := Open(gpt2Cfg, w, Options{MaxBatch: 64, MaxSeqLen: 1024, Paged: true, Graphs: true, MemoryFraction: 0.1})
	if err != nil {
		b.Fatal(err)
	}
	defer r.Close()
	st := decodeStep(64, 128, tablesFor(r, 64))
	next := make([]int32, 64)
	if err := r.Step(st, next); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for b.Loop() {
		if err := r.Step(st, next); err != nil {
			b.Fatal(err)
		}
	}
}

// TestProfileDecodeGPT2 prints the wall time of each op of an eager decode step (synchronizing
// after every op) of the GPT-2-124M-shaped model at context 128. Set ROSETOP_GPU_PROFILE=1.
func TestProfileDecodeGPT2(t *testing.T) {
	if os.Getenv("ROSETOP_GPU_PROFILE") == "" {
		t.Skip("ROSETOP_GPU_PROFILE is not set")
	}
	needGPU(t)
	w := testModel(gpt2Cfg, 1)
	for _, B := range []int{1, 64} {
		r, err := Open(gpt2Cfg, w, Options{MaxBatch: 64, MaxSeqLen: 1024, Paged: true, MemoryFraction: 0.1})
		if err != nil {
			t.Fatal(err)
		}
		st := decodeStep(B, 128, tablesFor(r, B))
		next := make([]int32, B)
		if err := r.Step(st, next); err != nil {
			t.Fatal(err)
		}
		p := &opProfile{took: map[string]time.Duration{}}
		r.w.do(func() { p.rt = r.s.rt; r.s.prof = p })
		const steps = 20
		for range steps {
			r.w.do(func() { p.last = time.Now() })
			if err := r.Step(st, next); err != nil {
				t.Fatal(err)
			}
		}
		var total time.Duration
		for _, op := range p.ops {
			total += p.took[op]
		}
		t.Logf("batch %d: %.1f us per step with a sync after each op", B, float64(total.Microseconds())/steps)
		for _, op := range p.ops {
			t.Logf("  %-22s %8.1f us/step", op, float64(p.took[op].Microseconds())/steps)
		}
		r.Close()
	}
}
