package hub

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
)

// TestResolveConcurrent: two processes fetching the same model at once (two goroutines here: each
// opens its own files) both end with the hub's bytes, and the cache holds them intact.
func TestResolveConcurrent(t *testing.T) {
	for range 3 {
		h, _, o, _ := setup(t, "gpt2")
		h.files["model.safetensors"] = stFile(1 << 20)
		var wg sync.WaitGroup
		dirs, errs := make([]string, 2), make([]error, 2)
		for i := range 2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				dirs[i], errs[i] = Resolve(context.Background(), "gpt2", o)
			}()
		}
		wg.Wait()
		for i := range 2 {
			if errs[i] != nil {
				t.Fatalf("Resolve %d: %v", i, errs[i])
			}
			if got, _ := os.ReadFile(filepath.Join(dirs[i], "model.safetensors")); !bytes.Equal(got, h.files["model.safetensors"]) {
				t.Fatalf("Resolve %d: model.safetensors differs from the hub's (%d bytes)", i, len(got))
			}
		}
	}
}

// TestLockFile: a held lock makes a second taker wait until its context is done; released, it
// can be taken again.
func TestLockFile(t *testing.T) {
	if runtime.GOOS == "windows" || runtime.GOOS == "plan9" {
		t.Skip("no flock")
	}
	path := filepath.Join(t.TempDir(), ".locks", "models--gpt2", "x.lock")
	unlock, err := lockFile(context.Background(), path, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	waited := 0
	if _, err := lockFile(ctx, path, func() { waited++ }); !errors.Is(err, context.Canceled) || waited != 1 {
		t.Fatalf("lockFile on a held lock with a done context = %v (waiting called %d times), want context.Canceled after one call", err, waited)
	}
	unlock()
	unlock2, err := lockFile(ctx, path, func() { t.Error("waited for a free lock") })
	if err != nil {
		t.Fatalf("lockFile after unlock: %v", err)
	}
	unlock2()
}
