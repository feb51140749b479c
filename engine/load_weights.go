package engine

import (
	"fmt"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"

	"rosetop/engine/safetensors"
)

// tensorSpec is one weight to read: its name without the "transformer." prefix, the shape the
// config implies, and where the values go.
type tensorSpec struct {
	name  string
	shape []int
	dst   *[]float32
}

// weightSpecs lists every GPT-2 parameter with its Hugging Face name and shape; Conv1D weights are
// [in, out]. lm_head.weight, if the file has it, is ignored: GPT-2 ties it to wte.
func weightSpecs(cfg Config, w *Weights) []tensorSpec {
	V, T, C, I := cfg.VocabSize, cfg.NPositions, cfg.NEmbd, cfg.InnerDim
	specs := []tensorSpec{
		{"wte.weight", []int{V, C}, &w.WTE},
		{"wpe.weight", []int{T, C}, &w.WPE},
		{"ln_f.weight", []int{C}, &w.LNFW},
		{"ln_f.bias", []int{C}, &w.LNFB},
	}
	for l := range w.Layers {
		lw := &w.Layers[l]
		p := fmt.Sprintf("h.%d.", l)
		specs = append(specs,
			tensorSpec{p + "ln_1.weight", []int{C}, &lw.LN1W},
			tensorSpec{p + "ln_1.bias", []int{C}, &lw.LN1B},
			tensorSpec{p + "attn.c_attn.weight", []int{C, 3 * C}, &lw.AttnW},
			tensorSpec{p + "attn.c_attn.bias", []int{3 * C}, &lw.AttnB},
			tensorSpec{p + "attn.c_proj.weight", []int{C, C}, &lw.AttnProjW},
			tensorSpec{p + "attn.c_proj.bias", []int{C}, &lw.AttnProjB},
			tensorSpec{p + "ln_2.weight", []int{C}, &lw.LN2W},
			tensorSpec{p + "ln_2.bias", []int{C}, &lw.LN2B},
			tensorSpec{p + "mlp.c_fc.weight", []int{C, I}, &lw.FCW},
			tensorSpec{p + "mlp.c_fc.bias", []int{I}, &lw.FCB},
			tensorSpec{p + "mlp.c_proj.weight", []int{I, C}, &lw.FCProjW},
			tensorSpec{p + "mlp.c_proj.bias", []int{C}, &lw.FCProjB},
		)
	}
	return specs
}

// loadWeights checks every tensor's presence and shape first, then converts them in parallel.
// aliased reports whether any slice points into f's bytes (F32 data used in place), in which case
// f must stay open as long as the weights are used.
func loadWeights(f *safetensors.File, cfg Config) (w *Weights, aliased bool, err error) {
	w = &Weights{Layers: make([]LayerWeights, cfg.NLayer)}
	specs := weightSpecs(cfg, w)
	full := make([]string, len(specs)) // name as stored in the file
	for i, s := range specs {
		t, ok := f.Tensor("transformer." + s.name)
		full[i] = "transformer." + s.name
		if !ok {
			t, ok = f.Tensor(s.name)
			full[i] = s.name
		}
		if !ok {
			return nil, false, fmt.Errorf("safetensors %s: %w: missing tensor %q (also looked for %q)", f.Name(), ErrInvalidModel, s.name, "transformer."+s.name)
		}
		if !slices.Equal(t.Shape, s.shape) {
			return nil, false, fmt.Errorf("safetensors %s: %w: tensor %q has shape %v, config.json implies %v", f.Name(), ErrInvalidModel, full[i], t.Shape, s.shape)
		}
		aliased = aliased || safetensors.Aliases(t)
	}
	errs := make([]error, len(specs))
	var next atomic.Int64 // index of the next unclaimed tensor
	var wg sync.WaitGroup
	for range min(runtime.GOMAXPROCS(0), len(specs)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				j := int(next.Add(1) - 1)
				if j >= len(specs) {
					return
				}
				*specs[j].dst, errs[j] = f.Float32(full[j])
			}
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, false, fmt.Errorf("%w: %w", ErrInvalidModel, err)
		}
	}
	return w, aliased, nil
}
