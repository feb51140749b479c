//go:build unix

package engine

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"rosetop/engine/tokenizer"
)

// TestLoadDanglingLinks: a model file that is a symbolic link to nothing, as in a Hugging Face
// snapshot copied without its blobs/, gets one line naming the link and its target, not "does
// not exist" or "no model.safetensors", and never a load with GPT-2's tokenizer in its place.
func TestLoadDanglingLinks(t *testing.T) {
	const target = "../../blobs/0123abcd"
	cfg := loadTestCfg()
	single := func(t *testing.T) string { return loadWriteModel(t, loadTestConfigJSON(cfg), loadTestTensors(cfg, "")) }
	sharded := func(t *testing.T) string {
		return loadWriteSharded(t, loadTestConfigJSON(cfg), loadTestTensors(cfg, ""), 2, nil)
	}
	// dangle makes name in the directory of model a link to target, replacing any file there;
	// files are written beside it first.
	dangle := func(model func(*testing.T) string, name string, files map[string]string) func(*testing.T) string {
		return func(t *testing.T) string {
			d := model(t)
			for f, content := range files {
				if err := os.WriteFile(filepath.Join(d, f), []byte(content), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			os.Remove(filepath.Join(d, name))
			if err := os.Symlink(target, filepath.Join(d, name)); err != nil {
				t.Fatal(err)
			}
			return d
		}
	}
	cases := []struct {
		name  string
		setup func(t *testing.T) string // returns the model directory
		file  string                    // the link, which the message names
		is    error                     // a sentinel wrapped beside ErrInvalidModel
	}{
		{"config.json", dangle(single, "config.json", nil), "config.json", ErrInvalidModel},
		{"model.safetensors", dangle(single, "model.safetensors", nil), "model.safetensors", ErrInvalidModel},
		// A broken model.safetensors is not skipped for an index, as a missing one is.
		{"model.safetensors beside an index", dangle(sharded, "model.safetensors", nil), "model.safetensors", ErrInvalidModel},
		{"the shards' index", dangle(sharded, "model.safetensors.index.json", nil), "model.safetensors.index.json", ErrInvalidModel},
		{"a shard", dangle(sharded, "model-00002-of-00002.safetensors", nil), "model-00002-of-00002.safetensors", ErrInvalidModel},
		{"tokenizer.json", dangle(single, "tokenizer.json", nil), "tokenizer.json", tokenizer.ErrInvalid},
		{"vocab.json beside merges.txt", dangle(single, "vocab.json", map[string]string{"merges.txt": "#version: 0.2\nĠ t\n"}), "vocab.json", tokenizer.ErrInvalid},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := c.setup(t)
			m, err := LoadModel(context.Background(), dir, LoadOptions{Getenv: func(string) string { return "" }})
			if err == nil {
				m.Close()
				t.Fatal("LoadModel succeeded")
			}
			msg := err.Error()
			link := filepath.Join(dir, c.file)
			want := "is a symbolic link to " + target + ", which does not exist"
			if !errors.Is(err, ErrInvalidModel) || !errors.Is(err, c.is) || !strings.Contains(msg, link) || !strings.Contains(msg, want) ||
				strings.Contains(msg, "\n") {
				t.Errorf("error %q: want one line wrapping ErrInvalidModel and %v, naming %s, saying %q", msg, c.is, link, want)
			}
		})
	}
}
