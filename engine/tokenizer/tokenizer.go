// Package tokenizer is GPT-2's byte-level BPE. (Contract placeholder: replaced by the tokenizer work.)
package tokenizer

// Tokenizer encodes text to GPT-2 token ids and back.
type Tokenizer struct{}
