package tokenizer

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// countedRune is how vocabulary files spell byte b, by bytes_to_unicode's definition: the k-th
// byte that is not printable Latin-1 is U+0100+k.
func countedRune(b byte) rune {
	if printableByte(b) {
		return rune(b)
	}
	k := 0
	for c := range int(b) {
		if !printableByte(byte(c)) {
			k++
		}
	}
	return rune(0x100 + k)
}

func TestAlphabetRoundTrip(t *testing.T) {
	seen := map[rune]bool{}
	for b := range 256 {
		r := alphabetRune(byte(b))
		if c := countedRune(byte(b)); r != c {
			t.Errorf("byte 0x%02x spelled %U, want %U", b, r, c)
		}
		if seen[r] {
			t.Fatalf("byte 0x%02x maps to %U, already used", b, r)
		}
		seen[r] = true
		if got, ok := alphabetByte(r); !ok || got != byte(b) {
			t.Errorf("alphabetByte(%U) = 0x%02x, %v; want 0x%02x", r, got, ok, b)
		}
	}
	for _, r := range []rune{' ', '\n', 0x7F, 0xAD, 0x144, -1, 0xFFFD} {
		if _, ok := alphabetByte(r); ok {
			t.Errorf("alphabetByte(%U) accepted a character outside the alphabet", r)
		}
	}
	if alphabetRune(' ') != 'Ġ' || alphabetRune('\n') != 'Ċ' {
		t.Errorf("space/newline spelled %q/%q, want Ġ/Ċ", alphabetRune(' '), alphabetRune('\n'))
	}
}

// tinyMerges are the merges of the synthetic vocabulary: ids 256.. in this order.
var tinyMerges = [][2]string{{"h", "e"}, {"l", "l"}, {"he", "ll"}, {"hell", "o"}, {"Ġ", "w"}, {"o", "r"}, {"Ġw", "or"}}

// tinyVocab is a byte-level vocabulary: byte b is id b, the merges follow, then <|endoftext|>.
func tinyVocab() map[string]int {
	v := make(map[string]int)
	for b := range 256 {
		v[string(alphabetRune(byte(b)))] = b
	}
	for i, m := range tinyMerges {
		v[m[0]+m[1]] = 256 + i
	}
	v[EndOfText] = 256 + len(tinyMerges)
	return v
}

func tinyMergesTxt() string {
	var sb strings.Builder
	sb.WriteString("#version: 0.2\n")
	for _, m := range tinyMerges {
		sb.WriteString(m[0] + " " + m[1] + "\n")
	}
	return sb.String()
}

// tinyTokenizerJSON is a tokenizer.json shaped like GPT-2's; pairs picks the merges format of
// tokenizers >= 0.20 (["l", "r"]) instead of "l r".
func tinyTokenizerJSON(t testing.TB, pairs bool, edit func(map[string]any)) string {
	merges := make([]any, len(tinyMerges))
	for i, m := range tinyMerges {
		merges[i] = m[0] + " " + m[1]
		if pairs {
			merges[i] = []string{m[0], m[1]}
		}
	}
	eot := len(tinyVocab()) - 1
	doc := map[string]any{
		"version":        "1.0",
		"added_tokens":   []any{map[string]any{"id": eot, "content": EndOfText, "special": true}},
		"normalizer":     nil,
		"pre_tokenizer":  map[string]any{"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true},
		"post_processor": map[string]any{"type": "ByteLevel", "add_prefix_space": true, "trim_offsets": false},
		"decoder":        map[string]any{"type": "ByteLevel"},
		"model":          map[string]any{"type": "BPE", "vocab": tinyVocab(), "merges": merges},
	}
	if edit != nil {
		edit(doc)
	}
	data, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

func vocabJSON(t testing.TB, edit func(map[string]int)) string {
	v := tinyVocab()
	if edit != nil {
		edit(v)
	}
	data, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

func writeDir(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestFromDir(t *testing.T) {
	// "hello world": "hello" is one merged token; " world" merges to "Ġwor" then bytes l, d.
	tinyWant := []int32{259, 262, 'l', 'd', 263}
	for _, tc := range []struct {
		name  string
		files map[string]string
		vocab int
	}{
		{"vocab.json alone", map[string]string{"vocab.json": vocabJSON(t, nil)}, 264},
		{"vocab.json and merges.txt", map[string]string{"vocab.json": vocabJSON(t, nil), "merges.txt": tinyMergesTxt()}, 264},
		{"merges.txt with CRLF", map[string]string{"vocab.json": vocabJSON(t, nil),
			"merges.txt": strings.ReplaceAll(tinyMergesTxt(), "\n", "\r\n")}, 264},
		{"tokenizer.json, string merges", map[string]string{"tokenizer.json": tinyTokenizerJSON(t, false, nil)}, 264},
		{"tokenizer.json, pair merges", map[string]string{"tokenizer.json": tinyTokenizerJSON(t, true, nil)}, 264},
		{"tokenizer.json wins over a broken vocab.json", map[string]string{
			"tokenizer.json": tinyTokenizerJSON(t, false, nil), "vocab.json": "{broken"}, 264},
		{"tokenizer_config.json without prefix space", map[string]string{"tokenizer.json": tinyTokenizerJSON(t, false, nil),
			"tokenizer_config.json": `{"add_prefix_space": false, "tokenizer_class": "GPT2Tokenizer", "added_tokens_decoder": {}}`}, 264},
		// added_tokens.json beside vocab.json: tokens transformers appends after the vocabulary
		// (tokenization_utils_base.py, "Add supplementary tokens"), split out of the text.
		{"vocab.json with added_tokens.json", map[string]string{"vocab.json": vocabJSON(t, nil), "merges.txt": tinyMergesTxt(),
			"added_tokens.json": `{"<|pad|>": 264}`}, 265},
		// GPT-2's own tokenizer.json spells out its BPE options, all off; older files leave them out,
		// and a file without a decoder encodes the same.
		{"tokenizer.json with GPT-2's BPE options", map[string]string{"tokenizer.json": tinyTokenizerJSON(t, false, func(d map[string]any) {
			maps.Copy(d["model"].(map[string]any), map[string]any{"dropout": nil, "unk_token": nil, "continuing_subword_prefix": "",
				"end_of_word_suffix": "", "fuse_unk": false, "byte_fallback": false, "ignore_merges": false})
		})}, 264},
		{"tokenizer.json with null BPE options and dropout 0", map[string]string{"tokenizer.json": tinyTokenizerJSON(t, false, func(d map[string]any) {
			maps.Copy(d["model"].(map[string]any), map[string]any{"dropout": 0, "continuing_subword_prefix": nil,
				"end_of_word_suffix": nil, "byte_fallback": nil, "ignore_merges": nil})
		})}, 264},
		{"tokenizer.json without a decoder", map[string]string{"tokenizer.json": tinyTokenizerJSON(t, false, func(d map[string]any) { delete(d, "decoder") })}, 264},
		{"tokenizer.json with a null decoder", map[string]string{"tokenizer.json": tinyTokenizerJSON(t, false, func(d map[string]any) { d["decoder"] = nil })}, 264},
		{"eos only among added_tokens", map[string]string{"tokenizer.json": tinyTokenizerJSON(t, false, func(d map[string]any) {
			v := tinyVocab()
			delete(v, EndOfText)
			d["model"].(map[string]any)["vocab"] = v
		})}, 264},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tok, err := FromDir(writeDir(t, tc.files))
			if err != nil {
				t.Fatalf("FromDir: %v", err)
			}
			if got := tok.VocabSize(); got != tc.vocab {
				t.Errorf("VocabSize() = %d, want %d", got, tc.vocab)
			}
			if got := tok.EOS(); got != 263 {
				t.Errorf("EOS() = %d, want 263", got)
			}
			text := "hello world<|endoftext|>"
			if got := tok.Encode(text); !slices.Equal(got, tinyWant) {
				t.Errorf("Encode(%q) = %v, want %v", text, got, tinyWant)
			}
			if tc.vocab == 265 {
				if got, want := tok.Encode("hello<|pad|>"), []int32{259, 264}; !slices.Equal(got, want) {
					t.Errorf("Encode(hello<|pad|>) = %v, want %v", got, want)
				}
			}
			if got := tok.Decode(tinyWant); got != text {
				t.Errorf("Decode(%v) = %q, want %q", tinyWant, got, text)
			}
		})
	}
}

func TestFromDirFallsBackToGPT2(t *testing.T) {
	tok, err := FromDir(writeDir(t, map[string]string{"config.json": "{}"}))
	if err != nil {
		t.Fatalf("FromDir(dir without tokenizer files): %v", err)
	}
	if tok.VocabSize() != 50257 || tok.EOS() != 50256 {
		t.Errorf("fallback vocab %d, eos %d; want GPT-2's 50257, 50256", tok.VocabSize(), tok.EOS())
	}
}

func TestFromDirErrors(t *testing.T) {
	vocab := func(edit func(map[string]int)) map[string]string {
		return map[string]string{"vocab.json": vocabJSON(t, edit)}
	}
	withMerges := func(merges string) map[string]string {
		return map[string]string{"vocab.json": vocabJSON(t, nil), "merges.txt": merges}
	}
	tj := func(edit func(map[string]any)) map[string]string {
		return map[string]string{"tokenizer.json": tinyTokenizerJSON(t, false, edit)}
	}
	bpe := func(option string, value any) map[string]string {
		return tj(func(d map[string]any) { d["model"].(map[string]any)[option] = value })
	}
	for _, tc := range []struct {
		name  string
		files map[string]string
		file  string // the file the error must name
		want  string // and a phrase it must contain
	}{
		{"vocab.json not JSON", map[string]string{"vocab.json": "{not json"}, "vocab.json", "JSON object"},
		{"vocab.json an array", map[string]string{"vocab.json": "[1, 2]"}, "vocab.json", "JSON object"},
		{"vocab.json empty object", map[string]string{"vocab.json": "{}"}, "vocab.json", "empty vocabulary"},
		{"vocab.json fractional id", map[string]string{"vocab.json": `{"a": 1.5}`}, "vocab.json", "JSON object"},
		{"raw space in a token", vocab(func(v map[string]int) { delete(v, "Ġw"); v[" w"] = 260 }), "vocab.json", "outside GPT-2's byte alphabet"},
		{"a byte without a token", vocab(func(v map[string]int) { delete(v, "A"); v["AA"] = 'A' }), "vocab.json", "no token for byte 0x41"},
		{"two tokens, one id", vocab(func(v map[string]int) { v["he"] = 257 }), "vocab.json", "another token"},
		{"negative id", vocab(func(v map[string]int) { v["he"] = -1 }), "vocab.json", "outside"},
		{"id past the end", vocab(func(v map[string]int) { v["he"] = 1 << 40 }), "vocab.json", "outside"},
		{"no end-of-text", vocab(func(v map[string]int) { delete(v, EndOfText) }), "vocab.json", "no <|endoftext|>"},
		{"merges line malformed", withMerges("h e x\n"), "merges.txt", "line 1"},
		{"merge of unknown tokens", withMerges("q z\n"), "merges.txt", "not in the vocabulary"},
		{"merges out of id order", withMerges("l l\nh e\n"), "merges.txt", "must follow merge order"},
		{"token made by no merge", withMerges("h e\n"), "merges.txt", "not made by any merge"},
		{"tokenizer.json not JSON", map[string]string{"tokenizer.json": "]"}, "tokenizer.json", "not Hugging Face tokenizer JSON"},
		{"tokenizer.json WordPiece", tj(func(d map[string]any) { d["model"].(map[string]any)["type"] = "WordPiece" }), "tokenizer.json", "want BPE"},
		{"tokenizer.json without vocab", tj(func(d map[string]any) { delete(d["model"].(map[string]any), "vocab") }), "tokenizer.json", "model.vocab"},
		{"tokenizer.json with a normalizer", tj(func(d map[string]any) { d["normalizer"] = map[string]any{"type": "NFC"} }), "tokenizer.json", "normalizer"},
		{"tokenizer.json with prefix space", tj(func(d map[string]any) {
			d["pre_tokenizer"] = map[string]any{"type": "ByteLevel", "add_prefix_space": true}
		}), "tokenizer.json", "add_prefix_space"},
		{"tokenizer.json Whitespace pre-tokenizer", tj(func(d map[string]any) { d["pre_tokenizer"] = map[string]any{"type": "Whitespace"} }), "tokenizer.json", "want ByteLevel"},
		// BPE options that Hugging Face applies and this package does not: each changes the ids.
		{"tokenizer.json with dropout", bpe("dropout", 0.1), "tokenizer.json", "model.dropout is 0.1"},
		{"tokenizer.json with continuing_subword_prefix", bpe("continuing_subword_prefix", "##"), "tokenizer.json", `model.continuing_subword_prefix is "##"`},
		{"tokenizer.json with end_of_word_suffix", bpe("end_of_word_suffix", "</w>"), "tokenizer.json", `model.end_of_word_suffix is "</w>"`},
		{"tokenizer.json with ignore_merges", bpe("ignore_merges", true), "tokenizer.json", "model.ignore_merges is true"},
		{"tokenizer.json with byte_fallback", bpe("byte_fallback", true), "tokenizer.json", "model.byte_fallback is true"},
		{"tokenizer.json with a WordPiece decoder", tj(func(d map[string]any) { d["decoder"] = map[string]any{"type": "WordPiece", "prefix": "##"} }),
			"tokenizer.json", `decoder type "WordPiece", want ByteLevel`},
		{"tokenizer.json bad merge entry", tj(func(d map[string]any) { d["model"].(map[string]any)["merges"] = []any{42} }), "tokenizer.json", "model.merges[0]"},
		{"tokenizer.json added token without id", tj(func(d map[string]any) { d["added_tokens"] = []any{map[string]any{"content": "x"}} }), "tokenizer.json", "added_tokens[0]"},
		{"tokenizer.json added token with lstrip", tj(func(d map[string]any) {
			d["added_tokens"] = []any{map[string]any{"id": 263, "content": EndOfText, "lstrip": true}}
		}), "tokenizer.json", "lstrip"},
		// GPT2TokenizerFast (tokenization_gpt2_fast.py) sets its pre-tokenizer's add_prefix_space from
		// tokenizer_config.json, over what tokenizer.json says.
		{"tokenizer_config.json with prefix space", map[string]string{"tokenizer.json": tinyTokenizerJSON(t, false, nil),
			"tokenizer_config.json": `{"add_prefix_space": true, "model_max_length": 1024}`}, "tokenizer_config.json", "add_prefix_space"},
		{"tokenizer_config.json with prefix space, vocab.json", map[string]string{"vocab.json": vocabJSON(t, nil),
			"tokenizer_config.json": `{"add_prefix_space": true}`}, "tokenizer_config.json", "add_prefix_space"},
		{"added_tokens.json not an object of ids", map[string]string{"vocab.json": vocabJSON(t, nil), "added_tokens.json": `{"<|pad|>": "x"}`}, "added_tokens.json", "JSON object"},
		{"added_tokens.json with a gap", map[string]string{"vocab.json": vocabJSON(t, nil), "added_tokens.json": `{"<|pad|>": 300}`}, "added_tokens.json", "ids must be dense"},
		{"added_tokens.json empty token", map[string]string{"vocab.json": vocabJSON(t, nil), "added_tokens.json": `{"": 264}`}, "added_tokens.json", "empty"},
		// Files that only work beside vocab.json: without it they would be ignored, and GPT-2's
		// vocabulary used in their place.
		{"merges.txt without vocab.json", map[string]string{"merges.txt": tinyMergesTxt()}, "merges.txt", "no vocab.json"},
		{"added_tokens.json without vocab.json", map[string]string{"added_tokens.json": `{"<|pad|>": 50257}`}, "added_tokens.json", "no vocab.json"},
		{"tokenizer_config.json not JSON", map[string]string{"vocab.json": vocabJSON(t, nil), "tokenizer_config.json": `<html>`}, "tokenizer_config.json", "JSON object"},
		{"tokenizer.json nested special tokens", tj(func(d map[string]any) {
			d["added_tokens"] = []any{map[string]any{"id": 263, "content": EndOfText}, map[string]any{"id": 264, "content": "<|endoftext|>!"}}
		}), "tokenizer.json", "lies inside"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tok, err := FromDir(writeDir(t, tc.files))
			if err == nil {
				t.Fatalf("FromDir succeeded (vocab %d); want an error", tok.VocabSize())
			}
			msg := err.Error()
			if !errors.Is(err, ErrInvalid) || !strings.Contains(msg, tc.file) || !strings.Contains(msg, tc.want) || strings.Contains(msg, "\n") {
				t.Errorf("error %q: want one line wrapping ErrInvalid, naming %s, saying %q", msg, tc.file, tc.want)
			}
		})
	}
}

func TestFromDirNotADirectory(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "vocab.json")
	if err := os.WriteFile(file, []byte("{}"), 0o644); err != nil {
		t.Fatal(err)
	}
	for name, path := range map[string]string{"missing": filepath.Join(dir, "nope"), "a file": file} {
		t.Run(name, func(t *testing.T) {
			if _, err := FromDir(path); err == nil || !strings.Contains(err.Error(), path) {
				t.Errorf("FromDir(%s) error = %v, want one naming the path", path, err)
			}
		})
	}
}

// nested finds a special token inside another wherever it lies (prefix, middle, suffix), names
// the first in sorted order, and passes tokens that only share bytes; it works on a file's worth
// of tokens (a hundred thousand) without comparing every pair.
func TestNestedSpecials(t *testing.T) {
	for _, tc := range []struct {
		name         string
		tokens       []string
		inner, outer string
	}{
		{"none", []string{EndOfText, "<|fim|>", "<|fim_end|"}, "", ""},
		{"a prefix", []string{EndOfText, "<|endoftext|>!"}, EndOfText, "<|endoftext|>!"},
		{"a suffix", []string{"b", "ab"}, "b", "ab"},
		{"in the middle", []string{"<|x|>", "[<|x|>]", "z"}, "<|x|>", "[<|x|>]"},
		{"the first in order", []string{"c", "xcx", "a", "yay"}, "a", "yay"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			special := map[string]int{}
			for i, s := range tc.tokens {
				special[s] = i
			}
			inner, outer, ok := nested(special)
			if ok != (tc.inner != "") || inner != tc.inner || outer != tc.outer {
				t.Fatalf("nested = %q inside %q (%v), want %q inside %q", inner, outer, ok, tc.inner, tc.outer)
			}
		})
	}
	many := map[string]int{}
	for i := range 100_000 {
		many[fmt.Sprintf("<|extra_%d|>", i)] = i
	}
	if inner, outer, ok := nested(many); ok {
		t.Fatalf("%q inside %q among distinct tokens", inner, outer)
	}
	many["extra_77|"] = -1
	if inner, outer, ok := nested(many); !ok || inner != "extra_77|" || !strings.Contains(outer, "extra_77|") {
		t.Fatalf("nested = %q inside %q (%v), want extra_77| found", inner, outer, ok)
	}
}
