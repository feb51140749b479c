package bench

import (
	"errors"
	"flag"
	"io"
	"strings"
	"testing"

	"rosetop/sched"
)

func TestParseFlagsBadInput(t *testing.T) {
	cases := []struct {
		name string
		args []string
		want string // substring of the one-line error
	}{
		{"warmup negative", []string{"--warmup-runs", "-1"}, "--warmup-runs must be >= 0"},
		{"repeat zero", []string{"--repeat-runs", "0"}, "--repeat-runs must be >= 1"},
		{"num requests zero", []string{"--num-requests", "0"}, "--num-requests must be >= 1"},
		{"max new tokens zero", []string{"--max-new-tokens", "0"}, "--max-new-tokens must be >= 1"},
		{"interval negative", []string{"--submit-interval-ms", "-1"}, "--submit-interval-ms must be"},
		{"unknown schedule", []string{"--submit-schedule", "sometimes"}, `--submit-schedule: unknown schedule "sometimes" (valid: relative, absolute)`},
		{"unknown job", []string{"--job", "nope"}, `--job: unknown job "nope" (valid: decode-heavy, admission, prefill-heavy, paced)`},
		{"prefill above max", []string{"--max-batch-size", "8", "--prefill-max-batch-size", "9"}, "--prefill-max-batch-size (9) must be <= --max-batch-size (8)"},
		{"unknown device", []string{"--device", "tpu"}, `--device: unknown device "tpu"`},
		{"unknown policy", []string{"--policy", "random"}, `--policy: unknown policy "random"`},
		{"negative rate", []string{"--request-rate", "-2"}, "--request-rate must be >= 0"},
		{"burst quiet negative", []string{"--burst-quiet-us", "-1"}, "--burst-quiet-us must be in [0, 1000], got -1"},
		{"burst quiet too long", []string{"--burst-quiet-us", "5000"}, "--burst-quiet-us must be in [0, 1000], got 5000"},
		{"undefined flag", []string{"--frobnicate"}, "flag provided but not defined: -frobnicate"},
		{"not a number", []string{"--num-requests", "many"}, `invalid value "many" for flag -num-requests`},
		{"positional", []string{"extra"}, `unexpected argument "extra"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseFlags(tc.args, io.Discard)
			if err == nil {
				t.Fatalf("ParseFlags(%q) = nil error, want %q", tc.args, tc.want)
			}
			if !errors.Is(err, ErrBadFlag) {
				t.Errorf("error %q does not wrap ErrBadFlag", err)
			}
			if msg := err.Error(); !strings.Contains(msg, tc.want) || strings.Contains(msg, "\n") {
				t.Errorf("error = %q, want one line containing %q", msg, tc.want)
			}
		})
	}
}

func TestParseFlagsJobAndOverrides(t *testing.T) {
	cfg, err := ParseFlags([]string{"--job", "decode-heavy", "--num-requests", "8", "--max-batch-size", "4"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	want := Config{NumRequests: 8, MaxNewTokens: 256, MaxBatch: 4, PrefillMaxBatch: 4, WarmupRuns: 1, RepeatRuns: 3}
	got := Config{NumRequests: cfg.NumRequests, MaxNewTokens: cfg.MaxNewTokens, MaxBatch: cfg.MaxBatch,
		PrefillMaxBatch: cfg.PrefillMaxBatch, WarmupRuns: cfg.WarmupRuns, RepeatRuns: cfg.RepeatRuns}
	if got != want {
		t.Errorf("sizes = %+v, want %+v", got, want)
	}
	if !cfg.UniquePrompts || !cfg.Paged || !cfg.CUDAGraph || !cfg.NoStopOnEOS || !cfg.NoPrefixCache {
		t.Errorf("job flags not applied: %+v", cfg)
	}
	cfg, err = ParseFlags([]string{"--job", "paced", "--submit-schedule", "relative", "--paged-attn=false"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.SubmitSchedule != "relative" || cfg.Paged || cfg.SubmitIntervalMs != 20 || !cfg.Pretok || cfg.StreamInterval != 8 {
		t.Errorf("explicit flags must override the job: %+v", cfg)
	}
}

func TestParseFlagsDefaultsAndHelp(t *testing.T) {
	cfg, err := ParseFlags(nil, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Prompt != "Hello" || cfg.RepeatRuns != 1 || cfg.PrefillMaxBatch != cfg.MaxBatch || cfg.Device != "auto" {
		t.Errorf("defaults = %+v", cfg)
	}
	for _, rate := range []string{"inf", "0"} {
		cfg, err := ParseFlags([]string{"--request-rate", rate, "--submit-interval-ms", "3"}, io.Discard)
		if a := arrivalsOf(cfg); err != nil || a.Schedule != "relative" || a.Interval != 3e6 {
			t.Errorf("--request-rate %s: %+v %v, want the interval schedule", rate, a, err)
		}
	}
	if cfg, _ := ParseFlags([]string{"--request-rate", "50"}, io.Discard); arrivalsOf(cfg).Schedule != "poisson" || arrivalsOf(cfg).intervalMs() != 20 {
		t.Errorf("--request-rate 50: %+v", arrivalsOf(cfg))
	}
	if _, err := ParseFlags([]string{"-h"}, io.Discard); !errors.Is(err, flag.ErrHelp) {
		t.Errorf("-h: err = %v, want flag.ErrHelp", err)
	}
	var b strings.Builder
	Usage(&b)
	for _, name := range []string{"-submit-schedule", "-request-rate", "-job", "-nvtx", "no effect without a profiler"} {
		if !strings.Contains(b.String(), name) {
			t.Errorf("usage lacks %q", name)
		}
	}
}

// TestPolicyFlag: every policy the scheduler knows is a --policy value that reaches the
// scheduler's configuration, and the default is mixed.
func TestPolicyFlag(t *testing.T) {
	for _, name := range append(sched.Policies(), "") {
		args := []string{"--policy", name}
		want := name
		if name == "" {
			args, want = nil, "mixed"
		}
		cfg, err := ParseFlags(args, io.Discard)
		if err != nil {
			t.Fatalf("ParseFlags(%q): %v", args, err)
		}
		if got := schedConfig(cfg).Policy.String(); got != want {
			t.Errorf("ParseFlags(%q): the scheduler runs policy %s, want %s", args, got, want)
		}
	}
}
