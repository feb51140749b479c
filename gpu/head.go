//go:build cgo

package gpu

import (
	"runtime"
	"sync"

	"rosetop/gpu/cu"
)

// The LM head of a greedy decode step on the wg_gemm path (gemm_sm90a.cu lm_head_argmax): the
// final norm folded into the tied embedding as into the layer GEMMs (fold.go), the logits never
// written, each block's per-row argmax handed to argmax_parts_next (sample.cu), which takes the
// token and moves the metadata on. The step loses the final norm's kernel and 12.9 MB of fp32
// logits written and read back at 64 rows, and the LM head joins the PDL chain. Steps that
// sample, prefill or return their logits keep the plain LM head and the samplers.

const (
	headThreads = 2 * wgGroupThread // two warpgroups, each multiplying half of K
	headTile    = wgBN              // columns a tile of the packed head
)

// headFits reports whether lm_head_argmax takes a model of width C: half of K in a warpgroup's
// registers.
func headFits(C int) bool { return C%32 == 0 && C/2 <= wgMaxSlice }

// headTiles is the 64-column tiles of a vocabulary of V tokens (the last one zero-padded).
func headTiles(V int) int { return (V + headTile - 1) / headTile }

// headBlocks is lm_head_argmax's grid: a block an SM (one fits: headShared), at most a tile each.
func headBlocks(sms, V int) int { return max(1, min(sms, headTiles(V))) }

// headShared is lm_head_argmax's dynamic shared memory at width C: two stages of a tile (64 x C
// halves; X's 64 rows of C + 8 halves overlay the second and the swap buffers), the swap buffers
// (2 x 2 x 64 x 32 floats), 64 row norms and five mbarriers.
func headShared(C int) int { return 2*headTile*C*2 + 2*2*64*32*4 + 64*8 + 5*8 }

// packWGT is packWG for a matrix stored transposed, src (N, K) row-major (the tied LM head, wte),
// scaled by scale[k] when not nil, for the 64-column blocks [nbLo, nbHi) of N rounded up to 64.
// Columns past N are left as they are (zero in a fresh image).
func packWGT(dst []uint16, src, scale []float32, K, N, nbLo, nbHi int) {
	for nb := nbLo; nb < nbHi; nb++ {
		for n := range min(wgBN, N-nb*wgBN) {
			row, col := src[(nb*wgBN+n)*K:][:K], (n/8)*128+(n%8)*8
			for k, v := range row {
				if scale != nil {
					v *= scale[k]
				}
				dst[wgAt(nb, K, k)+col] = halfBits(v)
			}
		}
	}
}

// foldHead returns the final norm folded into the tied LM head wte (V, C), for the columns of the
// padded vocabulary Vp (zero past V): colc[n] = sum_k fp16(gamma[k] wte[n][k]) (the packed
// values, summed as stored) and d[n] = sum_k beta[k] fp16(wte[n][k]), as foldNorm does for a
// layer's. The vocabulary is split over every core.
func foldHead(wte, gamma, beta []float32, V, C, Vp int) (colc, d []float32) {
	colc, d = make([]float32, Vp), make([]float32, Vp)
	workers := runtime.GOMAXPROCS(0)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := w * V / workers; n < (w+1)*V/workers; n++ {
				var c, b float64
				for k, v := range wte[n*C : (n+1)*C] {
					c += float64(halfToFloat(halfBits(gamma[k] * v)))
					b += float64(beta[k]) * float64(halfToFloat(halfBits(v)))
				}
				colc[n], d[n] = float32(c), float32(b)
			}
		}()
	}
	wg.Wait()
	return colc, d
}

// lmHeadArgmax appends lm_head_argmax over m rows of x (fp16, the residual stream written by
// the last layer's residual epilogue) with its statistics (parts pairs a row, pstride apart):
// part (m, blocks) gets each block's per-row argmax. wp, colc and d are the folded head
// (devWeights.head*), C the width, V the vocabulary.
func (p *program) lmHeadArgmax(pdl bool, part, x, wp, colc, d, stats cu.Ptr, parts, pstride int, eps float32, m, C, V, blocks int) {
	p.launch("lm head + argmax", kLMHead, blocks, 1, headThreads, headShared(C), pdl, cu.P(part), cu.P(x), cu.P(wp), cu.P(colc),
		cu.P(d), cu.P(stats), cu.I(parts), cu.I(pstride), cu.F(eps), cu.I(m), cu.I(C), cu.I(V), cu.I(headTiles(V)))
}
