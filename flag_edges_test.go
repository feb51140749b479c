package main

import (
	"bytes"
	"context"
	"io"
	"strings"
	"testing"
)

// TestHelpCommandWriteError: rosetop help CMD prints CMD's flags on stdout; a stdout that does
// not take them is a failure (exit 1, said on stderr), as for rosetop help alone.
func TestHelpCommandWriteError(t *testing.T) {
	for _, cmd := range []string{"bench", "serve", "generate", "dashboard"} {
		var stderr bytes.Buffer
		code := run(context.Background(), []string{"help", cmd}, strings.NewReader(""), fullWriter{}, &stderr)
		if code != exitFail || !strings.Contains(stderr.String(), "rosetop: stdout: no space left on device") {
			t.Errorf("help %s: exit %d, stderr %q; want 1 and the write error", cmd, code, stderr.String())
		}
	}
}

// TestFlagValueUnderflow: a positive number too small for a float64 is not read as 0, which
// would turn --request-rate off (every request at once) instead of refusing it.
func TestFlagValueUnderflow(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--request-rate", "1e-400"}, "--request-rate 1e-400: must be 0, inf, or from 0.001 to 1e+06 requests/s"},
		{[]string{"--burstiness", "1e-400", "--request-rate", "5"}, "--burstiness 1e-400: must be from 0.001 to 10000"},
		{[]string{"--request-rate", "5", "--submit-interval-ms", "1e-400"}, "both set the arrivals: give one"},
	} {
		_, err := parseOptions(t.Context(), tc.args, io.Discard)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("parseOptions(%q) = %v, want an error containing %q", tc.args, err, tc.want)
		}
	}
	for _, zero := range []string{"0", "-0", "0e-400", "0.000", "0x0p-2000"} {
		o, err := parseOptions(t.Context(), []string{"--request-rate", zero}, io.Discard)
		if err != nil || o.RequestRate != 0 {
			t.Errorf("--request-rate %s: rate %v, error %v; want 0 (off)", zero, o.RequestRate, err)
		}
	}
}

// TestFlagTinyTopPReachesEngine: a --top-p above 0 but below float32's range stays a nucleus
// (the most likely token), not the engine's 0, which turns top-p off.
func TestFlagTinyTopPReachesEngine(t *testing.T) {
	o, err := parseOptions(t.Context(), []string{"--top-p", "1e-50", "--temperature", "1"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if p := o.sessionConfig().Workload.Sampling.TopP; !(p > 0 && p < 1) {
		t.Errorf("--top-p 1e-50 reaches the engine as %v, want a value in (0, 1)", p)
	}
	o, err = parseOptions(t.Context(), []string{"--top-p", "0"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if p := o.sessionConfig().Workload.Sampling.TopP; p != 0 {
		t.Errorf("--top-p 0 reaches the engine as %v, want 0 (off)", p)
	}
}

// TestFlagRangeRatioBelowOne: --range-ratio takes what vLLM's takes, [0, 1).
func TestFlagRangeRatioBelowOne(t *testing.T) {
	o, err := parseOptions(t.Context(), []string{"--dataset", "random", "--input-len", "4000", "--range-ratio", "0.9995"}, io.Discard)
	if err != nil || o.RangeRatio != 0.9995 {
		t.Errorf("--range-ratio 0.9995: %v, error %v; want it taken", o.RangeRatio, err)
	}
	for _, bad := range []string{"1", "-0.1", "NaN"} {
		_, err := parseOptions(t.Context(), []string{"--dataset", "random", "--range-ratio", bad}, io.Discard)
		if err == nil || !strings.Contains(err.Error(), "--range-ratio "+bad+":") || !strings.Contains(err.Error(), "below 1") {
			t.Errorf("--range-ratio %s: %v; want an error naming the flag and [0, 1)", bad, err)
		}
	}
}

// TestFlagBoolSeparateValue: a boolean flag takes its value after "=" only; given as the next
// argument (--cuda-graph false, as for serve's flags that default on) the error says how.
func TestFlagBoolSeparateValue(t *testing.T) {
	for _, args := range [][]string{{"bench", "--paged-attn", "false"}, {"serve", "--cuda-graph", "false"}, {"generate", "--json", "true"}} {
		code, _, stderr := runCLI(t, args...)
		want := args[1] + "=" + args[2]
		if code != exitUsage || !strings.Contains(stderr, want) || strings.Count(stderr, "\n") != 1 {
			t.Errorf("%q: exit %d, stderr %q; want 2 and one line naming %s", args, code, stderr, want)
		}
	}
}

// TestServeHelpSaysServeDefaults: serve's -h describes the shared flags as serve uses them.
func TestServeHelpSaysServeDefaults(t *testing.T) {
	_, stdout, _ := runCLI(t, "help", "serve")
	_, after, _ := strings.Cut(stdout, "-max-seq-len")
	line, _, _ := strings.Cut(strings.TrimPrefix(after, " value\n"), "\n")
	if strings.Contains(line, "longest prompt") || !strings.Contains(line, "positions") {
		t.Errorf("serve -h on --max-seq-len: %q; want the model's positions as the default", line)
	}
	_, after, _ = strings.Cut(stdout, "-seed")
	line, _, _ = strings.Cut(strings.TrimPrefix(after, " value\n"), "\n")
	if strings.Contains(line, "arrivals") {
		t.Errorf("serve -h on --seed: %q; a server has no arrivals of its own", line)
	}
}

// TestHelpMistypedCommand: help with a mistyped command gets a "did you mean"; help -h is help.
func TestHelpMistypedCommand(t *testing.T) {
	code, _, stderr := runCLI(t, "help", "bnch")
	if code != exitUsage || !strings.Contains(stderr, `did you mean "bench"?`) {
		t.Errorf("help bnch: exit %d, stderr %q; want 2 and a did you mean", code, stderr)
	}
	for _, h := range []string{"-h", "--help"} {
		code, stdout, stderr := runCLI(t, "help", h)
		if code != 0 || !strings.Contains(stdout, "Usage:") {
			t.Errorf("help %s: exit %d, stderr %q; want the usage", h, code, stderr)
		}
	}
}

// TestHelpDashboardNamesItsJob: the dashboard's flags are bench's, but it starts from
// --job decode-heavy; its help says so rather than leaving bench's defaults as its own.
func TestHelpDashboardNamesItsJob(t *testing.T) {
	_, stdout, _ := runCLI(t, "help", "dashboard")
	if !strings.Contains(stdout, "starts from --job decode-heavy") {
		t.Errorf("help dashboard does not say the dashboard starts from --job decode-heavy:\n%.300s", stdout)
	}
}

// TestHelpStreamIntervalZero: --stream-interval takes 0, which the help says means every token.
func TestHelpStreamIntervalZero(t *testing.T) {
	_, stdout, _ := runCLI(t, "help", "bench")
	_, after, _ := strings.Cut(stdout, "-stream-interval")
	line, _, _ := strings.Cut(strings.TrimPrefix(after, " value\n"), "\n")
	if !strings.Contains(line, "0 or 1: every token") {
		t.Errorf("bench -h on --stream-interval: %q; want what 0 means", line)
	}
}

// TestHelpDatasetFlags: every dataset flag is in bench's help with vLLM's default, and says which
// --dataset it shapes.
func TestHelpDatasetFlags(t *testing.T) {
	_, stdout, _ := runCLI(t, "help", "bench")
	for flag, def := range map[string]string{
		"random-prefix-len": "", "custom-output-len": "(default 256)", "sonnet-input-len": "(default 550)", "sonnet-output-len": "(default 150)",
		"sonnet-prefix-len": "(default 200)", "prefix-repetition-prefix-len": "(default 256)", "prefix-repetition-suffix-len": "(default 256)",
		"prefix-repetition-num-prefixes": "(default 10)", "prefix-repetition-output-len": "(default 128)",
	} {
		_, after, ok := strings.Cut(stdout, "  -"+flag+" value\n")
		line, _, _ := strings.Cut(after, "\n")
		kind := map[string]string{"random": "random", "custom": "custom", "sonnet": "sonnet", "prefix": "prefix_repetition"}[strings.SplitN(flag, "-", 2)[0]]
		if !ok || !strings.Contains(line, "--dataset "+kind+":") || !strings.Contains(line, "vLLM") || !strings.Contains(line, def) {
			t.Errorf("help on --%s: %q; want its --dataset %s, vLLM's meaning and %q", flag, line, kind, def)
		}
	}
	_, after, _ := strings.Cut(stdout, "  -dataset string\n")
	line, _, _ := strings.Cut(after, "\n")
	for _, kind := range []string{"random", "sharegpt", "jsonl", "custom", "burstgpt", "sonnet", "prefix_repetition"} {
		if !strings.Contains(line, kind) {
			t.Errorf("help on --dataset does not name %s: %q", kind, line)
		}
	}
}
