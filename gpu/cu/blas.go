//go:build cgo

package cu

/*
#include "api.h"
*/
import "C"

import "fmt"

// GEMM computes row-major Y(n, out) = X(n, in) W with fp16 X and W, fp32 accumulation, and Y in
// fp16 (yF32 false) or fp32, through cublasGemmEx. W is stored (in, out) row-major, or
// transposed as (out, in) when wT (cuBLAS's "TN" case, PyTorch's nn.Linear layout).
// Column-major cuBLAS sees Y^T = W^T X^T.
func (c *Context) GEMM(y, x, w Ptr, n, in, out int, yF32, wT bool) error {
	ct := C.int(2) // CUDA_R_16F
	if yF32 {
		ct = 0 // CUDA_R_32F
	}
	trans, lda := C.int(0), C.int(out)
	if wT {
		trans, lda = 1, C.int(in)
	}
	s := C.w_gemm(c.a.c, c.blas, trans, C.int(out), C.int(n), C.int(in), C.CUdeviceptr(w), lda, C.CUdeviceptr(x), C.int(in),
		C.CUdeviceptr(y), ct, C.int(out))
	if s != 0 {
		return c.a.checkBLAS(s, fmt.Sprintf("cublasGemmEx(%dx%d @ %dx%d)", n, in, in, out))
	}
	return nil
}

// GEMMSplitK is GEMM (fp32 Y, W (in, out)) with K cut into splits slices run as one strided batch
// (cublasGemmStridedBatchedEx): Y_s(n, out) at y + s*n*out floats holds slice s's partial sum.
func (c *Context) GEMMSplitK(y, x, w Ptr, n, in, out, splits int) error {
	s := C.w_gemmSplitK(c.a.c, c.blas, C.int(out), C.int(n), C.int(in), C.int(splits), C.CUdeviceptr(w), C.int(out),
		C.CUdeviceptr(x), C.int(in), C.CUdeviceptr(y), C.int(out))
	if s != 0 {
		return c.a.checkBLAS(s, fmt.Sprintf("cublasGemmStridedBatchedEx(%dx%d @ %dx%d, %d K slices)", n, in, in, out, splits))
	}
	return nil
}
