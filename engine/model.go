package engine

import "rosetop/engine/tokenizer"

// Model is a loaded GPT-2: its configuration, its weights and its tokenizer.
type Model struct {
	Name          string // what the header shows: "gpt2", "random:gpt2", "tiny-gpt2 (embedded)", a directory
	Dir           string // where config.json and the weights were read; "" for embedded or random
	Config        Config
	Weights       *Weights
	Tokenizer     *tokenizer.Tokenizer
	RandomWeights bool         // built from a seed, not read from a file
	close         func() error // unmaps the weights file, when mapped
}

// Close releases the model's memory map, if any. The weights must not be used afterwards.
func (m *Model) Close() error {
	if m == nil || m.close == nil {
		return nil
	}
	c := m.close
	m.close = nil
	return c()
}
