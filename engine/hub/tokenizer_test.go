package hub

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestResolveTokenizer fetches a model's config and tokenizer files without its weights, finds
// them in the cache the next time without a request, and refuses a repository without either
// tokenizer file.
func TestResolveTokenizer(t *testing.T) {
	t.Run("downloads without weights, then cached", func(t *testing.T) {
		h, _, o, _ := setup(t, "org/tok")
		dir, err := ResolveTokenizer(context.Background(), "org/tok", o)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(filepath.Join(dir, "vocab.json")); err != nil {
			t.Fatalf("vocab.json not in %s: %v", dir, err)
		}
		if _, err := os.Stat(filepath.Join(dir, "model.safetensors")); err == nil {
			t.Fatal("the weights were downloaded for a tokenizer")
		}
		for _, r := range h.log() {
			if strings.Contains(r, "model.safetensors") {
				t.Fatalf("asked for the weights: %s", r)
			}
		}
		n := len(h.log())
		again, err := ResolveTokenizer(context.Background(), "org/tok", o)
		if err != nil || again != dir || len(h.log()) != n {
			t.Fatalf("second resolve: %q, %v, %d requests after %d", again, err, len(h.log()), n)
		}
		// A later model resolve completes the same snapshot.
		full, err := Resolve(context.Background(), "org/tok", o)
		if err != nil || full != dir {
			t.Fatalf("model resolve after the tokenizer: %q, %v", full, err)
		}
	})
	t.Run("no tokenizer file", func(t *testing.T) {
		h, _, o, _ := setup(t, "org/bare")
		delete(h.files, "vocab.json")
		_, err := ResolveTokenizer(context.Background(), "org/bare", o)
		if !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), "no tokenizer.json or vocab.json") {
			t.Fatalf("err = %v", err)
		}
		checkOneLine(t, err)
	})
	t.Run("offline and not cached", func(t *testing.T) {
		_, _, o, cache := setup(t, "org/tok")
		o.Getenv = env("HF_HUB_CACHE", cache, "HF_HUB_OFFLINE", "1")
		_, err := ResolveTokenizer(context.Background(), "org/tok", o)
		if !errors.Is(err, ErrNotCached) || !strings.Contains(err.Error(), "tokenizer org/tok") || !strings.Contains(err.Error(), "tokenizer.json or vocab.json") {
			t.Fatalf("err = %v", err)
		}
	})
}
