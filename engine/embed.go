package engine

import (
	"context"
	_ "embed" // go:embed of the tiny default model
	"fmt"
	"unsafe"

	"rosetop/engine/safetensors"
	"rosetop/engine/tokenizer"
)

// The tiny default model: GPT-2's vocabulary and architecture at 4 layers, 4 heads, 32 channels,
// seeded random weights saved by transformers (testdata/golden/make_golden.py), about 3 MB in F16.
// Strings, not byte slices, so that the embedded data is immutable.
var (
	//go:embed assets/tiny-gpt2/config.json
	tinyConfigJSON string
	//go:embed assets/tiny-gpt2/model.safetensors
	tinySafetensors string
)

// TinyName is the Name of the embedded default model.
const TinyName = "tiny-gpt2 (embedded)"

// LoadTiny returns the embedded tiny model. Its F16 weights are converted to float32 on each call.
func LoadTiny() (*Model, error) {
	cfg, err := ParseConfig("embedded tiny-gpt2/config.json", []byte(tinyConfigJSON))
	if err != nil {
		return nil, err
	}
	// A read-only view of the string: the reader never writes to its input.
	raw := unsafe.Slice(unsafe.StringData(tinySafetensors), len(tinySafetensors))
	f, err := safetensors.FromBytes("embedded tiny-gpt2/model.safetensors", raw)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidModel, err)
	}
	w, _, err := loadWeights(context.Background(), f, cfg, machineMemory())
	if err != nil {
		return nil, err
	}
	tok, err := tokenizer.GPT2()
	if err != nil {
		return nil, err
	}
	if err := checkVocab(cfg, tok, "embedded tiny-gpt2"); err != nil {
		return nil, err
	}
	// The weights are seeded random, not trained: their continuations are noise.
	return &Model{Name: TinyName, Config: cfg, Weights: w, Tokenizer: tok, RandomWeights: true}, nil
}
