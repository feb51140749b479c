package tokenizer

import (
	"errors"
	"strings"
	"testing"
)

// Tokenizer files are UTF-8 text, as Hugging Face reads them (serde_json from a str, Python's
// open(encoding="utf-8")): a file with other bytes is refused, not read with U+FFFD in their
// place, which would change a token's text (two such tokens could even become one).
func TestFromDirNotUTF8(t *testing.T) {
	for _, tc := range []struct {
		name  string
		files map[string]string
		file  string
	}{
		{"added_tokens.json", map[string]string{"vocab.json": vocabJSON(t, nil), "added_tokens.json": "{\"<|x\xff|>\": 264}"}, "added_tokens.json"},
		{"tokenizer.json", map[string]string{"tokenizer.json": strings.Replace(tinyTokenizerJSON(t, false, nil), `"added_tokens":[`,
			"\"added_tokens\":[{\"id\":264,\"content\":\"<|x\xfe|>\"},", 1)}, "tokenizer.json"},
		{"vocab.json", map[string]string{"vocab.json": strings.Replace(vocabJSON(t, nil), `"he":`, "\"h\xffe\":0,\"he\":", 1)}, "vocab.json"},
		{"tokenizer_config.json", map[string]string{"vocab.json": vocabJSON(t, nil), "tokenizer_config.json": "{\"x\": \"\xff\"}"}, "tokenizer_config.json"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tok, err := FromDir(writeDir(t, tc.files))
			if err == nil {
				t.Fatalf("FromDir succeeded (vocab %d, specials %q); want an error", tok.VocabSize(), tok.specials)
			}
			msg := err.Error()
			if !errors.Is(err, ErrInvalid) || !strings.Contains(msg, tc.file) || !strings.Contains(msg, "UTF-8") || strings.Contains(msg, "\n") {
				t.Errorf("error %q: want one line wrapping ErrInvalid, naming %s, saying it is not UTF-8", msg, tc.file)
			}
		})
	}
}
