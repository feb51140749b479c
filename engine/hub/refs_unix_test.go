//go:build unix

package hub

import (
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// A refs/main that is not a regular file (here a named pipe, which a plain read would wait on
// forever for a writer) is no ref: the complete snapshot is found by scanning snapshots/.
func TestResolveRefsNotRegular(t *testing.T) {
	cache := t.TempDir()
	repo := RepoDir(cache, "org/x")
	snap := filepath.Join(repo, "snapshots", commit)
	if err := os.MkdirAll(snap, 0o755); err != nil {
		t.Fatal(err)
	}
	os.MkdirAll(filepath.Join(repo, "refs"), 0o755)
	os.WriteFile(filepath.Join(snap, "config.json"), []byte("{}"), 0o644)
	os.WriteFile(filepath.Join(snap, "model.safetensors"), stFile(64), 0o644)
	if err := syscall.Mkfifo(filepath.Join(repo, "refs", "main"), 0o644); err != nil {
		t.Skip("no named pipes here:", err)
	}
	o := Options{Getenv: env("HF_HUB_CACHE", cache, "HF_HUB_OFFLINE", "1")}
	if dir, err := Resolve(context.Background(), "org/x", o); err != nil || dir != snap {
		t.Fatalf("Resolve = %s, %v; want %s", dir, err, snap)
	}
}
