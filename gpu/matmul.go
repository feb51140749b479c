//go:build cgo

package gpu

import (
	"fmt"

	"rosetop/gpu/cu"
)

// The GEMMs: Y(m, out) = X(m, in) W with fp16 X and W and fp32 accumulation, on cuBLAS
// (cublasGemmEx, or in K slices as one strided batch), on cuBLASLt (the fc GEMM with its bias and
// GELU, lt.go), or on gemm.cu's small_gemm (Hopper, steps of up to smallMaxRows rows: mma.go)
// with one of its epilogues; and bias_gelu, the fc GEMM's epilogue on cublasGemmEx.

// gemm appends cublasGemmEx: y(m, out) fp32 = x(m, in) w, w row-major (in, out).
func (p *program) gemm(name string, y, x, w cu.Ptr, m, in, out int) {
	p.ops = append(p.ops, op{name: name, kind: opGEMM, y: y, x: x, w: w, m: m, in: in, out: out})
}

// gemmSplitK appends gemm with K cut into splits slices: y_s(m, out) at y + s*m*out floats
// holds slice s's partial sum. splits 1 is gemm.
func (p *program) gemmSplitK(name string, y, x, w cu.Ptr, m, in, out, splits int) {
	if splits == 1 {
		p.gemm(name, y, x, w, m, in, out)
		return
	}
	p.ops = append(p.ops, op{name: name, kind: opSplitK, y: y, x: x, w: w, m: m, in: in, out: out, splits: splits})
}

// ltFC appends the fc GEMM through cuBLASLt plan fc: h(m, out) fp16 = GELU(x(m, in) w + bias),
// bias fp16.
func (p *program) ltFC(h, x, w, bias cu.Ptr, m, in, out int, fc *ltPlan) {
	p.ops = append(p.ops, op{name: "gemm fc", kind: opLtFC, y: h, x: x, w: w, bias: bias, m: m, in: in, out: out, fc: fc})
}

// biasGELU appends h(n, F) fp16 = gelu_tanh(y + bias), two values a thread (bias_gelu).
func (p *program) biasGELU(pdl bool, h, y, bias cu.Ptr, F, n int) {
	p.launch("bias+gelu", kBiasGELU, (n*F/2+255)/256, 1, 256, 0, pdl, cu.P(h), cu.P(y), cu.P(bias), cu.I(F), cu.I(n*F))
}

// epilogue is small_gemm's EPI_* (gemm.cu).
type epilogue int

const (
	epiPlain  epilogue = iota // y fp32 = XW
	epiGELU                   // y fp16 = gelu(XW + bias)
	epiLN                     // y fp32 = the folded norm's product (fold.go)
	epiLNGELU                 // y fp16 = gelu(the folded norm's product)
	epiRes                    // the residual add, its fp16 copy and the norm's statistics
	numEpilogues
)

// gemmEpi is what a small_gemm epilogue needs beyond XW (gemm.cu EPI_*; zero for epiPlain).
type gemmEpi struct {
	kind  epilogue
	bias  cu.Ptr // every epilogue but plain: fp32 (out)
	colc  cu.Ptr // epiLN, epiLNGELU: the folded matrix's column sums, fp32 (out)
	stats cu.Ptr // (rows, statStride) (mean, M2) pairs: epiLN* reads parts a row, epiRes writes out/(32 nt)
	parts int    // epiLN*: the pairs a row of stats holds
	x16   cu.Ptr // epiRes: y's fp16 copy, (m, out)
	// next, nextBytes: wg_gemm's blocks prefetch these bytes into L2, a share each: the packed
	// weights of the step's next GEMM (small_gemm ignores them).
	next      cu.Ptr
	nextBytes int
}

// smallGEMM appends y(m, out) = x(m, in) W through epilogue e on small_gemm, from W's packed copy
// wp with plan sp (y fp32, or fp16 for the GELU epilogues; with epiRes y is the residual stream).
// C and eps are the model's width and norm epsilon, for the folded norms. m must be
// 1..smallMaxRows.
func (p *program) smallGEMM(name string, pdl bool, y, x, wp cu.Ptr, m, in, out int, sp smallPlan, e gemmEpi, C int, eps float32) {
	if m < 1 || m > smallMaxRows {
		p.fail(fmt.Errorf("gpu: small_gemm for %d rows, want 1..%d", m, smallMaxRows))
		return
	}
	p.launchCluster(name, smallGEMMKernel(sp.nt, e.kind), out/(32*sp.nt), sp.splits, smallThreads, smallShared(m, sp), pdl, 1, sp.splits,
		cu.P(y), cu.P(x), cu.P(wp), cu.P(e.bias), cu.I(m), cu.I(out), cu.I(in), cu.I(sp.kp), cu.P(e.colc), cu.P(e.stats),
		cu.I(e.parts), cu.I(statStride(C)), cu.F(eps), cu.P(e.x16))
}
