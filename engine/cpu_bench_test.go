package engine

import (
	"context"
	"fmt"
	"math/rand/v2"
	"runtime"
	"testing"
)

// Notes on the decode step's speed (2026-11-21, the 2-core AMD EPYC (Zen 4) KVM machine the
// project runs on, shared with other work; see BenchmarkDecodeStep124M).
//
// The two numbers. One step of GPT-2 124M multiplies every row by 123.6M weights (85.0M in the
// Conv1D layers, 38.6M in the LM head tied to wte): 2 FLOP each, 3.96 GFLOP at batch 16, plus
// 0.04 GFLOP of attention over 65 positions. The FMA peak, measured with 12 independent
// VFMADD231PS chains, is 117 GFLOP/s per core (32 FLOP/cycle at 3.66 GHz), 231 for both: 17 ms.
// The step reads the weights once (498 MB in float32) and, at batch 16, 77 MB of KV cache (16
// sequences x 12 layers x 65 positions x keys and values x 3 KB): at the 34 GB/s measured for two
// threads streaming 512 MB through AVX2 adds (less while other work loads the memory), 17 ms. So
// batch 16 is not compute-bound here: both floors are 17 ms and the step must overlap the two.
// Batch 1 moves the same weights for a sixteenth of the arithmetic: 15 ms of memory, 1 of FMA.
//
// Measured: ms/step (tokens/s) when the step had both cores, and cpu-ms, the CPU time per step
// when it had one (then also its wall time; steadier under others' load):
//
//	             before (HEAD e721fbb)                after
//	batch  1     26-30 ms  (33-38)   41-44 cpu-ms     12.8-17 ms  (59-78)   17-19 cpu-ms
//	batch  8     42-51 ms  (157-191) 70-76 cpu-ms     25-29 ms    (278-324) 36-39 cpu-ms
//	batch 16     55-75 ms  (214-291) 94-101 cpu-ms    34-40 ms    (395-467) 55-57 cpu-ms
//
// Load averages 1.4-4 during these runs (base and new run alternately). With one core the new
// step takes its cpu-ms: 55-57 ms, 280-290 tokens/s at batch 16. Batch 1 at 12.8 ms reads 39 GB/s,
// at the memory floor; batch 16 is 2x its floors, the kernels' FMA rate limited by memory stalls.
// What moved it (cpu-ms per batch-16 step from profiles): weights packed into 24-column panels
// with a 4x24 register-blocked kernel, and each chunk's row groups prefetching the next chunk
// (BenchmarkMatmul stream/16x768x3072 on one thread: 47 GFLOP/s in the HF layout, 49 packed, 84
// packed with the prefetch; 132 on both threads); the LM head as the same matmul over wte packed
// transposed (24 -> 14.5 cpu-ms); GELU and the softmax exp vectorised in float32 (GELU 6 -> 0.5);
// attention kernels for head dim 64 (11 -> 7); layer norm with four partial sums, on the pool
// (3 -> 1 us a row). Tried and dropped: 256- or 32-row k chunks, prefetching two chunks ahead.

// BenchmarkDecodeStep124M times one decode step of the GPT-2-124M shape (random weights: speed
// does not depend on the values) for 1, 8 and 16 sequences that each have 64 tokens of context.
// cpu-ms/op is the process's CPU time per step (all threads): about wall time times the busy
// threads when nothing else runs, and the steadier number when something does.
//
//	go test -run XXX -bench DecodeStep124M -benchtime 5x -count 5 ./engine/
func BenchmarkDecodeStep124M(b *testing.B) {
	m, err := NewRandomModel(context.Background(), "gpt2", 1)
	if err != nil {
		b.Fatal(err)
	}
	const context, maxBatch = 64, 16
	c := newTestBackend(b, m, false, maxBatch, 128, 0)
	// Prefill one sequence of 64 tokens into slot 0 and copy its KV block to the other slots:
	// every sequence then attends over 64 real positions without 16 prefills.
	rng := rand.New(rand.NewPCG(1, 1))
	prompt := randTokens(rng, context, m.Config.VocabSize)
	next := make([]int32, maxBatch)
	if err := c.Step(&Batch{Seqs: []SeqStep{{Tokens: prompt, Blocks: []int32{0}}}}, next); err != nil {
		b.Fatal(err)
	}
	blockLen := len(c.kv) / c.layout.NumBlocks
	for blk := 1; blk < maxBatch; blk++ {
		copy(c.kv[blk*blockLen:(blk+1)*blockLen], c.kv[:blockLen])
	}
	for _, batch := range []int{1, 8, 16} {
		b.Run(fmt.Sprintf("batch=%d", batch), func(b *testing.B) {
			step := Batch{Seqs: make([]SeqStep, batch)}
			for i := range step.Seqs {
				step.Seqs[i] = SeqStep{ID: SeqID(i), Tokens: []int32{next[0]}, Start: context, Blocks: []int32{int32(i)}}
			}
			if err := c.Step(&step, next); err != nil { // warm the scratch for this batch size
				b.Fatal(err)
			}
			b.ReportAllocs()
			b.ResetTimer()
			cpu0 := processCPUTime()
			for range b.N {
				if err := c.Step(&step, next); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(batch)*float64(b.N)/b.Elapsed().Seconds(), "tokens/s")
			if cpu := processCPUTime() - cpu0; cpu > 0 {
				b.ReportMetric(cpu.Seconds()*1e3/float64(b.N), "cpu-ms/op")
			}
		})
	}
}

// BenchmarkMatmul times c.matmul alone for the 124M shapes at 16 rows; "cached" reuses one small
// weight (it stays in L2), "stream" rotates over enough weights to defeat the caches.
func BenchmarkMatmul(b *testing.B) {
	rng := rand.New(rand.NewPCG(5, 5))
	randSlice := func(n int) []float32 {
		s := make([]float32, n)
		for i := range s {
			s[i] = float32(rng.NormFloat64())
		}
		return s
	}
	for _, tc := range []struct {
		name       string
		n, in, out int
		sets       int
	}{
		{"cached/16x256x768", 16, 256, 768, 1},
		{"stream/16x768x3072", 16, 768, 3072, 8},
		{"stream/16x3072x768", 16, 3072, 768, 8},
		{"stream/1x768x3072", 1, 768, 3072, 8},
	} {
		b.Run(tc.name, func(b *testing.B) {
			c := &CPUBackend{pool: newWorkerPool(runtime.GOMAXPROCS(0)), k: pickKernels()}
			defer c.pool.close()
			c.mm.tiles = make([][]float32, c.pool.threads)
			for i := range c.mm.tiles {
				c.mm.tiles[i] = make([]float32, matRows*panelW)
			}
			c.mm.k = &c.k
			ws := make([]packedMat, tc.sets)
			for i := range ws {
				ws[i] = packMat(randSlice(tc.in*tc.out), tc.in, tc.out)
			}
			x, bias, y := randSlice(tc.n*tc.in), randSlice(tc.out), make([]float32, tc.n*tc.out)
			b.ResetTimer()
			for i := range b.N {
				c.matmul(y, x, &ws[i%len(ws)], bias, tc.n, epiStore)
			}
			sec := b.Elapsed().Seconds() / float64(b.N)
			b.ReportMetric(2*float64(tc.n*tc.in*tc.out)/sec/1e9, "GFLOP/s")
			b.ReportMetric(4*float64(tc.in*tc.out)/sec/1e9, "GB/s")
		})
	}
}

// BenchmarkPanelKernel times the 4-row panel kernel alone on one core, its operands in L1: the
// ceiling of the matmul (one core's FMA peak is 16 lanes x 2 FLOP per cycle).
func BenchmarkPanelKernel(b *testing.B) {
	ks := pickKernels()
	const k = matKChunk
	x, w, acc := make([]float32, 4*k), make([]float32, k*panelW), make([]float32, 4*panelW)
	for i := range x {
		x[i] = float32(i%7) * 0.125
	}
	for i := range w {
		w[i] = float32(i%5) * 0.25
	}
	for range b.N {
		ks.mp4(acc, x, k, w, k, w)
	}
	b.ReportMetric(2*4*panelW*k*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
}

// BenchmarkHead times the LM head alone (16 rows, GPT-2's vocabulary and width) on one thread
// and on all: its wte (154 MB) streams from memory every time; with 256 entries it stays in L2.
func BenchmarkHead(b *testing.B) {
	const rows, C = 16, 768
	rng := rand.New(rand.NewPCG(6, 6))
	wteAll := make([]float32, 50257*C)
	for i := range wteAll {
		wteAll[i] = float32(rng.NormFloat64())
	}
	xf := make([]float32, rows*C)
	for i := range xf {
		xf[i] = float32(rng.NormFloat64())
	}
	for _, tc := range []struct{ V, threads int }{{50257, 1}, {50257, runtime.GOMAXPROCS(0)}, {256, 1}} {
		V, threads := tc.V, tc.threads
		head := packMatT(wteAll[:V*C], V, C)
		b.Run(fmt.Sprintf("vocab=%d/threads=%d", V, threads), func(b *testing.B) {
			c := &CPUBackend{pool: newWorkerPool(threads), k: pickKernels()}
			defer c.pool.close()
			c.mm.tiles = make([][]float32, threads)
			for i := range c.mm.tiles {
				c.mm.tiles[i] = make([]float32, matRows*panelW)
			}
			c.mm.k = &c.k
			logits := make([]float32, rows*V)
			b.ResetTimer()
			cpu0 := processCPUTime()
			for range b.N {
				c.matmul(logits, xf, &head, nil, rows, epiStore)
			}
			sec := b.Elapsed().Seconds() / float64(b.N)
			b.ReportMetric(float64(2*rows*C*V)/sec/1e9, "GFLOP/s")
			b.ReportMetric(float64(4*C*V)/sec/1e9, "GB/s")
			if cpu := processCPUTime() - cpu0; cpu > 0 {
				b.ReportMetric(cpu.Seconds()*1e3/float64(b.N), "cpu-ms/op")
			}
		})
	}
}
