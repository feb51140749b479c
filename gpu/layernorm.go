//go:build cgo

package gpu

import "rosetop/gpu/cu"

// The row kernels of gpt2.cu: the embedding, the residual adds and the layer norms, a row of C
// channels at a time: a block of lnThreads per row, or with a warp per row (the *_warp kernels,
// lnwRows rows a block) when rowWarp(C).

const lnThreads = 256 // block of the block-per-row kernels (embed_ln, residual_ln, qkv_bias_kv_write)

// lnwRows is LNW_ROWS of gpt2.cu: rows per block of the warp-per-row kernels.
const lnwRows = 2

// rowWarp reports whether rows of C channels run on the warp-per-row kernels, which need
// C % 128 == 0 and C <= 1024.
func rowWarp(C int) bool { return C%128 == 0 && C <= 1024 }

// embedLN appends x(n, C) = wte[ids] + wpe[pos] and xln(n, C) = LN(x) with lnw, lnb (ln_1 of the
// first layer). With stats (folded norms, warp-per-row widths only) xln gets x in fp16 and stats
// each row's (mean, M2) per 64 channels instead (gpt2.cu embed_ln_warp).
func (p *program) embedLN(x, xln, ids, pos, wte, wpe, lnw, lnb cu.Ptr, C int, eps float32, n int, stats cu.Ptr) {
	if rowWarp(C) {
		p.launch("embed+ln", kEmbedLNWarp, (n+lnwRows-1)/lnwRows, 1, 32*lnwRows, 0, false, cu.P(x), cu.P(xln), cu.P(ids),
			cu.P(pos), cu.P(wte), cu.P(wpe), cu.P(lnw), cu.P(lnb), cu.I(C), cu.F(eps), cu.I(n), cu.P(stats), cu.I(statStride(C)))
		return
	}
	p.launch("embed+ln", kEmbedLN, n, 1, lnThreads, 0, false, cu.P(x), cu.P(xln), cu.P(ids), cu.P(pos), cu.P(wte), cu.P(wpe),
		cu.P(lnw), cu.P(lnb), cu.I(C), cu.F(eps))
}

// residualLN appends x(n, C) += y + bias, y the sum of splits partials pstride floats apart (a
// split-K GEMM's; 1 otherwise), then out(n, C) = LN(x) with lnw, lnb.
func (p *program) residualLN(pdl bool, x, y cu.Ptr, splits, pstride int, bias, lnw, lnb, out cu.Ptr, C int, eps float32, n int) {
	if rowWarp(C) {
		p.launch("residual+ln", kResidualLNWarp, (n+lnwRows-1)/lnwRows, 1, 32*lnwRows, 0, pdl, cu.P(x), cu.P(y), cu.I(splits),
			cu.U(uint64(pstride)), cu.P(bias), cu.P(lnw), cu.P(lnb), cu.P(out), cu.I(C), cu.F(eps), cu.I(n))
		return
	}
	p.launch("residual+ln", kResidualLN, n, 1, lnThreads, 0, pdl, cu.P(x), cu.P(y), cu.I(splits), cu.U(uint64(pstride)),
		cu.P(bias), cu.P(lnw), cu.P(lnb), cu.P(out), cu.I(C), cu.F(eps))
}

// residualLNLast appends, for the last row of each of nb sequences (row last[b]), out(nb, C) =
// LN(x + y + bias) with lnw, lnb; x is not stored back. y is the sum of splits partials pstride
// floats apart.
func (p *program) residualLNLast(pdl bool, x, y cu.Ptr, splits, pstride int, bias, lnw, lnb, out, last cu.Ptr, C int,
	eps float32, nb int) {
	if rowWarp(C) {
		p.launch("residual+ln", kResidualLNLastWarp, (nb+lnwRows-1)/lnwRows, 1, 32*lnwRows, 0, pdl, cu.P(x), cu.P(y),
			cu.I(splits), cu.U(uint64(pstride)), cu.P(bias), cu.P(lnw), cu.P(lnb), cu.P(out), cu.P(last), cu.I(C), cu.F(eps), cu.I(nb))
		return
	}
	p.launch("residual+ln", kResidualLNLast, nb, 1, lnThreads, 0, pdl, cu.P(x), cu.P(y), cu.I(splits), cu.U(uint64(pstride)),
		cu.P(bias), cu.P(lnw), cu.P(lnb), cu.P(out), cu.P(last), cu.I(C), cu.F(eps))
}
