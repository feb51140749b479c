package main

import (
	"errors"
	"flag"
	"io"
	"math"
	"path/filepath"
	"strings"
	"testing"

	"rosetop/sched"
)

func TestParseOptionsBadInput(t *testing.T) {
	cases := []struct {
		name string
		args []string
		want string // substring of the one-line error
	}{
		{"warmup negative", []string{"--warmup-runs", "-1"}, "--warmup-runs -1: must be from 0 to"},
		{"repeat zero", []string{"--repeat-runs", "0"}, "--repeat-runs 0: must be from 1 to"},
		{"num requests zero", []string{"--num-requests", "0"}, "--num-requests 0: must be from 1 to 100000"},
		{"num requests huge", []string{"--num-requests", "1e7"}, "--num-requests 1e7: not an integer"},
		{"num requests past the bound", []string{"--num-requests", "10000000"}, "must be from 1 to 100000"},
		{"max new tokens zero", []string{"--max-new-tokens", "0"}, "--max-new-tokens 0: must be from 1"},
		{"max new tokens 1e12", []string{"--max-new-tokens", "1000000000000"}, "--max-new-tokens 1000000000000: must be from 1 to 1048576"},
		{"max batch 1e12", []string{"--max-batch-size", "1000000000000"}, "--max-batch-size 1000000000000: must be from 1 to 4096"},
		{"int overflow", []string{"--max-batch-size", "99999999999999999999"}, "--max-batch-size 99999999999999999999: must be an integer from 1 to 4096"},
		{"prompt repeats huge", []string{"--prompt-repeats", "100000000"}, "--prompt-repeats 100000000: must be from 1 to"},
		{"prompt repeats times prompt", []string{"--prompt", "Hello world", "--prompt-repeats", "4000000"}, "more than the limit of 4194304"},
		{"interval negative", []string{"--submit-interval-ms", "-1"}, "--submit-interval-ms -1: must be from 0 to 3.6e+06"},
		{"interval NaN", []string{"--submit-interval-ms", "NaN"}, "--submit-interval-ms NaN: must be a finite number"},
		{"interval huge", []string{"--submit-interval-ms", "1e308"}, "must be from 0 to 3.6e+06"},
		{"interval 31 years", []string{"--submit-interval-ms", "1e12"}, "must be from 0 to 3.6e+06"},
		{"temperature NaN", []string{"--temperature", "NaN"}, "--temperature NaN: must be a finite number"},
		{"temperature Inf", []string{"--temperature", "+Inf"}, "--temperature +Inf: must be a finite number"},
		{"top-p NaN", []string{"--top-p", "nan"}, "--top-p nan: must be a finite number"},
		{"top-p above one", []string{"--top-p", "1.5"}, "--top-p 1.5: must be from 0 to 1"},
		{"memory fraction NaN", []string{"--gpu-memory-fraction", "NaN"}, "--gpu-memory-fraction NaN: must be a finite number"},
		{"rate tiny", []string{"--request-rate", "1e-300"}, "--request-rate 1e-300: must be 0, inf, or from 0.001 to 1e+06 requests/s"},
		{"rate NaN", []string{"--request-rate", "NaN"}, "--request-rate NaN: must be a finite number"},
		{"rate negative", []string{"--request-rate", "-2"}, "--request-rate -2: must be 0, inf"},
		{"rate and interval", []string{"--request-rate", "5", "--submit-interval-ms", "3"}, "both set the arrivals: give one"},
		{"seconds nonsense", []string{"--ramp-up-s", "1y"}, "--ramp-up-s 1y: not seconds (30) or a duration (30s, 2m)"},
		{"seconds past the bound", []string{"--ramp-up-s", "48h"}, "--ramp-up-s 48h: must be from 0 to 86400 seconds"},
		{"threads huge", []string{"--threads", "1000000000000"}, "--threads 1000000000000: must be from 0 to"},
		{"tokenize workers huge", []string{"--tokenize-workers", "1000000000000"}, "--tokenize-workers 1000000000000: must be from 0 to"},
		{"unknown schedule", []string{"--submit-schedule", "sometimes"}, `--submit-schedule: unknown schedule "sometimes" (valid: relative, absolute)`},
		{"unknown job", []string{"--job", "nope"}, `--job: unknown job "nope" (valid: decode-heavy, admission, prefill-heavy, paced)`},
		{"prefill above max", []string{"--max-batch-size", "8", "--prefill-max-batch-size", "9"}, "--prefill-max-batch-size 9 exceeds --max-batch-size 8"},
		{"unknown device", []string{"--device", "tpu"}, `--device: unknown device "tpu"`},
		{"unknown policy", []string{"--policy", "random"}, `--policy: unknown policy "random"`},
		{"burst quiet negative", []string{"--burst-quiet-us", "-1"}, "--burst-quiet-us -1: must be from 0 to 1000"},
		{"burst quiet too long", []string{"--burst-quiet-us", "5000"}, "--burst-quiet-us 5000: must be from 0 to 1000"},
		{"undefined flag", []string{"--frobnicate"}, "unknown flag --frobnicate (see -h for the flags)"},
		{"misspelt flag", []string{"--modle", "gpt2"}, "unknown flag --modle (did you mean --model?)"},
		{"misspelt long flag", []string{"--max-new-token", "3"}, "did you mean --max-new-tokens?"},
		{"not a number", []string{"--num-requests", "many"}, "--num-requests many: not an integer from 1 to 100000"},
		{"float not a number", []string{"--temperature", "warm"}, "--temperature warm: not a number from 0 to 100"},
		{"seed negative", []string{"--seed", "-1"}, "--seed -1: not an integer from 0 to 18446744073709551615"},
		{"seed empty", []string{"--seed", ""}, `--seed "": not an integer from 0 to`},
		{"seed past uint64", []string{"--seed", "18446744073709551616"}, "--seed 18446744073709551616: not an integer from 0 to"},
		{"bool not a bool", []string{"--paged-attn=maybe"}, "--paged-attn=maybe: not a boolean (true or false"},
		{"empty prompt", []string{"--prompt", ""}, `--prompt "": empty`},
		{"unique prompts past the bound", []string{"--unique-prompts", "--prompt-repeats", "800000", "--num-requests", "50"},
			"--unique-prompts gives each of --num-requests 50 its own copy of a 4000000-byte prompt"},
		{"positional", []string{"extra"}, `unexpected argument "extra"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parseOptions(t.Context(), tc.args, io.Discard)
			if err == nil {
				t.Fatalf("parseOptions(%q) = nil error, want %q", tc.args, tc.want)
			}
			if !errors.Is(err, errBadFlag) {
				t.Errorf("error %q does not wrap errBadFlag", err)
			}
			if msg := err.Error(); !strings.Contains(msg, tc.want) || strings.Contains(msg, "\n") {
				t.Errorf("error = %q, want one line containing %q", msg, tc.want)
			}
		})
	}
}

func TestParseOptionsJobAndOverrides(t *testing.T) {
	o, err := parseOptions(t.Context(), []string{"--job", "decode-heavy", "--num-requests", "8", "--max-batch-size", "4"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	type sizes struct{ req, newTok, batch, prefill, warm, rep int }
	got := sizes{o.NumRequests, o.MaxNewTokens, o.MaxBatch, o.PrefillMaxBatch, o.WarmupRuns, o.RepeatRuns}
	if want := (sizes{8, 256, 4, 4, 1, 3}); got != want {
		t.Errorf("sizes = %+v, want %+v", got, want)
	}
	if !o.UniquePrompts || !o.Paged || !o.CUDAGraph || !o.NoStopOnEOS || !o.NoPrefixCache {
		t.Errorf("job flags not applied: %+v", o)
	}
	o, err = parseOptions(t.Context(), []string{"--job", "paced", "--submit-schedule", "relative", "--paged-attn=false"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if o.SubmitSchedule != "relative" || o.Paged || o.SubmitIntervalMs != 20 || !o.Pretok || o.StreamInterval != 8 {
		t.Errorf("explicit flags must override the job: %+v", o)
	}
	// An explicit rate replaces the job's interval instead of conflicting with it.
	o, err = parseOptions(t.Context(), []string{"--job", "paced", "--request-rate", "40"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if a := o.sessionConfig().Arrivals; a.Schedule != "poisson" || a.Rate != 40 {
		t.Errorf("--job paced --request-rate 40: arrivals %+v", a)
	}
	// --request-rate 0 is off: the job's interval schedule stays.
	o, err = parseOptions(t.Context(), []string{"--job", "paced", "--request-rate", "0"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if o.SubmitIntervalMs != 20 || o.sessionConfig().Arrivals.Schedule == "poisson" {
		t.Errorf("--job paced --request-rate 0: interval %g ms, arrivals %+v; want the job's 20 ms", o.SubmitIntervalMs, o.sessionConfig().Arrivals)
	}
}

func TestParseOptionsDefaultsAndHelp(t *testing.T) {
	o, err := parseOptions(t.Context(), nil, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if o.Prompt != "Hello" || o.RepeatRuns != 1 || o.PrefillMaxBatch != o.MaxBatch || o.Device != "auto" {
		t.Errorf("defaults = %+v", o)
	}
	o, err = parseOptions(t.Context(), []string{"--request-rate", "0", "--submit-interval-ms", "3"}, io.Discard)
	if a := o.sessionConfig().Arrivals; err != nil || a.Schedule != "relative" || a.Interval != 3e6 {
		t.Errorf("--request-rate 0: %+v %v, want the interval schedule", a, err)
	}
	for _, args := range [][]string{{"--request-rate", "inf"}, {"--request-rate", "inf", "--job", "paced"}} {
		o, err = parseOptions(t.Context(), args, io.Discard)
		if a := o.sessionConfig().Arrivals; err != nil || a.Schedule == "poisson" || a.Interval != 0 {
			t.Errorf("%q: %+v %v, want every request at once", args, a, err)
		}
	}
	_, err = parseOptions(t.Context(), []string{"--request-rate", "inf", "--submit-interval-ms", "3"}, io.Discard)
	if want := "--request-rate inf and --submit-interval-ms 3 both set the arrivals"; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("--request-rate inf --submit-interval-ms 3: %v, want %q", err, want)
	}
	o, err = parseOptions(t.Context(), []string{"--request-rate", "50"}, io.Discard)
	if a := o.sessionConfig().Arrivals; err != nil || a.Schedule != "poisson" || a.Rate != 50 || math.IsNaN(a.Rate) {
		t.Errorf("--request-rate 50: %+v %v", a, err)
	}
	if _, err := parseOptions(t.Context(), []string{"-h"}, io.Discard); !errors.Is(err, flag.ErrHelp) {
		t.Errorf("-h: err = %v, want flag.ErrHelp", err)
	}
	var b strings.Builder
	benchUsage(&b)
	for _, name := range []string{"-submit-schedule", "-request-rate", "-job", "-nvtx", "no effect without a profiler", "[1..100000]"} {
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
		o, err := parseOptions(t.Context(), args, io.Discard)
		if err != nil {
			t.Fatalf("parseOptions(%q): %v", args, err)
		}
		if got := o.sessionConfig().Sched.Policy.String(); got != want {
			t.Errorf("parseOptions(%q): the scheduler runs policy %s, want %s", args, got, want)
		}
	}
}

func TestEditDistance(t *testing.T) {
	cases := []struct {
		a, b string
		want int
	}{{"", "", 0}, {"model", "model", 0}, {"modle", "model", 1}, {"bnech", "bench", 1}, {"abc", "", 3}, {"kitten", "sitting", 3}}
	for _, tc := range cases {
		if got := editDistance(tc.a, tc.b); got != tc.want {
			t.Errorf("editDistance(%q, %q) = %d, want %d", tc.a, tc.b, got, tc.want)
		}
	}
}

// TestEveryNumericFlag: every numeric flag, given -1, 0, a huge value, NaN or an infinity, either
// takes a value within its bounds or fails with one line that names it; none panics.
func TestEveryNumericFlag(t *testing.T) {
	o := defaultOptions()
	fs := newFlagSet(&o)
	n := 0
	fs.VisitAll(func(f *flag.Flag) {
		switch f.Value.(type) {
		case intFlag, floatFlag, rateFlag, uint64Flag:
		default:
			return
		}
		n++
		for _, v := range []string{"-1", "0", "1e12", "1000000000000", "NaN", "Inf", "-Inf", "1e308", "1e-300", "0x10", " 7 "} {
			args := []string{"--" + f.Name, v}
			o, err := parseOptions(t.Context(), args, io.Discard)
			if err != nil {
				if msg := err.Error(); !strings.Contains(msg, "--"+f.Name) || strings.Contains(msg, "\n") {
					t.Errorf("%q: error %q does not name the flag on one line", args, msg)
				}
				continue
			}
			if err := o.sessionConfig().Validate(); err != nil {
				t.Errorf("%q: accepted, but the session refuses it: %v", args, err)
			}
			if got := fs.Lookup(f.Name); got == nil {
				t.Fatal("flag vanished")
			}
		}
	})
	if n < 15 {
		t.Errorf("only %d numeric flags found", n)
	}
}

// FuzzParseOptions: any command line gives options the session accepts, or a one-line error;
// never a panic. Arguments are separated by NUL bytes.
func FuzzParseOptions(f *testing.F) {
	o := defaultOptions()
	newFlagSet(&o).VisitAll(func(fl *flag.Flag) {
		for _, v := range []string{"-1", "0", "1e12", "NaN", "Inf", "x"} {
			f.Add("--" + fl.Name + "\x00" + v)
		}
	})
	f.Add("--job\x00decode-heavy\x00--max-batch-size\x002")
	f.Add("--job\x00paced\x00--request-rate\x00inf")
	f.Add("--replay\x00a\nb.jsonl") // a file name with a newline: still one line
	f.Fuzz(func(t *testing.T, line string) {
		args := strings.Split(line, "\x00")
		o, err := parseOptions(t.Context(), args, io.Discard)
		if err != nil {
			if msg := err.Error(); strings.Contains(msg, "\n") {
				t.Errorf("%q: error on several lines: %q", args, msg)
			}
			if !errors.Is(err, errBadFlag) && !errors.Is(err, flag.ErrHelp) {
				t.Errorf("%q: error %q is not a command-line error", args, err)
			}
			return
		}
		cfg := o.sessionConfig()
		if err := cfg.Validate(); err != nil {
			t.Errorf("%q: accepted, but the session refuses it: %v", args, err)
		}
		w := cfg.Workload
		promptBytes := len(w.Prompt) * w.PromptRepeats
		if w.NumRequests > maxRequests || w.MaxNewTokens > maxNewTokens || cfg.Sched.MaxBatch > maxBatch || promptBytes > maxPromptBytes ||
			(w.UniquePrompts && promptBytes*w.NumRequests > maxUniqueBytes) {
			t.Errorf("%q: a size past its bound was accepted: %+v", args, w)
		}
	})
}

// TestSeedFlag: --seed parses as the other integer flags do, to its full uint64 range.
func TestSeedFlag(t *testing.T) {
	for in, want := range map[string]uint64{"7": 7, " 7 ": 7, "0x10": 16, "18446744073709551615": math.MaxUint64} {
		o, err := parseOptions(t.Context(), []string{"--seed", in}, io.Discard)
		if err != nil || o.Seed != want {
			t.Errorf("--seed %q: %d, %v; want %d", in, o.Seed, err, want)
		}
	}
}

// TestSecondsFlags: a flag in seconds takes a number or a duration.
func TestSecondsFlags(t *testing.T) {
	for in, want := range map[string]float64{"30": 30, "0.5": 0.5, "90s": 90, "2m": 120, " 1m30s ": 90, "250ms": 0.25} {
		o, err := parseOptions(t.Context(), []string{"--request-rate", "4", "--ramp-up-s", in}, io.Discard)
		if err != nil || o.RampUpS != want {
			t.Errorf("--ramp-up-s %q: %v s, %v; want %v s", in, o.RampUpS, err, want)
		}
	}
}

// TestRequestRateInfJSON: `bench --request-rate inf --json` writes its config (JSON has no
// infinity: "inf", as vLLM writes it) and a finite rate stays a number.
func TestRequestRateInfJSON(t *testing.T) {
	for rate, want := range map[string]any{"inf": "inf", "Infinity": "inf", "2.5": 2.5} {
		path := filepath.Join(t.TempDir(), "b.json")
		code, _, stderr := runCLI(t, "bench", "--request-rate", rate, "--num-requests", "2", "--max-new-tokens", "2", "--warmup-runs", "0", "--json", path)
		if code != 0 {
			t.Fatalf("--request-rate %s: exit %d: %s", rate, code, stderr)
		}
		var rep struct {
			Config struct {
				RequestRate any `json:"request_rate"`
			} `json:"config"`
		}
		readJSON(t, path, &rep)
		if rep.Config.RequestRate != want {
			t.Errorf("--request-rate %s: config.request_rate %#v, want %#v", rate, rep.Config.RequestRate, want)
		}
	}
}
