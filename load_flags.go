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
	return loadOptions{Burstiness: 1, InputLen: 128, ReplaySpeed: 1, ResultFormat: "rosetop"}
}

// bindLoadFlags binds o's flags to fs.
func bindLoadFlags(fs *flag.FlagSet, o *loadOptions) {
	fs.StringVar(&o.Goodput, "goodput", o.Goodput, "latency targets in ms, e.g. ttft:200,tpot:50,e2el:2000 (or, as vLLM takes them, ttft:200 tpot:50): a request is good when it meets every one (vLLM's goodput); reports request goodput and SLO attainment")
	floatVar(fs, &o.Burstiness, "burstiness", bench.MinBurstiness, maxBurstiness, "with --request-rate: gamma-distributed gaps of this shape (1: Poisson; < 1 burstier, > 1 more even), as vLLM's --burstiness")
	secondsVar(fs, &o.RampUpS, "ramp-up-s", 0, maxRampUpS, "with --request-rate: the rate rises linearly from 0 to the rate over the run's first S seconds")
	intVar(fs, &o.MaxConcurrency, "max-concurrency", 0, maxRequests, "most requests in flight: a request due while this many are submitted and unfinished waits for one to finish (0: no limit)")
	fs.StringVar(&o.Dataset, "dataset", o.Dataset, "where prompts come from instead of --prompt: random (vLLM's: --input-len, --output-len, --range-ratio), sharegpt or jsonl (--dataset-path FILE)")
	fs.StringVar(&o.DatasetPath, "dataset-path", o.DatasetPath, `--dataset sharegpt: a ShareGPT JSON file (first human turn as prompt, the reply's token count as output length); --dataset jsonl: one {"prompt": TEXT, "output_len": N} per line`)
	intVar(fs, &o.InputLen, "input-len", 1, maxInputLen, "--dataset random: mean prompt tokens")
	intVar(fs, &o.OutputLen, "output-len", 0, maxNewTokens, "--dataset random: mean output tokens (0: --max-new-tokens); sharegpt, jsonl: every request's (0: the row's)")
	belowVar(fs, &o.RangeRatio, "range-ratio", 0, 1, "--dataset random: lengths uniform in [len*(1-R), len*(1+R)], as vLLM's --random-range-ratio")
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
		{l.Dataset == "" && set["dataset-path"], "--dataset-path needs --dataset sharegpt or jsonl"},
		{l.Dataset != "random" && (set["input-len"] || set["range-ratio"]), "--input-len and --range-ratio shape --dataset random"},
		{l.Dataset == "" && set["output-len"], "--output-len needs --dataset"},
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
		return o.loadDataset(ctx, notes)
	}
	return nil
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

// loadDataset loads --dataset: random is generated later, files are read and checked now.
func (o *options) loadDataset(ctx context.Context, notes io.Writer) error {
	l := &o.loadOptions
	switch l.Dataset {
	case "random":
		if l.DatasetPath != "" {
			return badFlag("--dataset random makes its prompts: drop --dataset-path")
		}
		out := l.OutputLen
		if out == 0 {
			out = o.MaxNewTokens
		}
		l.dataset = &bench.Dataset{Kind: "random", InputLen: l.InputLen, OutputLen: out, RangeRatio: l.RangeRatio, Seed: o.Seed}
		return nil
	case "sharegpt", "jsonl":
		if l.DatasetPath == "" {
			return badFlag("--dataset %s needs --dataset-path FILE", l.Dataset)
		}
		d, err := bench.LoadDataset(ctx, l.Dataset, l.DatasetPath, notes)
		if err != nil {
			return loadErr(err)
		}
		d.OutputLen, d.Seed = l.OutputLen, o.Seed
		l.dataset = d
		return nil
	}
	return badFlag("--dataset: unknown dataset %q (valid: %s)", l.Dataset, strings.Join(bench.DatasetKinds, ", "))
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
