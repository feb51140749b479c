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

// The PTX is generated from kernels/*.cu by scripts/gen-ptx.sh and committed; the driver
// JIT-compiles it for the device at module load (part of the cold start).
//
//go:embed kernels/gpt2.ptx
var ptxGPT2 string

//go:embed kernels/sample.ptx
var ptxSample string

// kernel is one loaded function.
type kernel struct {
	f    C.CUfunction
	name string
}

// kernels are the functions of the two modules (gpt2.ptx and sample.ptx).
type kernels struct {
	embedLN, residualLN, residualLNLast, biasGELU, qkvKV, attnPaged, attnContig, sample kernel
}

const numKernels = 8

func ptxBytes() int { return len(ptxGPT2) + len(ptxSample) }

// loadKernels JIT-loads the two modules and looks up every kernel.
func (r *cudaRuntime) loadKernels() error {
	var mods [2]C.CUmodule
	for i, src := range []string{ptxGPT2, ptxSample} {
		img := C.CString(src) // NUL-terminated copy: cuModuleLoadData reads PTX as a C string
		err := r.a.check(C.w_moduleLoad(r.a.c, &mods[i], unsafe.Pointer(img)), "cuModuleLoadData(module %d)", i)
		C.free(unsafe.Pointer(img))
		if err != nil {
			if i == 1 {
				_ = r.a.check(C.w_moduleUnload(r.a.c, mods[0]), "cuModuleUnload")
			}
			return err
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
		{&r.fn.biasGELU, mods[0], "bias_gelu"},
		{&r.fn.qkvKV, mods[0], "qkv_bias_kv_write"},
		{&r.fn.attnPaged, mods[0], "attention_paged"},
		{&r.fn.attnContig, mods[0], "attention_contig"},
		{&r.fn.sample, mods[1], "sample"},
	} {
		name := C.CString(k.name)
		err := r.a.check(C.w_moduleFunc(r.a.c, &k.dst.f, k.mod, name), "cuModuleGetFunction(%s)", k.name)
		C.free(unsafe.Pointer(name))
		if err != nil {
			return err
		}
		k.dst.name = k.name
	}
	return nil
}

// setMaxShared lets f use up to n bytes of dynamic shared memory (above the default 48 KB).
func (r *cudaRuntime) setMaxShared(f kernel, n int) error {
	if n <= 48<<10 {
		return nil
	}
	if n > r.info.maxSharedOptin {
		return fmt.Errorf("gpu: %s needs %d bytes of shared memory, the device allows %d", f.name, n, r.info.maxSharedOptin)
	}
	// CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES = 8
	return r.a.check(C.w_funcAttr(r.a.c, f.f, 8, C.int(n)), "cuFuncSetAttribute(%s, %d)", f.name, n)
}
