//go:build cgo

package gpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"unsafe"

	"rosetop/gpu/cu"
)

// foldCfg is the smallest shape whose decode steps fold their norms (fold.go folds: width a
// multiple of 128 for the warp-per-row embedding).
var foldCfg = Config{NLayer: 2, NHead: 2, NEmbd: 128, NPositions: 128, VocabSize: 1000, Inner: 512, Eps: 1e-5}

// TestFoldedNormsMatchReference runs prefill and teacher-forced decode steps against the
// float64 reference with the norms folded into small_gemm (the default on Hopper) and not, and
// on wg_gemm (every step of up to 64 rows), in every mode.
func TestFoldedNormsMatchReference(t *testing.T) {
	needGPU(t)
	w := testModel(foldCfg, 21)
	const steps = 8
	ps := makePlans(foldCfg, w, []int{1, 9, 30, 50, 7}, []int{0, 0, 0, 0, 3}, steps, 6)
	for _, m := range modes {
		for _, path := range []string{"folded", "not folded", "wg_gemm"} {
			t.Run(fmt.Sprintf("%v/%s", m, path), func(t *testing.T) {
				narrow := map[string][]func(*caps){"folded": {smallTo64}, "not folded": {smallTo64, noFold}, "wg_gemm": {wgOnly}}[path]
				r := openNarrow(t, foldCfg, w, Options{MaxBatch: 8, MaxSeqLen: 64, MaxTokens: 64, Paged: m.paged, Graphs: m.graphs,
					MemoryFraction: 0.02}, narrow...)
				defer r.Close()
				c := &r.s.caps
				switch {
				case path == "wg_gemm" && !c.wg.on:
					t.Skipf("wg_gemm is not used on this GPU (compute capability %d)", r.s.ctx.Info().CC)
				case path != "wg_gemm" && !c.small.on:
					t.Skipf("small_gemm is not used on this GPU (compute capability %d): nothing folds", r.s.ctx.Info().CC)
				case path != "wg_gemm" && c.fold != (path == "folded"):
					t.Fatalf("the runner folds %v, want %v", c.fold, path == "folded")
				}
				runPlans(t, r, foldCfg, ps, steps, 1e-2)
			})
		}
	}
}

// TestFoldNorm checks the folded vectors against their definition on a small matrix. No GPU.
func TestFoldNorm(t *testing.T) {
	const K, N = 3, 2
	W := []float32{1, 2, 3, 4, 5, 6}
	gamma, beta, bias := []float32{0.5, 2, 1}, []float32{1, -1, 0.25}, []float32{10, 20}
	colc, d := foldNorm(W, gamma, beta, bias, K, N)
	wantC := []float32{0.5*1 + 2*3 + 1*5, 0.5*2 + 2*4 + 1*6}
	wantD := []float32{1*1 - 1*3 + 0.25*5 + 10, 1*2 - 1*4 + 0.25*6 + 20}
	for n := range N {
		if colc[n] != wantC[n] || d[n] != wantD[n] {
			t.Errorf("column %d: colc %v d %v, want %v %v", n, colc[n], d[n], wantC[n], wantD[n])
		}
	}
	if folds(100, smallGEMMs{on: true, proj: smallPlan{nt: 2}, fcProj: smallPlan{nt: 2}}) {
		t.Error("a width of 100 folds; the warp-per-row embedding needs a multiple of 128")
	}
	if !folds(768, smallGEMMs{on: true, proj: smallPlan{nt: 2}, fcProj: smallPlan{nt: 2}}) {
		t.Error("GPT-2's width does not fold")
	}
	if folds(768, smallGEMMs{on: true, proj: smallPlan{nt: 2}, fcProj: smallPlan{nt: 1}}) {
		t.Error("24 parts of 32 channels fold; small_gemm combines at most 16")
	}
}

// TestFoldedEpilogues runs the folded-norm epilogues alone against float64 on the host, at row
// counts that split unevenly over the clusters, on small_gemm and on wg_gemm: the attention
// projection with the residual add (EPI_RES: x, its fp16 copy, the row statistics), then the
// MLP's first GEMM with ln_2 folded in (EPI_LN_GELU) and the QKV GEMM with ln_1 folded in
// (EPI_LN) on what the first wrote.
func TestFoldedEpilogues(t *testing.T) {
	needGPU(t)
	cfg := foldCfg
	w := testModel(cfg, 23)
	r := openNarrow(t, cfg, w, Options{MaxBatch: 64, MaxSeqLen: 64, MemoryFraction: 0.01}, smallTo64)
	defer r.Close()
	for _, path := range []layerGEMMs{viaFolded, viaWG} {
		c := &r.s.caps
		if (path == viaFolded && !c.fold) || (path == viaWG && !c.wg.on) {
			t.Logf("path %d is not used on this GPU (compute capability %d)", path, r.s.ctx.Info().CC)
			continue
		}
		testFoldedEpilogues(t, r, cfg, w, path)
	}
}

func testFoldedEpilogues(t *testing.T, r *Runner, cfg Config, w *Weights, path layerGEMMs) {
	s := r.s
	C, F, L, wl := cfg.NEmbd, cfg.Inner, &s.wts.layers[0], &w.Layers[0]
	rng := rand.New(rand.NewPCG(3, 3))
	for _, m := range []int{1, 2, 3, 4, 5, 8, 13, 37, 64} {
		pl := stepPlan{rows: m, gemms: path, pdl: s.caps.pdl}
		parts := s.resParts(&pl, gemmProj)
		x0 := make([]float32, m*C)
		att := make([]uint16, m*C)
		for i := range x0 {
			x0[i] = float32(3 * rng.NormFloat64())
			att[i] = halfBits(float32(rng.NormFloat64()))
		}
		x := make([]float32, m*C)
		x16 := make([]uint16, m*C)
		h := make([]uint16, m*F)
		qkv := make([]float32, m*3*C)
		stride := statStride(C)
		stats := make([]float32, 2*m*stride)
		err := onWorker(r, func(s *state) error {
			ctx, a := s.ctx, &s.act
			if err := ctx.Upload(a.x, unsafe.Pointer(&x0[0]), int64(4*m*C)); err != nil {
				return err
			}
			if err := ctx.Upload(a.att, unsafe.Pointer(&att[0]), int64(2*m*C)); err != nil {
				return err
			}
			var p, q program
			s.layerGEMM(&pl, &p, L, gemmProj, a.x, gemmEpi{kind: epiRes, bias: L.projB, stats: a.stats, x16: a.xln})
			s.layerGEMM(&pl, &p, L, gemmFC, a.h, gemmEpi{kind: epiLNGELU, bias: L.fcD, colc: L.fcC, stats: a.stats, parts: parts})
			s.layerGEMM(&pl, &q, L, gemmQKV, a.y, gemmEpi{kind: epiLN, bias: L.qkvD, colc: L.qkvC, stats: a.stats, parts: parts})
			if err := s.run(&p); err != nil {
				return err
			}
			if err := ctx.Download(unsafe.Pointer(&stats[0]), a.stats, int64(8*m*stride)); err != nil {
				return err
			}
			if err := s.run(&q); err != nil {
				return err
			}
			for _, d := range []struct {
				dst unsafe.Pointer
				src cu.Ptr
				n   int
			}{{unsafe.Pointer(&qkv[0]), a.y, 4 * m * 3 * C}, {unsafe.Pointer(&x[0]), a.x, 4 * m * C},
				{unsafe.Pointer(&x16[0]), a.xln, 2 * m * C}, {unsafe.Pointer(&h[0]), a.h, 2 * m * F}} {
				if err := ctx.Download(d.dst, d.src, int64(d.n)); err != nil {
					return err
				}
			}
			return ctx.Sync()
		})
		if err != nil {
			t.Fatalf("path %d, %d rows: %v", path, m, err)
		}
		for i := range m {
			// x = x0 + att W + b, and its fp16 copy.
			want := make([]float64, C)
			for n := range C {
				v := float64(x0[i*C+n]) + float64(wl.AttnProjB[n])
				for k := range C {
					v += float64(halfToFloat(att[i*C+k])) * float64(wl.AttnProjW[k*C+n])
				}
				want[n] = v
			}
			if e := relErr(x[i*C:(i+1)*C], want); e > 1e-5 {
				t.Fatalf("path %d, %d rows, row %d: residual stream relative error %.2e", path, m, i, e)
			}
			got16 := make([]float32, C)
			for n := range C {
				got16[n] = halfToFloat(x16[i*C+n])
			}
			if e := relErr(got16, want); e > 1e-3 {
				t.Fatalf("path %d, %d rows, row %d: its fp16 copy relative error %.2e", path, m, i, e)
			}
			// The statistics of each part of the row.
			bn := C / parts // the projection's block of columns
			for p := range C / bn {
				var pm, p2 float64
				for _, v := range want[p*bn : (p+1)*bn] {
					pm += v
				}
				pm /= float64(bn)
				for _, v := range want[p*bn : (p+1)*bn] {
					p2 += (v - pm) * (v - pm)
				}
				got := stats[2*(i*stride+p) : 2*(i*stride+p)+2]
				if math.Abs(float64(got[0])-pm) > 1e-4*(1+math.Abs(pm)) || math.Abs(float64(got[1])-p2) > 1e-4*p2 {
					t.Errorf("path %d, %d rows, row %d, part %d: statistics %v, want (%v, %v)", path, m, i, p, got, pm, p2)
				}
			}
			var mean, v2 float64
			for _, v := range want {
				mean += v
			}
			mean /= float64(C)
			for _, v := range want {
				v2 += (v - mean) * (v - mean)
			}
			rstd := 1 / math.Sqrt(v2/float64(C)+float64(cfg.Eps))
			// qkv = ln_1(x) W (the attention kernel adds the bias), with this x as the input.
			wantQ := make([]float64, 3*C)
			for n := range 3 * C {
				for k := range C {
					wantQ[n] += ((want[k]-mean)*rstd*float64(wl.LN1W[k]) + float64(wl.LN1B[k])) * float64(wl.AttnW[k*3*C+n])
				}
			}
			if e := relErr(qkv[i*3*C:(i+1)*3*C], wantQ); e > 3e-3 {
				t.Errorf("path %d, %d rows, row %d: ln_1(x) W relative error %.2e", path, m, i, e)
			}
			// h = gelu(ln_2(x) W + b).
			wantH := make([]float64, F)
			gotH := make([]float32, F)
			for n := range F {
				u := float64(wl.FCB[n])
				for k := range C {
					u += ((want[k]-mean)*rstd*float64(wl.LN2W[k]) + float64(wl.LN2B[k])) * float64(wl.FCW[k*F+n])
				}
				wantH[n] = 0.5 * u * (1 + math.Tanh(0.7978845608028654*(u+0.044715*u*u*u)))
				gotH[n] = halfToFloat(h[i*F+n])
			}
			if e := relErr(gotH, wantH); e > 3e-3 {
				t.Fatalf("path %d, %d rows, row %d: gelu(ln_2(x) W + b) relative error %.2e", path, m, i, e)
			}
		}
	}
}
