//go:build cgo

package gpu

/*
#include <stdlib.h>
#include "api.h"
*/
import "C"

import (
	_ "embed"
	"fmt"
	"unsafe"
)

// The PTX and fatbins are generated from kernels/*.cu by scripts/gen-ptx.sh and committed. A
// fatbin holds SASS for sm_80 and sm_90 and the compute_80 PTX: Ampere and Hopper load machine
// code at once, other GPUs JIT the PTX inside it. The plain PTX is the fallback when a driver
// rejects the fatbin (it is also what reviewers read).
//
//go:embed kernels/gpt2.ptx
var ptxGPT2 string

//go:embed kernels/sample.ptx
var ptxSample string

//go:embed kernels/gpt2.fatbin
var fatbinGPT2 string

//go:embed kernels/sample.fatbin
var fatbinSample string

//go:embed kernels/gemm.ptx
var ptxGEMM string

//go:embed kernels/gemm.fatbin
var fatbinGEMM string

// kernel is one loaded function.
type kernel struct {
	f    C.CUfunction
	name string
}

// kernels are the functions of the three modules (gpt2, sample and gemm).
type kernels struct {
	embedLN, residualLN, residualLNLast, biasGELU, qkvKV     kernel
	embedLNW, residualLNW, residualLNLastW                   kernel // warp per row (rowWarp)
	attnPaged, attnContig, attnDecodePaged, attnDecodeContig kernel
	metaCopy                                                 kernel // the step's metadata, host to device
	tablesRefresh                                            kernel // a predicted step's new block tables (ahead.go)
	spin                                                     kernel // profiling only
	argmaxPart, argmaxNext, sample                           kernel // the samplers; they also move a decode graph's metadata on (ahead.go)
	// gemm.cu (sm_90 only): small_gemm for NT = 1 or 2 n8 tiles per warp, with each epilogue.
	gemm [2][numEpilogues]kernel // [NT-1][epilogue]
}

const (
	numKernels = 18 + 2*numEpilogues
	numModules = 3
)

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

// suffix is the epilogue's part of the kernel names (gemm.cu SG_KERNELS).
func (e epilogue) suffix() string {
	switch e {
	case epiGELU:
		return "_gelu"
	case epiLN:
		return "_ln"
	case epiLNGELU:
		return "_ln_gelu"
	case epiRes:
		return "_res"
	}
	return ""
}

// loadKernels loads the modules (fatbin first, PTX when the driver refuses it) and looks up
// every kernel. It returns which image loaded, for the ledger.
func (r *cudaRuntime) loadKernels() (string, error) {
	var mods [numModules]C.CUmodule
	from := "fatbin (sm_80/sm_90 SASS, compute_80 PTX)"
	for i, imgs := range [numModules][2]string{{fatbinGPT2, ptxGPT2}, {fatbinSample, ptxSample}, {fatbinGEMM, ptxGEMM}} {
		err := r.loadModule(&mods[i], imgs[0], i)
		if err != nil {
			from = "PTX (JIT)"
			err = r.loadModule(&mods[i], imgs[1], i)
		}
		if err != nil {
			for _, m := range mods[:i] {
				_ = r.a.check(C.w_moduleUnload(r.a.c, m), "cuModuleUnload")
			}
			return "", err
		}
	}
	r.mods = mods
	type named struct {
		dst  *kernel
		mod  C.CUmodule
		name string
	}
	var gemms []named
	for nt := 1; nt <= 2; nt++ {
		for e := range numEpilogues {
			gemms = append(gemms, named{&r.fn.gemm[nt-1][e], mods[2], fmt.Sprintf("gemm_small_n%d%s", nt, e.suffix())})
		}
	}
	for _, k := range append([]named{
		{&r.fn.embedLN, mods[0], "embed_ln"},
		{&r.fn.residualLN, mods[0], "residual_ln"},
		{&r.fn.residualLNLast, mods[0], "residual_ln_last"},
		{&r.fn.embedLNW, mods[0], "embed_ln_warp"},
		{&r.fn.residualLNW, mods[0], "residual_ln_warp"},
		{&r.fn.residualLNLastW, mods[0], "residual_ln_last_warp"},
		{&r.fn.biasGELU, mods[0], "bias_gelu"},
		{&r.fn.qkvKV, mods[0], "qkv_bias_kv_write"},
		{&r.fn.attnPaged, mods[0], "attention_paged"},
		{&r.fn.attnContig, mods[0], "attention_contig"},
		{&r.fn.attnDecodePaged, mods[0], "attention_decode_paged"},
		{&r.fn.attnDecodeContig, mods[0], "attention_decode_contig"},
		{&r.fn.metaCopy, mods[0], "meta_copy"},
		{&r.fn.tablesRefresh, mods[0], "tables_refresh"},
		{&r.fn.spin, mods[0], "spin_ns"},
		{&r.fn.argmaxPart, mods[1], "argmax_part"},
		{&r.fn.argmaxNext, mods[1], "argmax_next"},
		{&r.fn.sample, mods[1], "sample"},
	}, gemms...) {
		name := C.CString(k.name)
		err := r.a.check(C.w_moduleFunc(r.a.c, &k.dst.f, k.mod, name), "cuModuleGetFunction(%s)", k.name)
		C.free(unsafe.Pointer(name))
		if err != nil {
			return "", err
		}
		k.dst.name = k.name
	}
	return from, nil
}

// loadModule loads one image (a fatbin, or PTX text) into m.
func (r *cudaRuntime) loadModule(m *C.CUmodule, image string, i int) error {
	img := C.CString(image) // a NUL-terminated copy: PTX is read as a C string, a fatbin by its header
	defer C.free(unsafe.Pointer(img))
	return r.a.check(C.w_moduleLoad(r.a.c, m, unsafe.Pointer(img)), "cuModuleLoadData(module %d)", i)
}
