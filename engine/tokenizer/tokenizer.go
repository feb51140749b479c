// Package tokenizer is GPT-2's byte-level BPE, identical to Hugging Face's `tokenizers` for the
// GPT-2 family: the same pre-tokenizer pattern, the same merges, `<|endoftext|>` split out as a
// special token, and the same lossy UTF-8 decoding. Encoding gives the ids of
// github.com/pkoukk/tiktoken-go (rank-based BPE over the same pattern), which the tests use as the
// reference, but runs its own pre-tokenizer and an O(n log n) merge with a bounded cache of long
// pieces; the rank table is built offline from the model's own vocab.json / tokenizer.json or from
// the embedded GPT-2 vocabulary.
package tokenizer

import (
	"compress/gzip"
	"embed"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"unicode/utf8"
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
// Every field but cache and scratch is written once by the constructor and only read afterwards;
// cache locks itself and scratch is a sync.Pool. So one Tokenizer serves any number of goroutines.
type Tokenizer struct {
	tokens      [][]byte       // (VocabSize) raw bytes of token id i
	ranks       map[string]int // raw bytes -> id of every ordinary token (special tokens left out)
	byteID      [256]int32     // id of the token of each single byte
	pairRank    []int32        // (65536) id of the token of bytes b0 b1 at b0<<8|b1, or noRank
	maxTokenLen int            // bytes in the longest ordinary token: no longer span is one
	specials    []string       // special tokens' text, sorted; split out of the text before BPE
	special     map[string]int // special token text -> id
	eos         int32          // id of <|endoftext|>
	cache       *pieceCache    // ids of long pieces; nil turns caching off (benchmarks)
	scratch     *sync.Pool     // of *mergeScratch, mergeHeap's reusable working memory
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
// Cost: linear in the text, and O(n log n) in the length of one piece (a run of letters, digits
// or symbols with no space); a long piece met again comes from the Tokenizer's bounded cache.
func (t *Tokenizer) Encode(text string) []int32 {
	if !utf8.ValidString(text) {
		text = string([]rune(text))
	}
	out := make([]int32, 0, len(text)/4+4)
	// at[k] is where specials[k] next occurs in text at or after i (-1: nowhere), found once and
	// searched again only after i passes it: O(len(text)) per special token however many there are.
	var atBuf [4]int
	at := atBuf[:0]
	for _, sp := range t.specials {
		at = append(at, strings.Index(text, sp))
	}
	for i := 0; ; {
		first := -1
		for k, sp := range t.specials {
			if at[k] >= 0 && at[k] < i {
				if at[k] = strings.Index(text[i:], sp); at[k] >= 0 {
					at[k] += i
				}
			}
			// Specials never contain one another, so two cannot start at the same byte.
			if at[k] >= 0 && (first < 0 || at[k] < at[first]) {
				first = k
			}
		}
		if first < 0 {
			return t.appendOrdinary(out, text[i:])
		}
		out = t.appendOrdinary(out, text[i:at[first]])
		out = append(out, int32(t.special[t.specials[first]]))
		i = at[first] + len(t.specials[first])
	}
}

// cacheMin is the shortest piece that is cached. Shorter ones merge about as fast as a cache
// lookup, and the many distinct short words of prose would only churn the cache; long pieces,
// the ones worth keeping, are rarer and repeat in benchmark filler.
const cacheMin = 24

// appendOrdinary appends the ids of text, which holds no special token and is valid UTF-8.
func (t *Tokenizer) appendOrdinary(out []int32, text string) []int32 {
	for i := 0; i < len(text); {
		end := pieceEnd(text, i)
		piece := text[i:end]
		i = end
		if id, ok := t.ranks[piece]; ok { // a whole token (tiktoken checks this first too)
			out = append(out, int32(id))
			continue
		}
		if len(piece) < cacheMin || t.cache == nil {
			out = t.appendMerged(out, piece)
			continue
		}
		var hit bool
		if out, hit = t.cache.appendCached(out, piece); hit {
			continue
		}
		n := len(out)
		out = t.appendMerged(out, piece)
		t.cache.put(piece, append([]int32(nil), out[n:]...))
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
