package hub

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// testStall is the stall timeout of these tests: a server that stops sending is detected quickly,
// and a healthy transfer on a loaded machine (go test -race on 2 cores) never pauses that long.
// Nothing here measures it; the stalled handlers wait for the client to hang up.
const testStall = 250 * time.Millisecond

// TestResolveStall: a server that stops sending, mid-body or before answering, is cut after the
// stall timeout with a message saying how to resume, the partial file is kept, and the next run
// resumes from it with a Range request.
func TestResolveStall(t *testing.T) {
	cases := []struct {
		name  string
		file  string
		after int64 // bytes sent before the stall; -1: no headers
		is    error
		says  []string
		kept  int64 // bytes of model.safetensors kept for resuming
	}{
		{"weights mid-body", "model.safetensors", 30000, ErrStalled,
			[]string{"model.safetensors: interrupted after 30000 of ", "no data from the server for " + testStall.String(), "run again to resume from byte 30000"}, 30000},
		{"weights before the headers", "model.safetensors", -1, ErrStalled,
			[]string{"model.safetensors: download stalled: no data from the server for " + testStall.String(), "run again to resume from byte 0"}, 0},
		{"config.json mid-body", "config.json", 5, ErrStalled,
			[]string{"config.json: interrupted after 5 bytes", "no data from the server for " + testStall.String(), "run again to retry"}, 0},
		{"config.json before the headers", "config.json", -1, ErrStalled,
			[]string{"cannot be downloaded", "no data from the server for " + testStall.String()}, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h, _, o, cache := setup(t, "gpt2")
			o.StallTimeout, o.Attempts = testStall, 1
			h.stalls[c.file], h.stallN = c.after, 1
			_, err := Resolve(context.Background(), "gpt2", o)
			if !errors.Is(err, c.is) {
				t.Fatalf("Resolve = %v; want an error wrapping %v", err, c.is)
			}
			for _, s := range c.says {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q does not say %q", err, s)
				}
			}
			checkOneLine(t, err)
			part := filepath.Join(RepoDir(cache, "gpt2"), "blobs", commit+".model.safetensors.incomplete")
			if fi, err := os.Stat(part); c.kept > 0 && (err != nil || fi.Size() != c.kept) {
				t.Errorf("partial file: %v; want %d bytes kept", err, c.kept)
			}
			// The server is healthy again: the same call completes, resuming what was kept.
			dir, err := Resolve(context.Background(), "gpt2", o)
			if err != nil {
				t.Fatal(err)
			}
			got, _ := os.ReadFile(filepath.Join(dir, "model.safetensors"))
			if !bytes.Equal(got, h.files["model.safetensors"]) {
				t.Fatalf("model.safetensors differs after the stall: %d bytes", len(got))
			}
			if log := strings.Join(h.log(), "\n"); c.kept > 0 && !strings.Contains(log, "range=bytes=30000-") {
				t.Errorf("no resumed request after the stall:\n%s", log)
			}
		})
	}
}

// TestResolveStallRetries: with the default attempts one call rides out a stall by itself.
func TestResolveStallRetries(t *testing.T) {
	h, _, o, _ := setup(t, "gpt2")
	o.StallTimeout = testStall
	h.stalls["model.safetensors"], h.stallN = 1000, 2
	dir, err := Resolve(context.Background(), "gpt2", o)
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(filepath.Join(dir, "model.safetensors")); !bytes.Equal(got, h.files["model.safetensors"]) {
		t.Fatal("content differs after two stalls")
	}
	if log := strings.Join(h.log(), "\n"); !strings.Contains(log, "range=bytes=1000-") || !strings.Contains(log, "range=bytes=2000-") {
		t.Errorf("want two resumed requests:\n%s", log)
	}
}

// TestResolveCancelDuringStall: the caller's cancellation is reported as such, not as a stall.
func TestResolveCancelDuringStall(t *testing.T) {
	h, srv, o, _ := setup(t, "gpt2")
	o.StallTimeout = time.Hour
	ctx, cancel := context.WithCancel(context.Background())
	srv.Config.Handler = cancelAfterHeaders{h, cancel}
	_, err := Resolve(ctx, "gpt2", o)
	if !errors.Is(err, context.Canceled) || errors.Is(err, ErrStalled) || !strings.Contains(err.Error(), "cancelled") {
		t.Fatalf("Resolve = %v; want a cancellation", err)
	}
}

// cancelAfterHeaders serves model.safetensors' headers, then cancels the client's context and
// waits for it to hang up.
type cancelAfterHeaders struct {
	h      *fakeHub
	cancel context.CancelFunc
}

func (c cancelAfterHeaders) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !strings.HasSuffix(r.URL.Path, "/model.safetensors") {
		c.h.ServeHTTP(w, r)
		return
	}
	w.Header().Set("X-Repo-Commit", commit)
	w.WriteHeader(http.StatusOK)
	w.(http.Flusher).Flush()
	c.cancel()
	<-r.Context().Done()
}

// TestResolveRefusesBadFiles: a file that is not what its name says (an HTML page served with
// status 200, a truncated header, an oversized config) never enters the cache, and once the
// server sends the real file the download succeeds.
func TestResolveRefusesBadFiles(t *testing.T) {
	html := []byte("<!DOCTYPE html>\n<html><body>Sign in to the Wi-Fi</body></html>\n")
	st := stFile(64 << 10)
	cases := []struct {
		name string
		file string
		body []byte
		is   error
		says string
	}{
		{"config.json an HTML page", "config.json", html, ErrBadFile, `not a JSON object (it starts "<!DOCTYPE html>\n<html><body>Sign in to t"...)`},
		{"config.json a JSON array", "config.json", []byte(`[{"model_type":"gpt2"}]`), ErrBadFile, "not a JSON object"},
		{"config.json truncated", "config.json", []byte(`{"model_type":"gp`), ErrBadFile, "invalid JSON after 17 bytes: unexpected end of JSON input"},
		{"config.json empty", "config.json", nil, ErrBadFile, "not a JSON object"},
		{"config.json over 1 MiB", "config.json", append([]byte(`{"a":"`), bytes.Repeat([]byte("x"), 1<<20)...), ErrBadFile, "over the 1048576-byte limit"},
		{"config.json over 1 MiB, length unknown", "config.json", append([]byte(`{"a":"`), bytes.Repeat([]byte("x"), 2<<20)...), ErrBadFile, "more than the 1048576-byte limit"},
		{"vocab.json an HTML page", "vocab.json", html, ErrBadFile, "not a JSON object"},
		{"tokenizer.json an HTML page", "tokenizer.json", html, ErrBadFile, "not a JSON object"},
		{"tokenizer_config.json an HTML page", "tokenizer_config.json", html, ErrBadFile, "not a JSON object"},
		{"added_tokens.json an HTML page", "added_tokens.json", html, ErrBadFile, "not a JSON object"},
		{"merges.txt an HTML page", "merges.txt", html, ErrBadFile, "line 2 is not two tokens"},
		{"model.safetensors an HTML page", "model.safetensors", html, ErrBadFile, "invalid safetensors file"},
		{"model.safetensors truncated", "model.safetensors", st[:len(st)-100], ErrBadFile, "beyond the"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h, srv, o, cache := setup(t, "gpt2")
			good := h.files[c.file]
			h.setFile(c.file, c.body)
			h.noLength = strings.Contains(c.name, "length unknown")
			_, err := Resolve(context.Background(), "gpt2", o)
			if !errors.Is(err, c.is) || !strings.Contains(err.Error(), c.file) || !strings.Contains(err.Error(), c.says) ||
				!strings.Contains(err.Error(), "nothing was cached") || !strings.Contains(err.Error(), srv.URL) {
				t.Fatalf("Resolve = %v; want %v naming %s, the endpoint, and saying %q", err, c.is, c.file, c.says)
			}
			checkOneLine(t, err)
			repo := RepoDir(cache, "gpt2")
			if _, err := os.Stat(filepath.Join(repo, "snapshots", commit, c.file)); err == nil {
				t.Errorf("%s was placed in the snapshot", c.file)
			}
			blobs, _ := os.ReadDir(filepath.Join(repo, "blobs"))
			for _, b := range blobs {
				if got, _ := os.ReadFile(filepath.Join(repo, "blobs", b.Name())); bytes.Equal(got, c.body) {
					t.Errorf("the bad %s is kept as blobs/%s", c.file, b.Name())
				}
			}
			if good == nil { // a file the repository does not have: serve nothing again
				h.mu.Lock()
				delete(h.files, c.file)
				h.mu.Unlock()
			} else {
				h.setFile(c.file, good)
			}
			dir, err := Resolve(context.Background(), "gpt2", o)
			if err != nil {
				t.Fatalf("healthy server: %v", err)
			}
			if good != nil {
				if got, _ := os.ReadFile(filepath.Join(dir, c.file)); !bytes.Equal(got, good) {
					t.Errorf("%s in the cache differs from the server's", c.file)
				}
			}
		})
	}
}

func TestValidate(t *testing.T) {
	dir := t.TempDir()
	cases := []struct {
		name, file, body string
		ok               bool
	}{
		{"config object", "config.json", ` {"model_type": "gpt2"}` + "\n", true},
		{"config string", "config.json", `"gpt2"`, false},
		{"config two objects", "config.json", `{} {}`, false},
		{"config truncated", "config.json", `{"a": [1, 2`, false},
		{"vocab object", "vocab.json", `{"a": 0, "b": 1}`, true},
		{"merges with version", "merges.txt", "#version: 0.2\nĠ t\nh e\n", true},
		{"merges CRLF", "merges.txt", "Ġ t\r\nh e\r\n", true},
		{"merges empty", "merges.txt", "", true},
		{"merges three tokens", "merges.txt", "a b c\n", false},
		{"merges one token", "merges.txt", "#version: 0.2\nab\n", false},
		{"merges not UTF-8", "merges.txt", "a \xff\n", false},
		{"safetensors", "model.safetensors", string(stFile(64)), true},
		{"safetensors short", "model.safetensors", "1234", false},
		{"index", "model.safetensors.index.json", `{"weight_map":{"w":"model-00001-of-00002.safetensors"}}`, true},
		{"index with a path", "model.safetensors.index.json", `{"weight_map":{"w":"../model.safetensors"}}`, false},
		{"shard", "model-00001-of-00002.safetensors", string(stFile(64)), true},
		{"shard an HTML page", "model-00001-of-00002.safetensors", "<html>", false},
		{"other files unchecked", "README.md", "<html>", true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := filepath.Join(dir, strings.ReplaceAll(c.name, " ", "_"))
			if err := os.WriteFile(p, []byte(c.body), 0o644); err != nil {
				t.Fatal(err)
			}
			err := validate(c.file, p)
			if (err == nil) != c.ok {
				t.Fatalf("validate(%s) = %v; want ok=%v", c.file, err, c.ok)
			}
			if err != nil && strings.Contains(err.Error(), p) {
				t.Errorf("error %q names the temporary file", err)
			}
		})
	}
}
