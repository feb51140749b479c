package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// TestServeCommand: `rosetop serve` answers a streamed completion over real HTTP, publishes
// metrics that parse and count what was done, and on SIGTERM lets the request in flight finish,
// prints its summary and exits 0.
func TestServeCommand(t *testing.T) {
	cmd, base, stdout, stderr := startServe(t, "--window", "2")
	client := &http.Client{Timeout: time.Minute}
	body := `{"model":"tiny-gpt2","prompt":"Hello","max_tokens":6,"stream":true,"stream_options":{"include_usage":true},"ignore_eos":true}`
	resp, err := client.Post(base+"/completions", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	events := 0
	var usage struct {
		Usage *struct {
			CompletionTokens int `json:"completion_tokens"`
		} `json:"usage"`
	}
	for sc := bufio.NewScanner(resp.Body); sc.Scan(); {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok || data == "[DONE]" {
			continue
		}
		events++
		if err := json.Unmarshal([]byte(data), &usage); err != nil {
			t.Fatalf("chunk %q: %v", data, err)
		}
	}
	resp.Body.Close()
	if usage.Usage == nil || usage.Usage.CompletionTokens != 6 || events < 7 {
		t.Fatalf("%d chunks, last usage %+v; want 6 tokens and a usage chunk", events, usage.Usage)
	}

	resp, err = client.Get(strings.TrimSuffix(base, "/v1") + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	if f := families["rosetop_generation_tokens_total"]; f == nil || f.Metric[0].GetCounter().GetValue() != 6 {
		t.Errorf("rosetop_generation_tokens_total = %v, want 6", f)
	}
	if f := families["rosetop_time_to_first_token_seconds"]; f == nil || f.Metric[0].GetHistogram().GetSampleCount() != 1 {
		t.Errorf("rosetop_time_to_first_token_seconds count = %v, want 1", f)
	}

	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	errText := stderr()
	err = cmd.Wait()
	if code := cmd.ProcessState.ExitCode(); code != 0 {
		t.Fatalf("exit %d (%v) after SIGTERM, want 0", code, err)
	}
	if strings.Contains(errText, "stopping:") {
		t.Errorf("stderr %q: a drain note with nothing in flight", errText)
	}
	if !strings.Contains(stdout.String(), "=== rosetop session") {
		t.Errorf("no summary on stdout:\n%s", stdout.String())
	}
}

// startServe starts `rosetop serve` on the CPU on any free port, with args added, and returns it,
// its API's base URL (.../v1) and its stdout once it serves.
// stderr, the last result, waits for the process to close its stderr (its exit) and returns the
// lines after the start-up one: call it before cmd.Wait, which may drop what is not yet read.
func startServe(t *testing.T, args ...string) (cmd *exec.Cmd, base string, stdout *strings.Builder, stderr func() string) {
	t.Helper()
	cmd = childCmd(t, append([]string{"serve", "--port", "0", "--device", "cpu", "--threads", "1"}, args...)...)
	errPipe, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout = &strings.Builder{}
	cmd.Stdout = stdout
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	errLines := bufio.NewScanner(errPipe)
	addr := regexp.MustCompile(`serving tiny-gpt2 on (http://[^ ]+/v1)`)
	for base == "" && errLines.Scan() {
		if m := addr.FindStringSubmatch(errLines.Text()); m != nil {
			base = m[1]
		}
	}
	if base == "" {
		t.Fatal("no start-up line with the URL")
	}
	var rest strings.Builder
	copied := make(chan struct{})
	go func() { io.Copy(&rest, errPipe); close(copied) }()
	return cmd, base, stdout, func() string { <-copied; return rest.String() }
}

// TestServeSignalLetsStreamsFinish: on SIGTERM a stream in flight runs to its end within
// --shutdown-timeout (no error event), stderr says what the server waits for, the process exits
// 0, and --json holds the request.
func TestServeSignalLetsStreamsFinish(t *testing.T) {
	out := filepath.Join(t.TempDir(), "serve.json")
	cmd, base, _, stderr := startServe(t, "--shutdown-timeout", "10m", "--json", out)
	body := `{"prompt":"Hello","max_tokens":1000,"stream":true,"stream_options":{"include_usage":true},"ignore_eos":true}`
	resp, err := (&http.Client{Timeout: 10 * time.Minute}).Post(base+"/completions", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	if !sc.Scan() || !strings.HasPrefix(sc.Text(), "data: {") {
		t.Fatalf("first line %q, %v", sc.Text(), sc.Err())
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil { // the request is still generating
		t.Fatal(err)
	}
	var last struct {
		Usage *struct {
			CompletionTokens int `json:"completion_tokens"`
		} `json:"usage"`
		Error *struct {
			Message string `json:"message"`
		} `json:"error"`
	}
	done := false
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		if done = data == "[DONE]"; done {
			break
		}
		if err := json.Unmarshal([]byte(data), &last); err != nil {
			t.Fatalf("event %q: %v", data, err)
		}
		if last.Error != nil {
			t.Fatalf("the stream in flight got an error after SIGTERM: %s", last.Error.Message)
		}
	}
	if !done || last.Usage == nil || last.Usage.CompletionTokens != 1000 {
		t.Fatalf("the stream ended (done %v) with usage %+v; want [DONE] after 1000 tokens", done, last.Usage)
	}
	errText := stderr()
	err = cmd.Wait()
	if code := cmd.ProcessState.ExitCode(); code != 0 {
		t.Fatalf("exit %d (%v) after SIGTERM, want 0", code, err)
	}
	if want := "rosetop: stopping: 1 requests in flight, letting them finish for up to 10m0s (a second Ctrl-C exits at once)\n"; !strings.Contains(errText, want) {
		t.Errorf("stderr %q lacks %q", errText, want)
	}
	raw, err := os.ReadFile(out)
	if err != nil || !strings.Contains(string(raw), `"output_tokens": 1000`) {
		t.Fatalf("--json: %v\n%.2000s\nwant the request's 1000 output tokens", err, raw)
	}
	// The config holds the server's settings, not bench's workload defaults.
	var exp struct {
		Config map[string]any `json:"config"`
	}
	if err := json.Unmarshal(raw, &exp); err != nil {
		t.Fatalf("--json: %v", err)
	}
	c := exp.Config
	if c["command"] != "serve" || c["shutdown_timeout_s"] != 600.0 || c["max_batch_size"] == nil || c["paged_attn"] != true {
		t.Fatalf("--json config %v: want command serve, shutdown_timeout_s 600, the scheduler's and the engine's settings", c)
	}
	for _, k := range []string{"prompt", "num_requests", "max_new_tokens", "request_rate", "warmup_runs", "input_len"} {
		if _, ok := c[k]; ok {
			t.Fatalf("--json config has bench's %q (%v): not a setting of a server", k, c[k])
		}
	}
}

// TestServeBusyPort: a port already taken fails before the model loads, in one line, exit 1.
func TestServeBusyPort(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	port := strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
	code, _, stderr := runCLI(t, "serve", "--port", port, "--device", "cpu")
	if code != 1 || !strings.Contains(stderr, "--port "+port+": listen tcp") || strings.Contains(stderr, "loading model") {
		t.Errorf("exit %d, stderr:\n%s\nwant exit 1 and the listen error before any model loads", code, stderr)
	}
}

// TestServeGrace: --shutdown-timeout 0 means no time (serve.Options's negative), not its default.
func TestServeGrace(t *testing.T) {
	for s, want := range map[float64]time.Duration{0: -1, 0.5: 500 * time.Millisecond, 30: 30 * time.Second} {
		if got := (serveOptions{shutdownS: s}).grace(); got != want {
			t.Errorf("--shutdown-timeout %g: %v, want %v", s, got, want)
		}
	}
}

// TestServeAllowedOrigins: --allowed-origins is any origin by default (vLLM's "*"), a comma
// list or vLLM's JSON list, "" for none; an origin no browser sends is refused with exit 2, by
// name, before anything starts.
func TestServeAllowedOrigins(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{nil, []string{"*"}},
		{[]string{"--allowed-origins", "http://localhost:3000, https://ui.example.com/"}, []string{"http://localhost:3000", "https://ui.example.com/"}},
		{[]string{"--allowed-origins", `["http://localhost:3000","*"]`}, []string{"http://localhost:3000", "*"}},
		{[]string{"--allowed-origins", ""}, nil},
		{[]string{"--allowed-origins", `["null"]`}, []string{"null"}}, // a page opened from a file
	} {
		_, so, err := parseServe(tc.args)
		if err != nil || !slices.Equal(so.allowed, tc.want) {
			t.Errorf("%q: %q, %v; want %q", tc.args, so.allowed, err, tc.want)
		}
	}
	for _, tc := range []struct{ value, want string }{
		{"localhost:3000", `--allowed-origins "localhost:3000": want * or scheme://host[:port]`},
		{"http://a.example/app", `--allowed-origins "http://a.example/app": want * or scheme://host[:port]`},
		{`["http://a.example"`, `--allowed-origins "[\"http://a.example\"": not a JSON list of strings`},
		{"http://a.example,", `--allowed-origins "": want * or scheme://host[:port]`},
	} {
		code, stdout, stderr := runCLI(t, "serve", "--allowed-origins", tc.value)
		if code != exitUsage || stdout != "" || strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, tc.want) {
			t.Errorf("--allowed-origins %q: exit %d, stderr %q; want exit 2 and one line with %q", tc.value, code, stderr, tc.want)
		}
	}
}

// TestServeAPIKeys: --api-key given twice makes two keys; an empty one is refused with exit 2 in
// one line; the keys stay out of the --json config.
func TestServeAPIKeys(t *testing.T) {
	o, so, err := parseServe([]string{"--api-key", "k1", "--api-key=k 2"})
	if err != nil || !slices.Equal(so.apiKeys, []string{"k1", "k 2"}) {
		t.Fatalf("keys %q, %v", so.apiKeys, err)
	}
	cfg, err := serveSettings(o, so)
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := json.Marshal(cfg); strings.Contains(string(b), "k1") || strings.Contains(string(b), "k 2") {
		t.Errorf("a key in the --json config: %s", b)
	}
	code, stdout, stderr := runCLI(t, "serve", "--api-key", "")
	if code != exitUsage || stdout != "" || strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, `--api-key "": empty`) {
		t.Errorf("an empty key: exit %d, stderr %q", code, stderr)
	}
}

// TestServeAPIKeyEnv: without --api-key the key is $VLLM_API_KEY, as vLLM reads it (an empty
// one is none); --api-key wins over it.
func TestServeAPIKeyEnv(t *testing.T) {
	for _, tc := range []struct {
		env  string
		args []string
		want []string
	}{
		{"from-env", nil, []string{"from-env"}},
		{"from-env", []string{"--api-key", "k1"}, []string{"k1"}},
		{"", nil, nil},
	} {
		t.Setenv("VLLM_API_KEY", tc.env)
		if _, so, err := parseServe(tc.args); err != nil || !slices.Equal(so.apiKeys, tc.want) {
			t.Errorf("VLLM_API_KEY=%q %q: keys %q, %v; want %q", tc.env, tc.args, so.apiKeys, err, tc.want)
		}
	}
}

// servingWatcher is stderr for an in-process rosetop serve: it keeps what is written and closes
// serving once the start-up line ("rosetop: serving ...") is out.
type servingWatcher struct {
	mu      sync.Mutex // guards buf: the server writes from several goroutines
	buf     strings.Builder
	once    sync.Once
	serving chan struct{}
}

func (w *servingWatcher) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.Write(p)
	if s := w.buf.String(); strings.HasPrefix(s, "rosetop: serving ") || strings.Contains(s, "\nrosetop: serving ") {
		w.once.Do(func() { close(w.serving) })
	}
	return len(p), nil
}

func (w *servingWatcher) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}

// serveRefused runs rosetop serve with args, stopping it as a signal would once it says it
// serves, so that a server started where it should have been refused exits 0, not hangs.
func serveRefused(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stderr := &servingWatcher{serving: make(chan struct{})}
	var stdout strings.Builder
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, append([]string{"serve", "--port", "0", "--device", "cpu"}, args...), strings.NewReader(""), &stdout, stderr)
	}()
	var code int
	select {
	case <-stderr.serving:
		cancel()
		code = <-done
	case code = <-done:
	}
	return code, stdout.String(), stderr.String()
}

// TestServeMaxSeqLenPastModel: --max-seq-len past the model's positions is refused with exit 2
// and bench's message, not clamped.
func TestServeMaxSeqLenPastModel(t *testing.T) {
	code, _, stderr := serveRefused(t, "--max-seq-len", "65536")
	if want := "rosetop: --max-seq-len 65536: the model has 1024 positions (n_positions)\n"; code != exitUsage || !strings.HasSuffix(stderr, want) {
		t.Errorf("exit %d, stderr %q; want %d and %q", code, stderr, exitUsage, want)
	}
}

// TestServeUnmatchableKeysAndNames: an API key no client could send back (white space at either
// end, a control character) is refused at start in one line that never shows the key, from
// --api-key and $VLLM_API_KEY alike; so is a served model name that is blank or padded.
func TestServeUnmatchableKeysAndNames(t *testing.T) {
	for _, tc := range []struct {
		env  string
		args []string
		want string
	}{
		{"", []string{"--api-key", " "}, "--api-key: a key begins or ends with white space"},
		{"", []string{"--api-key", "k1", "--api-key", "sk-secret "}, "--api-key: a key begins or ends with white space"},
		{"", []string{"--api-key", "\tsk-secret"}, "--api-key: a key begins or ends with white space"},
		{"", []string{"--api-key", "sk-\x1bsecret"}, "--api-key: a key holds a control character"},
		{"sk-secret\n", nil, "$VLLM_API_KEY: a key begins or ends with white space"},
		{"", []string{"--served-model-name", " "}, `--served-model-name " ": blank`},
		{"", []string{"--served-model-name", "tiny "}, `--served-model-name "tiny ": begins or ends with white space`},
		{"", []string{"--served-model-name", "\ttiny"}, `--served-model-name "\ttiny": begins or ends with white space`},
	} {
		t.Setenv("VLLM_API_KEY", tc.env)
		code, stdout, stderr := serveRefused(t, tc.args...)
		if code != exitUsage || stdout != "" || strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, tc.want) || strings.Contains(stderr, "secret") {
			t.Errorf("VLLM_API_KEY=%q %q: exit %d, stderr %q; want exit 2 and one line with %q, no key", tc.env, tc.args, code, stderr, tc.want)
		}
	}
	if _, so, err := parseServe([]string{"--api-key", "k 2", "--served-model-name", "my model"}); err != nil || so.servedName != "my model" {
		t.Errorf("a key and a name with inner spaces: %v", err)
	}
}
