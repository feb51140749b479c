package main

import (
	"bytes"
	"errors"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"rosetop/remote/remotetest"
)

func TestRemoteFlagErrors(t *testing.T) {
	const ep = "http://127.0.0.1:8000/v1"
	cases := []struct {
		name string
		args []string
		want string
	}{
		{"engine flag with endpoint", []string{"--endpoint", ep, "--cuda-graph"}, "--cuda-graph means nothing with --endpoint"},
		{"engine flags with endpoint", []string{"--endpoint", ep, "--device", "cpu", "--threads", "2", "--max-batch-size", "8"}, "--device, --threads, --max-batch-size mean nothing with --endpoint"},
		{"remote flag without endpoint", []string{"--api", "chat"}, "--api: only with --endpoint"},
		{"remote flags without endpoint", []string{"--api-key", "k", "--tokenizer", "gpt2"}, "--api-key, --tokenizer: only with --endpoint"},
		{"port past 65535", []string{"--endpoint", "http://127.0.0.1:99999/v1"}, `--endpoint http://127.0.0.1:99999: port "99999" is not a number from 1 to 65535`},
		{"port zero", []string{"--endpoint", "http://127.0.0.1:0/v1"}, `port "0" is not a number from 1 to 65535`},
		{"unknown api", []string{"--endpoint", ep, "--api", "responses"}, `--api: unknown API "responses" (valid: completions, chat)`},
		{"extra body not an object", []string{"--endpoint", ep, "--extra-body", "[1]"}, "--extra-body: extra body [1]: want one JSON object"},
		{"extra body asks for n choices", []string{"--endpoint", ep, "--extra-body", `{"n":3}`}, `--extra-body: extra body may not set "n" to 3: the client reads one choice a request`},
		{"extra body asks for best_of", []string{"--endpoint", ep, "--extra-body", `{"best_of": 4}`}, `--extra-body: extra body may not set "best_of" to 4`},
		{"extra body sets stream", []string{"--endpoint", ep, "--extra-body", `{"stream": false}`}, `may not set "stream"`},
		{"pretok without tokenizer", []string{"--endpoint", ep, "--pretok"}, "--pretok with --endpoint: token ids need the server's own tokenizer"},
		{"pretok with chat", []string{"--endpoint", ep, "--pretok", "--tokenizer", "gpt2", "--api", "chat"}, "token ids need --api completions"},
		{"endpoint empty", []string{"--endpoint", ""}, `--endpoint "": want an http or https URL`},
		{"endpoint empty with =", []string{"--endpoint=", "--num-requests", "2"}, `--endpoint "": want an http or https URL`},
		{"endpoint empty with an engine flag", []string{"--endpoint", "", "--device", "cpu"}, `--endpoint "": want an http or https URL`},
		{"endpoint without scheme", []string{"--endpoint", "localhost:8000"}, `--endpoint "localhost:8000": want an http or https URL`},
		{"endpoint with credentials", []string{"--endpoint", "http://user:pw@h/v1"}, "put credentials in --api-key"},
		{"endpoint with a query", []string{"--endpoint", "http://h/v1?key=secret"}, "without a query or fragment"},
		{"request timeout negative", []string{"--endpoint", ep, "--request-timeout", "-1"}, "--request-timeout -1: must be from 0"},
		{"stall timeout without endpoint", []string{"--stall-timeout", "5"}, "--stall-timeout: only with --endpoint"},
		{"first byte timeout NaN", []string{"--endpoint", ep, "--first-byte-timeout", "NaN"}, "--first-byte-timeout NaN"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parseOptions(t.Context(), tc.args, &bytes.Buffer{})
			if err == nil || !errors.Is(err, errBadFlag) {
				t.Fatalf("parseOptions(%q) = %v, want a flag error", tc.args, err)
			}
			if msg := err.Error(); !strings.Contains(msg, tc.want) || strings.Contains(msg, "\n") || strings.Contains(msg, "secret") {
				t.Errorf("error = %q, want one line containing %q", msg, tc.want)
			}
		})
	}
}

// TestEmptyEndpointRefused: --endpoint "" (an unset $URL) is a bad flag on every command that
// takes it, not a run of the in-process engine.
func TestEmptyEndpointRefused(t *testing.T) {
	for _, args := range [][]string{
		{"bench", "--endpoint", "", "--device", "cpu"},
		{"bench", "--endpoint="},
		{"sweep", "--endpoint", "", "--concurrency", "1,2", "--out-dir", t.TempDir()},
		{"dashboard", "--endpoint", ""},
	} {
		code, stdout, stderr := runCLI(t, args...)
		if code != exitUsage || stdout != "" || !strings.HasPrefix(stderr, `rosetop: --endpoint "": want an http or https URL`) || strings.Count(stderr, "\n") != 1 {
			t.Errorf("%q: exit %d, stdout %.60q, stderr %q; want %d and one line refusing the empty endpoint", args, code, stdout, stderr, exitUsage)
		}
	}
}

// TestRemoteJobPresets: a job's presets of engine flags are ignored against a server; its
// --pretok is turned off, with a note, when no tokenizer of the server's is given.
func TestRemoteJobPresets(t *testing.T) {
	var stderr bytes.Buffer
	o, err := parseOptions(t.Context(), []string{"--endpoint", "http://h:8000/v1", "--job", "paced"}, &stderr)
	if err != nil {
		t.Fatal(err)
	}
	if o.Pretok || !strings.Contains(stderr.String(), "the job's --pretok is off against --endpoint") {
		t.Errorf("pretok %v, stderr %q", o.Pretok, stderr.String())
	}
	if o, err = parseOptions(t.Context(), []string{"--endpoint", "http://h:8000/v1", "--job", "paced", "--tokenizer", "gpt2"}, &stderr); err != nil || !o.Pretok {
		t.Errorf("with --tokenizer: pretok %v, %v", o.Pretok, err)
	}
	if _, err := parseOptions(t.Context(), []string{"--endpoint", "http://h:8000/v1", "--job", "decode-heavy"}, &stderr); err != nil {
		t.Errorf("decode-heavy's engine presets refused: %v", err)
	}
}

// TestBenchEndpoint runs `rosetop bench --endpoint` against a vLLM-like server: the report, a
// JSON export whose config names the endpoint, and the API key nowhere in the outputs.
func TestBenchEndpoint(t *testing.T) {
	srv, err := remotetest.NewServer(remotetest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	const key, envKey = "sk-flag-0123456789", "sk-env-9876543210"
	t.Setenv("OPENAI_API_KEY", envKey)
	dir := t.TempDir()
	jsonPath, csvPath := filepath.Join(dir, "out.json"), filepath.Join(dir, "out.csv")
	for _, args := range [][]string{
		{"bench", "--endpoint", srv.URL + "/v1", "--api-key", key, "--num-requests", "3", "--max-new-tokens", "4", "--json", jsonPath, "--csv", csvPath},
		{"bench", "--endpoint", srv.URL + "/v1", "--api", "chat", "--num-requests", "3", "--max-new-tokens", "4", "--json", jsonPath, "--csv", csvPath},
	} {
		code, stdout, stderr := runCLI(t, args...)
		if code != 0 {
			t.Fatalf("%q: exit %d\n%s", args, code, stderr)
		}
		for _, want := range []string{"Device: remote\nEndpoint: " + srv.URL + "/v1", "Requests: 3\n", "Completion tokens (total): 12\n", "Output tokens from: usage: 3\n"} {
			if !strings.Contains(stdout, want) {
				t.Errorf("report lacks %q:\n%s", want, stdout)
			}
		}
		if !strings.Contains(stderr, "rosetop: vllm at "+srv.URL+"/v1, model test-model") {
			t.Errorf("stderr does not name the server:\n%s", stderr)
		}
		js, err := os.ReadFile(jsonPath)
		if err != nil {
			t.Fatal(err)
		}
		cs, err := os.ReadFile(csvPath)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(js), `"endpoint": "`+srv.URL+`/v1"`) {
			t.Errorf("the JSON config lacks the endpoint")
		}
		for _, out := range []string{stdout, stderr, string(js), string(cs)} {
			if strings.Contains(out, key) || strings.Contains(out, envKey) {
				t.Fatalf("the API key leaked into an output")
			}
		}
	}
}

// TestEndpointRefused: a server that is not there is one line and exit 1.
func TestEndpointRefused(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	url := "http://" + ln.Addr().String() + "/v1"
	ln.Close() // nothing listens there now
	for _, args := range [][]string{{"bench", "--endpoint", url}, {"bench", "--endpoint", url, "--api", "chat"}} {
		code, stdout, stderr := runCLI(t, args...)
		line := strings.TrimSuffix(stderr, "\n")
		if code != exitFail || stdout != "" || strings.Count(stderr, "\n") != 1 ||
			!strings.HasPrefix(line, "rosetop: cannot reach the server at "+url+": ") || !strings.Contains(line, "connection refused") {
			t.Errorf("%q: exit %d, stdout %q, stderr %q", args, code, stdout, stderr)
		}
	}
}

// TestSweepEndpoint: rosetop sweep runs its points against a server; the prefill batch axis,
// rosetop's own scheduler's, is refused there.
func TestSweepEndpoint(t *testing.T) {
	srv, err := remotetest.NewServer(remotetest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	dir := t.TempDir()
	code, stdout, stderr := runCLI(t, "sweep", "--endpoint", srv.URL+"/v1", "--concurrency", "1,2", "--num-requests", "4",
		"--max-new-tokens", "4", "--warmup-runs", "0", "--out-dir", dir)
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	if srv.Requests() != 8 || !strings.Contains(stdout, "concurrency") {
		t.Errorf("%d requests reached the server; stdout:\n%s", srv.Requests(), stdout)
	}
	if js, err := os.ReadFile(filepath.Join(dir, "sweep.json")); err != nil || !strings.Contains(string(js), `"device": "vllm at `+srv.URL) {
		t.Errorf("sweep.json (%v):\n%s", err, js)
	}
	code, _, stderr = runCLI(t, "sweep", "--endpoint", srv.URL+"/v1", "--prefill-max-batch-sizes", "1,2", "--out-dir", dir)
	if code != exitUsage || !strings.Contains(stderr, "--prefill-max-batch-sizes means nothing with --endpoint") {
		t.Errorf("exit %d, stderr %q", code, stderr)
	}
}

// TestStallTimeout: --stall-timeout ends a stream that stops sending, and the report says so;
// the other requests complete.
func TestStallTimeout(t *testing.T) {
	srv, err := remotetest.NewServer(remotetest.Options{Faults: func(n int) remotetest.Fault {
		if n == 1 {
			return remotetest.Stall
		}
		return remotetest.OK
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	code, stdout, stderr := runCLI(t, "bench", "--endpoint", srv.URL+"/v1", "--num-requests", "3", "--max-new-tokens", "4",
		"--warmup-runs", "0", "--stall-timeout", "0.05")
	if code != 0 || !strings.Contains(stdout, "Requests: 2\n") || !strings.Contains(stdout, "Failed: 1 (timeout (stall): 1); first: timeout (stall): after 50ms\n") {
		t.Fatalf("exit %d; want 2 requests done and 1 stall timeout in the report:\n%s\n%s", code, stdout, stderr)
	}
}

// TestTokenizerFlagError: a --tokenizer that cannot be loaded is one line naming the flag and its
// value once, and exit 2.
func TestTokenizerFlagError(t *testing.T) {
	t.Setenv("HF_HUB_OFFLINE", "1")
	t.Setenv("HF_HUB_CACHE", t.TempDir())
	empty := t.TempDir()
	const endpoint = "http://127.0.0.1:1/v1" // never reached: the tokenizer loads first
	for _, tc := range []struct {
		value string
		args  []string
		want  string // stderr's last line
	}{
		{empty, []string{"bench", "--endpoint", endpoint, "--tokenizer", empty},
			"rosetop: --tokenizer " + empty + ": holds no tokenizer.json or vocab.json (rosetop reads GPT-2's byte-level BPE format only)"},
		{empty, []string{"sweep", "--endpoint", endpoint, "--tokenizer", empty, "--concurrency", "1", "--out-dir", t.TempDir()},
			"rosetop: --concurrency 1: --tokenizer " + empty + ": holds no tokenizer.json or vocab.json (rosetop reads GPT-2's byte-level BPE format only)"},
		{"nosuch-tok", []string{"bench", "--endpoint", endpoint, "--tokenizer", "nosuch-tok"},
			"rosetop: --tokenizer: tokenizer nosuch-tok is not in the Hugging Face cache ("},
	} {
		code, _, stderr := runCLI(t, tc.args...)
		lines := strings.Split(strings.TrimSuffix(stderr, "\n"), "\n")
		last := lines[len(lines)-1]
		if code != exitUsage || !strings.HasPrefix(last, tc.want) || strings.Count(stderr, " "+tc.value) != 1 {
			t.Errorf("%q: exit %d, stderr %q; want exit 2 and %q", tc.args, code, stderr, tc.want)
		}
	}
}

// TestFirstRunFailedExit: a bench whose first run fails every request (a model the server does
// not serve) stops there with exit 1, the server's message in its one-line error, and its
// --json written; a measured run after a good warmup in which every request failed is reported,
// then fails the bench (exit 1, one line naming the run).
func TestFirstRunFailedExit(t *testing.T) {
	srv, err := remotetest.NewServer(remotetest.Options{Faults: func(n int) remotetest.Fault {
		if n >= 2 {
			return remotetest.Status429
		}
		return remotetest.OK
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	jsonPath := filepath.Join(t.TempDir(), "out.json")
	base := []string{"bench", "--endpoint", srv.URL + "/v1", "--num-requests", "2", "--max-new-tokens", "2", "--warmup-runs", "1", "--repeat-runs", "1"}
	code, _, stderr := runCLI(t, append(base, "--model", "nosuch", "--json", jsonPath)...)
	lines := strings.Split(strings.TrimSuffix(stderr, "\n"), "\n")
	want := "rosetop: warmup 1/1: all 2 requests failed (http 404: 2): check --endpoint, --model and --api; first: http 404: The model `nosuch` does not exist."
	if code != exitFail || lines[len(lines)-1] != want {
		t.Errorf("exit %d, stderr:\n%s\nwant exit 1 and %q", code, stderr, want)
	}
	if _, err := os.Stat(jsonPath); err != nil {
		t.Errorf("--json not written: %v", err)
	}
	code, stdout, stderr := runCLI(t, base...)
	lines = strings.Split(strings.TrimSuffix(stderr, "\n"), "\n")
	want = "rosetop: run 1/1: all 2 requests failed (http 429: 2); first: http 429: Too many requests, retry later"
	if code != exitFail || lines[len(lines)-1] != want ||
		!strings.Contains(stdout, "Failed: 2 (http 429: 2); first: http 429: Too many requests, retry later\n") {
		t.Errorf("exit %d; want 1, %q last on stderr, and the measured run's report:\n%s\n%s", code, want, stdout, stderr)
	}
}

// TestSweepPointAllFailed: a sweep's first point failing every request stops the sweep (a
// misconfiguration), a later one's is a point of the sweep (the load past what the server takes).
func TestSweepPointAllFailed(t *testing.T) {
	failFrom := func(from int) func(n int) remotetest.Fault {
		return func(n int) remotetest.Fault {
			if n >= from {
				return remotetest.Status429
			}
			return remotetest.OK
		}
	}
	for _, c := range []struct {
		name string
		from int // requests before the server refuses every one: each point sends 2 + 2
		code int
		want string // in stderr
	}{
		{"first point", 0, exitFail, "rosetop: --concurrency 1: warmup 1/1: all 2 requests failed (http 429: 2)"},
		{"later point", 4, 0, "rosetop: sweep: 2 points in "},
	} {
		t.Run(c.name, func(t *testing.T) {
			srv, err := remotetest.NewServer(remotetest.Options{Faults: failFrom(c.from)})
			if err != nil {
				t.Fatal(err)
			}
			defer srv.Close()
			dir := filepath.Join(t.TempDir(), "sweep")
			code, _, stderr := runCLI(t, "sweep", "--endpoint", srv.URL+"/v1", "--concurrency", "1,2", "--num-requests", "2",
				"--max-new-tokens", "2", "--warmup-runs", "1", "--repeat-runs", "1", "--out-dir", dir)
			if code != c.code || !strings.Contains(stderr, c.want) {
				t.Fatalf("exit %d, stderr:\n%s\nwant exit %d and %q", code, stderr, c.code, c.want)
			}
		})
	}
}

// TestRedactedArgs: every spelling of --api-key loses its value; nothing else changes.
func TestRedactedArgs(t *testing.T) {
	in := []string{"--endpoint", "http://h/v1", "--api-key", "k1", "-api-key=k2", "--api-key=", "--prompt", "api-key", "--", "--api-key", "k3"}
	want := []string{"--endpoint", "http://h/v1", "--api-key", "[redacted]", "-api-key=[redacted]", "--api-key=[redacted]", "--prompt", "api-key", "--", "--api-key", "k3"}
	if got := redactedArgs(in); !slices.Equal(got, want) {
		t.Errorf("got  %q\nwant %q", got, want)
	}
	if in[3] != "k1" {
		t.Error("the caller's args were changed")
	}
}
