//go:build cgo

package cu

/*
#include <stdlib.h>
#include "lt.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"unsafe"
)

// Lt is a cuBLASLt handle (lt.h): GEMMs with a list of candidate algorithms to time and fused
// epilogues. Owned by the worker goroutine.
type Lt struct {
	api  *C.lt_api
	Name string // which libcublasLt was found
}

// OpenLt loads cuBLASLt and creates its handle; the error says why it cannot be used.
func OpenLt() (*Lt, error) {
	var errBuf [256]C.char
	api := C.lt_open(&errBuf[0], C.int(len(errBuf)))
	if api == nil {
		return nil, errors.New(C.GoString(&errBuf[0]))
	}
	return &Lt{api: api, Name: C.GoString(&api.name[0])}, nil
}

// Close frees the handle; the library stays loaded.
func (l *Lt) Close() { C.lt_close(l.api) }

// LtPlan is one planned GEMM shape: column-major D(m, n) = A(m, k) B(k, n) (+ an epilogue), A and
// B fp16, fp32 compute, with the heuristic's candidate algorithms.
type LtPlan struct {
	p       *C.lt_plan // C memory
	m, n, k int
}

// Lt epilogues (cublasLt.h).
const (
	LtPlain    = 1  // D = A B
	LtBiasGELU = 36 // D = GELU(A B + bias), the bias fp16
)

// NewPlan plans column-major D(m, n) = A(m, k) B(k, n) through epilogue (LtPlain, LtBiasGELU)
// with D in fp32 (d16 false) or fp16, asking the heuristic for its candidates.
func (c *Context) NewPlan(l *Lt, m, n, k int, d16 bool, epilogue int) (*LtPlan, error) {
	p := &LtPlan{p: (*C.lt_plan)(C.calloc(1, C.size_t(unsafe.Sizeof(C.lt_plan{})))), m: m, n: n, k: k}
	if p.p == nil {
		return nil, fmt.Errorf("cu: out of host memory for a cuBLASLt plan")
	}
	dtype := C.int(0) // CUDA_R_32F
	if d16 {
		dtype = 2 // CUDA_R_16F
	}
	if st := C.lt_plan_new(l.api, p.p, C.int(m), C.int(n), C.int(k), dtype, C.int(epilogue), WorkspaceBytes); st != 0 {
		C.free(unsafe.Pointer(p.p))
		return nil, c.a.checkBLAS(C.cublasStatus_t(st), fmt.Sprintf("cublasLtMatmulAlgoGetHeuristic(%dx%d @ %dx%d)", n, k, k, m))
	}
	return p, nil
}

// Count is how many candidates the heuristic gave.
func (p *LtPlan) Count() int { return int(p.p.count) }

// FreePlan frees a plan made by NewPlan.
func (l *Lt) FreePlan(p *LtPlan) {
	C.lt_plan_free(l.api, p.p)
	C.free(unsafe.Pointer(p.p))
}

// LtMatmul enqueues candidate algo of p: D = A B (+ the epilogue, with bias when it has one).
func (c *Context) LtMatmul(l *Lt, p *LtPlan, algo int, a, b, d, bias Ptr) error {
	st := C.lt_matmul(l.api, p.p, C.int(algo), C.CUdeviceptr(a), C.CUdeviceptr(b), C.CUdeviceptr(d), C.CUdeviceptr(bias),
		C.CUdeviceptr(c.ws), WorkspaceBytes, c.stream)
	if st != 0 {
		return c.a.checkBLAS(st, fmt.Sprintf("cublasLtMatmul(%dx%d @ %dx%d, candidate %d)", p.n, p.k, p.k, p.m, algo))
	}
	return nil
}
