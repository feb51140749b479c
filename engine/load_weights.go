package engine

import (
	"context"
	"fmt"
	"math"
	"runtime"
	"slices"
	"strconv"
	"strings"
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

// loadWeights reads cfg's weights from f. It checks the file against cfg before allocating
// anything sized by cfg (the layer count, then every tensor's presence and shape, then the memory
// the float32 copies need against memory, the machine's bytes, 0 for unknown), then converts the
// tensors in parallel chunks, refusing NaN and infinities and stopping when ctx is done.
// aliased reports whether any slice points into f's bytes (F32 data used in place), in which case
// f must stay open as long as the weights are used.
func loadWeights(ctx context.Context, f tensorFiles, cfg Config, memory uint64) (w *Weights, aliased bool, err error) {
	if err := checkLayers(f, cfg); err != nil {
		return nil, false, err
	}
	w = &Weights{Layers: make([]LayerWeights, cfg.NLayer)}
	specs := weightSpecs(cfg, w)
	tensors, err := findTensors(f, specs)
	if err != nil {
		return nil, false, err
	}
	var convert uint64 // bytes of the float32 copies
	for _, t := range tensors {
		if safetensors.Aliases(t) {
			aliased = true
		} else {
			convert += 4 * uint64(t.Numel())
		}
	}
	if err := checkMemory(convert, memory, "converting the weights to float32"); err != nil {
		return nil, false, fmt.Errorf("safetensors %s: %w", f.Name(), err)
	}
	dsts := make([][]float32, len(specs))
	for i, t := range tensors {
		if safetensors.Aliases(t) {
			dsts[i], _ = f.Float32(t.Name) // the file's bytes in place: no error for f's own F32 tensor
		} else {
			dsts[i] = make([]float32, t.Numel()) // filled by decodeAll
		}
		*specs[i].dst = dsts[i]
	}
	if err := decodeAll(ctx, tensors, dsts); err != nil {
		return nil, false, fmt.Errorf("safetensors %s: %w", f.Name(), err)
	}
	return w, aliased, nil
}

// findTensors looks up each spec's tensor, with or without the "transformer." prefix, and checks
// its dtype and shape.
func findTensors(f tensorFiles, specs []tensorSpec) ([]safetensors.Tensor, error) {
	tensors := make([]safetensors.Tensor, len(specs))
	for i, s := range specs {
		t, ok := f.Tensor("transformer." + s.name)
		if !ok {
			t, ok = f.Tensor(s.name)
		}
		if !ok {
			return nil, fmt.Errorf("safetensors %s: %w: missing tensor %q (also looked for %q)", f.Name(), ErrInvalidModel, s.name, "transformer."+s.name)
		}
		if !t.DType.Float() { // other tensors of the file (BOOL attention masks) are never read
			return nil, fmt.Errorf("safetensors %s: %w: %w: tensor %q has dtype %s, want F32, F16 or BF16", f.Name(), ErrInvalidModel, safetensors.ErrUnsupportedDType, t.Name, t.DType)
		}
		if !slices.Equal(t.Shape, s.shape) {
			return nil, fmt.Errorf("safetensors %s: %w: tensor %q has shape %v, config.json implies %v", f.Name(), ErrInvalidModel, t.Name, t.Shape, s.shape)
		}
		tensors[i] = t
	}
	return tensors, nil
}

// checkLayers compares config.json's n_layer with the layers the file holds (tensors named
// [transformer.]h.N.*), before anything is allocated per layer.
func checkLayers(f tensorFiles, cfg Config) error {
	seen := map[int]bool{}
	lo, hi := math.MaxInt, -1
	for _, name := range f.Names() {
		rest, ok := strings.CutPrefix(strings.TrimPrefix(name, "transformer."), "h.")
		if !ok {
			continue
		}
		idx, _, ok := strings.Cut(rest, ".")
		if n, err := strconv.Atoi(idx); ok && err == nil && n >= 0 {
			seen[n] = true
			lo, hi = min(lo, n), max(hi, n)
		}
	}
	if len(seen) == cfg.NLayer {
		return nil // which layers: the per-tensor check names a missing one
	}
	have := "no layers (no tensors named h.N.*)"
	if len(seen) > 0 {
		have = fmt.Sprintf("%d layers (h.%d to h.%d)", len(seen), lo, hi)
	}
	return fmt.Errorf("safetensors %s: %w: config.json n_layer is %d, the file holds %s", f.Name(), ErrInvalidModel, cfg.NLayer, have)
}

// checkMemory refuses to allocate need bytes for what on a machine of memory bytes (0: unknown,
// not checked).
func checkMemory(need, memory uint64, what string) error {
	if memory == 0 || need <= memory {
		return nil
	}
	return fmt.Errorf("%w: %s: %s needed, more than the %s of memory this process may use", ErrModelTooLarge, what, gib(need), gib(memory))
}

// gib prints a byte count in GiB.
func gib(n uint64) string { return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30)) }

// decodeChunk is the number of elements a worker converts and checks at a time: small enough to
// stay in cache between the conversion and the check, and to notice cancellation promptly.
const decodeChunk = 1 << 16

// decodeAll fills dsts[i] from tensors[i] (dsts[i] aliasing the file's bytes is only checked),
// chunk by chunk on GOMAXPROCS goroutines, and checks every value is finite. It returns the first
// non-finite value in tensor order, or ctx's error once ctx is done.
func decodeAll(ctx context.Context, tensors []safetensors.Tensor, dsts [][]float32) error {
	type job struct{ tensor, first int }
	var jobs []job
	for i, d := range dsts {
		for first := 0; first < len(d); first += decodeChunk {
			jobs = append(jobs, job{i, first})
		}
	}
	var next atomic.Int64 // index of the next unclaimed job
	var mu sync.Mutex     // guards bad and decErr
	bad := nonFinite{tensor: -1}
	var decErr error
	var wg sync.WaitGroup
	for range min(runtime.GOMAXPROCS(0), max(len(jobs), 1)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := int(next.Add(1) - 1); j < len(jobs) && ctx.Err() == nil; j = int(next.Add(1) - 1) {
				jb := jobs[j]
				mu.Lock()
				skip := decErr != nil || (bad.tensor >= 0 && jb.tensor > bad.tensor) // jobs run in tensor order
				mu.Unlock()
				if skip {
					return
				}
				t, d := tensors[jb.tensor], dsts[jb.tensor]
				chunk := d[jb.first:min(jb.first+decodeChunk, len(d))]
				var err error
				if !safetensors.Aliases(t) {
					err = t.Decode(chunk, jb.first)
				}
				i := firstNonFinite(chunk)
				if err == nil && i < 0 {
					continue
				}
				mu.Lock()
				if err != nil && decErr == nil {
					decErr = err
				}
				if found := (nonFinite{jb.tensor, jb.first + i, chunk[max(i, 0)]}); err == nil && found.before(bad) {
					bad = found
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	switch {
	case decErr != nil:
		return fmt.Errorf("%w: %w", ErrInvalidModel, decErr)
	case bad.tensor >= 0:
		t := tensors[bad.tensor]
		return fmt.Errorf("%w: %w: tensor %q holds %v at element %d of %d", ErrInvalidModel, ErrNonFiniteWeights, t.Name, bad.value, bad.index, len(dsts[bad.tensor]))
	case ctx.Err() != nil:
		return fmt.Errorf("loading cancelled: %w", ctx.Err())
	}
	return nil
}

// nonFinite is a NaN or infinite weight: its tensor's index, its element and its value.
type nonFinite struct {
	tensor, index int
	value         float32
}

// before orders findings by position in the file's tensor list; tensor -1 is "none yet".
func (a nonFinite) before(b nonFinite) bool {
	return b.tensor < 0 || a.tensor < b.tensor || a.tensor == b.tensor && a.index < b.index
}

// firstNonFinite returns the index of the first NaN or ±Inf in x, or -1. An all-ones exponent
// marks both.
func firstNonFinite(x []float32) int {
	for i, v := range x {
		if math.Float32bits(v)&0x7f800000 == 0x7f800000 {
			return i
		}
	}
	return -1
}
