package hub

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

const commit = "0123456789abcdef0123456789abcdef01234567"

// fakeHub serves /{id}/resolve/{rev}/{file} like the Hugging Face hub, with knobs for failures.
type fakeHub struct {
	id     string
	files  map[string][]byte // file -> contents, others are 404; under mu once serving (setFile)
	commit string            // X-Repo-Commit; "" sends none

	mu       sync.Mutex       // guards the fields below, written by handler goroutines
	cutOnce  map[string]int64 // file -> cut the first full-body response after this many bytes
	stalls   map[string]int64 // file -> stop sending after this many bytes (-1: before the headers) until the client hangs up
	lieSize  map[string]int64 // file -> X-Linked-Size to announce instead of the truth
	stallN   int              // requests that stall, for the files in stalls
	noRange  bool             // ignore Range headers (answer 200 with everything)
	noLength bool             // send full bodies without Content-Length (chunked)
	requests []string         // "METHOD path range=R auth=A" per request
}

func newFakeHub(id string) *fakeHub {
	return &fakeHub{id: id, commit: commit, cutOnce: map[string]int64{}, lieSize: map[string]int64{}, stalls: map[string]int64{},
		files: map[string][]byte{
			"config.json":           []byte(`{"model_type":"gpt2"}`),
			"vocab.json":            []byte(`{"a":0}`),
			"tokenizer_config.json": []byte(`{"model_max_length":1024}`),
			"model.safetensors":     stFile(64 << 10),
		}}
}

// stFile is a well-formed safetensors image of one F32 tensor holding n bytes (a multiple of 4)
// of a repeating pattern.
func stFile(n int) []byte {
	hdr := fmt.Sprintf(`{"w":{"dtype":"F32","shape":[%d],"data_offsets":[0,%d]}}`, n/4, n)
	hdr += strings.Repeat(" ", (8-len(hdr)%8)%8)
	b := binary.LittleEndian.AppendUint64(nil, uint64(len(hdr)))
	b = append(b, hdr...)
	return append(b, bytes.Repeat([]byte("0123456789abcdef"), n/16+1)[:n]...)
}

// setFile replaces what the hub serves for file.
func (h *fakeHub) setFile(file string, b []byte) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.files[file] = b
}

func (h *fakeHub) log() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.requests...)
}

func (h *fakeHub) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h.mu.Lock()
	h.requests = append(h.requests, fmt.Sprintf("%s %s range=%s auth=%s", r.Method, r.URL.Path, r.Header.Get("Range"), r.Header.Get("Authorization")))
	h.mu.Unlock()
	prefix := "/" + h.id + "/resolve/"
	rest, ok := strings.CutPrefix(r.URL.Path, prefix)
	if !ok {
		http.NotFound(w, r)
		return
	}
	rev, file, _ := strings.Cut(rest, "/")
	h.mu.Lock()
	body, ok := h.files[file]
	h.mu.Unlock()
	if !ok || (rev != "main" && rev != h.commit) {
		http.NotFound(w, r)
		return
	}
	if h.commit != "" {
		w.Header().Set("X-Repo-Commit", h.commit)
	}
	h.mu.Lock()
	cut, doCut := h.cutOnce[file]
	delete(h.cutOnce, file)
	stall, doStall := h.stalls[file]
	if doStall && h.stallN > 0 {
		h.stallN--
	} else {
		doStall = false
	}
	lie, doLie := h.lieSize[file]
	noRange, noLength := h.noRange, h.noLength
	h.mu.Unlock()
	if doLie {
		w.Header().Set("X-Linked-Size", strconv.FormatInt(lie, 10))
	}
	if doStall && stall < 0 {
		<-r.Context().Done() // no answer at all until the client gives up
		return
	}
	start := int64(0)
	if rg := r.Header.Get("Range"); rg != "" && !noRange {
		n, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimPrefix(rg, "bytes="), "-"), 10, 64)
		if err != nil || n >= int64(len(body)) {
			w.WriteHeader(http.StatusRequestedRangeNotSatisfiable)
			return
		}
		start = n
		w.Header().Set("Content-Range", fmt.Sprintf("bytes %d-%d/%d", n, len(body)-1, len(body)))
		w.Header().Set("Content-Length", strconv.Itoa(len(body)-int(n)))
		w.WriteHeader(http.StatusPartialContent)
	} else {
		if !noLength {
			w.Header().Set("Content-Length", strconv.Itoa(len(body)))
		}
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush() // headers out before the body: no length inferred from it
	}
	if doCut {
		w.Write(body[start : start+cut])
		w.(http.Flusher).Flush()
		panic(http.ErrAbortHandler) // drop the connection mid-body
	}
	if doStall {
		w.Write(body[start : start+stall])
		w.(http.Flusher).Flush()
		<-r.Context().Done() // connection open, nothing more sent, until the client gives up
		return
	}
	w.Write(body[start:])
}

// env builds a Getenv over a fixed map: tests never read the real environment or home.
func env(kv ...string) func(string) string {
	m := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return func(k string) string { return m[k] }
}

// setup starts a fake hub and returns options pointing a fresh cache at it.
func setup(t *testing.T, id string) (*fakeHub, *httptest.Server, Options, string) {
	t.Helper()
	h := newFakeHub(id)
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	cache := t.TempDir()
	return h, srv, Options{Getenv: env("HF_HUB_CACHE", cache, "HF_ENDPOINT", srv.URL+"/"), HTTPClient: srv.Client()}, cache
}

func checkOneLine(t *testing.T, err error) {
	t.Helper()
	if err != nil && strings.Contains(err.Error(), "\n") {
		t.Errorf("error spans lines: %q", err)
	}
}

// incompletes lists the .incomplete files left in a repository's blobs/.
func incompletes(t *testing.T, cache, id string) []string {
	t.Helper()
	m, _ := filepath.Glob(filepath.Join(RepoDir(cache, id), "blobs", "*.incomplete"))
	return m
}

func TestResolveDownloadsThenUsesCache(t *testing.T) {
	h, srv, o, cache := setup(t, "org/model")
	var prog bytes.Buffer
	o.Progress = &prog
	dir, err := Resolve(context.Background(), "org/model", o)
	if err != nil {
		t.Fatal(err)
	}
	repo := filepath.Join(cache, "models--org--model")
	if want := filepath.Join(repo, "snapshots", commit); dir != want {
		t.Fatalf("dir = %s, want %s", dir, want)
	}
	for name, want := range h.files {
		got, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("%s: %d bytes, err %v; want %d bytes", name, len(got), err, len(want))
		}
		if fi, err := os.Lstat(filepath.Join(dir, name)); err != nil || fi.Mode()&os.ModeSymlink == 0 {
			t.Errorf("%s is not a symlink into blobs/ (%v)", name, err)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "merges.txt")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("merges.txt (404 on the hub) exists in the snapshot: %v", err)
	}
	if ref, _ := os.ReadFile(filepath.Join(repo, "refs", "main")); string(ref) != commit {
		t.Errorf("refs/main = %q, want %q", ref, commit)
	}
	if left := incompletes(t, cache, "org/model"); len(left) != 0 {
		t.Errorf("left behind: %v", left)
	}
	if p := prog.String(); !strings.Contains(p, "org/model model.safetensors") || !strings.Contains(p, "100.0%") || !strings.HasSuffix(p, "\n") {
		t.Errorf("progress output %q", p)
	}
	// Later files are pinned to the commit the first response named.
	if log := h.log(); !strings.Contains(strings.Join(log, "\n"), "/org/model/resolve/"+commit+"/model.safetensors") {
		t.Errorf("model.safetensors not fetched at the pinned commit: %v", log)
	}

	srv.Close() // the cache alone must do now, also in offline mode
	for _, extra := range [][]string{nil, {"HF_HUB_OFFLINE", "1"}} {
		o.Getenv = env(append([]string{"HF_HUB_CACHE", cache, "HF_ENDPOINT", srv.URL}, extra...)...)
		again, err := Resolve(context.Background(), "org/model", o)
		if err != nil || again != dir {
			t.Fatalf("cached Resolve (%v) = %s, %v; want %s", extra, again, err, dir)
		}
	}
}

func TestResolveResumesAfterCut(t *testing.T) {
	h, _, o, cache := setup(t, "gpt2")
	const cut = 20000
	h.cutOnce["model.safetensors"] = cut
	o.Attempts = 1
	_, err := Resolve(context.Background(), "gpt2", o)
	if !errors.Is(err, ErrDownload) || !strings.Contains(err.Error(), "run again to resume") {
		t.Fatalf("first Resolve: %v; want an interrupted download", err)
	}
	checkOneLine(t, err)
	part := filepath.Join(RepoDir(cache, "gpt2"), "blobs", commit+".model.safetensors.incomplete")
	if fi, err := os.Stat(part); err != nil || fi.Size() != cut {
		t.Fatalf("partial file %s: %v, want %d bytes", part, err, cut)
	}
	if _, err := os.Stat(filepath.Join(RepoDir(cache, "gpt2"), "snapshots", commit, "model.safetensors")); err == nil {
		t.Fatal("a partial model.safetensors is visible under snapshots/")
	}

	dir, err := Resolve(context.Background(), "gpt2", o)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := os.ReadFile(filepath.Join(dir, "model.safetensors"))
	if !bytes.Equal(got, h.files["model.safetensors"]) {
		t.Fatalf("resumed file differs: %d bytes", len(got))
	}
	want := fmt.Sprintf("GET /gpt2/resolve/%s/model.safetensors range=bytes=%d-", commit, cut)
	if log := strings.Join(h.log(), "\n"); !strings.Contains(log, want) {
		t.Errorf("no resumed request %q in\n%s", want, log)
	}
	if left := incompletes(t, cache, "gpt2"); len(left) != 0 {
		t.Errorf("left behind: %v", left)
	}
}

// With the default attempts, one Resolve call resumes by itself.
func TestResolveRetriesWithinOneCall(t *testing.T) {
	h, _, o, _ := setup(t, "gpt2")
	h.cutOnce["model.safetensors"] = 1000
	dir, err := Resolve(context.Background(), "gpt2", o)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := os.ReadFile(filepath.Join(dir, "model.safetensors"))
	if !bytes.Equal(got, h.files["model.safetensors"]) {
		t.Fatal("content differs after an in-call resume")
	}
	if log := strings.Join(h.log(), "\n"); !strings.Contains(log, "range=bytes=1000-") {
		t.Errorf("no resumed request in\n%s", log)
	}
}

// A server that ignores Range restarts the file from zero; the stale prefix must not survive.
func TestResolveRestartsWhenRangeIgnored(t *testing.T) {
	h, _, o, cache := setup(t, "gpt2")
	h.noRange = true
	blobs := filepath.Join(RepoDir(cache, "gpt2"), "blobs")
	os.MkdirAll(blobs, 0o755)
	os.WriteFile(filepath.Join(blobs, commit+".model.safetensors.incomplete"), bytes.Repeat([]byte("X"), 5000), 0o644)
	dir, err := Resolve(context.Background(), "gpt2", o)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := os.ReadFile(filepath.Join(dir, "model.safetensors"))
	if !bytes.Equal(got, h.files["model.safetensors"]) {
		t.Fatal("content differs after a 200 answer to a Range request")
	}
}

func TestResolveSizeMismatch(t *testing.T) {
	for _, delta := range []int64{+10, -10} {
		t.Run(fmt.Sprintf("announced%+d", delta), func(t *testing.T) {
			h, _, o, cache := setup(t, "gpt2")
			real := int64(len(h.files["model.safetensors"]))
			h.lieSize["model.safetensors"] = real + delta
			_, err := Resolve(context.Background(), "gpt2", o)
			if !errors.Is(err, ErrSizeMismatch) || !strings.Contains(err.Error(), "model.safetensors") {
				t.Fatalf("Resolve = %v; want ErrSizeMismatch naming the file", err)
			}
			checkOneLine(t, err)
			snap := filepath.Join(RepoDir(cache, "gpt2"), "snapshots", commit)
			if _, err := os.Stat(filepath.Join(snap, "model.safetensors")); err == nil {
				t.Fatal("model.safetensors of the wrong size was placed in the snapshot")
			}
			if left := incompletes(t, cache, "gpt2"); len(left) != 0 {
				t.Fatalf("a bad partial file was kept for resuming: %v", left)
			}
			// Once the server tells the truth the download starts from zero, not from the bad bytes.
			delete(h.lieSize, "model.safetensors")
			n := len(h.log())
			dir, err := Resolve(context.Background(), "gpt2", o)
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range h.log()[n:] {
				if !strings.Contains(r, "range= ") {
					t.Errorf("retry after a size mismatch sent a Range: %s", r)
				}
			}
			got, _ := os.ReadFile(filepath.Join(dir, "model.safetensors"))
			if int64(len(got)) != real {
				t.Fatalf("got %d bytes, want %d", len(got), real)
			}
		})
	}
}

// TestResolveNotFound: a repository the hub does not have; the message names what was asked
// for, a model or a tokenizer.
func TestResolveNotFound(t *testing.T) {
	_, srv, o, _ := setup(t, "gpt2")
	for what, resolve := range map[string]func(context.Context, string, Options) (string, error){"model": Resolve, "tokenizer": ResolveTokenizer} {
		_, err := resolve(context.Background(), "nobody/nothing", o)
		if !errors.Is(err, ErrNotFound) {
			t.Fatalf("%s: %v; want ErrNotFound", what, err)
		}
		want := what + " nobody/nothing not found at " + srv.URL + " (HTTP 404"
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not contain %q", err, want)
		}
		checkOneLine(t, err)
	}
}

func TestResolveOfflineWithoutCache(t *testing.T) {
	h, _, o, cache := setup(t, "gpt2")
	o.Getenv = env("HF_HUB_CACHE", cache, "HF_ENDPOINT", "http://unused.invalid", "HF_HUB_OFFLINE", "1")
	_, err := Resolve(context.Background(), "gpt2", o)
	if !errors.Is(err, ErrNotCached) {
		t.Fatalf("Resolve = %v; want ErrNotCached", err)
	}
	for _, want := range []string{RepoDir(cache, "gpt2"), "HF_HUB_OFFLINE", "random:gpt2", "local model directory", "run once with HF_HUB_OFFLINE unset"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
	if n := strings.Count(err.Error(), "Hugging Face cache"); n != 1 {
		t.Errorf("error %q says the cache %d times: one sentence, once", err, n)
	}
	checkOneLine(t, err)
	if n := len(h.log()); n != 0 {
		t.Errorf("offline mode made %d requests", n)
	}
}

// TRANSFORMERS_OFFLINE forbids downloads too (huggingface_hub's constants.py reads it when
// HF_HUB_OFFLINE is unset), with the same values.
func TestResolveTransformersOffline(t *testing.T) {
	for _, v := range []string{"1", "TRUE", "yes", "On"} {
		h, srv, _, cache := setup(t, "gpt2")
		o := Options{Getenv: env("HF_HUB_CACHE", cache, "HF_ENDPOINT", srv.URL, "TRANSFORMERS_OFFLINE", v), HTTPClient: srv.Client()}
		_, err := Resolve(context.Background(), "gpt2", o)
		if !errors.Is(err, ErrNotCached) || !strings.Contains(err.Error(), "TRANSFORMERS_OFFLINE="+v) {
			t.Errorf("TRANSFORMERS_OFFLINE=%s: Resolve = %v; want ErrNotCached naming the variable", v, err)
		}
		if n := len(h.log()); n != 0 {
			t.Errorf("TRANSFORMERS_OFFLINE=%s: %d requests", v, n)
		}
	}
}

func TestResolveUnreachable(t *testing.T) {
	_, srv, o, cache := setup(t, "gpt2")
	srv.Close()
	_, err := Resolve(context.Background(), "gpt2", o)
	if !errors.Is(err, ErrNotCached) || !strings.Contains(err.Error(), "cannot be downloaded from "+srv.URL) ||
		!strings.Contains(err.Error(), "random:gpt2") || !strings.Contains(err.Error(), RepoDir(cache, "gpt2")) {
		t.Fatalf("Resolve = %v; want ErrNotCached naming the endpoint, the cache and the alternatives", err)
	}
	checkOneLine(t, err)
}

func TestResolveSendsToken(t *testing.T) {
	for _, tok := range []string{"", "hf_secret"} {
		h, srv, o, cache := setup(t, "gpt2")
		o.Getenv = env("HF_HUB_CACHE", cache, "HF_ENDPOINT", srv.URL, "HF_TOKEN", tok)
		if _, err := Resolve(context.Background(), "gpt2", o); err != nil {
			t.Fatal(err)
		}
		want := "auth="
		if tok != "" {
			want += "Bearer " + tok
		}
		for _, r := range h.log() {
			if !strings.HasSuffix(r, want) {
				t.Errorf("token %q: request %q, want it to end %q", tok, r, want)
			}
		}
	}
}

// The hub answers resolve/ for large files with a redirect that carries the commit and the size;
// the storage backend's response carries neither.
func TestResolveReadsRedirectHeaders(t *testing.T) {
	body := stFile(3000)
	var mux http.ServeMux
	mux.HandleFunc("/m/resolve/", func(w http.ResponseWriter, r *http.Request) {
		file := r.URL.Path[strings.LastIndex(r.URL.Path, "/")+1:]
		w.Header().Set("X-Repo-Commit", commit)
		switch file {
		case "config.json":
			w.Write([]byte("{}"))
		case "model.safetensors":
			w.Header().Set("X-Linked-Size", strconv.Itoa(len(body)))
			w.Header().Set("X-Linked-Etag", `"abc123"`)
			http.Redirect(w, r, "/cdn/blob", http.StatusFound)
		default:
			http.NotFound(w, r)
		}
	})
	mux.HandleFunc("/cdn/blob", func(w http.ResponseWriter, r *http.Request) { w.Write(body) })
	srv := httptest.NewServer(&mux)
	defer srv.Close()
	cache := t.TempDir()
	dir, err := Resolve(context.Background(), "m", Options{Getenv: env("HF_HUB_CACHE", cache, "HF_ENDPOINT", srv.URL), HTTPClient: srv.Client()})
	if err != nil {
		t.Fatal(err)
	}
	if target, err := os.Readlink(filepath.Join(dir, "model.safetensors")); err != nil || filepath.Base(target) != "abc123" {
		t.Errorf("model.safetensors links to %q (%v), want the blob named by its etag", target, err)
	}
	if got, _ := os.ReadFile(filepath.Join(dir, "model.safetensors")); !bytes.Equal(got, body) {
		t.Error("content differs")
	}
}

// A cache filled by other tools may hold plain files and no refs/main.
func TestResolvePlainFileSnapshot(t *testing.T) {
	cache := t.TempDir()
	snap := filepath.Join(RepoDir(cache, "org/x"), "snapshots", "abc")
	os.MkdirAll(snap, 0o755)
	os.WriteFile(filepath.Join(snap, "config.json"), []byte("{}"), 0o644)
	o := Options{Getenv: env("HF_HUB_CACHE", cache, "HF_ENDPOINT", "http://127.0.0.1:1")}
	if _, err := Resolve(context.Background(), "org/x", o); !errors.Is(err, ErrNotCached) {
		t.Fatalf("incomplete snapshot: Resolve = %v, want ErrNotCached", err)
	}
	os.WriteFile(filepath.Join(snap, "model.safetensors"), []byte("w"), 0o644)
	if dir, err := Resolve(context.Background(), "org/x", o); err != nil || dir != snap {
		t.Fatalf("Resolve = %s, %v; want %s", dir, err, snap)
	}
}

func TestCacheRoot(t *testing.T) {
	cases := []struct {
		name string
		env  []string
		want string
	}{
		{"HF_HUB_CACHE wins", []string{"HF_HUB_CACHE", "/c", "HF_HOME", "/h", "HOME", "/home/u"}, "/c"},
		{"HF_HOME", []string{"HF_HOME", "/h", "HOME", "/home/u"}, "/h/hub"},
		{"XDG_CACHE_HOME", []string{"XDG_CACHE_HOME", "/x", "HOME", "/home/u"}, "/x/huggingface/hub"},
		{"HOME", []string{"HOME", "/home/u"}, "/home/u/.cache/huggingface/hub"},
		// huggingface_hub's constants.py: HUGGINGFACE_HUB_CACHE (legacy) below HF_HUB_CACHE, above
		// HF_HOME; both paths go through expanduser and expandvars.
		{"legacy HUGGINGFACE_HUB_CACHE", []string{"HUGGINGFACE_HUB_CACHE", "/l", "HF_HOME", "/h"}, "/l"},
		{"HF_HUB_CACHE over the legacy name", []string{"HF_HUB_CACHE", "/c", "HUGGINGFACE_HUB_CACHE", "/l"}, "/c"},
		{"HF_HOME with ~", []string{"HF_HOME", "~/hf", "HOME", "/home/u"}, "/home/u/hf/hub"},
		{"HF_HUB_CACHE is ~", []string{"HF_HUB_CACHE", "~", "HOME", "/home/u"}, "/home/u"},
		{"HF_HUB_CACHE with a variable", []string{"HF_HUB_CACHE", "$SCRATCH/hub", "SCRATCH", "/s"}, "/s/hub"},
		{"HF_HOME with braces", []string{"HF_HOME", "${SCRATCH}/hf", "SCRATCH", "/s"}, "/s/hf/hub"},
		{"unset variable kept", []string{"HF_HUB_CACHE", "/c/$NOPE"}, "/c/$NOPE"},
		{"~user kept", []string{"HF_HUB_CACHE", "~bob/c", "HOME", "/home/u"}, "~bob/c"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := CacheRoot(env(c.env...))
			if err != nil || got != filepath.FromSlash(c.want) {
				t.Errorf("CacheRoot = %q, %v; want %q", got, err, c.want)
			}
		})
	}
	if _, err := CacheRoot(env()); err == nil {
		t.Error("CacheRoot with no HOME succeeded")
	}
}

func TestValidID(t *testing.T) {
	for id, want := range map[string]bool{
		"gpt2": true, "openai-community/gpt2": true, "distilgpt2": true, "a.b_c-d/E9": true,
		"": false, "/gpt2": false, "a/b/c": false, "../x": false, "a--b": false, "-x": false,
		".hidden": false, "has space": false, "a/": false,
	} {
		if got := ValidID(id); got != want {
			t.Errorf("ValidID(%q) = %v, want %v", id, got, want)
		}
	}
	_, err := Resolve(context.Background(), "a/b/c", Options{Getenv: env("HOME", t.TempDir())})
	if !errors.Is(err, ErrInvalidID) {
		t.Errorf("Resolve(a/b/c) = %v, want ErrInvalidID", err)
	}
}

// TestProgressRedrawLimit drives the bar with a fake clock: writes 10 ms apart redraw every 100 ms.
func TestProgressRedrawLimit(t *testing.T) {
	t0 := time.Unix(1000, 0)
	now := t0
	var out bytes.Buffer
	p := newProgress(&out, func() time.Time { return now }, "gpt2 model.safetensors", 0, 1_000_000)
	for i := 0; i < 100; i++ { // 1 s of writes, 10 kB each
		now = now.Add(10 * time.Millisecond)
		p.Write(make([]byte, 10_000))
	}
	p.finish()
	s := out.String()
	if n := strings.Count(s, "\r"); n < 10 || n > 12 {
		t.Errorf("%d redraws for 1 s of progress, want about 10:\n%q", n, s)
	}
	last := s[strings.LastIndex(s, "\r")+1:]
	for _, want := range []string{"1.0 MB / 1.0 MB", "100.0%", "1.0 MB/s"} {
		if !strings.Contains(last, want) {
			t.Errorf("final line %q lacks %q", last, want)
		}
	}
	if !strings.HasSuffix(s, "\n") {
		t.Error("no newline after the bar")
	}
}

// Without X-Repo-Commit nothing pins the revision: files land in snapshots/main, and a cut
// download leaves no partial file that a later run could wrongly resume against a newer main.
func TestResolveWithoutCommitHeader(t *testing.T) {
	h, _, o, cache := setup(t, "gpt2")
	h.commit = ""
	h.cutOnce["model.safetensors"] = 500
	_, err := Resolve(context.Background(), "gpt2", o)
	if !errors.Is(err, ErrDownload) {
		t.Fatalf("cut download: %v", err)
	}
	if left := incompletes(t, cache, "gpt2"); len(left) != 0 {
		t.Fatalf("unpinned partial file kept: %v", left)
	}
	dir, err := Resolve(context.Background(), "gpt2", o)
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(RepoDir(cache, "gpt2"), "snapshots", "main"); dir != want {
		t.Errorf("dir = %s, want %s", dir, want)
	}
	if got, _ := os.ReadFile(filepath.Join(dir, "model.safetensors")); !bytes.Equal(got, h.files["model.safetensors"]) {
		t.Error("content differs")
	}
}

// TestToken: the token comes from the environment first, then from the file `hf auth login`
// saves, where huggingface_hub looks for it; whitespace around it is dropped.
func TestToken(t *testing.T) {
	home, hfHome, other := t.TempDir(), t.TempDir(), t.TempDir()
	write := func(path, s string) {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(filepath.Join(home, ".cache", "huggingface", "token"), "hf_home\n")
	write(filepath.Join(hfHome, "token"), " hf_hfhome \n")
	write(filepath.Join(other, "tok"), "hf_path")
	for _, c := range []struct {
		name string
		env  []string
		want string
	}{
		{"HF_TOKEN first", []string{"HOME", home, "HF_TOKEN", "hf_env", "HUGGING_FACE_HUB_TOKEN", "hf_old"}, "hf_env"},
		{"the older variable", []string{"HOME", home, "HUGGING_FACE_HUB_TOKEN", "hf_old"}, "hf_old"},
		{"HF_TOKEN_PATH", []string{"HOME", home, "HF_HOME", hfHome, "HF_TOKEN_PATH", "$D/tok", "D", other}, "hf_path"},
		{"HF_HOME's token", []string{"HOME", home, "HF_HOME", hfHome}, "hf_hfhome"},
		{"the default place", []string{"HOME", home}, "hf_home"},
		{"no file", []string{"HOME", other}, ""},
		{"nowhere to look", nil, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := token(env(c.env...)); got != c.want {
				t.Errorf("token = %q, want %q", got, c.want)
			}
		})
	}
}

// TestResolveRefusesAPathForACommit: an X-Repo-Commit that is not a plain name (a hostile or
// broken mirror's "../../x") is refused before it names a directory: nothing is written outside
// the cache, and no snapshot or refs/main is made.
func TestResolveRefusesAPathForACommit(t *testing.T) {
	for _, bad := range []string{"../../../victim", "a/b", ".hidden", strings.Repeat("f", 129)} {
		h, _, o, cache := setup(t, "gpt2")
		h.commit = bad
		_, err := Resolve(context.Background(), "gpt2", o)
		if !errors.Is(err, ErrDownload) || !strings.Contains(err.Error(), "not a commit hash") {
			t.Fatalf("commit %q: %v", bad, err)
		}
		// "../../../victim" from snapshots/ and from .locks/models--gpt2/ is the cache's parent's
		// victim, the test's own temporary directory.
		escaped, _ := filepath.Glob(filepath.Join(filepath.Dir(cache), "victim*"))
		repo := RepoDir(cache, "gpt2")
		for _, p := range append(escaped, filepath.Join(repo, "snapshots"), filepath.Join(repo, "refs", "main")) {
			if _, err := os.Lstat(p); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("commit %q: %s exists (%v)", bad, p, err)
			}
		}
	}
}

// TestResolveNamesABrokenLink: offline, a cached snapshot whose link leads nowhere (its blob
// deleted) is named in the error, not only "not in the cache".
func TestResolveNamesABrokenLink(t *testing.T) {
	_, _, o, cache := setup(t, "gpt2")
	if _, err := Resolve(context.Background(), "gpt2", o); err != nil {
		t.Fatal(err)
	}
	snap := filepath.Join(RepoDir(cache, "gpt2"), "snapshots", commit)
	target, err := os.Readlink(filepath.Join(snap, "model.safetensors"))
	if err != nil {
		t.Skip("the cache holds files, not links, here:", err)
	}
	if err := os.Remove(filepath.Join(snap, target)); err != nil {
		t.Fatal(err)
	}
	for _, getenv := range []func(string) string{
		env("HF_HUB_CACHE", cache, "HF_ENDPOINT", "http://unused.invalid", "HF_HUB_OFFLINE", "1"),
		env("HF_HUB_CACHE", cache, "HF_ENDPOINT", "http://127.0.0.1:1"),
	} {
		o.Getenv = getenv
		_, err := Resolve(context.Background(), "gpt2", o)
		want := "its snapshots/" + commit + "/model.safetensors links to " + target + ", which does not exist"
		if !errors.Is(err, ErrNotCached) || !strings.Contains(err.Error(), want) {
			t.Errorf("Resolve = %v; want ErrNotCached naming %q", err, want)
		}
		checkOneLine(t, err)
	}
}
