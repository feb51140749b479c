package hub

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// shardedHub serves a repository whose weights are split over two shards with an index, as
// save_pretrained writes a checkpoint past max_shard_size.
func shardedHub(t *testing.T, id string) (*fakeHub, Options, string) {
	h, _, o, cache := setup(t, id)
	delete(h.files, "model.safetensors")
	h.files["model.safetensors.index.json"] = []byte(`{"metadata":{"total_size":8},"weight_map":{"a":"model-00001-of-00002.safetensors","b":"model-00002-of-00002.safetensors"}}`)
	h.files["model-00001-of-00002.safetensors"] = stFile(4 << 10)
	h.files["model-00002-of-00002.safetensors"] = stFile(8 << 10)
	return h, o, cache
}

// TestResolveSharded downloads an index and every shard it lists into the snapshot, resumes a cut
// shard, and finds the whole checkpoint in the cache the next time, offline.
func TestResolveSharded(t *testing.T) {
	h, o, cache := shardedHub(t, "org/big")
	h.cutOnce["model-00002-of-00002.safetensors"] = 1000
	dir, err := Resolve(context.Background(), "org/big", o)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"config.json", "model.safetensors.index.json", "model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"} {
		if got, err := os.ReadFile(filepath.Join(dir, name)); err != nil || !bytes.Equal(got, h.files[name]) {
			t.Errorf("%s in the snapshot: %d bytes, %v; want the hub's %d", name, len(got), err, len(h.files[name]))
		}
	}
	if log := strings.Join(h.log(), "\n"); !strings.Contains(log, "model-00002-of-00002.safetensors range=bytes=1000-") {
		t.Errorf("the cut shard was not resumed:\n%s", log)
	}
	n := len(h.log())
	o.Getenv = env("HF_HUB_CACHE", cache, "HF_HUB_OFFLINE", "1")
	if again, err := Resolve(context.Background(), "org/big", o); err != nil || again != dir || len(h.log()) != n {
		t.Fatalf("cached Resolve = %s, %v (%d requests); want %s from the cache", again, err, len(h.log())-n, dir)
	}
	// A snapshot missing a shard is not complete.
	os.Remove(filepath.Join(dir, "model-00001-of-00002.safetensors"))
	if _, err := Resolve(context.Background(), "org/big", o); !errors.Is(err, ErrNotCached) {
		t.Fatalf("snapshot without a shard: Resolve = %v, want ErrNotCached", err)
	}
}

// TestResolveShardedBadIndex: an index naming a file outside the repository's snapshot, or not
// JSON, never enters the cache.
func TestResolveShardedBadIndex(t *testing.T) {
	for name, body := range map[string]string{
		"path outside": `{"weight_map":{"a":"../../../../evil.safetensors"}}`,
		"HTML":         "<html>sign in</html>",
	} {
		t.Run(name, func(t *testing.T) {
			h, o, cache := shardedHub(t, "org/big")
			h.files["model.safetensors.index.json"] = []byte(body)
			_, err := Resolve(context.Background(), "org/big", o)
			if !errors.Is(err, ErrBadFile) || !strings.Contains(err.Error(), "model.safetensors.index.json") {
				t.Fatalf("Resolve = %v; want ErrBadFile naming the index", err)
			}
			checkOneLine(t, err)
			if _, err := os.Stat(filepath.Join(RepoDir(cache, "org/big"), "snapshots", commit, "model.safetensors.index.json")); err == nil {
				t.Error("the bad index was placed in the snapshot")
			}
		})
	}
}

// TestResolveNoSafetensors: a repository with config.json but weights only in pytorch_model.bin
// exists; the message says what it lacks rather than that the model is not found.
func TestResolveNoSafetensors(t *testing.T) {
	h, _, o, _ := setup(t, "org/old")
	delete(h.files, "model.safetensors")
	h.files["pytorch_model.bin"] = []byte("PK")
	_, err := Resolve(context.Background(), "org/old", o)
	if !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), "has no model.safetensors or model.safetensors.index.json") ||
		strings.Contains(err.Error(), "org/old not found") {
		t.Fatalf("Resolve = %v; want ErrNotFound saying the repository has no safetensors weights", err)
	}
	checkOneLine(t, err)
}

// TestResolveShardNamesEscaped: a shard's name is one path segment of the URL, whatever it holds
// (a space, '#', '?', '%'), so the file fetched is the file the index names.
func TestResolveShardNamesEscaped(t *testing.T) {
	h, o, _ := shardedHub(t, "org/big")
	names := []string{"w 1.safetensors", "w#2.safetensors", "w?3.safetensors", "w%2f4.safetensors"}
	h.files["model.safetensors.index.json"] = []byte(`{"weight_map":{"a":"w 1.safetensors","b":"w#2.safetensors","c":"w?3.safetensors","d":"w%2f4.safetensors"}}`)
	for i, name := range names {
		h.files[name] = stFile(1024 * (i + 1))
	}
	h.files["w/4.safetensors"] = stFile(64) // what an unescaped "w%2f4" asks for
	dir, err := Resolve(context.Background(), "org/big", o)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range names {
		if got, err := os.ReadFile(filepath.Join(dir, name)); err != nil || !bytes.Equal(got, h.files[name]) {
			t.Errorf("%s in the snapshot: %d bytes, %v; want the hub's %d", name, len(got), err, len(h.files[name]))
		}
	}
}
