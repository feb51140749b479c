//go:build cgo

package gpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"testing"
	"unsafe"

	"rosetop/gpu/cu"
)

// TestPackHeadMatchesHost: pack_head's LM head, downloaded, is gamma wte of ln_f in packWG's order
// (bit for bit: one fp32 product rounded to fp16, as halfBits rounds it), zero past the
// vocabulary, and its folded vectors are foldNorm's sums of those values (to fp32 rounding: the
// order of the sums differs). A 1000-token vocabulary: 16 tiles, the last one 24 columns short.
func TestPackHeadMatchesHost(t *testing.T) {
	needGPU(t)
	cfg := foldCfg
	w := testModel(cfg, 31)
	r := openNarrow(t, cfg, w, Options{MaxBatch: 4, MaxSeqLen: 64, Paged: true, MemoryFraction: 0.02}, wgOnly)
	defer r.Close()
	if !r.s.caps.head {
		t.Skipf("lm_head_argmax is not used on this GPU (compute capability %d)", r.s.ctx.Info().CC)
	}
	C, V := cfg.NEmbd, cfg.VocabSize
	Vh := headTiles(V) * headTile
	got, colc, d := make([]uint16, Vh*C), make([]float32, Vh), make([]float32, Vh)
	err := onWorker(r, func(s *state) error {
		for _, b := range []struct {
			dst   unsafe.Pointer
			src   cu.Ptr
			bytes int
		}{{unsafe.Pointer(&got[0]), s.wts.headWg, Vh * C * 2}, {unsafe.Pointer(&colc[0]), s.wts.headC, Vh * 4},
			{unsafe.Pointer(&d[0]), s.wts.headD, Vh * 4}} {
			if err := s.ctx.Download(b.dst, b.src, int64(b.bytes)); err != nil {
				return err
			}
		}
		return s.ctx.Sync()
	})
	if err != nil {
		t.Fatal(err)
	}
	// The same on the host: W (C, Vh) = the fp16 embedding transposed, zero past V.
	W := make([]float32, C*Vh)
	for n := range V {
		for k := range C {
			W[k*Vh+n] = halfToFloat(halfBits(w.WTE[n*C+k]))
		}
	}
	want := make([]uint16, Vh*C)
	packWG(want, W, w.LNFW, C, Vh, 0, Vh/wgBN)
	for i := range got {
		if got[i] != want[i] {
			t.Fatalf("packed element %d: %#x, want %#x", i, got[i], want[i])
		}
	}
	wantC, wantD := foldNorm(W, w.LNFW, w.LNFB, nil, C, Vh)
	for n := range Vh {
		if e := math.Abs(float64(colc[n]-wantC[n])) + math.Abs(float64(d[n]-wantD[n])); e > 1e-5*(1+math.Abs(float64(wantC[n]))+math.Abs(float64(wantD[n]))) {
			t.Fatalf("column %d: colsum %g, beta wte %g; want %g, %g", n, colc[n], d[n], wantC[n], wantD[n])
		}
	}
}

// TestHeadPlan: GPT-2's widths up to 768 fit the kernel, wider ones keep the plain LM head; the
// grid is a block an SM, never more than the tiles; the shared memory fits an H100's.
func TestHeadPlan(t *testing.T) {
	for _, c := range []struct {
		C    int
		fits bool
	}{{768, true}, {512, true}, {128, true}, {1024, false}, {1280, false}, {100, false}} {
		if got := headFits(c.C); got != c.fits {
			t.Errorf("headFits(%d) = %v, want %v", c.C, got, c.fits)
		}
	}
	if g := headBlocks(132, 50257); g != 132 || headTiles(50257) != 786 {
		t.Errorf("GPT-2 on 132 multiprocessors: %d blocks, %d tiles; want 132, 786", g, headTiles(50257))
	}
	if g := headBlocks(132, 1000); g != 16 {
		t.Errorf("a 1000-token vocabulary: %d blocks, want 16 (a tile each)", g)
	}
	if n := headShared(768); n > 232448 {
		t.Errorf("headShared(768) = %d bytes, more than Hopper's 227 KB a block", n)
	}
	for _, c := range []struct{ m, C int }{{65, 768}, {0, 768}, {64, 1024}} {
		var p program
		if p.lmHeadArgmax(false, 0, 0, 0, 0, 0, 0, 12, 24, 1e-5, c.m, c.C, 50257, 132); p.err == nil || len(p.ops) != 0 {
			t.Errorf("%d rows of width %d: launched (%v), want an error", c.m, c.C, p.err)
		}
	}
}

// TestWGHeadMatchesLogits runs the same greedy decode steps of a model as wide as GPT-2 124M
// (two layers, its 50257-token vocabulary: 786 tiles, the last one partial) on StepLogits, whose
// LM head writes the logits, and on Step, whose LM head takes its own argmax (lm_head_argmax,
// argmax_parts_next); the first's tokens are fed to both. Each Step token must be the argmax of
// the logits or a near tie of it (its logit within 1e-3 of the row's largest magnitude: the folded
// norm rounds differently), and at least 95% must be the argmax. Batches of 1, 5 and 64 (the
// wide plans), from graphs and eagerly; and StepLogits of some rows (Step.LogitRows) copies those
// rows alone.
func TestWGHeadMatchesLogits(t *testing.T) {
	needGPU(t)
	cfg := Config{NLayer: 2, NHead: 12, NEmbd: 768, NPositions: 128, VocabSize: 50257, Inner: 3072, Eps: 1e-5}
	w := testModel(cfg, 23)
	for _, graphs := range []bool{false, true} {
		r := openNarrow(t, cfg, w, Options{MaxBatch: 64, MaxSeqLen: 64, MaxTokens: 256, Paged: true, Graphs: graphs, MemoryFraction: 0.05},
			wgOnly)
		if !r.s.caps.head {
			r.Close()
			t.Skipf("lm_head_argmax is not used on this GPU (compute capability %d)", r.s.ctx.Info().CC)
		}
		for _, B := range []int{1, 5, 64} {
			t.Run(fmt.Sprintf("graphs %v, batch %d", graphs, B), func(t *testing.T) {
				same, total := headRun(t, r, cfg, B, uint64(B))
				if same*100 < 95*total {
					t.Errorf("%d of %d tokens are the argmax of the logits, want at least 95%%", same, total)
				}
				t.Logf("%d of %d tokens the argmax, the rest near ties", same, total)
			})
		}
		if err := r.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// headRun prefills B sequences of 3 random tokens, then runs 6 decode steps both ways
// (TestWGHeadMatchesLogits); it returns how many Step tokens were the argmax, of how many.
func headRun(t *testing.T, r *Runner, cfg Config, B int, seed uint64) (same, total int) {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 9))
	tables := tablesFor(r, B)
	V := cfg.VocabSize
	step := func(toks [][]int32, start int32) *Step {
		st := &Step{}
		for i, tk := range toks {
			addSeq(st, tk, start, tables[i], 0, 0, 0, 0)
		}
		return st
	}
	toks := make([][]int32, B)
	for i := range toks {
		toks[i] = []int32{int32(rng.IntN(V)), int32(rng.IntN(V)), int32(rng.IntN(V))}
	}
	next, fused, logits := make([]int32, B), make([]int32, B), make([]float32, B*V)
	if err := r.StepLogits(step(toks, 0), next, logits); err != nil {
		t.Fatal(err)
	}
	for pos := int32(3); pos < 9; pos++ {
		for i := range toks {
			toks[i] = []int32{next[i]}
		}
		st := step(toks, pos)
		if err := r.StepLogits(st, next, logits); err != nil {
			t.Fatalf("position %d, with logits: %v", pos, err)
		}
		if err := r.Step(st, fused); err != nil { // the same keys and values written again
			t.Fatalf("position %d: %v", pos, err)
		}
		// Again with the logits of every third row only (LogitRows): those rows are the full
		// download's, bit for bit; the others are left as they were.
		masked := slices.Repeat([]float32{-7}, B*V)
		st.LogitRows = make([]bool, B)
		for b := 0; b < B; b += 3 {
			st.LogitRows[b] = true
		}
		if err := r.StepLogits(st, make([]int32, B), masked); err != nil {
			t.Fatalf("position %d, with the logits of some rows: %v", pos, err)
		}
		for b := range B {
			want := logits[b*V : (b+1)*V]
			if !st.LogitRows[b] {
				want = slices.Repeat([]float32{-7}, V)
			}
			if !slices.Equal(masked[b*V:(b+1)*V], want) {
				t.Fatalf("position %d row %d (asked %v): its logits differ from the full download's", pos, b, st.LogitRows[b])
			}
		}
		for b := range B {
			row := logits[b*V : (b+1)*V]
			top, scale := row[next[b]], 0.0
			for _, v := range row {
				scale = max(scale, math.Abs(float64(v)))
			}
			f := fused[b]
			switch {
			case f < 0 || int(f) >= V:
				t.Fatalf("position %d row %d: token %d outside the vocabulary", pos, b, f)
			case f == next[b]:
				same++
			case float64(top-row[f]) > 1e-3*scale:
				t.Errorf("position %d row %d: token %d (logit %g), the argmax is %d (logit %g)", pos, b, f, row[f], next[b], top)
			}
			total++
		}
	}
	return same, total
}

// TestProfileHead logs the batch-64 decode step's time by kind, then times the decode step graphs
// at batch 64, 48, 32, 16 and 1 with the LM head taking its own argmax and with the plain LM head
// and argmax_next, alternated over two rounds. Set ROSETOP_GPU_PROFILE=1.
func TestProfileHead(t *testing.T) {
	if os.Getenv("ROSETOP_GPU_PROFILE") == "" {
		t.Skip("ROSETOP_GPU_PROFILE is not set")
	}
	needGPU(t)
	w := testModel(gpt2Cfg, 1)
	profileStepOps(t, w, 64, true)
	for _, B := range []int{64, 48, 32, 16, 1} {
		for round := range 2 {
			profileGraph(t, w, B, fmt.Sprintf("round %d, lm_head_argmax", round))
			profileGraph(t, w, B, fmt.Sprintf("round %d, plain LM head", round), func(c *caps) { c.head = false })
		}
	}
}
