package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"rosetop/internal/benchcheck"
)

// urlWatcher is stderr for an in-process `rosetop serve`: it keeps what is written and sends the
// API root of the start-up line once.
type urlWatcher struct {
	mu   sync.Mutex // guards buf and sent: the server writes from several goroutines
	buf  strings.Builder
	sent bool
	url  chan string // capacity 1
}

var servingLine = regexp.MustCompile(`serving \S+ on (http://\S+/v1)`)

func (w *urlWatcher) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.Write(p)
	if m := servingLine.FindStringSubmatch(w.buf.String()); m != nil && !w.sent {
		w.sent = true
		w.url <- m[1]
	}
	return len(p), nil
}

func (w *urlWatcher) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}

// TestBenchAgainstServe is the acceptance run of `rosetop bench --endpoint`: `rosetop serve` on
// the embedded model, in this process on a free port, driven with decode-heavy (one warmup run,
// two measured runs) through main's run(). The full report comes out with the server named, the
// token counts equal those of the same job run in-process, and every printed percentile is
// recomputed from the --json records. Under -race the job runs smaller (16 requests of 32
// tokens); CI runs it full-size without the race detector too (.ci/run).
func TestBenchAgainstServe(t *testing.T) {
	if testing.Short() {
		t.Skip("decode-heavy three times in-process and three times over HTTP")
	}
	job := []string{"--job", "decode-heavy", "--warmup-runs", "1", "--repeat-runs", "2"}
	requests, tokens := 64, 256
	if raceEnabled { // the race detector slows both engines and the HTTP path many times over
		requests, tokens = 16, 32
		job = append(job, "--num-requests", "16", "--max-new-tokens", "32")
	}
	code, inProc, stderr := runCLI(t, append([]string{"bench", "--device", "cpu"}, job...)...)
	if code != 0 {
		t.Fatalf("in-process bench: exit %d\n%s", code, stderr)
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	serveErr := &urlWatcher{url: make(chan string, 1)}
	var serveOut strings.Builder
	served := make(chan int, 1)
	go func() {
		served <- run(ctx, []string{"serve", "--port", "0", "--device", "cpu"}, strings.NewReader(""), &serveOut, serveErr)
	}()
	var base string
	select {
	case base = <-serveErr.url:
	case code := <-served:
		t.Fatalf("rosetop serve exited %d before serving:\n%s", code, serveErr)
	case <-time.After(time.Minute): // turns a hang into a failure
		t.Fatalf("rosetop serve did not start:\n%s", serveErr)
	}

	jsonPath, recPath := filepath.Join(t.TempDir(), "remote.json"), filepath.Join(t.TempDir(), "remote.rec")
	code, remote, stderr := runCLI(t, append([]string{"bench", "--endpoint", base, "--json", jsonPath, "--record", recPath, "--api-key", "sk-never-kept"}, job...)...)
	cancel()
	if code != 0 {
		t.Fatalf("bench --endpoint: exit %d\n%s", code, stderr)
	}
	if code := <-served; code != 0 {
		t.Errorf("rosetop serve: exit %d after its context ended\n%s", code, serveErr)
	}
	for _, want := range []string{
		fmt.Sprintf("=== warmup 1/1 ===\nCold run, not measured: %d requests in ", requests),
		"\n=== run 1/2 ===\n=== streaming benchmark ===\nModel: tiny-gpt2\nDevice: remote\nEndpoint: " + base + " (completions API)\nServer: rosetop\n",
		"\n=== run 2/2 ===\n", fmt.Sprintf("Requests: %d\n", requests), fmt.Sprintf("Completion tokens (total): %d\n", requests*tokens),
		fmt.Sprintf("Output tokens from: usage: %d\n", requests), "\n=== cold start ===\n",
	} {
		if !strings.Contains(remote, want) {
			t.Errorf("the report lacks %q:\n%s", want, remote)
		}
	}
	if strings.Contains(remote, "Failed") || strings.Contains(remote, "Interrupted") {
		t.Errorf("requests failed:\n%s", remote)
	}
	for _, prefix := range []string{"Prompt tokens (total): ", "Completion tokens (total): "} {
		got, want := linesWith(remote, prefix), linesWith(inProc, prefix)
		if len(got) != 2 || strings.Join(got, "|") != strings.Join(want, "|") {
			t.Errorf("%q: over HTTP %q, in-process %q", prefix, got, want)
		}
	}
	for _, path := range []string{jsonPath, recPath} {
		if data, err := os.ReadFile(path); err != nil || bytes.Contains(data, []byte("sk-never-kept")) {
			t.Errorf("%s: %v; the API key must not be in it", path, err)
		}
	}
	if code, summary, stderr := runCLI(t, "replay", "--summary", recPath); code != 0 || !strings.Contains(summary, " --api-key [redacted] ") {
		t.Errorf("replay --summary: exit %d, %s\n%s; want the command line with the key redacted", code, stderr, summary)
	}
	data, err := os.ReadFile(jsonPath)
	if err != nil {
		t.Fatal(err)
	}
	if n := benchcheck.Check(t, remote, data); n < 2*13 { // per run: TTFT, TPOT, ITL and latency p50/p95/p99, throughput
		t.Errorf("only %d printed numbers compared", n)
	}
	if testing.Verbose() {
		t.Logf("over HTTP:\n%s\nin-process:\n%s", remote, inProc)
	}
}

// linesWith returns the lines of s that start with prefix, in order.
func linesWith(s, prefix string) []string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.HasPrefix(l, prefix) {
			out = append(out, l)
		}
	}
	return out
}
