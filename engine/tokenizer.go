package engine

// Tokenizer is GPT-2's byte-level BPE. (Contract placeholder: the tokenizer helper replaces this file.)
type Tokenizer struct{}
