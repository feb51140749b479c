package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

func tempFile(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestLoadFlagsBadInput: every bad value of the load flags is a one-line error naming it,
// before any model is loaded.
func TestLoadFlagsBadInput(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "missing.json")
	empty := tempFile(t, "empty.jsonl", "")
	notJSON := tempFile(t, "bad.json", "{not json")
	badLine := tempFile(t, "bad.jsonl", "{\"prompt\": \"hi\", \"output_len\": 3}\n{\"output_len\": 3}\n")
	trace := tempFile(t, "t.jsonl", "{\"timestamp\": 0, \"input_length\": 3, \"output_length\": 2, \"hash_ids\": [0]}\n")
	badTrace := tempFile(t, "bt.jsonl", "{\"timestamp\": 9, \"input_length\": 3, \"output_length\": 2}\n{\"timestamp\": 1, \"input_length\": 3, \"output_length\": 2}\n")
	custom := tempFile(t, "c.jsonl", "{\"prompt\": \"hi\", \"output_tokens\": 3}\n{\"prompt\": \"there\"}\n")
	burst := tempFile(t, "b.csv", "Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n1,GPT-4,5,7,12,API log\n")
	burstNoCol := tempFile(t, "nc.csv", "Timestamp,Model,Request tokens,Output tokens\n1,GPT-4,5,7\n")
	burstBadLen := tempFile(t, "bl.csv", "Timestamp,Model,Request tokens,Response tokens\n1,GPT-4,5,7\n2,GPT-4,five,7\n")
	burstNoRows := tempFile(t, "nr.csv", "Timestamp,Model,Request tokens,Response tokens\n1,ChatGPT,5,7\n2,GPT-4,5,0\n")
	sonnet := tempFile(t, "s.txt", "Shall I compare thee to a summer's day?\nThou art more lovely and more temperate:\n")
	sonnetBad := tempFile(t, "sb.txt", "fine\n\xff\n")
	cases := []struct {
		name string
		args []string
		want string
	}{
		{"unknown SLO key", []string{"--goodput", "ttft:100,itl:5"}, `--goodput: unknown key "itl" (valid: ttft, tpot, e2el)`},
		{"negative target", []string{"--goodput", "tpot:-5"}, "--goodput: tpot:-5: a target must be >= 0 ms"},
		{"NaN target", []string{"--goodput", "e2el:NaN"}, "--goodput: e2el:NaN: the target is not a finite number"},
		{"empty goodput", []string{"--goodput", ""}, "--goodput: empty"},
		{"malformed goodput", []string{"--goodput", "ttft=5"}, `--goodput: "ttft=5" is not KEY:MS`},
		{"burstiness zero", []string{"--request-rate", "5", "--burstiness", "0"}, "--burstiness 0: must be from 0.001 to 10000"},
		{"burstiness negative", []string{"--request-rate", "5", "--burstiness", "-1"}, "--burstiness -1: must be from 0.001"},
		{"burstiness subnormal", []string{"--request-rate", "0.001", "--burstiness", "5e-324"}, "--burstiness 5e-324: must be from 0.001 to 10000"},
		{"burstiness NaN", []string{"--request-rate", "5", "--burstiness", "NaN"}, "--burstiness NaN: must be a finite number"},
		{"burstiness without a rate", []string{"--burstiness", "2"}, "--burstiness shapes the gaps of --request-rate"},
		{"ramp-up without a rate", []string{"--ramp-up-s", "3"}, "--ramp-up-s ramps --request-rate up"},
		{"ramp-up negative", []string{"--request-rate", "5", "--ramp-up-s", "-3"}, "--ramp-up-s -3: must be from 0 to"},
		{"max concurrency negative", []string{"--max-concurrency", "-1"}, "--max-concurrency -1: must be from 0 to 100000"},
		{"unknown dataset", []string{"--dataset", "tsv"}, `--dataset: unknown dataset "tsv" (valid: random, sharegpt, jsonl, custom, burstgpt, sonnet, prefix_repetition)`},
		{"dataset without its file", []string{"--dataset", "sharegpt"}, "--dataset sharegpt needs --dataset-path FILE"},
		{"missing dataset file", []string{"--dataset", "sharegpt", "--dataset-path", missing}, "--dataset sharegpt --dataset-path " + missing + ": no such file or directory"},
		{"empty dataset file", []string{"--dataset", "jsonl", "--dataset-path", empty}, ": no lines"},
		{"malformed sharegpt", []string{"--dataset", "sharegpt", "--dataset-path", notJSON}, "not ShareGPT JSON"},
		{"malformed jsonl line", []string{"--dataset", "jsonl", "--dataset-path", badLine}, `line 2: no "prompt" text`},
		{"random with a path", []string{"--dataset", "random", "--dataset-path", trace}, "--dataset random makes its prompts"},
		{"path without dataset", []string{"--dataset-path", trace}, "--dataset-path needs --dataset sharegpt, jsonl, custom, burstgpt or sonnet"},
		{"range ratio one", []string{"--dataset", "random", "--range-ratio", "1"}, "--range-ratio 1: must be at least 0 and below 1"},
		{"input len without random", []string{"--input-len", "8"}, "--input-len shapes --dataset random: give --dataset random, or drop it"},
		{"input len zero", []string{"--dataset", "random", "--input-len", "0"}, "--input-len 0 with --range-ratio 0 can sample an empty prompt: give a longer --input-len, a smaller --range-ratio or a --random-prefix-len"},
		{"range ratio with sharegpt", []string{"--dataset", "sharegpt", "--dataset-path", notJSON, "--range-ratio", "0.5"}, "--range-ratio shapes --dataset random, not --dataset sharegpt: drop it"},
		{"random prefix without random", []string{"--random-prefix-len", "8"}, "--random-prefix-len shapes --dataset random: give --dataset random, or drop it"},
		{"random prefix with replay", []string{"--replay", trace, "--random-prefix-len", "8"}, "--random-prefix-len shapes --dataset random, and --replay makes the prompts: drop it"},
		{"random prefix negative", []string{"--dataset", "random", "--random-prefix-len", "-1"}, "--random-prefix-len -1: must be from 0 to 1048576"},
		{"custom without its file", []string{"--dataset", "custom"}, "--dataset custom needs --dataset-path FILE"},
		{"custom missing file", []string{"--dataset", "custom", "--dataset-path", missing}, "--dataset custom --dataset-path " + missing + ": no such file or directory"},
		{"custom bad line", []string{"--dataset", "custom", "--dataset-path", badLine}, `--dataset custom --dataset-path ` + badLine + `: line 2: no "prompt" text`},
		{"custom output zero", []string{"--dataset", "custom", "--dataset-path", custom, "--custom-output-len", "0"}, `--custom-output-len 0: want -1 (each line's "output_tokens") or from 1 to 1048576`},
		{"custom output below -1", []string{"--dataset", "custom", "--dataset-path", custom, "--custom-output-len", "-2"}, "--custom-output-len -2: must be from -1 to 1048576"},
		{"custom line without output", []string{"--dataset", "custom", "--dataset-path", custom, "--custom-output-len", "-1"}, `--dataset custom --dataset-path ` + custom + `: line 2 has no "output_tokens": give --custom-output-len N for the lines without one`},
		{"custom two output flags", []string{"--dataset", "custom", "--dataset-path", custom, "--custom-output-len", "5", "--output-len", "6"}, "--output-len and --custom-output-len both set the output length: give one"},
		{"custom flag for jsonl", []string{"--dataset", "jsonl", "--dataset-path", badLine, "--custom-output-len", "5"}, "--custom-output-len shapes --dataset custom, not --dataset jsonl: drop it"},
		{"burstgpt without its file", []string{"--dataset", "burstgpt"}, "--dataset burstgpt needs --dataset-path FILE"},
		{"burstgpt missing file", []string{"--dataset", "burstgpt", "--dataset-path", missing}, "--dataset burstgpt --dataset-path " + missing + ": no such file or directory"},
		{"burstgpt wrong column", []string{"--dataset", "burstgpt", "--dataset-path", burstNoCol}, `--dataset burstgpt --dataset-path ` + burstNoCol + `: no "Response tokens" column: want BurstGPT's header Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type`},
		{"burstgpt non-integer length", []string{"--dataset", "burstgpt", "--dataset-path", burstBadLen}, `: line 3: "Request tokens" is "five", want an integer from 0 to 16777216`},
		{"burstgpt no rows kept", []string{"--dataset", "burstgpt", "--dataset-path", burstNoRows}, `: no row has Model "GPT-4" and Response tokens above 0 (the rows vLLM's BurstGPT dataset keeps)`},
		{"burstgpt a JSON file", []string{"--dataset", "burstgpt", "--dataset-path", notJSON}, `: no "Model" column: want BurstGPT's header`},
		{"burstgpt output len", []string{"--dataset", "burstgpt", "--dataset-path", burst, "--output-len", "5"}, "--output-len: --dataset burstgpt takes each request's output length from the trace's Response tokens"},
		{"sonnet without its file", []string{"--dataset", "sonnet"}, "--dataset sonnet needs --dataset-path FILE"},
		{"sonnet not text", []string{"--dataset", "sonnet", "--dataset-path", sonnetBad}, "--dataset sonnet --dataset-path " + sonnetBad + ": line 2: not UTF-8 text"},
		{"sonnet empty", []string{"--dataset", "sonnet", "--dataset-path", empty}, "--dataset sonnet --dataset-path " + empty + ": no lines"},
		{"sonnet output len", []string{"--dataset", "sonnet", "--dataset-path", sonnet, "--output-len", "5"}, "--output-len: --dataset sonnet takes --sonnet-output-len"},
		{"sonnet input zero", []string{"--dataset", "sonnet", "--dataset-path", sonnet, "--sonnet-input-len", "0"}, "--sonnet-input-len 0: must be from 1"},
		{"sonnet flag for random", []string{"--dataset", "random", "--sonnet-prefix-len", "5"}, "--sonnet-prefix-len shapes --dataset sonnet, not --dataset random: drop it"},
		{"prefix repetition with a path", []string{"--dataset", "prefix_repetition", "--dataset-path", trace}, "--dataset prefix_repetition makes its prompts: drop --dataset-path"},
		{"prefix repetition too few requests", []string{"--dataset", "prefix_repetition", "--num-requests", "4"}, "--num-requests 4 is fewer than --prefix-repetition-num-prefixes 10: each prefix needs a request"},
		{"prefix repetition no prefixes", []string{"--dataset", "prefix_repetition", "--prefix-repetition-num-prefixes", "0"}, "--prefix-repetition-num-prefixes 0: must be from 1"},
		{"prefix repetition output zero", []string{"--dataset", "prefix_repetition", "--output-len", "0"}, "--output-len 0: --dataset prefix_repetition needs an output length from 1 to 1048576"},
		{"prefix repetition two output flags", []string{"--dataset", "prefix_repetition", "--output-len", "4", "--prefix-repetition-output-len", "6"}, "--output-len and --prefix-repetition-output-len both set the output length: give one"},
		{"prefix repetition empty prompts", []string{"--dataset", "prefix_repetition", "--prefix-repetition-prefix-len", "0", "--prefix-repetition-suffix-len", "0"}, "make empty prompts"},
		{"prefix repetition flag alone", []string{"--prefix-repetition-suffix-len", "5"}, "--prefix-repetition-suffix-len shapes --dataset prefix_repetition: give --dataset prefix_repetition, or drop it"},
		{"dataset and prompt", []string{"--dataset", "random", "--prompt", "hi"}, "drop --prompt"},
		{"missing trace", []string{"--replay", missing}, "--replay " + missing + ": no such file or directory"},
		{"empty trace", []string{"--replay", empty}, "--replay " + empty + ": no lines"},
		{"sharegpt as a trace", []string{"--replay", notJSON}, "line 1: not a trace line"},
		{"unordered trace", []string{"--replay", badTrace}, "line 2: timestamp 1 is before"},
		{"replay and rate", []string{"--replay", trace, "--request-rate", "4"}, "--replay sets the arrivals"},
		{"replay and dataset", []string{"--replay", trace, "--dataset", "random"}, "--replay and --dataset both set the prompts"},
		{"replay more than the trace", []string{"--replay", trace, "--num-requests", "2"}, "--num-requests 2: the trace"},
		{"replay speed zero", []string{"--replay", trace, "--replay-speed", "0"}, "--replay-speed 0: must be"},
		{"replay speed past a Duration", []string{"--replay", trace, "--replay-speed", "1e-12"}, "--replay-speed 1e-12: must be"},
		{"replay speed without replay", []string{"--replay-speed", "2"}, "--replay-speed needs --replay"},
		{"unknown result format", []string{"--result-format", "csv"}, `--result-format: unknown format "csv"`},
		{"vllm without json", []string{"--result-format", "vllm"}, "give --json"},
		{"detailed without vllm", []string{"--save-detailed"}, "give --result-format vllm"},
		{"percentiles without vllm", []string{"--metric-percentiles", "50"}, "--percentile-metrics and --metric-percentiles choose the statistics of vLLM's result: give --result-format vllm"},
		{"unknown metric", []string{"--json", "x.json", "--result-format", "vllm", "--percentile-metrics", "ttft,e2e"}, `--percentile-metrics: unknown metric "e2e" (valid: ttft, tpot, itl, e2el, client_queue_time, e2el_including_client_queue)`},
		{"percentile past 100", []string{"--json", "x.json", "--result-format", "vllm", "--metric-percentiles", "50,100.5"}, `--metric-percentiles: "100.5" is not a percentile from 0 to 100`},
		{"percentile not a number", []string{"--json", "x.json", "--result-format", "vllm", "--metric-percentiles", "NaN"}, `--metric-percentiles: "NaN" is not a percentile`},
		{"empty percentile", []string{"--json", "x.json", "--result-format", "vllm", "--metric-percentiles", "50,"}, `--metric-percentiles: "" is not a percentile`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parseOptions(t.Context(), tc.args, io.Discard)
			if err == nil || !errors.Is(err, errBadFlag) {
				t.Fatalf("parseOptions(%q) = %v, want a bad-flag error %q", tc.args, err, tc.want)
			}
			if msg := err.Error(); !strings.Contains(msg, tc.want) || strings.Contains(msg, "\n") {
				t.Errorf("error = %q, want one line containing %q", msg, tc.want)
			}
			code, _, stderr := runCLI(t, append([]string{"bench"}, tc.args...)...)
			if code != exitUsage || strings.Count(stderr, "\n") != 1 {
				t.Errorf("exit %d, stderr %q; want exit 2 and one line", code, stderr)
			}
		})
	}
}

// TestDatasetTooLongForTheModel: a dataset that the model cannot hold is found once the model is
// known, and is bad input too (exit 2), named in the last line.
func TestDatasetTooLongForTheModel(t *testing.T) {
	code, _, stderr := runCLI(t, "bench", "--dataset", "random", "--input-len", "2000", "--num-requests", "2")
	lines := strings.Split(strings.TrimSpace(stderr), "\n")
	if code != exitUsage || !strings.Contains(lines[len(lines)-1], "--input-len 2000 and --output-len 64") {
		t.Errorf("exit %d, stderr %q", code, stderr)
	}
}

// TestDatasetKindsTooLongForTheModel: each synthesized or file dataset that the model cannot hold
// is refused once the model is known, as bad input (exit 2), named in the last line.
func TestDatasetKindsTooLongForTheModel(t *testing.T) {
	sonnet := tempFile(t, "s.txt", "Shall I compare thee to a summer's day?\nThou art more lovely and more temperate:\n")
	burst := tempFile(t, "b.csv", "Timestamp,Model,Request tokens,Response tokens\n1,GPT-4,2000,7\n2,GPT-4,0,7\n")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--dataset", "random", "--random-prefix-len", "1000", "--input-len", "100"}, "--random-prefix-len 1000, --input-len 100 and --output-len 64 with --range-ratio 0 reach 1164 tokens, more than the model's 1024 positions"},
		{[]string{"--dataset", "sonnet", "--dataset-path", sonnet, "--sonnet-input-len", "1000"}, "--sonnet-input-len 1000 and --sonnet-output-len 150 reach 1150 tokens, more than the model's 1024 positions"},
		{[]string{"--dataset", "prefix_repetition", "--num-requests", "10", "--prefix-repetition-prefix-len", "900"}, "--prefix-repetition-prefix-len 900, -suffix-len 256 and -output-len 128 reach 1284 tokens, more than the model's 1024 positions"},
		{[]string{"--dataset", "burstgpt", "--dataset-path", burst}, "--dataset burstgpt --dataset-path " + burst + ": no GPT-4 row fits the model (a prompt of at least 1 token, and prompt + output within 1024 positions)"},
	} {
		code, _, stderr := runCLI(t, append([]string{"bench", "--num-requests", "10"}, tc.args...)...)
		lines := strings.Split(strings.TrimSpace(stderr), "\n")
		if code != exitUsage || lines[len(lines)-1] != "rosetop: "+tc.want {
			t.Errorf("%q: exit %d, stderr %q; want exit 2 and last line %q", tc.args, code, stderr, tc.want)
		}
	}
}

// TestLoadFlagsReachTheSession: the flags become the Session's config.
func TestLoadFlagsReachTheSession(t *testing.T) {
	o, err := parseOptions(t.Context(), []string{"--job", "paced", "--request-rate", "40", "--burstiness", "0.5", "--ramp-up-s", "2",
		"--max-concurrency", "8", "--goodput", "ttft:100,e2el:900", "--dataset", "random", "--input-len", "32", "--range-ratio", "0.25"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	c := o.sessionConfig()
	a := c.Arrivals
	if a.Schedule != "poisson" || a.Rate != 40 || a.Burstiness != 0.5 || a.RampUp != 2*time.Second || a.MaxConcurrency != 8 {
		t.Errorf("arrivals %+v", a)
	}
	if len(c.Goodput) != 2 || c.Goodput[1].Metric != "e2el" || c.Goodput[1].Ms != 900 {
		t.Errorf("goodput %+v", c.Goodput)
	}
	d := c.Workload.Dataset
	if d == nil || d.Kind != "random" || d.InputLen != 32 || d.OutputLen != 128 || d.RangeRatio != 0.25 {
		t.Errorf("dataset %+v, want random 32 in, the job's 128 out", d)
	}
	trace := tempFile(t, "t.jsonl", "{\"timestamp\": 0, \"input_length\": 3, \"output_length\": 2}\n{\"timestamp\": 10, \"input_length\": 4, \"output_length\": 2}\n")
	o, err = parseOptions(t.Context(), []string{"--job", "paced", "--replay", trace, "--replay-speed", "4"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	c = o.sessionConfig()
	if c.Workload.NumRequests != 2 || c.Arrivals.Schedule != "trace" || len(c.Arrivals.Offsets) != 2 || c.Arrivals.Offsets[1] != 2500*time.Microsecond {
		t.Errorf("replay: %d requests, arrivals %+v", c.Workload.NumRequests, c.Arrivals)
	}
}

// TestSaveTraceAndReplayCLI: `rosetop bench --request-rate R --save-trace F` then
// `rosetop bench --replay F`: the replay's submit targets are the saved trace's timestamps, which
// are the first run's submit offsets to the nearest ms, so the replay reproduces them within
// 1 ms; the lengths are the saved ones. The targets are what the scheduler was asked for, so
// this holds on a loaded machine too.
func TestSaveTraceAndReplayCLI(t *testing.T) {
	dir := t.TempDir()
	trace, j1, j2 := filepath.Join(dir, "t.jsonl"), filepath.Join(dir, "a.json"), filepath.Join(dir, "b.json")
	code, _, stderr := runCLI(t, "bench", "--request-rate", "400", "--burstiness", "0.7", "--num-requests", "24", "--max-new-tokens", "3",
		"--unique-prompts", "--no-stop-on-eos", "--save-trace", trace, "--json", j1)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	code, out, stderr := runCLI(t, "bench", "--replay", trace, "--json", j2, "--result-format", "vllm", "--save-detailed")
	if code != 0 {
		t.Fatalf("replay: exit %d: %s", code, stderr)
	}
	if !strings.Contains(out, " / trace") {
		t.Errorf("report does not name the trace schedule:\n%s", out)
	}
	type rec struct {
		PromptTokens   int      `json:"prompt_tokens"`
		SubmitStartMs  float64  `json:"submit_start_ms"`
		SubmitTargetMs *float64 `json:"submit_target_ms"`
	}
	var first struct {
		Runs []struct {
			Warmup   bool  `json:"warmup"`
			Requests []rec `json:"requests"`
		} `json:"runs"`
	}
	data, _ := os.ReadFile(j1)
	if err := json.Unmarshal(data, &first); err != nil {
		t.Fatal(err)
	}
	var orig []rec // the measured run's requests: the trace is saved from it, not from the warm-up
	for _, r := range first.Runs {
		if !r.Warmup && orig == nil {
			orig = r.Requests
		}
	}
	var saved []struct {
		Timestamp    float64 `json:"timestamp"`
		InputLength  int     `json:"input_length"`
		OutputLength int     `json:"output_length"`
	}
	f, err := os.Open(trace)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for sc := bufio.NewScanner(f); sc.Scan(); {
		var l struct {
			Timestamp    float64 `json:"timestamp"`
			InputLength  int     `json:"input_length"`
			OutputLength int     `json:"output_length"`
		}
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatal(err)
		}
		saved = append(saved, l)
	}
	var replay struct {
		InputLens  []int     `json:"input_lens"`
		OutputLens []int     `json:"output_lens"`
		StartTimes []float64 `json:"start_times"`
		Completed  int       `json:"completed"`
	}
	data, _ = os.ReadFile(j2)
	if err := json.Unmarshal(data, &replay); err != nil {
		t.Fatal(err)
	}
	if len(saved) != 24 || len(orig) != 24 || replay.Completed != 24 {
		t.Fatalf("%d saved lines, %d first-run requests, %d replayed", len(saved), len(orig), replay.Completed)
	}
	for i := range saved {
		if off := orig[i].SubmitStartMs - orig[0].SubmitStartMs; math.Abs(saved[i].Timestamp-off) > 0.5 {
			t.Errorf("line %d: timestamp %v ms, the run submitted at +%.3f ms", i, saved[i].Timestamp, off)
		}
		if replay.InputLens[i] != saved[i].InputLength || replay.OutputLens[i] != saved[i].OutputLength || saved[i].OutputLength != 3 {
			t.Errorf("request %d: replayed %d/%d tokens, saved %d/%d", i, replay.InputLens[i], replay.OutputLens[i], saved[i].InputLength, saved[i].OutputLength)
		}
	}
	// The replay's due times: rosetop's own JSON of the same replay records them.
	j3 := filepath.Join(dir, "c.json")
	if code, _, stderr := runCLI(t, "bench", "--replay", trace, "--json", j3); code != 0 {
		t.Fatalf("replay: exit %d: %s", code, stderr)
	}
	var third struct {
		Runs []struct {
			Warmup   bool  `json:"warmup"`
			Requests []rec `json:"requests"`
		} `json:"runs"`
	}
	data, _ = os.ReadFile(j3)
	if err := json.Unmarshal(data, &third); err != nil {
		t.Fatal(err)
	}
	reqs := third.Runs[len(third.Runs)-1].Requests
	worst := 0.0
	for i, r := range reqs {
		off := *r.SubmitTargetMs - *reqs[0].SubmitTargetMs
		worst = max(worst, math.Abs(off-(orig[i].SubmitStartMs-orig[0].SubmitStartMs)))
	}
	if worst > 1 {
		t.Errorf("replayed due times are up to %.3f ms off the recorded offsets", worst)
	}
	t.Logf("replayed due times within %.3f ms of the recorded run's submit offsets", worst)
}

// TestSaveTraceRunFiles: with several measured runs --save-trace writes FILE-runK.jsonl, so those
// are the paths checked before the run: one taken by a directory or by another output is refused,
// exit 2, before anything runs or is written.
func TestSaveTraceRunFiles(t *testing.T) {
	dir := t.TempDir()
	trace := filepath.Join(dir, "t.jsonl")
	if err := os.Mkdir(filepath.Join(dir, "t-run2.jsonl"), 0o755); err != nil {
		t.Fatal(err)
	}
	run := []string{"bench", "--num-requests", "2", "--max-new-tokens", "2", "--warmup-runs", "0", "--repeat-runs", "2", "--save-trace", trace}
	for _, tc := range []struct {
		name  string
		extra []string
		want  string
	}{
		{"a directory", nil, "--save-trace " + filepath.Join(dir, "t-run2.jsonl") + ": cannot write there: "},
		{"another output", []string{"--json", filepath.Join(dir, "t-run1.jsonl")}, "--json and --save-trace name the same file " + filepath.Join(dir, "t-run1.jsonl")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, stdout, stderr := runCLI(t, append(run, tc.extra...)...)
			if code != exitUsage || stdout != "" || strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, tc.want) {
				t.Errorf("exit %d, stdout %q, stderr %q; want exit 2, nothing run, one line with %q", code, stdout, stderr, tc.want)
			}
		})
	}
	if names, _ := filepath.Glob(filepath.Join(dir, "*")); len(names) != 1 {
		t.Errorf("files written before the run: %v", names)
	}
}

// TestOutputOverInput: an output naming the dataset or trace the run reads (through a link too)
// is refused before the run, and the input is left as it was.
func TestOutputOverInput(t *testing.T) {
	dir := t.TempDir()
	data, trace := filepath.Join(dir, "in.jsonl"), filepath.Join(dir, "in.trace")
	lines := map[string]string{data: `{"prompt": "Hello there", "output_len": 2}` + "\n",
		trace: `{"timestamp": 0, "input_length": 4, "output_length": 2, "hash_ids": [1]}` + "\n"}
	for p, l := range lines {
		if err := os.WriteFile(p, []byte(l), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	link := filepath.Join(dir, "link.trace")
	if err := os.Symlink(trace, link); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"json over the dataset", []string{"--dataset", "jsonl", "--dataset-path", data, "--json", data}, "--json " + data + " is the --dataset-path file this run reads"},
		{"trace over the trace", []string{"--replay", trace, "--save-trace", trace}, "--save-trace " + trace + " is the --replay file this run reads"},
		{"csv over a link to the trace", []string{"--replay", trace, "--csv", link}, "--csv " + link + " is the --replay file this run reads"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, stdout, stderr := runCLI(t, append([]string{"bench", "--warmup-runs", "0", "--num-requests", "1", "--max-new-tokens", "2"}, tc.args...)...)
			if code != exitUsage || stdout != "" || strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, tc.want) {
				t.Errorf("exit %d, stdout %q, stderr %q; want exit 2 and one line with %q", code, stdout, stderr, tc.want)
			}
		})
	}
	for p, l := range lines {
		if b, _ := os.ReadFile(p); string(b) != l {
			t.Errorf("%s was changed: %q", p, b)
		}
	}
}

// TestOutputIsStdout: an output that is stdout, when stdout is a file or a pipe, is refused (the
// report would be written into it); on a terminal-like stdout, or any other file, it is not.
func TestOutputIsStdout(t *testing.T) {
	dir := t.TempDir()
	out, err := os.Create(filepath.Join(dir, "out.txt"))
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	pipePath := fmt.Sprintf("/proc/self/fd/%d", w.Fd())
	if _, err := os.Stat(pipePath); err != nil {
		t.Skipf("no /proc/self/fd: %v", err)
	}
	other := filepath.Join(dir, "other.rec")
	for _, tc := range []struct {
		name   string
		record string
		stdout io.Writer
		want   string // "": accepted
	}{
		{"the file stdout is", out.Name(), out, "--record " + out.Name() + " is standard output, where the report goes: give a file"},
		{"the pipe stdout is", pipePath, w, "--record " + pipePath + " is standard output"},
		{"another file", other, out, ""},
		{"stdout not a file", out.Name(), &strings.Builder{}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o, err := parseOptions(t.Context(), []string{"--record", tc.record}, io.Discard)
			if err != nil {
				t.Fatal(err)
			}
			err = checkOutputs(o, tc.stdout)
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("refused: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("got %v, want %q", err, tc.want)
			}
		})
	}
}

// TestSignalWhileReadingDataset: a signal while a dataset or trace file is read ends the command
// as an interrupt (exit 130), not as a bad --dataset-path or --replay file.
func TestSignalWhileReadingDataset(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	jsonl := tempFile(t, "d.jsonl", "{\"prompt\": \"hi\", \"output_len\": 2}\n")
	trace := tempFile(t, "t.jsonl", "{\"timestamp\": 0, \"input_length\": 3, \"output_length\": 2}\n")
	for _, args := range [][]string{
		{"bench", "--dataset", "jsonl", "--dataset-path", jsonl},
		{"bench", "--replay", trace},
		{"sweep", "--request-rates", "1,2", "--dataset", "jsonl", "--dataset-path", jsonl, "--out-dir", t.TempDir()},
	} {
		var stdout, stderr strings.Builder
		if code := run(ctx, args, strings.NewReader(""), &stdout, &stderr); code != exitInterrupted || stderr.String() != "rosetop: interrupted\n" {
			t.Errorf("%q: exit %d, stderr %q; want 130 and the interrupt", args, code, stderr.String())
		}
	}
}

// TestGoodputVLLMForm: --goodput takes vLLM's pairs as separate arguments too, in either flag
// spelling, and leaves the other arguments as they were.
func TestGoodputVLLMForm(t *testing.T) {
	for _, args := range [][]string{
		{"--goodput", "ttft:100", "tpot:20", "e2el:900", "--request-rate", "5"},
		{"-goodput=ttft:100", "tpot:20", "e2el:900", "--request-rate", "5"},
		{"--request-rate", "5", "--goodput", "ttft:100,tpot:20", "e2el:900"},
	} {
		o, err := parseOptions(t.Context(), args, io.Discard)
		if err != nil {
			t.Fatalf("%q: %v", args, err)
		}
		if g := o.sessionConfig().Goodput; len(g) != 3 || g[1].Metric != "tpot" || g[2].Ms != 900 || o.sessionConfig().Arrivals.Rate != 5 {
			t.Errorf("%q: goodput %+v", args, g)
		}
	}
	if _, err := parseOptions(t.Context(), []string{"--goodput", "ttft:100", "stray"}, io.Discard); err == nil || !strings.Contains(err.Error(), `unexpected argument "stray"`) {
		t.Errorf("a stray argument after the pairs: %v", err)
	}
}

// TestVLLMPercentileFlags: --percentile-metrics and --metric-percentiles choose the statistics of
// the vLLM-format result as vLLM's flags do: the chosen metrics (a repeat once), a key per
// percentile named as vLLM names it; an empty --percentile-metrics is the default.
func TestVLLMPercentileFlags(t *testing.T) {
	path := filepath.Join(t.TempDir(), "v.json")
	code, _, stderr := runCLI(t, "bench", "--num-requests", "4", "--max-new-tokens", "3", "--json", path, "--result-format", "vllm",
		"--percentile-metrics", "e2el,ttft,e2el", "--metric-percentiles", "50,99.9")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var v map[string]any
	if err := json.Unmarshal(data, &v); err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"mean_ttft_ms", "p50_ttft_ms", "p99.9_ttft_ms", "std_e2el_ms", "p50_e2el_ms", "p99.9_e2el_ms"} {
		if _, ok := v[key].(float64); !ok {
			t.Errorf("result lacks %s", key)
		}
	}
	for _, key := range []string{"p99_ttft_ms", "mean_tpot_ms", "mean_itl_ms"} {
		if _, ok := v[key]; ok {
			t.Errorf("result has %s, not chosen", key)
		}
	}
	// An empty --percentile-metrics is vLLM's default (its `args.percentile_metrics or default`).
	if code, _, stderr = runCLI(t, "bench", "--num-requests", "2", "--max-new-tokens", "3", "--json", path, "--result-format", "vllm",
		"--percentile-metrics", ""); code != 0 {
		t.Fatalf("--percentile-metrics \"\": exit %d: %s", code, stderr)
	}
	if data, err = os.ReadFile(path); err != nil {
		t.Fatal(err)
	}
	v = nil
	if err := json.Unmarshal(data, &v); err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"p99_ttft_ms", "p99_tpot_ms", "p99_itl_ms"} {
		if _, ok := v[key].(float64); !ok {
			t.Errorf("--percentile-metrics \"\": result lacks %s", key)
		}
	}
}

// TestDatasetKindFlagsReachTheSession: each kind's flags, with vLLM's defaults, become the
// Session's dataset; --output-len stands in for --custom-output-len and
// --prefix-repetition-output-len as vLLM maps it; prefix_repetition runs num_prefixes x
// (--num-requests / num_prefixes) requests, as vLLM does, and says so when that is fewer.
func TestDatasetKindFlagsReachTheSession(t *testing.T) {
	custom := tempFile(t, "c.jsonl", "{\"prompt\": \"hi\", \"output_tokens\": 3}\n")
	sonnet := tempFile(t, "s.txt", "Shall I compare thee to a summer's day?\n")
	burst := tempFile(t, "b.csv", "Timestamp,Model,Request tokens,Response tokens\n1,GPT-4,5,7\n")
	type shape struct { // the Dataset's settings
		Kind                                                   string
		InputLen, OutputLen, PrefixLen, SuffixLen, NumPrefixes int
		Seed                                                   uint64
	}
	for _, tc := range []struct {
		args     []string
		want     shape
		requests int
		note     string
	}{
		{[]string{"--dataset", "random", "--random-prefix-len", "32", "--input-len", "0", "--seed", "7"}, shape{Kind: "random", OutputLen: 64, PrefixLen: 32, Seed: 7}, 16, ""},
		{[]string{"--dataset", "custom", "--dataset-path", custom}, shape{Kind: "custom", OutputLen: 256}, 16, ""},
		{[]string{"--dataset", "custom", "--dataset-path", custom, "--custom-output-len", "-1"}, shape{Kind: "custom"}, 16, ""},
		{[]string{"--dataset", "custom", "--dataset-path", custom, "--output-len", "9"}, shape{Kind: "custom", OutputLen: 9}, 16, ""},
		{[]string{"--dataset", "sonnet", "--dataset-path", sonnet}, shape{Kind: "sonnet", InputLen: 550, OutputLen: 150, PrefixLen: 200}, 16, ""},
		{[]string{"--dataset", "sonnet", "--dataset-path", sonnet, "--sonnet-input-len", "90", "--sonnet-output-len", "4", "--sonnet-prefix-len", "0"}, shape{Kind: "sonnet", InputLen: 90, OutputLen: 4}, 16, ""},
		{[]string{"--dataset", "burstgpt", "--dataset-path", burst, "--seed", "3"}, shape{Kind: "burstgpt", Seed: 3}, 16, ""},
		{[]string{"--dataset", "prefix_repetition"}, shape{Kind: "prefix_repetition", OutputLen: 128, PrefixLen: 256, SuffixLen: 256, NumPrefixes: 10}, 10,
			"rosetop: --dataset prefix_repetition: 10 prefixes x 1 requests each = 10 requests, not --num-requests 16 (as vLLM: num_requests // num_prefixes a prefix)\n"},
		{[]string{"--dataset", "prefix_repetition", "--num-requests", "30", "--prefix-repetition-num-prefixes", "3", "--output-len", "5", "--prefix-repetition-suffix-len", "0"},
			shape{Kind: "prefix_repetition", OutputLen: 5, PrefixLen: 256, NumPrefixes: 3}, 30, ""},
	} {
		var notes strings.Builder
		o, err := parseOptions(t.Context(), tc.args, &notes)
		if err != nil {
			t.Errorf("%q: %v", tc.args, err)
			continue
		}
		c := o.sessionConfig()
		d := c.Workload.Dataset
		got := shape{Kind: d.Kind, InputLen: d.InputLen, OutputLen: d.OutputLen, PrefixLen: d.PrefixLen, SuffixLen: d.SuffixLen, NumPrefixes: d.NumPrefixes, Seed: d.Seed}
		if got != tc.want || c.Workload.NumRequests != tc.requests || notes.String() != tc.note {
			t.Errorf("%q: dataset %+v, %d requests, notes %q; want %+v, %d, %q", tc.args, got, c.Workload.NumRequests, notes.String(), tc.want, tc.requests, tc.note)
		}
		if err := c.Validate(); err != nil {
			t.Errorf("%q: the session refuses it: %v", tc.args, err)
		}
	}
}

// TestDatasetKindsRun: each kind runs end to end on the embedded model, and its --json records
// the lengths it defines: prompts of the file's or the flags' token counts, outputs of theirs;
// the same --seed draws the same requests and another seed others.
func TestDatasetKindsRun(t *testing.T) {
	dir := t.TempDir()
	burst := tempFile(t, "b.csv", "Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n"+
		"1,GPT-4,11,3,14,API log\n2,ChatGPT,12,4,16,API log\n3,GPT-4,13,0,13,API log\n4,GPT-4,15,5,20,API log\n5,GPT-4,17,6,23,API log\n6,GPT-4,19,2,21,API log\n")
	custom := tempFile(t, "c.jsonl", "{\"prompt\": \"Hello\", \"output_tokens\": 2}\n{\"prompt\": \"What is the capital of France?\", \"output_tokens\": 4}\n")
	sonnet := tempFile(t, "s.txt", strings.Repeat("Shall I compare thee to a summer's day?\nThou art more lovely and more temperate:\nRough winds do shake the darling buds of May,\n", 4))
	type request struct {
		PromptTokens int `json:"prompt_tokens"`
		OutputTokens int `json:"output_tokens"`
	}
	run := func(args ...string) ([]request, map[string]any) {
		t.Helper()
		path := filepath.Join(dir, "out.json")
		code, _, stderr := runCLI(t, append([]string{"bench", "--warmup-runs", "0", "--no-stop-on-eos", "--json", path}, args...)...)
		if code != 0 {
			t.Fatalf("%q: exit %d: %s", args, code, stderr)
		}
		var out struct {
			Config map[string]any `json:"config"`
			Runs   []struct {
				Requests []request `json:"requests"`
			} `json:"runs"`
		}
		readJSON(t, path, &out)
		return out.Runs[len(out.Runs)-1].Requests, out.Config
	}
	burstArgs := []string{"--dataset", "burstgpt", "--dataset-path", burst, "--num-requests", "4", "--seed", "1"}
	reqs, config := run(burstArgs...)
	outOf := map[int]int{11: 3, 15: 5, 17: 6, 19: 2} // the kept rows: GPT-4, Response tokens above 0
	seen := map[int]bool{}
	for _, r := range reqs {
		if outOf[r.PromptTokens] != r.OutputTokens {
			t.Errorf("burstgpt: a request of %d prompt and %d output tokens, want a kept row's %v", r.PromptTokens, r.OutputTokens, outOf)
		}
		seen[r.PromptTokens] = true
	}
	if len(reqs) != 4 || len(seen) != 4 || config["dataset"] != "burstgpt" {
		t.Errorf("burstgpt: %d requests of %d rows, config dataset %v; want the 4 kept rows once each", len(reqs), len(seen), config["dataset"])
	}
	order := func(rs []request) (s []int) {
		for _, r := range rs {
			s = append(s, r.PromptTokens)
		}
		return s
	}
	again, _ := run(burstArgs...)
	other, _ := run(append(burstArgs, "--seed", "2")...)
	if !slices.Equal(order(reqs), order(again)) || slices.Equal(order(reqs), order(other)) {
		t.Errorf("burstgpt draws %v, %v with --seed 1, %v with --seed 2: want the seed to decide", order(reqs), order(again), order(other))
	}

	reqs, _ = run("--dataset", "custom", "--dataset-path", custom, "--custom-output-len", "-1", "--num-requests", "4")
	for _, r := range reqs {
		if want := map[int]int{1: 2, 7: 4}[r.PromptTokens]; r.OutputTokens != want {
			t.Errorf("custom: %d prompt tokens, %d output; want a line's prompt as written and its output_tokens", r.PromptTokens, r.OutputTokens)
		}
	}
	reqs, config = run("--dataset", "sonnet", "--dataset-path", sonnet, "--num-requests", "4", "--sonnet-input-len", "60", "--sonnet-output-len", "3", "--sonnet-prefix-len", "25")
	for _, r := range reqs {
		if r.PromptTokens > 60 || r.PromptTokens < 40 || r.OutputTokens != 3 {
			t.Errorf("sonnet: %d prompt tokens, %d output; want about 60 and at most 60, 3", r.PromptTokens, r.OutputTokens)
		}
	}
	if config["sonnet_input_len"] != 60.0 || config["sonnet_prefix_len"] != 25.0 {
		t.Errorf("sonnet: config %v lacks its flags", config)
	}
	reqs, _ = run("--dataset", "prefix_repetition", "--num-requests", "4", "--prefix-repetition-num-prefixes", "2", "--prefix-repetition-prefix-len", "16",
		"--prefix-repetition-suffix-len", "8", "--output-len", "3")
	for _, r := range reqs {
		if r.PromptTokens != 24 || r.OutputTokens != 3 {
			t.Errorf("prefix_repetition: %d prompt tokens, %d output; want 16 + 8, 3", r.PromptTokens, r.OutputTokens)
		}
	}
	reqs, config = run("--dataset", "random", "--random-prefix-len", "20", "--input-len", "10", "--output-len", "2", "--num-requests", "4")
	for _, r := range reqs {
		if r.PromptTokens != 30 || r.OutputTokens != 2 {
			t.Errorf("random with a prefix: %d prompt tokens, %d output; want 20 + 10, 2", r.PromptTokens, r.OutputTokens)
		}
	}
	if config["random_prefix_len"] != 20.0 {
		t.Errorf("random: config random_prefix_len %v, want 20", config["random_prefix_len"])
	}
}
