//go:build unix

package tokenizer

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestFromDirDanglingLinks: a tokenizer file that is a symbolic link to nothing (a Hugging Face
// snapshot copied without its blobs/) is refused, naming the link and its target, rather than
// taken as absent, which would run the model with another tokenizer file or GPT-2's vocabulary.
// A link that leads to a file is read as the file.
func TestFromDirDanglingLinks(t *testing.T) {
	const target = "../../blobs/0123abcd"
	for _, tc := range []struct {
		name  string
		files map[string]string // regular files beside the link
		link  string            // the dangling link
	}{
		{"tokenizer.json", nil, "tokenizer.json"},
		{"tokenizer.json beside vocab.json", map[string]string{"vocab.json": vocabJSON(t, nil), "merges.txt": tinyMergesTxt()}, "tokenizer.json"},
		{"vocab.json beside merges.txt", map[string]string{"merges.txt": tinyMergesTxt()}, "vocab.json"},
		{"vocab.json alone", nil, "vocab.json"},
		{"merges.txt", map[string]string{"vocab.json": vocabJSON(t, nil)}, "merges.txt"},
		{"added_tokens.json", map[string]string{"vocab.json": vocabJSON(t, nil), "merges.txt": tinyMergesTxt()}, "added_tokens.json"},
		{"tokenizer_config.json", map[string]string{"tokenizer.json": tinyTokenizerJSON(t, false, nil)}, "tokenizer_config.json"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := writeDir(t, tc.files)
			link := filepath.Join(dir, tc.link)
			if err := os.Symlink(target, link); err != nil {
				t.Fatal(err)
			}
			tok, err := FromDir(dir)
			if err == nil {
				t.Fatalf("FromDir succeeded (vocab %d); want an error naming the dangling %s", tok.VocabSize(), tc.link)
			}
			msg := err.Error()
			want := "is a symbolic link to " + target + ", which does not exist"
			if !errors.Is(err, ErrInvalid) || !strings.Contains(msg, link) || !strings.Contains(msg, want) || strings.Contains(msg, "\n") {
				t.Errorf("error %q: want one line wrapping ErrInvalid, naming %s, saying %q", msg, link, want)
			}
		})
	}
	t.Run("links into blobs", func(t *testing.T) {
		blobs := writeDir(t, map[string]string{"v": vocabJSON(t, nil), "m": tinyMergesTxt()})
		dir := t.TempDir()
		for name, blob := range map[string]string{"vocab.json": "v", "merges.txt": "m"} {
			if err := os.Symlink(filepath.Join(blobs, blob), filepath.Join(dir, name)); err != nil {
				t.Fatal(err)
			}
		}
		tok, err := FromDir(dir)
		if err != nil {
			t.Fatalf("FromDir: %v", err)
		}
		if got := tok.VocabSize(); got != 264 {
			t.Errorf("VocabSize() = %d, want the linked vocabulary's 264", got)
		}
	})
}
