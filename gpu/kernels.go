//go:build cgo

package gpu

import (
	_ "embed"

	"rosetop/gpu/cu"
)

// The PTX and fatbins are generated from kernels/*.cu by scripts/gen-ptx.sh and committed. A
// fatbin holds SASS for sm_80 and sm_90 and the compute_80 PTX: Ampere and Hopper load machine
// code at once, other GPUs JIT the PTX inside it. The plain PTX is the fallback when a driver
// rejects the fatbin (it is also what reviewers read, and what ptx_test.go checks every
// launcher's arguments against).
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

// module is one of the three kernel modules.
type module int

const (
	modGPT2   module = iota // kernels/gpt2.cu: norms, attention, metadata
	modSample               // kernels/sample.cu: the samplers
	modGEMM                 // kernels/gemm.cu: small_gemm (sm_90 only)
	numModules
)

// kernelID names a kernel; the runner's kernels are indexed by it.
type kernelID int

const (
	kEmbedLN kernelID = iota
	kEmbedLNWarp
	kResidualLN
	kResidualLNWarp
	kResidualLNLast
	kResidualLNLastWarp
	kBiasGELU
	kQKVKV
	kAttnPaged
	kAttnContig
	kAttnDecodePaged
	kAttnDecodeContig
	kMetaCopy
	kTablesRefresh
	kSpin
	kArgmaxPart
	kArgmaxNext
	kSample
	kSmallGEMM // the first of small_gemm's: 2 tiles a warp (nt) times numEpilogues (smallGEMMKernel)
	numKernels = kSmallGEMM + 2*kernelID(numEpilogues)
)

// kernelNames are the kernels' names in their modules, by kernelID (read-only).
var kernelNames = [numKernels]string{
	"embed_ln", "embed_ln_warp", "residual_ln", "residual_ln_warp", "residual_ln_last", "residual_ln_last_warp",
	"bias_gelu", "qkv_bias_kv_write", "attention_paged", "attention_contig", "attention_decode_paged",
	"attention_decode_contig", "meta_copy", "tables_refresh", "spin_ns", "argmax_part", "argmax_next", "sample",
	"gemm_small_n1", "gemm_small_n1_gelu", "gemm_small_n1_ln", "gemm_small_n1_ln_gelu", "gemm_small_n1_res",
	"gemm_small_n2", "gemm_small_n2_gelu", "gemm_small_n2_ln", "gemm_small_n2_ln_gelu", "gemm_small_n2_res",
}

// module is the module k is in.
func (k kernelID) module() module {
	switch {
	case k >= kSmallGEMM:
		return modGEMM
	case k >= kArgmaxPart:
		return modSample
	}
	return modGPT2
}

// smallGEMMKernel is small_gemm for nt n8 tiles a warp (1 or 2) and epilogue e (gemm.cu
// SG_KERNELS).
func smallGEMMKernel(nt int, e epilogue) kernelID {
	return kSmallGEMM + kernelID((nt-1)*int(numEpilogues)+int(e))
}

// loadKernels loads the modules (fatbin first, PTX when the driver refuses it) and looks up every
// kernel. It returns which image loaded, for the ledger.
func loadKernels(ctx *cu.Context) ([numKernels]cu.Kernel, string, error) {
	var ks [numKernels]cu.Kernel
	var mods [numModules]cu.Module
	from := "fatbin (sm_80/sm_90 SASS, compute_80 PTX)"
	names := [numModules]string{"gpt2", "sample", "gemm"}
	for i, imgs := range [numModules][2]string{{fatbinGPT2, ptxGPT2}, {fatbinSample, ptxSample}, {fatbinGEMM, ptxGEMM}} {
		m, err := ctx.LoadModule(imgs[0], names[i]+".fatbin")
		if err != nil {
			from = "PTX (JIT)"
			m, err = ctx.LoadModule(imgs[1], names[i]+".ptx")
		}
		if err != nil {
			return ks, "", err
		}
		mods[i] = m
	}
	for k := range numKernels {
		f, err := ctx.Function(mods[k.module()], kernelNames[k])
		if err != nil {
			return ks, "", err
		}
		ks[k] = f
	}
	return ks, from, nil
}

// spin appends spin_ns (gpt2.cu): one thread holds the stream for ns nanoseconds, so that work
// enqueued after it runs back to back (timing).
func (p *program) spin(ns uint64) {
	p.launch("spin", kSpin, 1, 1, 1, 0, false, cu.U(ns))
}
