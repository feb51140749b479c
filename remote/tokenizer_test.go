package remote

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"rosetop/engine/hub"
	"rosetop/engine/tokenizer"
)

// TestTokenizerErrors: every tokenizer that cannot be loaded is a *TokenizerError wrapping
// ErrConfig and its cause, whose message names the tokenizer once, as itself or as the flag
// that gave it.
func TestTokenizerErrors(t *testing.T) {
	t.Setenv("HF_HUB_OFFLINE", "1")
	t.Setenv("HF_HUB_CACHE", t.TempDir())
	empty := t.TempDir()
	file := filepath.Join(empty, "file")
	bad := t.TempDir()
	for path, data := range map[string]string{file: "x", filepath.Join(bad, "tokenizer.json"): "{"} {
		if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	const format = " (rosetop reads GPT-2's byte-level BPE format only)"
	cases := []struct {
		name, spec string
		cause      error  // also wrapped; nil: none to check
		msg        string // Error()
		flag       string // Named("--tokenizer"), a prefix
	}{
		{"directory without tokenizer files", empty, nil,
			"tokenizer " + empty + ": holds no tokenizer.json or vocab.json" + format,
			"--tokenizer " + empty + ": holds no tokenizer.json or vocab.json" + format},
		{"a file", file, nil, "tokenizer " + file + ": not a directory", "--tokenizer " + file + ": not a directory"},
		{"neither a directory nor an id", "a/b/c", nil,
			"tokenizer a/b/c: no such directory, and not a Hugging Face id (NAME or ORG/NAME)",
			"--tokenizer a/b/c: no such directory, and not a Hugging Face id (NAME or ORG/NAME)"},
		{"invalid tokenizer.json", bad, tokenizer.ErrInvalid,
			"tokenizer " + bad + ": " + filepath.Join(bad, "tokenizer.json") + ": invalid tokenizer file: ",
			"--tokenizer " + bad + ": " + filepath.Join(bad, "tokenizer.json") + ": invalid tokenizer file: "},
		{"hub id not cached", "nosuch-tok", hub.ErrNotCached,
			"tokenizer nosuch-tok is not in the Hugging Face cache (",
			"--tokenizer: tokenizer nosuch-tok is not in the Hugging Face cache ("},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := LoadTokenizer(context.Background(), tc.spec, io.Discard)
			var te *TokenizerError
			if !errors.As(err, &te) || !errors.Is(err, ErrConfig) || (tc.cause != nil && !errors.Is(err, tc.cause)) {
				t.Fatalf("LoadTokenizer = %v, want a *TokenizerError wrapping ErrConfig and %v", err, tc.cause)
			}
			msg, flag := err.Error(), te.Named("--tokenizer")
			if !strings.HasPrefix(msg, tc.msg) || !strings.HasPrefix(flag, tc.flag) {
				t.Errorf("message %q, want %q...\nnamed %q, want %q...", msg, tc.msg, flag, tc.flag)
			}
			if strings.Count(flag, tc.spec+" ")+strings.Count(flag, tc.spec+":") != 1 || strings.Contains(msg, "\n") {
				t.Errorf("named %q: want one line naming %s once", flag, tc.spec)
			}
		})
	}
}
