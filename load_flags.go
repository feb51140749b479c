package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"rosetop/bench"
)

// loadOptions are the flags that shape the load beyond the seeds' prompt and schedule: goodput
// targets, arrivals at a rate with a burstiness and ramp-up, a cap on requests in flight,
// datasets, trace replay and saving, and the vLLM result format. Embedded in options, so their
// JSON keys sit beside the other flags'.
type loadOptions struct {
	Goodput        string  `json:"goodput,omitempty"`
	Burstiness     float64 `json:"burstiness"`
	RampUpS        float64 `json:"ramp_up_s"`
	MaxConcurrency int     `json:"max_concurrency"`
	Dataset        string  `json:"dataset,omitempty"`
	DatasetPath    string  `json:"dataset_path,omitempty"`
	InputLen       int     `json:"input_len,omitempty"`
	OutputLen      int     `json:"output_len,omitempty"`
	RangeRatio     float64 `json:"range_ratio"`
	Replay         string  `json:"replay,omitempty"`
	ReplaySpeed    float64 `json:"replay_speed"`
	SaveTrace      string  `json:"-"`
	ResultFormat   string  `json:"-"`
	SaveDetailed   bool    `json:"-"`
	PctMetrics     string  `json:"-"` // --percentile-metrics
	MetricPcts     string  `json:"-"` // --metric-percentiles
	// The dataset kinds' own flags, named and defaulted as vLLM's bench names them.
	RandomPrefixLen      int `json:"random_prefix_len"`
	CustomOutputLen      int `json:"custom_output_len"`
	SonnetInputLen       int `json:"sonnet_input_len"`
	SonnetOutputLen      int `json:"sonnet_output_len"`
	SonnetPrefixLen      int `json:"sonnet_prefix_len"`
	PrefixRepPrefixLen   int `json:"prefix_repetition_prefix_len"`
	PrefixRepSuffixLen   int `json:"prefix_repetition_suffix_len"`
	PrefixRepNumPrefixes int `json:"prefix_repetition_num_prefixes"`
	PrefixRepOutputLen   int `json:"prefix_repetition_output_len"`

	slos    []bench.SLO     // parsed --goodput
	stats   bench.VLLMStats // parsed --percentile-metrics and --metric-percentiles
	dataset *bench.Dataset  // loaded --dataset or --replay; read-only once loaded
}

const (
	maxInputLen   = 1 << 20
	maxBurstiness = 1e4
	// minBurstiness: gaps with a coefficient of variation of about 32; far below it the gamma
	// draw's scale 1/(rate*burstiness) overflows.
	minBurstiness  = 1e-3
	maxRampUpS     = 86_400
	maxReplaySpeed = 1e6
	// minReplaySpeed keeps the slowest replay of the longest trace (bench's maxTraceMs, 30 days)
	// within a time.Duration's 292 years.
	minReplaySpeed = 1e-3
)

func defaultLoadOptions() loadOptions {
	return loadOptions{Burstiness: 1, InputLen: 128, ReplaySpeed: 1, ResultFormat: "rosetop",
		CustomOutputLen: 256, SonnetInputLen: 550, SonnetOutputLen: 150, SonnetPrefixLen: 200, // vLLM's defaults
		PrefixRepPrefixLen: 256, PrefixRepSuffixLen: 256, PrefixRepNumPrefixes: 10, PrefixRepOutputLen: 128}
}

// datasetFlags are the flags that shape one --dataset kind each, as vLLM's dataset groups do.
var datasetFlags = []struct{ flag, kind string }{
	{"input-len", "random"}, {"range-ratio", "random"}, {"random-prefix-len", "random"},
	{"custom-output-len", "custom"},
	{"sonnet-input-len", "sonnet"}, {"sonnet-output-len", "sonnet"}, {"sonnet-prefix-len", "sonnet"},
	{"prefix-repetition-prefix-len", "prefix_repetition"}, {"prefix-repetition-suffix-len", "prefix_repetition"},
	{"prefix-repetition-num-prefixes", "prefix_repetition"}, {"prefix-repetition-output-len", "prefix_repetition"},
}

// bindLoadFlags binds o's flags to fs.
func bindLoadFlags(fs *flag.FlagSet, o *loadOptions) {
	fs.StringVar(&o.Goodput, "goodput", o.Goodput, "latency targets in ms, e.g. ttft:200,tpot:50,e2el:2000 (or, as vLLM takes them, ttft:200 tpot:50): a request is good when it meets every one (vLLM's goodput); reports request goodput and SLO attainment")
	floatVar(fs, &o.Burstiness, "burstiness", bench.MinBurstiness, maxBurstiness, "with --request-rate: gamma-distributed gaps of this shape (1: Poisson; < 1 burstier, > 1 more even), as vLLM's --burstiness")
	secondsVar(fs, &o.RampUpS, "ramp-up-s", 0, maxRampUpS, "with --request-rate: the rate rises linearly from 0 to the rate over the run's first S seconds")
	intVar(fs, &o.MaxConcurrency, "max-concurrency", 0, maxRequests, "most requests in flight: a request due while this many are submitted and unfinished waits for one to finish (0: no limit)")
	fs.StringVar(&o.Dataset, "dataset", o.Dataset, "where prompts come from instead of --prompt, as vLLM's --dataset-name: random (--input-len, --output-len, --range-ratio, --random-prefix-len), prefix_repetition (--prefix-repetition-...), or a file given by --dataset-path: sharegpt, jsonl, custom, burstgpt, sonnet (--sonnet-...)")
	fs.StringVar(&o.DatasetPath, "dataset-path", o.DatasetPath, `--dataset sharegpt: a ShareGPT JSON file (first human turn as prompt, the reply's token count as output length); jsonl: one {"prompt": TEXT, "output_len": N} per line; custom: vLLM's custom JSONL, one {"prompt": TEXT} per line, "output_tokens": N read with --custom-output-len -1 (prompts are sent as written, as with vLLM's --skip-chat-template: a chat --api has the server apply its template); burstgpt: a BurstGPT CSV trace (as vLLM: rows of Model GPT-4 with Response tokens above 0, prompts of Request tokens, outputs of Response tokens); sonnet: a text file of lines, e.g. vLLM's sonnet.txt`)
	intVar(fs, &o.InputLen, "input-len", 0, maxInputLen, "--dataset random: mean tokens of a prompt's sampled part (0 only with --random-prefix-len)")
	intVar(fs, &o.OutputLen, "output-len", 0, maxNewTokens, "--dataset random: mean output tokens (0: --max-new-tokens); sharegpt, jsonl, custom: every request's (0: the row's); prefix_repetition: every request's. As vLLM's --output-len, it stands in for --custom-output-len and --prefix-repetition-output-len; burstgpt and sonnet take theirs elsewhere")
	belowVar(fs, &o.RangeRatio, "range-ratio", 0, 1, "--dataset random: lengths uniform in [len*(1-R), len*(1+R)], as vLLM's --random-range-ratio (one ratio for both; not its JSON form)")
	intVar(fs, &o.RandomPrefixLen, "random-prefix-len", 0, maxInputLen, "--dataset random: this many random tokens, the same for every request, before each prompt's sampled part: a prompt has these + a length drawn around --input-len (the range ratio leaves the prefix alone), as vLLM's --random-prefix-len")
	intVar(fs, &o.CustomOutputLen, "custom-output-len", -1, maxNewTokens, `--dataset custom: output tokens of every request, as vLLM's (not 0); -1: each line's "output_tokens"`)
	intVar(fs, &o.SonnetInputLen, "sonnet-input-len", 1, maxInputLen, "--dataset sonnet: most prompt tokens; lines are drawn to about this many, and a draw over it drawn again, as vLLM's (deprecated there); prompts are counted as written, GPT-2 having no chat template")
	intVar(fs, &o.SonnetOutputLen, "sonnet-output-len", 1, maxNewTokens, "--dataset sonnet: output tokens of every request, as vLLM's")
	intVar(fs, &o.SonnetPrefixLen, "sonnet-prefix-len", 0, maxInputLen, "--dataset sonnet: tokens of the part every prompt shares, as vLLM's: its base prompt and as many of the file's first lines as make about this many")
	intVar(fs, &o.PrefixRepPrefixLen, "prefix-repetition-prefix-len", 0, maxInputLen, "--dataset prefix_repetition: random tokens of each shared prefix, as vLLM's")
	intVar(fs, &o.PrefixRepSuffixLen, "prefix-repetition-suffix-len", 0, maxInputLen, "--dataset prefix_repetition: random tokens after the prefix, each request's own; a prompt has prefix + suffix tokens, as vLLM's")
	intVar(fs, &o.PrefixRepNumPrefixes, "prefix-repetition-num-prefixes", 1, maxRequests, "--dataset prefix_repetition: distinct prefixes, each shared by --num-requests / this many requests (rounded down, as vLLM's: the run may have fewer than --num-requests); the requests come shuffled")
	intVar(fs, &o.PrefixRepOutputLen, "prefix-repetition-output-len", 1, maxNewTokens, "--dataset prefix_repetition: output tokens of every request, as vLLM's")
	fs.StringVar(&o.Replay, "replay", o.Replay, "replay a Mooncake-format JSONL trace (timestamp ms, input_length, output_length, hash_ids): its arrival times and lengths")
	floatVar(fs, &o.ReplaySpeed, "replay-speed", minReplaySpeed, maxReplaySpeed, "--replay: play the trace this many times faster")
	fs.StringVar(&o.SaveTrace, "save-trace", o.SaveTrace, "write each measured run as a Mooncake-format JSONL trace to FILE (with several, one a run: t.jsonl -> t-run1.jsonl, ...)")
	fs.StringVar(&o.ResultFormat, "result-format", o.ResultFormat, "--json's format: rosetop (config, runs, per-request records) | vllm (vllm bench serve --save-result's keys, one object per measured run)")
	fs.BoolVar(&o.SaveDetailed, "save-detailed", o.SaveDetailed, "--result-format vllm: add the per-request arrays (input_lens, ttfts, itls, ...)")
	fs.StringVar(&o.PctMetrics, "percentile-metrics", o.PctMetrics, "--result-format vllm: the metrics with statistics, as vLLM's: a comma-separated list of "+strings.Join(bench.VLLMMetricNames(), ", ")+" (default ttft,tpot,itl; the client queue's need --max-concurrency)")
	fs.StringVar(&o.MetricPcts, "metric-percentiles", o.MetricPcts, "--result-format vllm: the percentiles written for each metric, as vLLM's: e.g. 50,90,99 (default 99), each from 0 to 100")
}

// applyLoad checks the load flags against each other and the rest of the command line (set:
// the flags given explicitly), parses the targets and loads the dataset or trace file, noting a
// slow load's progress on notes; a signal (ctx) stops the load.
func (o *options) applyLoad(ctx context.Context, set map[string]bool, notes io.Writer) error {
	l := &o.loadOptions
	rate := o.RequestRate.poisson()
	promptFlags := set["prompt"] || set["prompt-repeats"] || set["unique-prompts"]
	sweep := set["request-rates"] || set["concurrency"] || set["prefill-max-batch-sizes"] // rosetop sweep's axes
	checks := []struct {
		bad bool
		msg string
	}{
		{set["burstiness"] && !rate, "--burstiness shapes the gaps of --request-rate: give a rate"},
		{l.RampUpS > 0 && !rate, "--ramp-up-s ramps --request-rate up: give a rate"},
		{set["replay-speed"] && l.Replay == "", "--replay-speed needs --replay FILE"},
		{l.Replay != "" && l.Dataset != "", "--replay and --dataset both set the prompts: give one"},
		{l.Replay != "" && (set["request-rate"] || set["submit-interval-ms"] || set["submit-schedule"]), "--replay sets the arrivals: drop --request-rate, --submit-interval-ms and --submit-schedule"},
		{(l.Replay != "" || l.Dataset != "") && promptFlags, "--dataset and --replay make the prompts: drop --prompt, --prompt-repeats and --unique-prompts"},
		{l.Dataset == "" && set["dataset-path"], "--dataset-path needs --dataset " + orList(bench.FileDatasetKinds())},
		{l.Dataset == "" && set["output-len"], "--output-len needs --dataset"},
		{l.Dataset == "burstgpt" && set["output-len"], "--output-len: --dataset burstgpt takes each request's output length from the trace's Response tokens"},
		{l.Dataset == "sonnet" && set["output-len"], "--output-len: --dataset sonnet takes --sonnet-output-len (vLLM's --output-len does not reach it either)"},
		{l.ResultFormat != "rosetop" && l.ResultFormat != "vllm", fmt.Sprintf("--result-format: unknown format %q (valid: rosetop, vllm)", l.ResultFormat)},
		{sweep && (set["result-format"] || set["save-detailed"]), "--result-format and --save-detailed shape rosetop bench's --json: rosetop sweep writes its own files to --out-dir"},
		{l.ResultFormat == "vllm" && o.JSONPath == "", "--result-format vllm is the format of --json FILE: give --json"},
		{l.SaveDetailed && l.ResultFormat != "vllm", "--save-detailed adds vLLM's per-request arrays: give --result-format vllm"},
		{sweep && (set["percentile-metrics"] || set["metric-percentiles"]), "--percentile-metrics and --metric-percentiles shape rosetop bench's --json: rosetop sweep writes its own files to --out-dir"},
		{(set["percentile-metrics"] || set["metric-percentiles"]) && l.ResultFormat != "vllm", "--percentile-metrics and --metric-percentiles choose the statistics of vLLM's result: give --result-format vllm"},
	}
	for _, c := range checks {
		if c.bad {
			return badFlag("%s", c.msg)
		}
	}
	for _, f := range datasetFlags {
		switch {
		case !set[f.flag] || l.Dataset == f.kind:
		case l.Replay != "":
			return badFlag("--%s shapes --dataset %s, and --replay makes the prompts: drop it", f.flag, f.kind)
		case l.Dataset == "":
			return badFlag("--%s shapes --dataset %s: give --dataset %s, or drop it", f.flag, f.kind, f.kind)
		default:
			return badFlag("--%s shapes --dataset %s, not --dataset %s: drop it", f.flag, f.kind, l.Dataset)
		}
	}
	if err := l.parseVLLMStats(set); err != nil {
		return err
	}
	if l.Goodput != "" || set["goodput"] {
		slos, err := bench.ParseGoodput(l.Goodput)
		if err != nil {
			return badFlag("%s", err)
		}
		l.slos = slos
	}
	switch {
	case l.Replay != "":
		return o.loadReplay(ctx, set, notes)
	case l.Dataset != "":
		return o.loadDataset(ctx, set, notes)
	}
	return nil
}

// orList joins words as "a, b or c".
func orList(words []string) string {
	if len(words) < 2 {
		return strings.Join(words, "")
	}
	return strings.Join(words[:len(words)-1], ", ") + " or " + words[len(words)-1]
}

// parseVLLMStats reads --percentile-metrics and --metric-percentiles: a known metric or a
// percentile in [0, 100] each, a repeat kept once (vLLM's result, a dict, keeps one key); an
// empty --percentile-metrics is the default, as vLLM's.
func (l *loadOptions) parseVLLMStats(set map[string]bool) error {
	if set["percentile-metrics"] && l.PctMetrics != "" {
		l.stats.Metrics = []string{}
		for _, m := range strings.Split(l.PctMetrics, ",") {
			m = strings.TrimSpace(m)
			if !slices.Contains(bench.VLLMMetricNames(), m) {
				return badFlag("--percentile-metrics: unknown metric %q (valid: %s)", printable(m), strings.Join(bench.VLLMMetricNames(), ", "))
			}
			if !slices.Contains(l.stats.Metrics, m) {
				l.stats.Metrics = append(l.stats.Metrics, m)
			}
		}
	}
	if set["metric-percentiles"] {
		l.stats.Percentiles = []float64{}
		for _, f := range strings.Split(l.MetricPcts, ",") {
			p, err := strconv.ParseFloat(strings.TrimSpace(f), 64)
			if err != nil || !(p >= 0 && p <= 100) {
				return badFlag("--metric-percentiles: %q is not a percentile from 0 to 100", printable(strings.TrimSpace(f)))
			}
			if !slices.Contains(l.stats.Percentiles, p) {
				l.stats.Percentiles = append(l.stats.Percentiles, p)
			}
		}
	}
	return nil
}

// loadDataset loads --dataset (set: the flags given explicitly): random and prefix_repetition are
// made later, files are read and checked now.
func (o *options) loadDataset(ctx context.Context, set map[string]bool, notes io.Writer) error {
	l := &o.loadOptions
	switch l.Dataset {
	case "random", "prefix_repetition":
		if l.DatasetPath != "" { // vLLM refuses a path for these too
			return badFlag("--dataset %s makes its prompts: drop --dataset-path", l.Dataset)
		}
	}
	switch l.Dataset {
	case "random":
		out := l.OutputLen
		if out == 0 {
			out = o.MaxNewTokens
		}
		l.dataset = &bench.Dataset{Kind: "random", InputLen: l.InputLen, OutputLen: out, RangeRatio: l.RangeRatio, PrefixLen: l.RandomPrefixLen, Seed: o.Seed}
		return nil
	case "prefix_repetition":
		out, err := l.outputLenFor("prefix-repetition-output-len", l.PrefixRepOutputLen, set)
		if err != nil {
			return err
		}
		if out == 0 {
			return badFlag("--output-len 0: --dataset prefix_repetition needs an output length from 1 to %d", maxNewTokens)
		}
		if err := o.prefixRepetitionRequests(notes); err != nil {
			return err
		}
		l.dataset = &bench.Dataset{Kind: "prefix_repetition", PrefixLen: l.PrefixRepPrefixLen, SuffixLen: l.PrefixRepSuffixLen,
			NumPrefixes: l.PrefixRepNumPrefixes, OutputLen: out, Seed: o.Seed}
		return nil
	}
	if !slices.Contains(bench.FileDatasetKinds(), l.Dataset) {
		return badFlag("--dataset: unknown dataset %q (valid: %s)", l.Dataset, strings.Join(bench.DatasetKinds, ", "))
	}
	if l.DatasetPath == "" {
		return badFlag("--dataset %s needs --dataset-path FILE", l.Dataset)
	}
	out := l.OutputLen // sharegpt, jsonl: 0 is each row's own
	if l.Dataset == "custom" {
		if l.CustomOutputLen == 0 {
			return badFlag(`--custom-output-len 0: want -1 (each line's "output_tokens") or from 1 to %d`, maxNewTokens)
		}
		var err error
		if out, err = l.outputLenFor("custom-output-len", max(l.CustomOutputLen, 0), set); err != nil { // -1: the line's, 0 here
			return err
		}
	}
	d, err := bench.LoadDataset(ctx, l.Dataset, l.DatasetPath, notes)
	if err != nil {
		return loadErr(err)
	}
	d.OutputLen, d.Seed = out, o.Seed
	if l.Dataset == "sonnet" {
		d.InputLen, d.OutputLen, d.PrefixLen = l.SonnetInputLen, l.SonnetOutputLen, l.SonnetPrefixLen
	}
	l.dataset = d
	return nil
}

// outputLenFor is the output length of a dataset whose own flag is flag (its value own): as vLLM
// maps its general --output-len onto the dataset's flag, --output-len stands in for it; the two
// together are refused rather than one dropped.
func (l *loadOptions) outputLenFor(flag string, own int, set map[string]bool) (int, error) {
	switch {
	case set["output-len"] && set[flag]:
		return 0, badFlag("--output-len and --%s both set the output length: give one", flag)
	case set["output-len"]:
		return l.OutputLen, nil
	}
	return own, nil
}

// prefixRepetitionRequests makes --num-requests what vLLM's prefix_repetition runs: each of the
// prefixes serves --num-requests / prefixes requests, rounded down; a run cut short says so on notes.
func (o *options) prefixRepetitionRequests(notes io.Writer) error {
	n, k := o.NumRequests, o.PrefixRepNumPrefixes
	switch {
	case n < k:
		return badFlag("--num-requests %d is fewer than --prefix-repetition-num-prefixes %d: each prefix needs a request", n, k)
	case o.PrefixRepPrefixLen+o.PrefixRepSuffixLen < 1: // refused before the note, not after it
		return badFlag("--prefix-repetition-prefix-len 0 and --prefix-repetition-suffix-len 0 make empty prompts: give either a length")
	}
	if n%k != 0 {
		fmt.Fprintf(notes, "rosetop: --dataset prefix_repetition: %d prefixes x %d requests each = %d requests, not --num-requests %d (as vLLM: num_requests // num_prefixes a prefix)\n", k, n/k, n/k*k, n)
		o.NumRequests = n / k * k
	}
	return nil
}

// loadReplay loads --replay's trace; the run is the trace's requests unless --num-requests takes
// its first N.
func (o *options) loadReplay(ctx context.Context, set map[string]bool, notes io.Writer) error {
	d, err := bench.LoadTrace(ctx, o.Replay, notes)
	if err != nil {
		return loadErr(err)
	}
	d.Seed = o.Seed
	switch n := d.Len(); {
	case set["num-requests"] && o.NumRequests > n:
		return badFlag("--num-requests %d: the trace %s has %d requests", o.NumRequests, o.Replay, n)
	case !set["num-requests"] && n > maxRequests:
		return badFlag("--replay %s has %d requests, more than a run's %d: give --num-requests N to replay its first N", o.Replay, n, maxRequests)
	case !set["num-requests"]:
		o.NumRequests = n
	}
	o.loadOptions.dataset = d
	return nil
}

// loadErr is a dataset or trace file's load error as a bad flag, or a signal's as it is.
func loadErr(err error) error {
	if errors.Is(err, context.Canceled) {
		return err
	}
	return badFlag("%s", err)
}

// withLoad adds the load flags to the Session's config.
func (o options) withLoad(c bench.Config) bench.Config {
	l := o.loadOptions
	c.Goodput = l.slos
	c.Arrivals.MaxConcurrency = l.MaxConcurrency
	if c.Arrivals.Schedule == "poisson" {
		c.Arrivals.Burstiness = l.Burstiness
		c.Arrivals.RampUp = time.Duration(l.RampUpS * float64(time.Second))
	}
	if l.dataset != nil {
		c.Workload.Dataset = l.dataset
	}
	if l.Replay != "" && l.dataset != nil {
		c.Arrivals = bench.Arrivals{Schedule: "trace", Offsets: l.dataset.Offsets(o.NumRequests, l.ReplaySpeed), MaxConcurrency: l.MaxConcurrency}
	}
	return c
}

// exports are the files the options ask a headless run to write.
func (o options) exports() bench.Exports {
	return bench.Exports{
		JSONPath: o.JSONPath, JSONFormat: o.ResultFormat, Detailed: o.SaveDetailed, VLLMStats: o.stats, CSVPath: o.CSVPath,
		TracePath: o.SaveTrace, Settings: o, Tool: toolInfo(),
	}
}
