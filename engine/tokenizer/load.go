package tokenizer

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"unicode/utf8"

	"rosetop/internal/regular"
)

// FromDir returns the tokenizer of a Hugging Face model directory: tokenizer.json when present
// (Hugging Face's own choice for fast tokenizers), else vocab.json with merges.txt when present (the
// merges are checked against the vocabulary, not needed to encode) and added_tokens.json, else the
// embedded GPT-2 vocabulary. A tokenizer_config.json asking for a prefix space is refused. A file
// that exists but cannot be used (a symbolic link to nothing, merges.txt or added_tokens.json
// without vocab.json) is an error naming it, wrapping ErrInvalid.
func FromDir(dir string) (*Tokenizer, error) {
	if fi, err := os.Stat(dir); err != nil {
		return nil, fmt.Errorf("tokenizer: %w", err)
	} else if !fi.IsDir() {
		return nil, fmt.Errorf("tokenizer: %s: not a directory", dir)
	}
	if err := checkTokenizerConfig(filepath.Join(dir, "tokenizer_config.json")); err != nil {
		return nil, err
	}
	tjFile := filepath.Join(dir, "tokenizer.json")
	if data, ok, err := readOptional(tjFile); err != nil {
		return nil, err
	} else if ok {
		return fromTokenizerJSON(data, tjFile)
	}
	vocabFile := filepath.Join(dir, "vocab.json")
	data, ok, err := readOptional(vocabFile)
	if err != nil {
		return nil, err
	}
	if !ok {
		if err := checkNoVocabFiles(dir); err != nil {
			return nil, err
		}
		return GPT2()
	}
	vocab, err := parseVocabJSON(data, vocabFile)
	if err != nil {
		return nil, err
	}
	src := source{vocabFile: vocabFile, vocab: vocab, special: map[string]int{EndOfText: idFromVocab}}
	if err := src.addTokensJSON(filepath.Join(dir, "added_tokens.json")); err != nil {
		return nil, err
	}
	src.mergesFile = filepath.Join(dir, "merges.txt")
	if data, ok, err := readOptional(src.mergesFile); err != nil {
		return nil, err
	} else if ok {
		if src.merges, err = parseMerges(data, src.mergesFile); err != nil {
			return nil, err
		}
	}
	return build(src)
}

// maxFileBytes bounds each tokenizer file: GPT-2's tokenizer.json is 1.4 MB.
const maxFileBytes = 64 << 20

// readOptional reads a regular file of UTF-8 text of at most maxFileBytes that may be absent (ok false).
// Errors name the file.
func readOptional(path string) (data []byte, ok bool, err error) {
	data, err = regular.ReadFile(path, maxFileBytes)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		// A link to nothing (a snapshot copied without its blobs/) is a broken file, not an absent
		// one: taking it as absent would load another tokenizer file or GPT-2's in its place.
		if target, ok := regular.DanglingLink(path); ok {
			return nil, false, fmt.Errorf("%s: %w: it is a symbolic link to %s, which does not exist", path, ErrInvalid, target)
		}
		return nil, false, nil
	case errors.Is(err, regular.ErrNotRegular) || errors.Is(err, regular.ErrTooLarge):
		return nil, false, fmt.Errorf("%s: %w: %w", path, ErrInvalid, err)
	case err != nil:
		return nil, false, fmt.Errorf("tokenizer %s: %w", path, err)
	case !utf8.Valid(data):
		// Go's JSON reader would put U+FFFD in place of the bad bytes and carry on.
		return nil, false, fmt.Errorf("%s: %w: not UTF-8 text", path, ErrInvalid)
	}
	return data, true, nil
}

// checkNoVocabFiles refuses merges.txt and added_tokens.json in a directory without vocab.json
// (or tokenizer.json): they belong to a vocabulary that is not there, and GPT-2's would be used.
func checkNoVocabFiles(dir string) error {
	for _, name := range []string{"merges.txt", "added_tokens.json"} {
		file := filepath.Join(dir, name)
		if _, err := os.Lstat(file); err == nil {
			return fmt.Errorf("%s: %w: no vocab.json beside it (want vocab.json with merges.txt, or tokenizer.json)", file, ErrInvalid)
		}
	}
	return nil
}

// checkTokenizerConfig refuses a tokenizer_config.json (optional) with add_prefix_space true:
// transformers' GPT2TokenizerFast writes that setting into its pre-tokenizer, whatever
// tokenizer.json says, and then encodes "Hello" as " Hello".
func checkTokenizerConfig(file string) error {
	data, ok, err := readOptional(file)
	if err != nil || !ok {
		return err
	}
	var c struct {
		AddPrefixSpace *bool `json:"add_prefix_space"`
	}
	if err := json.Unmarshal(data, &c); err != nil {
		return fmt.Errorf("%s: %w: want a JSON object: %v", file, ErrInvalid, err)
	}
	if c.AddPrefixSpace != nil && *c.AddPrefixSpace {
		return fmt.Errorf("%s: %w: add_prefix_space is true (unsupported: GPT-2 encodes without it)", file, ErrInvalid)
	}
	return nil
}

// addTokensJSON adds the tokens of added_tokens.json (optional): token -> id, ids following the
// vocabulary's, which transformers registers beside vocab.json and splits out of the text.
func (s *source) addTokensJSON(file string) error {
	data, ok, err := readOptional(file)
	if err != nil || !ok {
		return err
	}
	var added map[string]int
	if err := json.Unmarshal(data, &added); err != nil {
		return fmt.Errorf("%s: %w: want a JSON object of token -> id: %v", file, ErrInvalid, err)
	}
	for text, id := range added {
		if text == "" || id < 0 {
			return fmt.Errorf("%s: %w: token %q with id %d: want a non-empty token and an id >= 0", file, ErrInvalid, text, id)
		}
		s.special[text] = id
	}
	s.addedFile = file
	return nil
}

// parseVocabJSON reads Hugging Face's vocab.json: one JSON object, token (alphabet form) -> id.
func parseVocabJSON(data []byte, file string) (map[string]int, error) {
	var vocab map[string]int
	if err := json.Unmarshal(data, &vocab); err != nil {
		return nil, fmt.Errorf("%s: %w: want a JSON object of token -> id: %v", file, ErrInvalid, err)
	}
	if len(vocab) == 0 {
		return nil, fmt.Errorf("%s: %w: empty vocabulary", file, ErrInvalid)
	}
	return vocab, nil
}

// parseMerges reads merges.txt: an optional "#version" line, then one "left right" pair a line.
func parseMerges(data []byte, file string) ([][2]string, error) {
	lines := strings.Split(string(data), "\n")
	merges := make([][2]string, 0, len(lines))
	for i, line := range lines {
		line = strings.TrimSuffix(line, "\r")
		if line == "" || (i == 0 && strings.HasPrefix(line, "#version")) {
			continue
		}
		left, right, ok := strings.Cut(line, " ")
		if !ok || left == "" || right == "" || strings.Contains(right, " ") {
			return nil, fmt.Errorf("%s: %w: line %d: want two tokens separated by one space, got %q", file, ErrInvalid, i+1, line)
		}
		merges = append(merges, [2]string{left, right})
	}
	return merges, nil
}

// tokenizerJSON is the part of Hugging Face's tokenizer.json that this package reads or checks.
type tokenizerJSON struct {
	AddedTokens []struct {
		ID         *int   `json:"id"`
		Content    string `json:"content"`
		SingleWord bool   `json:"single_word"`
		LStrip     bool   `json:"lstrip"`
		RStrip     bool   `json:"rstrip"`
	} `json:"added_tokens"`
	Normalizer    json.RawMessage `json:"normalizer"`
	PreTokenizer  json.RawMessage `json:"pre_tokenizer"`
	PostProcessor json.RawMessage `json:"post_processor"`
	Decoder       json.RawMessage `json:"decoder"`
	Model         bpeJSON         `json:"model"`
}

// bpeJSON is tokenizer.json's model. GPT-2's leaves the options below off (null, "" or false, or
// absent in older files); Hugging Face applies each when set, and this package implements none.
// unk_token and fuse_unk are not read: a byte-level vocabulary never needs the unknown token.
type bpeJSON struct {
	Type   string            `json:"type"`
	Vocab  map[string]int    `json:"vocab"`
	Merges []json.RawMessage `json:"merges"` // "left right" (before tokenizers 0.20) or ["left", "right"]

	Dropout                 *float64 `json:"dropout"` // 0 drops no merge: off, as null is
	ContinuingSubwordPrefix *string  `json:"continuing_subword_prefix"`
	EndOfWordSuffix         *string  `json:"end_of_word_suffix"`
	IgnoreMerges            *bool    `json:"ignore_merges"`
	ByteFallback            *bool    `json:"byte_fallback"`
}

// optionSet names the first option of m that is on, with its value ("model.dropout is 0.1"), or
// returns "" when all are off.
func (m *bpeJSON) optionSet() string {
	switch {
	case m.Dropout != nil && *m.Dropout != 0:
		return fmt.Sprintf("model.dropout is %g", *m.Dropout)
	case m.ContinuingSubwordPrefix != nil && *m.ContinuingSubwordPrefix != "":
		return fmt.Sprintf("model.continuing_subword_prefix is %q", *m.ContinuingSubwordPrefix)
	case m.EndOfWordSuffix != nil && *m.EndOfWordSuffix != "":
		return fmt.Sprintf("model.end_of_word_suffix is %q", *m.EndOfWordSuffix)
	case m.IgnoreMerges != nil && *m.IgnoreMerges:
		return "model.ignore_merges is true"
	case m.ByteFallback != nil && *m.ByteFallback:
		return "model.byte_fallback is true"
	}
	return ""
}

// byteLevel is the ByteLevel pre-tokenizer, post-processor or decoder of tokenizer.json.
type byteLevel struct {
	Type           string `json:"type"`
	AddPrefixSpace bool   `json:"add_prefix_space"`
	UseRegex       *bool  `json:"use_regex"`
}

// fromTokenizerJSON builds the tokenizer of a tokenizer.json. Only what GPT-2's own file uses is
// accepted (BPE with its options off, no normalizer, ByteLevel pre-tokenizer without prefix space,
// ByteLevel or no decoder); anything else would tokenize differently here than in Hugging Face, so
// it is refused rather than approximated.
func fromTokenizerJSON(data []byte, file string) (*Tokenizer, error) {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%s: %w: %s", file, ErrInvalid, fmt.Sprintf(format, args...))
	}
	var tj tokenizerJSON
	if err := json.Unmarshal(data, &tj); err != nil {
		return nil, bad("not Hugging Face tokenizer JSON: %v", err)
	}
	if t := tj.Model.Type; t != "" && t != "BPE" {
		return nil, bad("model type %q, want BPE", t)
	}
	if len(tj.Model.Vocab) == 0 {
		return nil, bad("model.vocab is missing or empty")
	}
	if o := tj.Model.optionSet(); o != "" {
		return nil, bad("%s (unsupported: GPT-2's BPE leaves it off)", o)
	}
	if !isNull(tj.Normalizer) {
		return nil, bad("a normalizer is set (unsupported: GPT-2 has none)")
	}
	if err := checkByteLevel(tj.PreTokenizer, "pre_tokenizer", true); err != nil {
		return nil, bad("%v", err)
	}
	if err := checkByteLevel(tj.PostProcessor, "post_processor", false); err != nil {
		return nil, bad("%v", err)
	}
	if err := checkByteLevel(tj.Decoder, "decoder", false); err != nil {
		return nil, bad("%v", err)
	}
	merges := make([][2]string, 0, len(tj.Model.Merges))
	for i, raw := range tj.Model.Merges {
		m, err := parseMergeJSON(raw)
		if err != nil {
			return nil, bad("model.merges[%d]: %v", i, err)
		}
		merges = append(merges, m)
	}
	special := make(map[string]int, len(tj.AddedTokens))
	for i, at := range tj.AddedTokens {
		if at.ID == nil || *at.ID < 0 || at.Content == "" {
			return nil, bad("added_tokens[%d]: want an id >= 0 and a non-empty content", i)
		}
		if at.SingleWord || at.LStrip || at.RStrip {
			return nil, bad("added_tokens[%d] (%q): single_word, lstrip and rstrip are unsupported", i, at.Content)
		}
		special[at.Content] = *at.ID
	}
	if _, ok := special[EndOfText]; !ok {
		special[EndOfText] = idFromVocab // as for vocab.json
	}
	return build(source{vocabFile: file, vocab: tj.Model.Vocab, mergesFile: file, merges: merges, special: special})
}

// checkByteLevel accepts a missing/null component or a ByteLevel one (for the pre-tokenizer,
// without a prefix space and with its regex split on; the post-processor's and the decoder's
// settings change neither ids nor text).
func checkByteLevel(raw json.RawMessage, name string, pre bool) error {
	if isNull(raw) {
		return nil
	}
	var bl byteLevel
	if err := json.Unmarshal(raw, &bl); err != nil {
		return fmt.Errorf("%s: %v", name, err)
	}
	switch {
	case bl.Type != "ByteLevel":
		return fmt.Errorf("%s type %q, want ByteLevel", name, bl.Type)
	case pre && bl.AddPrefixSpace:
		return fmt.Errorf("%s add_prefix_space is true (unsupported: GPT-2 encodes without it)", name)
	case pre && bl.UseRegex != nil && !*bl.UseRegex:
		return fmt.Errorf("%s use_regex is false (unsupported)", name)
	}
	return nil
}

func parseMergeJSON(raw json.RawMessage) ([2]string, error) {
	var pair []string
	if err := json.Unmarshal(raw, &pair); err == nil {
		if len(pair) != 2 || pair[0] == "" || pair[1] == "" {
			return [2]string{}, fmt.Errorf("want two non-empty tokens, got %.60q", raw)
		}
		return [2]string{pair[0], pair[1]}, nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return [2]string{}, fmt.Errorf("want \"left right\" or [\"left\", \"right\"], got %.60q", raw)
	}
	left, right, ok := strings.Cut(s, " ")
	if !ok || left == "" || right == "" || strings.Contains(right, " ") {
		return [2]string{}, fmt.Errorf("want two tokens separated by one space, got %q", s)
	}
	return [2]string{left, right}, nil
}

func isNull(raw json.RawMessage) bool {
	return len(raw) == 0 || bytes.Equal(bytes.TrimSpace(raw), []byte("null"))
}
