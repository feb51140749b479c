package engine

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// newTestBackend builds a CPU backend for m with room for maxBatch sequences of maxSeq positions.
func newTestBackend(t testing.TB, m *Model, paged bool, maxBatch, maxSeq, threads int) *CPUBackend {
	t.Helper()
	layout := cpuLayout(Options{Paged: paged, MaxBatch: maxBatch, MaxSeqLen: maxSeq})
	c, err := newCPUBackend(m, layout, threads)
	if err != nil {
		t.Fatalf("newCPUBackend: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// blockTables gives each of n sequences the blocks it needs for maxSeq positions. Paged tables
// take the pool's blocks in a shuffled order, so a sequence's blocks are neither consecutive nor
// ascending and an indexing mistake shows.
func blockTables(l KVLayout, n, maxSeq int, seed uint64) [][]int32 {
	per := (maxSeq + l.BlockSize - 1) / l.BlockSize
	ids := make([]int32, l.NumBlocks)
	for i := range ids {
		ids[i] = int32(i)
	}
	if l.Paged {
		rng := rand.New(rand.NewPCG(seed, 1))
		rng.Shuffle(len(ids), func(i, j int) { ids[i], ids[j] = ids[j], ids[i] })
	}
	tables := make([][]int32, n)
	for i := range tables {
		tables[i] = ids[i*per : (i+1)*per]
	}
	return tables
}

func randTokens(rng *rand.Rand, n, vocab int) []int32 {
	out := make([]int32, n)
	for i := range out {
		out[i] = int32(rng.IntN(vocab))
	}
	return out
}

// TestCPUMatchesReference runs three sequences through a schedule that mixes prefill, chunked
// prefill and decode in the same steps, and checks the logits of every position against the
// float64 reference, for both layouts and several thread counts.
func TestCPUMatchesReference(t *testing.T) {
	wide := smallConfig()
	wide.NEmbd, wide.InnerDim = 32, 128 // head dim 16
	for _, cfg := range []Config{smallConfig(), wide, hd64Config()} {
		for _, paged := range []bool{false, true} {
			for _, threads := range []int{1, 3} {
				t.Run(fmt.Sprintf("headdim=%d/paged=%v/threads=%d", cfg.HeadDim(), paged, threads), func(t *testing.T) {
					checkAgainstReference(t, cfg, paged, threads)
				})
			}
		}
	}
}

func checkAgainstReference(t *testing.T, cfg Config, paged bool, threads int) {
	m := smallModel(t, cfg, 3)
	rng := rand.New(rand.NewPCG(3, 3))
	seqs := [][]int32{randTokens(rng, 9, cfg.VocabSize), randTokens(rng, 21, cfg.VocabSize), randTokens(rng, 40, cfg.VocabSize)}
	want := make([][][]float64, len(seqs))
	for i, s := range seqs {
		want[i] = refLogits(cfg, m.Weights, s)
	}
	// chunks[i] = how many tokens sequence i runs in each step (0: not in that step)
	chunks := [][]int{
		{5, 1, 12},
		{1, 9, 0},
		{1, 1, 20},
		{1, 1, 1},
		{1, 9, 7},
	}
	c := newTestBackend(t, m, paged, 3, cfg.NPositions, threads)
	tables := blockTables(c.layout, 3, cfg.NPositions, 5)
	done := make([]int, len(seqs))
	for step, counts := range chunks {
		var b Batch
		for i, n := range counts {
			n = min(n, len(seqs[i])-done[i])
			if n > 0 {
				b.Seqs = append(b.Seqs, SeqStep{ID: SeqID(i), Tokens: seqs[i][done[i] : done[i]+n], Start: done[i], Blocks: tables[i]})
			}
		}
		got, err := c.Logits(&b, true)
		if err != nil {
			t.Fatalf("step %d: %v", step, err)
		}
		r := 0
		for _, s := range b.Seqs {
			for j := range s.Tokens {
				p := s.Start + j
				if d := maxDiffRatio(got[r], want[s.ID][p]); d > 1e-5 {
					t.Errorf("step %d seq %d pos %d: max|diff|/max|ref| = %.2e, want <= 1e-5", step, s.ID, p, d)
				}
				r++
			}
			done[s.ID] += len(s.Tokens)
		}
	}
	for i := range seqs {
		if done[i] != len(seqs[i]) {
			t.Fatalf("schedule covered %d of %d tokens of sequence %d", done[i], len(seqs[i]), i)
		}
	}
}

// hd64Config is smallConfig with GPT-2's head dimension, 64: attention takes the assembly path.
func hd64Config() Config {
	cfg := smallConfig()
	cfg.NEmbd, cfg.InnerDim = 128, 256
	return cfg
}

// TestGoKernelsMatchAsm runs the whole forward pass with the portable kernels (what a machine
// without AVX2/FMA, or not amd64, runs) and with this CPU's, over prefill and decode steps.
func TestGoKernelsMatchAsm(t *testing.T) {
	if pickKernels().name == goKernels().name {
		t.Skip("this CPU runs the Go kernels only")
	}
	for _, cfg := range []Config{smallConfig(), hd64Config()} {
		t.Run(fmt.Sprintf("headdim=%d", cfg.HeadDim()), func(t *testing.T) {
			m := smallModel(t, cfg, 4)
			asm, gok := newTestBackend(t, m, true, 2, cfg.NPositions, 2), newTestBackend(t, m, true, 2, cfg.NPositions, 2)
			gok.k = goKernels()
			rng := rand.New(rand.NewPCG(8, 8))
			tables := blockTables(asm.layout, 2, cfg.NPositions, 6)
			b := Batch{Seqs: []SeqStep{
				{ID: 0, Tokens: randTokens(rng, 21, cfg.VocabSize), Blocks: tables[0]},
				{ID: 1, Tokens: randTokens(rng, 6, cfg.VocabSize), Blocks: tables[1]},
			}}
			for step := range 4 {
				want, err := asm.Logits(&b, true)
				if err != nil {
					t.Fatal(err)
				}
				got, err := gok.Logits(&b, true)
				if err != nil {
					t.Fatal(err)
				}
				for r := range want {
					if d := relDiff(got[r], want[r]); d > 1e-5 {
						t.Errorf("step %d row %d: Go kernels differ from %s by %.2e relative, want <= 1e-5", step, r, asm.k.name, d)
					}
				}
				for i := range b.Seqs { // decode: one more token each
					s := &b.Seqs[i]
					s.Start += len(s.Tokens)
					s.Tokens = randTokens(rng, 1, cfg.VocabSize)
				}
			}
		})
	}
}

func TestMatmulMatchesNaive(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	randSlice := func(n int) []float32 {
		s := make([]float32, n)
		for i := range s {
			s[i] = float32(rng.NormFloat64())
		}
		return s
	}
	cases := []struct {
		name       string
		n, in, out int
		epi        epilogue
	}{
		{"one row", 1, 16, 48, epiStore},
		{"rows past one tile", 17, 8, 130, epiStore},
		{"in not a multiple of 4", 5, 7, 33, epiStore},
		{"gelu", 33, 12, 300, epiGELU},
		{"residual", 16, 20, 64, epiResidual},
		{"row groups of 4 and 1", 7, 24, 48, epiStore},
		{"zero inner dimension", 3, 0, 16, epiStore},
	}
	for _, ks := range testKernels() {
		for _, tc := range cases {
			t.Run(ks.name+"/"+tc.name, func(t *testing.T) {
				c := &CPUBackend{pool: newWorkerPool(3), k: ks}
				defer c.pool.close()
				c.mm.tiles = [][]float32{make([]float32, matRows*panelW), make([]float32, matRows*panelW), make([]float32, matRows*panelW)}
				c.mm.k = &c.k
				x, w, b, y := randSlice(tc.n*tc.in), randSlice(tc.in*tc.out), randSlice(tc.out), randSlice(tc.n*tc.out)
				y0 := append([]float32(nil), y...)
				pw := packMat(w, tc.in, tc.out)
				c.matmul(y, x, &pw, b, tc.n, tc.epi)
				for r := range tc.n {
					for j := range tc.out {
						s := float64(b[j])
						for k := range tc.in {
							s += float64(x[r*tc.in+k]) * float64(w[k*tc.out+j])
						}
						switch tc.epi {
						case epiGELU:
							s = float64(geluTanh(float32(s)))
						case epiResidual:
							s += float64(y0[r*tc.out+j])
						}
						if d := math.Abs(float64(y[r*tc.out+j]) - s); d > 1e-4*math.Max(1, math.Abs(s)) {
							t.Fatalf("y[%d,%d] = %v, want %v", r, j, y[r*tc.out+j], s)
						}
					}
				}
			})
		}
	}
}

// testKernels returns the Go kernels and, when this CPU selects others, those too.
func testKernels() []kernels {
	ks := []kernels{goKernels()}
	if k := pickKernels(); k.name != ks[0].name {
		ks = append(ks, k)
	}
	return ks
}

func TestStepRejectsBadBatch(t *testing.T) {
	cfg := smallConfig()
	c := newTestBackend(t, smallModel(t, cfg, 1), true, 2, 32, 1) // 4 blocks of 16
	ok := func() SeqStep { return SeqStep{Tokens: []int32{1, 2}, Start: 0, Blocks: []int32{0, 1}} }
	cases := []struct {
		name string
		edit func(s *SeqStep)
		next int
	}{
		{"no tokens", func(s *SeqStep) { s.Tokens = nil }, 1},
		{"negative start", func(s *SeqStep) { s.Start = -1 }, 1},
		{"past n_positions", func(s *SeqStep) { s.Start = cfg.NPositions - 1 }, 1},
		{"block table too short", func(s *SeqStep) { s.Start = 15; s.Blocks = s.Blocks[:1] }, 1},
		{"block out of range", func(s *SeqStep) { s.Blocks = []int32{4} }, 1},
		{"negative block", func(s *SeqStep) { s.Blocks = []int32{-1} }, 1},
		{"token out of range", func(s *SeqStep) { s.Tokens = []int32{int32(cfg.VocabSize)} }, 1},
		{"negative token", func(s *SeqStep) { s.Tokens = []int32{-3} }, 1},
		{"next too short", func(s *SeqStep) {}, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := ok()
			tc.edit(&s)
			err := c.Step(&Batch{Seqs: []SeqStep{s}}, make([]int32, tc.next))
			if !errors.Is(err, ErrBadBatch) {
				t.Fatalf("Step = %v, want an error wrapping ErrBadBatch", err)
			}
			t.Log(err)
		})
	}
	if err := c.Step(&Batch{}, nil); !errors.Is(err, ErrBadBatch) {
		t.Errorf("empty batch: Step = %v, want ErrBadBatch", err)
	}
	s := ok()
	if err := c.Step(&Batch{Seqs: []SeqStep{s}}, make([]int32, 1)); err != nil {
		t.Errorf("valid batch after errors: %v", err)
	}
}

// TestDecodeStepAllocs checks that a steady decode step allocates nothing: the scratch is sized
// by the first (larger) prefill and reused.
func TestDecodeStepAllocs(t *testing.T) {
	cfg := smallConfig()
	m := smallModel(t, cfg, 2)
	c := newTestBackend(t, m, true, 4, cfg.NPositions, 2)
	tables := blockTables(c.layout, 4, cfg.NPositions, 2)
	rng := rand.New(rand.NewPCG(9, 9))
	var prefill Batch
	for i := range 4 {
		sp := SamplingParams{}
		if i%2 == 1 {
			sp = SamplingParams{Temperature: 0.8, TopK: 5, TopP: 0.9, Seed: uint64(i)}
		}
		prefill.Seqs = append(prefill.Seqs, SeqStep{ID: SeqID(i), Tokens: randTokens(rng, 3+i, cfg.VocabSize), Blocks: tables[i], Sample: sp})
	}
	next := make([]int32, 4)
	if err := c.Step(&prefill, next); err != nil {
		t.Fatal(err)
	}
	decode := Batch{Seqs: make([]SeqStep, 4)}
	for i, s := range prefill.Seqs {
		decode.Seqs[i] = SeqStep{ID: s.ID, Tokens: []int32{next[i]}, Start: len(s.Tokens), Blocks: s.Blocks, Sample: s.Sample}
	}
	var err error
	allocs := testing.AllocsPerRun(20, func() {
		// the same step again: it rewrites the same KV slots, a steady state
		err = c.Step(&decode, next)
	})
	if err != nil {
		t.Fatal(err)
	}
	if allocs != 0 {
		t.Errorf("decode step allocates %.1f times, want 0", allocs)
	}
}

func TestNewCPUBackendRejectsBadShapes(t *testing.T) {
	cases := []struct {
		name   string
		edit   func(m *Model)
		layout KVLayout
		want   string
	}{
		{"short wte", func(m *Model) { m.Weights.WTE = m.Weights.WTE[:10] }, KVLayout{BlockSize: 16, NumBlocks: 1},
			"cpu backend: weight wte has 10 values, want 1552"},
		{"missing layer", func(m *Model) { m.Weights.Layers = m.Weights.Layers[:1] }, KVLayout{BlockSize: 16, NumBlocks: 1},
			"cpu backend: weights have 1 layers, config 2"},
		{"bad fc bias", func(m *Model) { m.Weights.Layers[1].FCB = nil }, KVLayout{BlockSize: 16, NumBlocks: 1},
			"cpu backend: weight h.1.mlp.c_fc.bias has 0 values, want 64"},
		{"heads do not divide", func(m *Model) { m.Config.NHead = 3 }, KVLayout{BlockSize: 16, NumBlocks: 1},
			"cpu backend: config n_embd=16 n_head=3 n_layer=2 vocab=97 n_positions=48 is not a GPT-2 shape"},
		{"empty layout", func(m *Model) {}, KVLayout{BlockSize: 16},
			"cpu backend: KV layout 0 blocks of 16 positions (want >= 1 of each)"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m := smallModel(t, smallConfig(), 1)
			tc.edit(m)
			c, err := newCPUBackend(m, tc.layout, 1)
			if err == nil {
				c.Close()
				t.Fatalf("newCPUBackend succeeded, want %q", tc.want)
			}
			if err.Error() != tc.want {
				t.Errorf("error %q, want %q", err, tc.want)
			}
		})
	}
}
