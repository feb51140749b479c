// Package tokenizer is GPT-2's byte-level BPE, identical to Hugging Face's `tokenizers` for the
// GPT-2 family: the same pre-tokenizer pattern, the same merges, `<|endoftext|>` split out as a
// special token, and the same lossy UTF-8 decoding. The BPE itself runs in
// github.com/pkoukk/tiktoken-go; this package builds its rank table offline from the model's own
// vocab.json / tokenizer.json or from the embedded GPT-2 vocabulary.
package tokenizer

import (
	"compress/gzip"
	"embed"
	"errors"
	"fmt"
	"io"
	"unicode/utf8"

	"github.com/pkoukk/tiktoken-go"
)

// ErrInvalid is wrapped by every error about a tokenizer file that cannot be used.
var ErrInvalid = errors.New("invalid tokenizer file")

// EndOfText is GPT-2's end-of-text token, its EOS and document separator.
const EndOfText = "<|endoftext|>"

// gpt2Pattern splits text into pieces before BPE (GPT-2's encoder.py pattern, the one Hugging
// Face's ByteLevel pre-tokenizer uses): contractions, letter runs, number runs, other-symbol runs,
// each with at most one leading space, then whitespace that is not followed by a non-space.
const gpt2Pattern = `'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+`

// assets holds GPT-2's vocabulary: Hugging Face's vocab.json and merges.txt, gzipped.
//
//go:embed assets/gpt2-vocab.json.gz assets/gpt2-merges.txt.gz
var assets embed.FS

// Tokenizer encodes text to GPT-2 token ids and back.
//
// Every field is written once by the constructor and only read afterwards, so one Tokenizer serves
// any number of goroutines: tiktoken-go's encoder only reads its maps, and the regexp2 programs it
// matches with keep their per-match state in runners pooled under the program's own mutex.
type Tokenizer struct {
	bpe    *tiktoken.Tiktoken
	tokens [][]byte // (VocabSize) raw bytes of token id i
	eos    int32    // id of <|endoftext|>
}

// GPT2 returns the tokenizer of the embedded GPT-2 vocabulary (gpt2, distilgpt2 and gpt2-medium,
// -large, -xl all share it). Each call parses the vocabulary again (tens of milliseconds).
func GPT2() (*Tokenizer, error) {
	raw, err := readGzipAsset("assets/gpt2-vocab.json.gz")
	if err != nil {
		return nil, err
	}
	vocab, err := parseVocabJSON(raw, "embedded vocab.json")
	if err != nil {
		return nil, err
	}
	// The embedded merges are checked once by TestEmbeddedMerges rather than on every call.
	return build(source{vocabFile: "embedded vocab.json", vocab: vocab, special: map[string]int{EndOfText: idFromVocab}})
}

func readGzipAsset(name string) ([]byte, error) {
	f, err := assets.Open(name)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	raw, err := io.ReadAll(zr)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return raw, nil
}

// Encode returns the token ids of text. Every `<|endoftext|>` in text is the end-of-text token,
// as in Hugging Face, where it is registered as a special token; the text around it is encoded
// piece by piece. Invalid UTF-8 in text is read as U+FFFD, one per bad byte (Go's []rune rule).
//
// Cost: about 0.2 ms per KB of prose. tiktoken-go's merge loop is quadratic in the length of one
// pre-token piece (a run of letters, digits or symbols with no space), so a 16 KB "word" takes
// about 0.4 s: callers that accept untrusted text should bound its length first.
func (t *Tokenizer) Encode(text string) []int32 {
	ids := t.bpe.Encode(text, []string{"all"}, nil)
	out := make([]int32, len(ids))
	for i, id := range ids {
		out[i] = int32(id)
	}
	return out
}

// Decode returns the text of ids as Hugging Face's decode does: the tokens' bytes joined, special
// tokens included, ids out of range skipped, and ill-formed UTF-8 replaced by U+FFFD per maximal
// subpart (Rust's String::from_utf8_lossy).
func (t *Tokenizer) Decode(ids []int32) string {
	n := 0
	for _, id := range ids {
		n += len(t.TokenBytes(id))
	}
	raw := make([]byte, 0, n)
	for _, id := range ids {
		raw = append(raw, t.TokenBytes(id)...)
	}
	if utf8.Valid(raw) {
		return string(raw)
	}
	out, _ := appendLossy(make([]byte, 0, n+8), raw, true)
	return string(out)
}

// TokenBytes returns the raw bytes of token id (nil when id is out of range). The slice is shared:
// callers must not modify it.
func (t *Tokenizer) TokenBytes(id int32) []byte {
	if id < 0 || int(id) >= len(t.tokens) {
		return nil
	}
	return t.tokens[id]
}

// EOS returns the id of <|endoftext|> (50256 for GPT-2).
func (t *Tokenizer) EOS() int32 { return t.eos }

// VocabSize returns the number of token ids (50257 for GPT-2; a model may pad its embedding
// table beyond this).
func (t *Tokenizer) VocabSize() int { return len(t.tokens) }
