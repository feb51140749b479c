//go:build cgo

package gpu

import (
	"fmt"
	"sync"
)

// Folded norms: in a step on small_gemm (folded) or wg_gemm, no kernel of its own runs a layer
// norm or a residual add. The GEMM that ends a residual branch (attention's output projection, the MLP's
// second matrix) adds its product and bias to the residual stream x in its epilogue, writes x in
// fp16 for the next GEMM and, per block of columns, each row's mean and sum of squared
// deviations (EPI_RES). The GEMM after a norm (QKV after ln_1, the MLP's first after ln_2) reads
// that fp16 x and applies the norm to its product instead of to its input:
//
//	LN(x) W + b = rstd (x (gamma W) - mean colsum(gamma W)) + beta W + b
//
// with gamma W packed in place of W and the two column vectors computed at upload (EPI_LN,
// EPI_LN_GELU). The row's mean and rstd come from the per-block pairs (Chan et al.'s pairwise
// combination). A layer is then four GEMMs and the attention kernel: the step loses its 24
// residual + norm kernels. The last layer's second MLP matrix keeps the plain epilogue, so that
// the final norm (ln_f, of each sequence's last row) stays residual_ln_last's job, except where
// the LM head folds ln_f in as well (head.go: greedy decode steps on wg_gemm).

// foldParts is the width of embed_ln_warp's stats parts (gpt2.cu warp_stats: 16 lanes of 4).
const foldParts = 64

// statStride is the (mean, M2) pairs a row of act.stats has room for: one per 32 channels, the
// narrowest small_gemm block.
func statStride(C int) int { return C / 32 }

// foldMaxParts is the most (mean, M2) pairs a row's norm combines (gemm.cu SG_MAX_PARTS).
const foldMaxParts = 16

// folds reports whether a model of width C on these small_gemm plans can fold its norms.
func folds(C int, g smallGEMMs) bool {
	return g.on && foldsAt(C, 32*g.proj.nt) && foldsAt(C, 32*g.fcProj.nt)
}

// foldsAt reports whether a model of width C can fold its norms into GEMMs whose residual
// epilogues write the statistics of part columns each: the warp-per-row embedding writes the
// first statistics, every part is whole, and no row has more parts than the epilogues combine.
func foldsAt(C, part int) bool {
	whole := func(part int) bool { return C%part == 0 && C/part <= foldMaxParts }
	return rowWarp(C) && whole(foldParts) && whole(part)
}

// foldedLayer holds a layer's host-side vectors for the folded norms.
type foldedLayer struct {
	qkvC, qkvD []float32 // ln_1 into the QKV GEMM: colsum(gamma W), beta W (attention adds the bias)
	fcC, fcD   []float32 // ln_2 into the MLP's first GEMM: colsum(gamma W), beta W + b
}

// foldLayers computes every layer's vectors, a goroutine per layer.
func foldLayers(cfg Config, w *Weights) []foldedLayer {
	C, F := cfg.NEmbd, cfg.Inner
	out := make([]foldedLayer, len(w.Layers))
	var wg sync.WaitGroup
	for i := range w.Layers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			L, f := &w.Layers[i], &out[i]
			f.qkvC, f.qkvD = foldNorm(L.AttnW, L.LN1W, L.LN1B, nil, C, 3*C)
			f.fcC, f.fcD = foldNorm(L.FCW, L.LN2W, L.LN2B, L.FCB, C, F)
		}()
	}
	wg.Wait()
	return out
}

// foldNorm returns, for the row-major (K, N) matrix W after a norm with weights gamma and biases
// beta, colc[n] = sum_k fp16(gamma[k] W[k][n]) (the packed values small_gemm multiplies, summed
// exactly as stored) and d[n] = sum_k beta[k] fp16(W[k][n]) + bias[n] (bias may be nil).
func foldNorm(W, gamma, beta, bias []float32, K, N int) (colc, d []float32) {
	c64, d64 := make([]float64, N), make([]float64, N)
	for k := range K {
		row := W[k*N : (k+1)*N]
		g, b := gamma[k], float64(beta[k])
		for n, v := range row {
			c64[n] += float64(halfToFloat(halfBits(g * v)))
			d64[n] += b * float64(halfToFloat(halfBits(v)))
		}
	}
	colc, d = make([]float32, N), make([]float32, N)
	for n := range N {
		colc[n] = float32(c64[n])
		d[n] = float32(d64[n])
		if bias != nil {
			d[n] += bias[n]
		}
	}
	return colc, d
}

// checkNorms validates the tensors foldLayers reads before it reads them; the message names the
// first bad one.
func checkNorms(cfg Config, w *Weights) error {
	C, F := cfg.NEmbd, cfg.Inner
	for i := range w.Layers {
		L := &w.Layers[i]
		for _, t := range []struct {
			name string
			v    []float32
			n    int
		}{
			{"attn.c_attn.weight", L.AttnW, C * 3 * C}, {"ln_1.weight", L.LN1W, C}, {"ln_1.bias", L.LN1B, C},
			{"mlp.c_fc.weight", L.FCW, C * F}, {"mlp.c_fc.bias", L.FCB, F}, {"ln_2.weight", L.LN2W, C}, {"ln_2.bias", L.LN2B, C},
		} {
			if len(t.v) != t.n {
				return fmt.Errorf("gpu: weight h.%d.%s has %d values, want %d", i, t.name, len(t.v), t.n)
			}
		}
	}
	return nil
}
