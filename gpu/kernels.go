//go:build cgo

package gpu

import (
	_ "embed"
	"fmt"

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

// The sm_90a module (wgmma, bulk copies) is a fatbin of sm_90a SASS alone, made on a machine with
// a newer nvcc by scripts/gen-sm90a.sh: drivers that cannot load it (older than its toolkit) and
// GPUs other than Hopper refuse it, and the runner goes on without it (loadKernels).
//
//go:embed kernels/gemm_sm90a.fatbin
var fatbinWG string

// module is one of the kernel modules.
type module int

const (
	modGPT2   module = iota // kernels/gpt2.cu: norms, attention, metadata
	modSample               // kernels/sample.cu: the samplers
	modGEMM                 // kernels/gemm.cu: small_gemm (sm_90 only)
	modWG                   // kernels/gemm_sm90a.cu: wg_gemm (sm_90a only; optional)
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
	kPackHead
	kArgmaxPart
	kArgmaxNext
	kSample
	kArgmaxPartsNext
	kSmallGEMM                                         // the first of small_gemm's: 2 tiles a warp (nt) times numEpilogues (smallGEMMKernel)
	kWGGEMM    = kSmallGEMM + 2*kernelID(numEpilogues) // the first of wg_gemm's: its epilogues at 64 columns, then at 32, X by rows then by boxes (wgKernel)
	kLMHead    = kWGGEMM + numWGKernels                // lm_head_argmax (head.go): X by rows, then by boxes
	numKernels = kLMHead + 2
)

// kernelNames are the kernels' names in their modules, by kernelID (read-only).
var kernelNames = [numKernels]string{
	"embed_ln", "embed_ln_warp", "residual_ln", "residual_ln_warp", "residual_ln_last", "residual_ln_last_warp",
	"bias_gelu", "qkv_bias_kv_write", "attention_paged", "attention_contig", "attention_decode_paged",
	"attention_decode_contig", "meta_copy", "tables_refresh", "spin_ns", "pack_head", "argmax_part", "argmax_next", "sample",
	"argmax_parts_next", "gemm_small_n1", "gemm_small_n1_gelu", "gemm_small_n1_ln", "gemm_small_n1_ln_gelu", "gemm_small_n1_res",
	"gemm_small_n2", "gemm_small_n2_gelu", "gemm_small_n2_ln", "gemm_small_n2_ln_gelu", "gemm_small_n2_res",
	"gemm_wg", "gemm_wg_ln", "gemm_wg_ln_gelu", "gemm_wg_res", "gemm_wg32_ln_gelu",
	"gemm_wg_box", "gemm_wg_ln_box", "gemm_wg_ln_gelu_box", "gemm_wg_res_box", "gemm_wg32_ln_gelu_box",
	"lm_head_argmax", "lm_head_argmax_box",
}

// module is the module k is in.
func (k kernelID) module() module {
	switch {
	case k >= kWGGEMM:
		return modWG
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

// loaded is what loadKernels loaded, for the ledger and caps.
type loaded struct {
	from string // which image of the core modules: the fatbin, or PTX through the JIT
	wg   error  // why the sm_90a module did not load (nil: it did, and wg_gemm's kernels are set)
}

// loadKernels loads the core modules (fatbin first, PTX when the driver refuses it) and the
// sm_90a module where the driver takes it, and looks up every kernel of the modules it loaded.
func loadKernels(ctx *cu.Context) ([numKernels]cu.Kernel, loaded, error) {
	var ks [numKernels]cu.Kernel
	var mods [numModules]cu.Module
	ld := loaded{from: "fatbin (sm_80/sm_90 SASS, compute_80 PTX)"}
	names := [modWG]string{"gpt2", "sample", "gemm"}
	for i, imgs := range [modWG][2]string{{fatbinGPT2, ptxGPT2}, {fatbinSample, ptxSample}, {fatbinGEMM, ptxGEMM}} {
		m, err := ctx.LoadModule(imgs[0], names[i]+".fatbin")
		if err != nil {
			ld.from = "PTX (JIT)"
			m, err = ctx.LoadModule(imgs[1], names[i]+".ptx")
		}
		if err != nil {
			return ks, ld, err
		}
		mods[i] = m
	}
	switch {
	case ctx.Info().CC/10 != 9:
		ld.wg = fmt.Errorf("compute capability %d.%d is not Hopper", ctx.Info().CC/10, ctx.Info().CC%10)
	case !ctx.HasTensorMaps(): // wg_gemm's X and lm_head_argmax's come by tensor copies (xmaps.go)
		ld.wg = fmt.Errorf("the driver has no tensor maps (cuTensorMapEncodeTiled, CUDA 12.0 or newer)")
	default:
		mods[modWG], ld.wg = ctx.LoadModule(fatbinWG, "gemm_sm90a.fatbin")
	}
	for k := range numKernels {
		if k.module() == modWG && ld.wg != nil {
			continue
		}
		f, err := ctx.Function(mods[k.module()], kernelNames[k])
		if err != nil {
			return ks, ld, err
		}
		ks[k] = f
	}
	return ks, ld, nil
}

// spin appends spin_ns (gpt2.cu): one thread holds the stream for ns nanoseconds, so that work
// enqueued after it runs back to back (timing).
func (p *program) spin(ns uint64) {
	p.launch("spin", kSpin, 1, 1, 1, 0, false, cu.U(ns))
}
