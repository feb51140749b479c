package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"runtime/debug"
	"strings"
	"testing"
)

// runCLI runs the command in-process and returns its exit code, stdout and stderr.
func runCLI(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), args, strings.NewReader(""), &stdout, &stderr)
	return code, stdout.String(), stderr.String()
}

// TestBadInput checks every bad input of issues 2 and 3 ends in one line on stderr naming the
// input, and a non-zero exit status, without a panic.
func TestBadInput(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		d := filepath.Join(dir, name)
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		if content != "" {
			if err := os.WriteFile(filepath.Join(d, "config.json"), []byte(content), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		return d
	}
	noConfig := write("noconfig", "")
	badJSON := write("badjson", "{not json")
	badType := write("badtype", `{"model_type":"llama","n_layer":2,"n_head":2,"n_embd":8,"n_positions":16,"vocab_size":50257}`)
	badHeads := write("badheads", `{"model_type":"gpt2","n_layer":2,"n_head":3,"n_embd":8,"n_positions":16,"vocab_size":50257}`)
	longPrompt := strings.Repeat("hello ", 1100)

	cases := []struct {
		name string
		args []string
		want string // a piece of the error line
	}{
		{"missing directory", []string{"generate", "--model", filepath.Join(dir, "nope")}, "does not exist"},
		{"missing config.json", []string{"generate", "--model", noConfig}, "config.json"},
		{"invalid config.json", []string{"generate", "--model", badJSON}, "config.json"},
		{"unsupported model_type", []string{"generate", "--model", badType}, "llama"},
		{"n_embd not divisible by n_head", []string{"generate", "--model", badHeads}, "n_head"},
		{"prompt longer than n_positions", []string{"generate", "--prompt", longPrompt}, "n_positions"},
		{"max-new-tokens zero", []string{"generate", "--max-new-tokens", "0"}, "--max-new-tokens"},
		{"unknown device", []string{"generate", "--device", "tpu"}, "--device"},
		{"cuda where there is no GPU", []string{"generate", "--device", "cuda"}, "--device cuda"},
		{"stray argument", []string{"generate", "hello"}, "unexpected argument"},
		{"unknown random arch", []string{"generate", "--model", "random:gpt5"}, "gpt5"},
		{"bench warmup runs", []string{"bench", "--warmup-runs", "-1"}, "--warmup-runs"},
		{"bench repeat runs", []string{"bench", "--repeat-runs", "0"}, "--repeat-runs"},
		{"bench num requests", []string{"bench", "--num-requests", "0"}, "--num-requests"},
		{"bench max new tokens", []string{"bench", "--max-new-tokens", "0"}, "--max-new-tokens"},
		{"bench submit interval", []string{"bench", "--submit-interval-ms", "-1"}, "--submit-interval-ms"},
		{"bench submit schedule", []string{"bench", "--submit-schedule", "sometimes"}, "--submit-schedule"},
		{"bench job", []string{"bench", "--job", "nope"}, "--job"},
		{"bench prefill batch", []string{"bench", "--max-batch-size", "4", "--prefill-max-batch-size", "8"}, "--prefill-max-batch-size"},
		{"bench device", []string{"bench", "--device", "tpu"}, "--device"},
		{"dashboard flag", []string{"--num-requests", "-3"}, "--num-requests"},
		{"bench cpu profile", []string{"bench", "--cpuprofile", filepath.Join(dir, "no", "such", "cpu.prof")}, "--cpuprofile"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if tc.name == "cuda where there is no GPU" && os.Getenv("ROSETOP_REQUIRE_GPU") != "" {
				t.Skip("a GPU is present")
			}
			code, _, stderr := runCLI(t, tc.args...)
			if code == 0 {
				t.Fatalf("exit 0, want non-zero; stderr %q", stderr)
			}
			line := strings.TrimSuffix(stderr, "\n")
			if strings.Contains(line, "\n") || !strings.HasPrefix(line, "rosetop: ") {
				t.Fatalf("stderr is not one 'rosetop: ...' line: %q", stderr)
			}
			if !strings.Contains(line, tc.want) {
				t.Fatalf("error %q does not mention %q", line, tc.want)
			}
		})
	}
}

// TestCPUProfile checks that --cpuprofile writes a profile (gzip-compressed, as pprof writes
// them) and leaves the report on stdout.
func TestCPUProfile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cpu.prof")
	code, stdout, stderr := runCLI(t, "bench", "--num-requests", "2", "--max-new-tokens", "2", "--cpuprofile", path)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if !strings.Contains(stdout, "Throughput") {
		t.Fatalf("no report on stdout: %q", stdout)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) < 2 || b[0] != 0x1f || b[1] != 0x8b {
		t.Fatalf("%s is not a gzip-compressed profile (%d bytes)", path, len(b))
	}
}

func TestGenerateJSON(t *testing.T) {
	code, stdout, stderr := runCLI(t, "generate", "--device", "cpu", "--prompt", "Hello world", "--max-new-tokens", "5", "--no-stop-on-eos", "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var r generateResult
	if err := json.Unmarshal([]byte(stdout), &r); err != nil {
		t.Fatalf("bad JSON %q: %v", stdout, err)
	}
	if want := []int32{15496, 995}; len(r.PromptIDs) != 2 || r.PromptIDs[0] != want[0] || r.PromptIDs[1] != want[1] {
		t.Errorf("prompt ids %v, want %v", r.PromptIDs, want)
	}
	if len(r.GeneratedIDs) != 5 || r.Text == "" {
		t.Errorf("generated %v text %q, want 5 ids and text", r.GeneratedIDs, r.Text)
	}
}

func TestHelpAndVersion(t *testing.T) {
	for _, args := range [][]string{{"help"}, {"--help"}, {"version"}, {"generate", "-h"}, {"bench", "-h"}} {
		if code, _, stderr := runCLI(t, args...); code != 0 {
			t.Errorf("%v: exit %d, stderr %q", args, code, stderr)
		}
	}
	// help CMD prints CMD's flags on stdout; --version is version.
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"help", "bench"}, "-num-requests"}, {[]string{"help", "bench"}, "inf: every request at once"}, {[]string{"help", "sweep"}, "-out-dir"}, {[]string{"help", "generate"}, "-max-new-tokens"},
		{[]string{"help", "serve"}, "-port"}, {[]string{"help", "replay"}, "-summary"}, {[]string{"help", "version"}, "Usage:"},
		{[]string{"--version"}, "rosetop "},
	} {
		code, stdout, stderr := runCLI(t, tc.args...)
		if code != 0 || !strings.Contains(stdout, tc.want) || stderr != "" {
			t.Errorf("%v: exit %d, stdout %.60q, stderr %q; want exit 0 and %q on stdout", tc.args, code, stdout, stderr, tc.want)
		}
	}
}

// TestUsageNamesEveryCommand: rosetop help lists every command and points to the -h of each
// that takes flags.
func TestUsageNamesEveryCommand(t *testing.T) {
	code, stdout, _ := runCLI(t, "help")
	if code != 0 {
		t.Fatalf("help: exit %d", code)
	}
	for _, c := range commands {
		if c == "dashboard" {
			continue // rosetop [flags]
		}
		if !strings.Contains(stdout, "\n  rosetop "+c+" ") && !strings.Contains(stdout, "\n  rosetop "+c+"\n") {
			t.Errorf("usage has no line for rosetop %s:\n%s", c, stdout)
		}
		if c != "help" && c != "version" && !strings.Contains(stdout, "'rosetop "+c+" -h'") {
			t.Errorf("usage does not point to 'rosetop %s -h':\n%s", c, stdout)
		}
	}
}

// TestFindTerminal: the dashboard draws on stdin/stderr when they are the terminal, else on the
// controlling terminal; with none it refuses in one line that names the headless command, exit 2.
func TestFindTerminal(t *testing.T) {
	t.Setenv("TERM", "xterm-256color") // not the TERM=dumb of some CI runners (TestDumbTerminalRefused)
	noTTY := func() (*os.File, error) { return nil, errors.New("no such device or address") }
	if _, err := findTerminal(strings.NewReader(""), &bytes.Buffer{}, noTTY); !errors.Is(err, errNoTerminal) || exitCode(err) != exitUsage ||
		!strings.Contains(err.Error(), "rosetop bench") {
		t.Errorf("no terminal: err = %v (exit %d), want errNoTerminal, exit 2", err, exitCode(err))
	}
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	opened := 0
	tty := func() (*os.File, error) { opened++; return w, nil }
	term, err := findTerminal(strings.NewReader(""), &bytes.Buffer{}, tty)
	if err != nil || opened != 1 || term.in != io.Reader(w) || term.out != io.Writer(w) {
		t.Errorf("redirected stdin and stderr: %+v %v, want both on the controlling terminal", term, err)
	}
}

// TestDumbTerminalRefused: under TERM=dumb (an editor's shell buffer) the dashboard, the
// replay and serve's dashboard refuse in one line naming the headless command, exit 2, before
// a model loads, rather than print their escapes as text.
func TestDumbTerminalRefused(t *testing.T) {
	t.Setenv("TERM", "dumb")
	opened := false
	tty := func() (*os.File, error) { opened = true; return nil, errors.New("not opened") }
	if _, err := findTerminal(strings.NewReader(""), &bytes.Buffer{}, tty); !errors.Is(err, errDumbTerminal) || exitCode(err) != exitUsage || opened {
		t.Errorf("TERM=dumb: err = %v (exit %d, /dev/tty opened %v), want errDumbTerminal, exit 2", err, exitCode(err), opened)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--model", "no-such-model-dir/"}, "TERM=dumb says this one cannot; 'rosetop bench' runs"},
		{[]string{"replay", "testdata/recordings/cpu-tiny-v1.rec"}, "TERM=dumb says this one cannot: rosetop replay --summary testdata/recordings/cpu-tiny-v1.rec prints it headless"},
		{[]string{"serve", "--dashboard", "--port", "0"}, "TERM=dumb says this one cannot; without --dashboard rosetop serve runs headless"},
	} {
		code, _, stderr := runCLI(t, tc.args...)
		if code != exitUsage || strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want exit 2 and one line with %q", tc.args, code, stderr, tc.want)
		}
	}
}

// TestFormatVersion: the version names the commit and its date, and says when there is none.
func TestFormatVersion(t *testing.T) {
	set := func(kv ...string) []debug.BuildSetting {
		var out []debug.BuildSetting
		for i := 0; i < len(kv); i += 2 {
			out = append(out, debug.BuildSetting{Key: kv[i], Value: kv[i+1]})
		}
		return out
	}
	tests := []struct {
		name string
		info *debug.BuildInfo
		want string
	}{
		{"go build in a checkout", &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "v0.0.0-20261124095435-adbec1f02f0b+dirty"},
			Settings: set("vcs.revision", "adbec1f02f0b1234567890", "vcs.time", "2026-11-24T09:54:35Z", "vcs.modified", "true")},
			"v0.0.0-20261124095435-adbec1f02f0b+dirty (commit adbec1f02f0b, 2026-11-24 09:54 UTC, with uncommitted changes), go1.26.8"},
		{"clean", &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "v1.2.0"},
			Settings: set("vcs.revision", "adbec1f", "vcs.time", "2026-11-24T09:54:35Z", "vcs.modified", "false")},
			"v1.2.0 (commit adbec1f, 2026-11-24 09:54 UTC), go1.26.8"},
		{"no vcs", &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "(devel)"}},
			"(devel) (no commit recorded: built outside a git checkout or with -buildvcs=false), go1.26.8"},
		{"no build info", nil, "(unknown: no build information)"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := formatVersion(tc.info); got != tc.want {
				t.Errorf("got  %q\nwant %q", got, tc.want)
			}
		})
	}
}

// TestBenchDefaults: with no job, bench warms up first (its report is a steady run), says what
// the warm-up measured under its heading, prints both throughputs and confirms each file.
func TestBenchDefaults(t *testing.T) {
	dir := t.TempDir()
	js, csv := filepath.Join(dir, "out.json"), filepath.Join(dir, "out.csv")
	code, stdout, stderr := runCLI(t, "bench", "--num-requests", "2", "--max-new-tokens", "3", "--json", js, "--csv", csv)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	for _, want := range []string{"=== warmup 1/1 ===\nCold run, not measured: 2 requests in ", "=== cold start ===", "Requests: 2\n"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("stdout lacks %q:\n%s", want, stdout)
		}
	}
	if !regexp.MustCompile(`Throughput \(completion,total\): [0-9.]+, [0-9.]+ tokens/s`).MatchString(stdout) {
		t.Errorf("the throughput line lacks one of its two numbers:\n%s", stdout)
	}
	for _, p := range []string{js, csv} {
		if !strings.Contains(stderr, "rosetop: wrote "+p+": 2 runs, 4 requests\n") {
			t.Errorf("stderr does not confirm %s:\n%s", p, stderr)
		}
	}
}

// TestCLIMessages: the command line's answers to a new user's slips and questions: one line,
// a suggestion, the same exit status from every command for the same mistake.
func TestCLIMessages(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "no-model")
	tests := []struct {
		name   string
		args   []string
		code   int
		stderr []string // pieces of stderr
	}{
		{"typo'd command", []string{"bnech"}, exitUsage, []string{`unknown command "bnech" (did you mean "bench"?)`}},
		{"typo'd flag", []string{"bench", "--modle", "gpt2"}, exitUsage, []string{"did you mean --model?"}},
		{"generate's --json is a switch", []string{"generate", "--json", "out.json"}, exitUsage, []string{"--json is a switch", "> out.json"}},
		{"missing model in generate", []string{"generate", "--model", missing}, exitUsage, []string{"does not exist"}},
		{"missing model in bench", []string{"bench", "--model", missing}, exitUsage, []string{"does not exist"}},
		{"random weights said", []string{"generate", "--device", "cpu", "--max-new-tokens", "4"}, 0, []string{"random weights", "tokens/s", "time to first token"}},
		{"empty command", []string{""}, exitUsage, []string{`unknown command ""`}},
		{"version with arguments", []string{"version", "--json"}, exitUsage, []string{`version takes no arguments, got "--json"`}},
		{"help of no command", []string{"help", "bnech"}, exitUsage, []string{`help takes a command`, `got "bnech"`}},
		{"dataset a directory", []string{"bench", "--dataset", "sharegpt", "--dataset-path", dir}, exitUsage, []string{"--dataset-path " + dir + ": not a regular file: it is a directory"}},
		{"trace a directory", []string{"bench", "--replay", dir}, exitUsage, []string{"--replay " + dir + ": not a regular file: it is a directory"}},
		{"max seq len past the model", []string{"bench", "--device", "cpu", "--max-seq-len", "5000"}, exitUsage, []string{"--max-seq-len 5000: the model has", "positions (n_positions)"}},
		{"serve on an address not here", []string{"serve", "--device", "cpu", "--host", "192.0.2.1", "--port", "0"}, exitUsage, []string{"--host 192.0.2.1 --port 0"}},
		{"served model name not UTF-8", []string{"serve", "--served-model-name", "m\xff"}, exitUsage, []string{`--served-model-name "m\xff": not valid UTF-8`}},
		{"model path not UTF-8 as the served name", []string{"serve", "--model", dir + "/m\xff"}, exitUsage, []string{"not valid UTF-8, so it cannot be the served model id: give --served-model-name"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			code, _, stderr := runCLI(t, tc.args...)
			if code != tc.code {
				t.Errorf("exit %d, want %d; stderr %q", code, tc.code, stderr)
			}
			if code == exitUsage { // the error is the last line, after any progress
				lines := strings.Split(strings.TrimSuffix(stderr, "\n"), "\n")
				stderr = lines[len(lines)-1]
			}
			for _, want := range tc.stderr {
				if !strings.Contains(stderr, want) {
					t.Errorf("stderr %q lacks %q", stderr, want)
				}
			}
		})
	}
}

// TestEveryErrorPrinted: errors joined together (a JSON and a CSV export that both fail) are
// printed one line each, none lost, and the exit status is the usage one for bad paths.
func TestEveryErrorPrinted(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "missing")
	code, _, stderr := runCLI(t, "bench", "--num-requests", "2", "--max-new-tokens", "2",
		"--json", filepath.Join(dir, "a.json"), "--csv", filepath.Join(dir, "b.csv"))
	lines := strings.Split(strings.TrimSuffix(stderr, "\n"), "\n")
	if code != exitUsage || len(lines) != 2 || !strings.HasPrefix(lines[0], "rosetop: --json ") || !strings.HasPrefix(lines[1], "rosetop: --csv ") {
		t.Fatalf("exit %d, stderr:\n%s\nwant 2 and one line for each export", code, stderr)
	}
	for _, l := range lines {
		if !strings.Contains(l, "directory "+dir+" does not exist") {
			t.Errorf("line %q does not say the directory is missing", l)
		}
	}
}

// TestTaggedErrorPrintedWhole: an error that wraps sentinels beside its cause (a model not in the
// hub cache is also a model not found) prints as its own one line, not as its sentinels' texts;
// errors.Join still prints a line for each error.
func TestTaggedErrorPrintedWhole(t *testing.T) {
	t.Setenv("HF_HUB_OFFLINE", "1")
	t.Setenv("HF_HUB_CACHE", t.TempDir())
	code, _, stderr := runCLI(t, "generate", "--model", "openai-community/gpt2")
	if code != exitUsage || strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, "rosetop: model openai-community/gpt2 is not in the Hugging Face cache") {
		t.Errorf("exit %d, stderr %q; want exit 2 and the one line naming the model", code, stderr)
	}
	a, b := errors.New("a failed"), errors.New("b failed")
	for _, tc := range []struct {
		err  error
		want string
	}{
		{fmt.Errorf("%w: model x: %w", a, b), "rosetop: a failed: model x: b failed\n"},
		{errors.Join(a, fmt.Errorf("%w: c", b)), "rosetop: a failed\nrosetop: b failed: c\n"},
		{errors.Join(errors.Join(a), nil, b), "rosetop: a failed\nrosetop: b failed\n"},
	} {
		var out strings.Builder
		printErrors(&out, tc.err)
		if out.String() != tc.want {
			t.Errorf("printErrors(%q) = %q, want %q", tc.err, out.String(), tc.want)
		}
	}
}

// TestDashboardRefusesSaveTrace: the looping dashboard has no measured runs to write as traces
// (it would write one a window): --save-trace is refused before any terminal is looked for.
func TestDashboardRefusesSaveTrace(t *testing.T) {
	code, stdout, stderr := runCLI(t, "--save-trace", filepath.Join(t.TempDir(), "t.jsonl"))
	if code != exitUsage || stdout != "" || !strings.Contains(stderr, "--save-trace") || !strings.Contains(stderr, "use rosetop bench") {
		t.Errorf("exit %d, stderr %q; want exit 2 naming --save-trace", code, stderr)
	}
}

// fullWriter is a stdout that takes nothing (/dev/full).
type fullWriter struct{}

func (fullWriter) Write([]byte) (int, error) { return 0, errors.New("no space left on device") }

// TestStdoutWriteErrors: output stdout did not take is a failure (exit 1, said on stderr), not a
// success: help, version and generate's text alike.
func TestStdoutWriteErrors(t *testing.T) {
	for _, args := range [][]string{{"help"}, {"version"}, {"generate", "--max-new-tokens", "2"}} {
		var stderr bytes.Buffer
		code := run(context.Background(), args, strings.NewReader(""), fullWriter{}, &stderr)
		if code != exitFail || !strings.Contains(stderr.String(), "rosetop: stdout: no space left on device") {
			t.Errorf("%v: exit %d, stderr %q; want 1 and the write error", args, code, stderr.String())
		}
	}
}
