//go:build cgo

package gpu

/*
#include <stdlib.h>
#include "api.h"
*/
import "C"

import (
	_ "embed"
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

// kernel is one loaded function.
type kernel struct {
	f    C.CUfunction
	name string
}

// kernels are the functions of the two modules (gpt2.ptx and sample.ptx).
type kernels struct {
	embedLN, residualLN, residualLNLast, biasGELU, qkvKV     kernel
	embedLNW, residualLNW, residualLNLastW                   kernel // warp per row (rowWarp)
	attnPaged, attnContig, attnDecodePaged, attnDecodeContig kernel
	spin                                                     kernel // profiling only
	argmaxPart, sample                                       kernel
}

const numKernels = 15

// loadKernels loads the two modules (fatbin first, PTX when the driver refuses it) and looks up
// every kernel. It returns which image loaded, for the ledger.
func (r *cudaRuntime) loadKernels() (string, error) {
	var mods [2]C.CUmodule
	from := "fatbin (sm_80/sm_90 SASS, compute_80 PTX)"
	for i, imgs := range [][2]string{{fatbinGPT2, ptxGPT2}, {fatbinSample, ptxSample}} {
		err := r.loadModule(&mods[i], imgs[0], i)
		if err != nil {
			from = "PTX (JIT)"
			err = r.loadModule(&mods[i], imgs[1], i)
		}
		if err != nil {
			if i == 1 {
				_ = r.a.check(C.w_moduleUnload(r.a.c, mods[0]), "cuModuleUnload")
			}
			return "", err
		}
	}
	r.mod, r.mod2 = mods[0], mods[1]
	for _, k := range []struct {
		dst  *kernel
		mod  C.CUmodule
		name string
	}{
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
		{&r.fn.spin, mods[0], "spin_ns"},
		{&r.fn.argmaxPart, mods[1], "argmax_part"},
		{&r.fn.sample, mods[1], "sample"},
	} {
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
