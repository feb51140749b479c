//go:build cgo

package gpu

import (
	"os"
	"testing"
	"time"
)

// TestProfileFirstPrefill looks for steps that are slow only the first time their shape runs
// (lazy loading of cuBLAS kernels, lazy graph captures): after a warm-up like the benchmark's
// (a 64 x 2-token prefill and batch-64 decode steps), it runs a prefill of k sequences of 2
// tokens for every k in 1..64, twice, and logs each whose first run took much longer than its
// second. Set ROSETOP_GPU_PROFILE=1.
func TestProfileFirstPrefill(t *testing.T) {
	if os.Getenv("ROSETOP_GPU_PROFILE") == "" {
		t.Skip("ROSETOP_GPU_PROFILE is not set")
	}
	needGPU(t)
	w := testModel(gpt2Cfg, 1)
	t0 := time.Now()
	r, err := Open(gpt2Cfg, w, Options{MaxBatch: 64, MaxSeqLen: 1024, Paged: true, Graphs: true, MemoryFraction: 0.1})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	t.Logf("open: %v (CUDA_MODULE_LOADING=%q)", time.Since(t0), os.Getenv("CUDA_MODULE_LOADING"))
	tables := tablesFor(r, 64)
	next := make([]int32, 64)
	prefill := func(k int) time.Duration {
		st := &Step{}
		for i := range k {
			st.Tokens = append(st.Tokens, int32(i+1), int32(i+2))
			st.SeqLens = append(st.SeqLens, 2)
			st.Start = append(st.Start, 0)
			st.Tables = append(st.Tables, tables[i]...)
			st.Temperature = append(st.Temperature, 0)
			st.TopK = append(st.TopK, 0)
			st.TopP = append(st.TopP, 0)
			st.Seed = append(st.Seed, uint64(i))
		}
		s := time.Now()
		if err := r.Step(st, next); err != nil {
			t.Fatal(err)
		}
		return time.Since(s)
	}
	prefill(64)
	dec := decodeStep(64, 2, tables)
	for range 3 {
		if err := r.Step(dec, next); err != nil {
			t.Fatal(err)
		}
	}
	var slow int
	var sum1, sum2 time.Duration
	for k := 1; k <= 64; k++ {
		a, b := prefill(k), prefill(k)
		sum1, sum2 = sum1+a, sum2+b
		if a > 2*b && a-b > 500*time.Microsecond {
			slow++
			t.Logf("prefill %2d x 2 tokens: first %v, second %v", k, a, b)
		}
	}
	t.Logf("prefills k x 2 tokens, k = 1..64: %d first runs slow; total first %v, second %v", slow, sum1, sum2)
}
