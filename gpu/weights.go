//go:build cgo

package gpu

import (
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"unsafe"

	"rosetop/gpu/cu"
)

// Config is the GPT-2 shape the runner builds.
type Config struct {
	NLayer, NHead, NEmbd int // L, NH, C
	NPositions           int // T: the position table's length
	VocabSize            int // V
	Inner                int // F: the MLP's hidden width (4C for GPT-2)
	Eps                  float32
}

// Layer holds one block's parameters in Hugging Face layout (Conv1D weights [in, out]).
type Layer struct {
	LN1W, LN1B []float32 // (C)
	AttnW      []float32 // (C, 3C)
	AttnB      []float32 // (3C)
	AttnProjW  []float32 // (C, C)
	AttnProjB  []float32 // (C)
	LN2W, LN2B []float32 // (C)
	FCW        []float32 // (C, F)
	FCB        []float32 // (F)
	FCProjW    []float32 // (F, C)
	FCProjB    []float32 // (C)
}

// Weights are the model's parameters as float32; the runner uploads matrices and embeddings as
// fp16 and norms and biases as fp32. The LM head is tied to WTE.
type Weights struct {
	WTE, WPE   []float32 // (V, C), (T, C)
	Layers     []Layer
	LNFW, LNFB []float32 // (C)
}

func (c Config) validate() error {
	switch {
	case c.NLayer < 1 || c.NHead < 1 || c.NEmbd < 1 || c.VocabSize < 2 || c.NPositions < 1 || c.Inner < 1:
		return fmt.Errorf("gpu: config %+v: every size must be positive", c)
	case c.NEmbd%c.NHead != 0:
		return fmt.Errorf("gpu: n_embd %d is not a multiple of n_head %d", c.NEmbd, c.NHead)
	case c.NEmbd/c.NHead < 8 || c.NEmbd/c.NHead > 256 || (c.NEmbd/c.NHead)&(c.NEmbd/c.NHead-1) != 0:
		// The attention kernel spreads a head over hd/8 lanes of 16-byte loads.
		return fmt.Errorf("gpu: head size %d (n_embd %d / n_head %d): the CUDA kernels want a power of two from 8 to 256", c.NEmbd/c.NHead, c.NEmbd, c.NHead)
	case c.Inner%2 != 0:
		return fmt.Errorf("gpu: MLP width %d: the CUDA kernels want an even width", c.Inner)
	case c.NEmbd > 2048:
		// The norm kernels keep a row in registers: 256 threads x 8 values (gpt2-xl is 1600).
		return fmt.Errorf("gpu: n_embd %d: the CUDA kernels support at most 2048", c.NEmbd)
	}
	return nil
}

// devLayer is one block's parameters on the device.
type devLayer struct {
	ln1w, ln1b, attnW, attnB, projW, projB, ln2w, ln2b, fcW, fcB, fcProjW, fcProjB cu.Ptr
	fcBh                                                                           cu.Ptr // fp16 copy of fcB: the bias of cuBLASLt's GELU epilogue
	// The four matrices packed for small_gemm (mma.go); zero when it is not used. With folded
	// norms (fold.go) attnWp and fcWp hold gamma W of ln_1 and ln_2, and the vectors below the
	// column sums of those and beta W (+ the MLP's bias).
	attnWp, projWp, fcWp, fcProjWp cu.Ptr
	// The same, packed for wg_gemm (wg.go); zero when it is not used.
	attnWg, projWg, fcWg, fcProjWg cu.Ptr
	qkvC, qkvD, fcC, fcD           cu.Ptr
}

// devWeights is every parameter on the device, sub-allocated from one buffer.
type devWeights struct {
	buf        cu.Ptr
	bytes      int64
	wte, wpe   cu.Ptr // fp16 (V, C), (T, C)
	wteT       cu.Ptr // fp16 (C, Vp): the LM head as a plain [in, out] GEMM operand, zero-padded
	lnfw, lnfb cu.Ptr // fp32 (C)
	// The LM head for lm_head_argmax (head.go), zero when it is not used, filled on the device
	// (pack_head): gamma wte of ln_f in packWG's order, K whole (the vocabulary padded to Vh, a
	// multiple of 64), and its folded vectors colsum(gamma wte) and beta wte (Vh).
	headWg, headC, headD cu.Ptr
	layers               []devLayer
}

type tensorSpec struct {
	dst     *cu.Ptr
	src     []float32
	n       int // expected elements
	half    bool
	name    string
	cols    int // > 0: upload the (n/cols, cols) matrix transposed, rows padded to padRows
	padRows int
	mma     int       // > 0: upload the (n/mma, mma) matrix packed for small_gemm (packMMA) ...
	wg      bool      // ... or, when wg, for wg_gemm (packWG)
	scale   []float32 // packed only, if not nil: row k multiplied by scale[k] first (fold.go)
	device  bool      // filled on the device after the upload (head.go packHead): space only, no src
}

// packing is which packed copies of the layer matrices the upload adds.
type packing struct {
	mma  bool // small_gemm's (packMMA)
	fold bool // small_gemm's copies with the norms folded in (fold.go)
	wg   bool // wg_gemm's (packWG), always with the norms folded in
	head bool // lm_head_argmax's LM head (head.go), ln_f folded in
}

// uploadWeights checks every tensor's size, allocates one device buffer and copies the
// parameters into it (matrices as fp16, vectors as fp32; each layer's four matrices again in each
// packed order of pk, and with folded norms as well their vectors).
func uploadWeights(ctx *cu.Context, cfg Config, w *Weights, pk packing) (*devWeights, error) {
	if len(w.Layers) != cfg.NLayer {
		return nil, fmt.Errorf("gpu: weights have %d layers, config says %d", len(w.Layers), cfg.NLayer)
	}
	d := &devWeights{layers: make([]devLayer, cfg.NLayer)}
	specs, err := weightSpecs(cfg, w, d, pk)
	if err != nil {
		return nil, err
	}
	var total, host int64 // host: the bytes the upload fills, before the device-filled tensors
	offs := make([]int64, len(specs))
	for i, s := range specs {
		if !s.device && len(s.src) != s.n {
			return nil, fmt.Errorf("gpu: weight %s has %d values, want %d", s.name, len(s.src), s.n)
		}
		offs[i] = total
		total += align(int64(s.stored()) * elemSize(s.half))
		if !s.device {
			host = total
		}
	}
	buf, err := ctx.Alloc(total, "weights")
	if err != nil {
		return nil, err
	}
	d.buf, d.bytes = buf, total
	for i, s := range specs {
		*s.dst = buf + cu.Ptr(offs[i])
	}
	// The device image is built on the host by every core (fp16 conversion and the LM head's
	// transpose dominate the cold start when done on one), then moves in one copy; the
	// device-filled tensors at the end are not part of it.
	img := make([]byte, host)
	fillImage(img, specs, offs)
	if err = ctx.Upload(buf, unsafe.Pointer(&img[0]), host); err != nil {
		return nil, fmt.Errorf("gpu: uploading the weights: %w", err)
	}
	// img is pageable and the driver staged it before returning; synchronize anyway so the
	// weights are resident before anything reads them and img may be collected.
	if err = ctx.Sync(); err != nil {
		return nil, err
	}
	return d, nil
}

// weightSpecs lists every tensor of the device image with where its address goes in d.
func weightSpecs(cfg Config, w *Weights, d *devWeights, pk packing) ([]tensorSpec, error) {
	C, V, T := cfg.NEmbd, cfg.VocabSize, cfg.NPositions
	specs := []tensorSpec{
		f16Spec(&d.wte, w.WTE, V*C, "wte"), f16Spec(&d.wpe, w.WPE, T*C, "wpe"),
		// A transposed copy of the tied LM head, its rows padded from V to Vp (a multiple of 8):
		// with V = 50257 (odd) every leading dimension is misaligned and cuBLAS falls back to a
		// slow generic kernel.
		{dst: &d.wteT, src: w.WTE, n: V * C, half: true, name: "wte (transposed LM head)", cols: C, padRows: paddedVocab(V)},
		f32Spec(&d.lnfw, w.LNFW, C, "ln_f.weight"), f32Spec(&d.lnfb, w.LNFB, C, "ln_f.bias"),
	}
	var folded []foldedLayer
	if (pk.mma && pk.fold) || pk.wg {
		if err := checkNorms(cfg, w); err != nil {
			return nil, err
		}
		folded = foldLayers(cfg, w)
	}
	for i := range w.Layers {
		var fl *foldedLayer
		if folded != nil {
			fl = &folded[i]
		}
		specs = layerSpecs(specs, cfg, &w.Layers[i], &d.layers[i], fmt.Sprintf("h.%d.", i), pk, fl)
	}
	if pk.head { // last: the upload stops where these begin
		Vh := headTiles(V) * headTile
		specs = append(specs, tensorSpec{dst: &d.headWg, n: Vh * C, half: true, name: "LM head (packed on the device)", device: true},
			tensorSpec{dst: &d.headC, n: Vh, name: "ln_f folded into the LM head: colsum", device: true},
			tensorSpec{dst: &d.headD, n: Vh, name: "ln_f folded into the LM head: beta wte", device: true})
	}
	return specs, nil
}

// layerSpecs appends layer s's tensors, named with prefix p, to specs: also its matrices in each
// packed order of pk, and with fl (folded norms) the norms folded into them.
func layerSpecs(specs []tensorSpec, cfg Config, s *Layer, dl *devLayer, p string, pk packing, fl *foldedLayer) []tensorSpec {
	C, F := cfg.NEmbd, cfg.Inner
	specs = append(specs,
		f32Spec(&dl.ln1w, s.LN1W, C, p+"ln_1.weight"), f32Spec(&dl.ln1b, s.LN1B, C, p+"ln_1.bias"),
		f16Spec(&dl.attnW, s.AttnW, C*3*C, p+"attn.c_attn.weight"), f32Spec(&dl.attnB, s.AttnB, 3*C, p+"attn.c_attn.bias"),
		f16Spec(&dl.projW, s.AttnProjW, C*C, p+"attn.c_proj.weight"), f32Spec(&dl.projB, s.AttnProjB, C, p+"attn.c_proj.bias"),
		f32Spec(&dl.ln2w, s.LN2W, C, p+"ln_2.weight"), f32Spec(&dl.ln2b, s.LN2B, C, p+"ln_2.bias"),
		f16Spec(&dl.fcW, s.FCW, C*F, p+"mlp.c_fc.weight"), f32Spec(&dl.fcB, s.FCB, F, p+"mlp.c_fc.bias"), f16Spec(&dl.fcBh, s.FCB, F, p+"mlp.c_fc.bias (fp16)"),
		f16Spec(&dl.fcProjW, s.FCProjW, F*C, p+"mlp.c_proj.weight"), f32Spec(&dl.fcProjB, s.FCProjB, C, p+"mlp.c_proj.bias"),
	)
	for _, wg := range []bool{false, true} {
		if (wg && !pk.wg) || (!wg && !pk.mma) {
			continue
		}
		var g1, g2 []float32
		if wg || pk.fold {
			g1, g2 = s.LN1W, s.LN2W
		}
		dst, order := [4]*cu.Ptr{&dl.attnWp, &dl.projWp, &dl.fcWp, &dl.fcProjWp}, " (packed)"
		if wg {
			dst, order = [4]*cu.Ptr{&dl.attnWg, &dl.projWg, &dl.fcWg, &dl.fcProjWg}, " (packed for wgmma)"
		}
		packed := func(dst *cu.Ptr, src []float32, n, cols int, name string, scale []float32) tensorSpec {
			return tensorSpec{dst: dst, src: src, n: n, half: true, name: name + order, mma: cols, wg: wg, scale: scale}
		}
		specs = append(specs,
			packed(dst[0], s.AttnW, C*3*C, 3*C, p+"attn.c_attn.weight", g1), packed(dst[1], s.AttnProjW, C*C, C, p+"attn.c_proj.weight", nil),
			packed(dst[2], s.FCW, C*F, F, p+"mlp.c_fc.weight", g2), packed(dst[3], s.FCProjW, F*C, C, p+"mlp.c_proj.weight", nil),
		)
	}
	if fl != nil {
		specs = append(specs,
			f32Spec(&dl.qkvC, fl.qkvC, 3*C, p+"ln_1 folded: colsum"), f32Spec(&dl.qkvD, fl.qkvD, 3*C, p+"ln_1 folded: beta W"),
			f32Spec(&dl.fcC, fl.fcC, F, p+"ln_2 folded: colsum"), f32Spec(&dl.fcD, fl.fcD, F, p+"ln_2 folded: beta W + b"),
		)
	}
	return specs
}

// f16Spec and f32Spec are a tensor stored as fp16 or fp32.
func f16Spec(dst *cu.Ptr, src []float32, n int, name string) tensorSpec {
	return tensorSpec{dst: dst, src: src, n: n, half: true, name: name}
}

func f32Spec(dst *cu.Ptr, src []float32, n int, name string) tensorSpec {
	return tensorSpec{dst: dst, src: src, n: n, name: name}
}

// fillImage writes every tensor of specs into img at its offset: fp16 (transposed and padded
// where cols > 0) or fp32. The work is split into pieces of about a million values, shared by
// GOMAXPROCS goroutines.
func fillImage(img []byte, specs []tensorSpec, offs []int64) {
	type piece struct {
		s      *tensorSpec
		off    int64
		lo, hi int // elements [lo, hi) of src; rows [lo, hi) when transposed; n8 tiles (64-column blocks for wgmma) when packed
	}
	var pieces []piece
	const grain = 1 << 20
	for i := range specs {
		s := &specs[i]
		if s.device {
			continue
		}
		n, step := s.n, grain
		switch {
		case s.cols > 0:
			n, step = s.n/s.cols, max(grain/s.cols, 64)
		case s.mma > 0 && s.wg: // 64-column blocks of K rows each
			n, step = s.mma/wgBN, max(grain/(wgBN*(s.n/s.mma)), 1)
		case s.mma > 0: // n8 column tiles of K rows each
			n, step = s.mma/8, max(grain/(8*(s.n/s.mma)), 1)
		}
		for lo := 0; lo < n; lo += step {
			pieces = append(pieces, piece{s, offs[i], lo, min(lo+step, n)})
		}
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(runtime.GOMAXPROCS(0), len(pieces)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := int(next.Add(1) - 1); k < len(pieces); k = int(next.Add(1) - 1) {
				p := pieces[k]
				dst := img[p.off : p.off+int64(p.s.stored())*elemSize(p.s.half)]
				switch {
				case !p.s.half:
					f := unsafe.Slice((*float32)(unsafe.Pointer(&dst[0])), p.s.n)
					copy(f[p.lo:p.hi], p.s.src[p.lo:p.hi])
				case p.s.cols > 0:
					h := unsafe.Slice((*uint16)(unsafe.Pointer(&dst[0])), p.s.stored())
					toHalfT(h, p.s.src, p.s.cols, p.s.padRows, p.lo, p.hi)
				case p.s.mma > 0 && p.s.wg:
					h := unsafe.Slice((*uint16)(unsafe.Pointer(&dst[0])), p.s.n)
					packWG(h, p.s.src, p.s.scale, p.s.n/p.s.mma, p.s.mma, p.lo, p.hi)
				case p.s.mma > 0:
					h := unsafe.Slice((*uint16)(unsafe.Pointer(&dst[0])), p.s.n)
					packMMA(h, p.s.src, p.s.scale, p.s.n/p.s.mma, p.s.mma, p.lo, p.hi)
				default:
					h := unsafe.Slice((*uint16)(unsafe.Pointer(&dst[0])), p.s.n)
					toHalf(h[p.lo:p.hi], p.s.src[p.lo:p.hi])
				}
			}
		}()
	}
	wg.Wait()
}

// stored is the number of elements on the device (transposed matrices are padded).
func (s tensorSpec) stored() int {
	if s.cols > 0 {
		return s.cols * s.padRows
	}
	return s.n
}

// paddedVocab rounds V up to a multiple of 8 so that fp16 and fp32 rows of the LM head and the
// logits are 16-byte aligned.
func paddedVocab(v int) int { return (v + 7) &^ 7 }

func elemSize(half bool) int64 {
	if half {
		return 2
	}
	return 4
}

// align rounds n up to 256 bytes, the alignment cuBLAS and vector loads like.
func align(n int64) int64 { return (n + 255) &^ 255 }
