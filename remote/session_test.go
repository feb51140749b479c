package remote

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"rosetop/bench"
	"rosetop/internal/benchcheck"
	"rosetop/remote/remotetest"
	"rosetop/sched"
)

// startTestServer starts a remotetest server and closes it when the test ends.
func startTestServer(t *testing.T, o remotetest.Options) *remotetest.Server {
	t.Helper()
	srv, err := remotetest.NewServer(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	return srv
}

// sessionConfig is a small decode-heavy-like workload: n unique prompts of tokens tokens each,
// all at once, no EOS.
func sessionConfig(n, tokens, warmup, repeat int) bench.Config {
	return bench.Config{
		Job:        "test",
		Workload:   bench.Workload{Prompt: "Hello", PromptRepeats: 1, UniquePrompts: true, NumRequests: n, MaxNewTokens: tokens, StreamInterval: 1},
		Arrivals:   bench.Arrivals{Schedule: "relative"},
		Sched:      sched.Config{MaxBatch: 64, PrefillMaxBatch: 64},
		WarmupRuns: warmup, RepeatRuns: repeat,
	}
}

func newTestProvider(t *testing.T, srv *remotetest.Server, o ProviderOptions) *Provider {
	t.Helper()
	o.Client.BaseURL = srv.URL + "/v1"
	p, err := NewProvider(o)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// runBench runs bench headless against p with a JSON export and returns stdout and the JSON.
func runBench(t *testing.T, p *Provider, cfg bench.Config) (string, []byte) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "out.json")
	var out, errOut bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	err := bench.RunBench(ctx, cfg, bench.SessionOptions{Provider: p}, bench.Exports{JSONPath: path, Settings: cfg}, &out, &errOut)
	if err != nil {
		t.Fatalf("RunBench: %v\nstderr:\n%s", err, errOut.String())
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return out.String(), data
}

// TestSessionReport runs bench's warmup and repeat runs against a server that streams as vLLM
// does: the report names the endpoint and the server, leaves the parts a client cannot see n/a,
// labels the chunk gap and the token gap, counts tokens from usage, and every printed number
// is recomputed from the JSON.
func TestSessionReport(t *testing.T) {
	cases := []struct {
		name     string
		srv      remotetest.Options
		api      API
		tokenGap bool // the chunks say their token counts
		source   string
	}{
		{"completions, one token a chunk", remotetest.Options{MaxModelLen: 1024}, Completions, false, "usage: 8"},
		{"chat, three tokens a chunk with token ids", remotetest.Options{ChunkTokens: 3, TokenIDs: true}, Chat, true, "usage: 8"},
		{"no usage: tokens from the tokenizer", remotetest.Options{Faults: func(int) remotetest.Fault { return remotetest.NoUsage }}, Completions, false, "tokenizer: 8"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			srv := startTestServer(t, tc.srv)
			p := newTestProvider(t, srv, ProviderOptions{API: tc.api})
			out, data := runBench(t, p, sessionConfig(8, 10, 1, 2))
			for _, want := range []string{
				"=== warmup 1/1 ===\nCold run, not measured: 8 requests in ",
				"\n=== run 1/2 ===\n=== streaming benchmark ===\nModel: test-model\nDevice: remote\n",
				"Endpoint: " + srv.URL + "/v1 (" + tc.api.String() + " API)\nServer: vllm\nPretok: False\nRequests: 8\n",
				"Completion tokens (total): 80\n",
				"add_request latency p50/p95/p99: n/a\nTokenize p50/p95/p99: n/a\nQueue wait (post-tok) p50/p95/p99: n/a\nPrefill->first token p50/p95/p99: n/a\n",
				"ITL (chunk gap) p50/p95/p99: ",
				"Output tokens from: " + tc.source + "\n",
			} {
				if !strings.Contains(out, want) {
					t.Errorf("report lacks %q:\n%s", want, out)
				}
			}
			if got := strings.Contains(out, "Token gap p50/p95/p99: n/a"); got == tc.tokenGap {
				t.Errorf("token gap n/a = %v, want %v:\n%s", got, !tc.tokenGap, out)
			}
			for _, bad := range []string{"Paged attention", "CUDA Graph", "Failed", "Interrupted"} {
				if strings.Contains(out, bad) {
					t.Errorf("report has %q:\n%s", bad, out)
				}
			}
			if want := `"backend": "` + tc.api.backend() + `"`; !strings.Contains(string(data), want) {
				t.Errorf("the JSON lacks %s", want)
			}
			if n := benchcheck.Check(t, out, data); n == 0 {
				t.Fatal("nothing was compared")
			}
			rep := benchcheck.Decode(t, data)
			for _, run := range rep.Runs {
				for i, r := range run.Requests {
					if r.OutputTokens != 10 || r.PromptTokens < 2 || r.Reason != "length" || r.AdmittedMs != nil || r.SubmitEndMs != nil ||
						len(r.ChunkTokens) != len(r.TokenMs) || r.TokenMs[0] != r.FirstTokenMs || r.TokenMs[len(r.TokenMs)-1] != r.FinishedMs {
						t.Errorf("%s request %d: %+v", run.Label, i, r)
					}
				}
			}
			if srv.Requests() != 8*3 {
				t.Errorf("the server saw %d requests, want 24", srv.Requests())
			}
		})
	}
}

// TestSessionFaults injects every kind of failure into one run: each is counted with its
// reason, the run completes, the good requests are measured, and nothing leaks (TestMain).
func TestSessionFaults(t *testing.T) {
	faults := []remotetest.Fault{remotetest.OK, remotetest.Status429, remotetest.Status500, remotetest.Status503HTML,
		remotetest.Stall, remotetest.Cut, remotetest.Garbage, remotetest.NoUsage, remotetest.Status429}
	srv := startTestServer(t, remotetest.Options{Faults: func(n int) remotetest.Fault { return faults[n%len(faults)] }})
	p := newTestProvider(t, srv, ProviderOptions{Client: Config{StallTimeout: 300 * time.Millisecond}})
	out, data := runBench(t, p, sessionConfig(len(faults), 6, 0, 1))
	for _, want := range []string{
		"Requests: 2\n", "Completion tokens (total): 12\n",
		"Output tokens from: tokenizer: 1, usage: 1\n",
		"Failed: 7 (http 429: 2, http 500: 1, http 503: 1, malformed-json: 1, stream-cut: 1, timeout (stall): 1); first: ",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q:\n%s", want, out)
		}
	}
	benchcheck.Check(t, out, data)
	byFailure := map[string]string{}
	for _, r := range benchcheck.Decode(t, data).Runs[0].Requests {
		if r.Failure != "" {
			byFailure[r.Failure] = r.Reason
		}
	}
	for _, f := range []string{"http 429", "http 500", "http 503", "malformed-json", "stream-cut", "timeout (stall)"} {
		if byFailure[f] != "error" {
			t.Errorf("no request failed with %q in the JSON: %v", f, byFailure)
		}
	}
}

// TestSessionCancel interrupts a run whose requests the server holds open: every request is
// cancelled, its connection closed (which frees the server's KV cache), the partial run is
// reported, and nothing leaks.
func TestSessionCancel(t *testing.T) {
	const n = 4
	started, left := make(chan struct{}, n), make(chan struct{}, n)
	srv := startTestServer(t, remotetest.Options{Faults: func(int) remotetest.Fault { return remotetest.Stall }, Started: started, Left: left})
	p := newTestProvider(t, srv, ProviderOptions{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out, errOut bytes.Buffer
	done := make(chan error, 1)
	go func() {
		done <- bench.RunBench(ctx, sessionConfig(n, 8, 0, 1), bench.SessionOptions{Provider: p}, bench.Exports{}, &out, &errOut)
	}()
	guard := time.After(30 * time.Second)
	for range n {
		select {
		case <-started:
		case <-guard:
			t.Fatal("the streams did not all start")
		}
	}
	cancel()
	if err := <-done; !errors.Is(err, bench.ErrInterrupted) {
		t.Fatalf("RunBench = %v, want ErrInterrupted", err)
	}
	if !strings.Contains(errOut.String(), "interrupted: 0 requests finished, 4 cancelled") {
		t.Errorf("stderr:\n%s", errOut.String())
	}
	for range n {
		select {
		case <-left:
		case <-guard:
			t.Fatalf("%d of %d clients left the server", srv.Gone(), n)
		}
	}
}

// TestServerGone: a server that goes away after the connection was checked fails every request
// with a connect failure; the run still completes and says so, and the session stops there with
// an error that says why.
func TestServerGone(t *testing.T) {
	srv := startTestServer(t, remotetest.Options{})
	p := newTestProvider(t, srv, ProviderOptions{})
	if err := p.Prepare(context.Background(), io.Discard); err != nil {
		t.Fatal(err)
	}
	srv.Close()
	var out, errOut bytes.Buffer
	err := bench.RunBench(context.Background(), sessionConfig(5, 4, 0, 2), bench.SessionOptions{Provider: p}, bench.Exports{}, &out, &errOut)
	if want := "run 1/2: all 5 requests failed (connect: 5): check --endpoint, --model and --api; first: connect: "; err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Errorf("RunBench = %v, want %q...", err, want)
	}
	if !strings.Contains(out.String(), "Requests: 0\n") || !strings.Contains(out.String(), "Failed: 5 (connect: 5); first: connect: ") ||
		strings.Contains(out.String(), "run 2/2") {
		t.Errorf("report:\n%s", out.String())
	}
}

// TestPrepareRefused: a server that is not there fails Prepare with an error wrapping
// ErrConnect that names the endpoint, in one line.
func TestPrepareRefused(t *testing.T) {
	srv := startTestServer(t, remotetest.Options{})
	p := newTestProvider(t, srv, ProviderOptions{})
	srv.Close()
	err := p.Prepare(context.Background(), io.Discard)
	if !errors.Is(err, ErrConnect) || !strings.HasPrefix(err.Error(), "cannot reach the server at "+srv.URL+"/v1: ") || strings.Contains(err.Error(), "\n") {
		t.Fatalf("Prepare = %v", err)
	}
}

// TestPrepareModelIDNotPrintable: a model id the server lists with characters a terminal would
// act on (an escape sequence, a newline) is not taken as the model: rosetop prints the model it
// asks for in its start-up line and reports. The user names one with --model.
func TestPrepareModelIDNotPrintable(t *testing.T) {
	for _, id := range []string{"evil\x1b[2Jmodel", "two\nlines", "c1\u009bcontrol"} {
		srv := startTestServer(t, remotetest.Options{Model: id})
		p := newTestProvider(t, srv, ProviderOptions{})
		err := p.Prepare(context.Background(), io.Discard)
		if !errors.Is(err, ErrMalformed) || !strings.Contains(err.Error(), "--model") || strings.ContainsAny(err.Error(), "\x1b\n") {
			t.Errorf("model id %q: Prepare = %v; want a one-line ErrMalformed saying to name one with --model", id, err)
		}
	}
}
