package main

import (
	"cmp"
	"strings"

	"rosetop/bench"
)

// watchRefused are the flags that shape the load rosetop sends, or how it measures that load as
// a client: --watch sends none, so they mean nothing with it (and neither do datasetFlags).
var watchRefused = []string{"job", "prompt", "prompt-repeats", "unique-prompts", "num-requests", "max-new-tokens",
	"temperature", "top-k", "top-p", "seed", "no-stop-on-eos", "submit-interval-ms", "submit-schedule", "request-rate",
	"pretok", "warmup-runs", "repeat-runs", "burstiness", "ramp-up-s", "max-concurrency", "dataset",
	"dataset-path", "output-len", "replay", "replay-speed", "save-trace", "result-format",
	"save-detailed", "percentile-metrics", "metric-percentiles", "api", "extra-body", "request-timeout", "first-byte-timeout", "stall-timeout", "tokenizer"}

// checkWatch applies the --watch rules, given the flags set explicitly, before a job's presets
// or a dataset are read: only the dashboard watches, only a server (--endpoint), and no flag
// that shapes a load or exports its requests is taken (--record is: it keeps the views). With
// --watch the dashboard's default job is dropped: no workload runs.
func (o *options) checkWatch(set map[string]bool) error {
	if !o.Watch {
		return nil
	}
	if cmd := cmp.Or(o.command, "bench"); cmd != "dashboard" {
		return badFlag("--watch: rosetop %s measures the load it sends; to watch a server without sending it any, open the dashboard: rosetop --endpoint URL --watch", cmd)
	}
	if o.Endpoint == "" && len(o.Fleet) == 0 { // an empty first of several is refused by name (checkRemote)
		return badFlag("--watch watches a server outside this process: give its API root with --endpoint URL")
	}
	var given []string
	for _, n := range watchRefused {
		if set[n] {
			given = append(given, "--"+n)
		}
	}
	for _, f := range datasetFlags {
		if set[f.flag] {
			given = append(given, "--"+f.flag)
		}
	}
	if len(given) > 0 {
		verb := "mean"
		if len(given) == 1 {
			verb = "means"
		}
		return badFlag("%s %s nothing with --watch: it sends the server no requests", strings.Join(given, ", "), verb)
	}
	if set["goodput"] { // targets the servers' histograms can say something about
		slos, err := bench.ParseGoodput(o.Goodput)
		if err != nil {
			return badFlag("%s", err)
		}
		for _, s := range slos {
			switch {
			case bench.SLOLatency(s.Metric) == "":
				return badFlag("--goodput %s: watch mode reads the servers' latency histograms, and none holds a request's %s: give ttft or e2el targets", s.Metric, strings.ToUpper(s.Metric))
			case s.Ms == 0: // no latency is within it, and a target of 0 is none to the panes
				return badFlag("--goodput %s:0: no latency the server observes is within 0 ms: give a target above 0", s.Metric)
			}
		}
	}
	if o.JSONPath != "" || o.CSVPath != "" {
		return badFlag("--json and --csv hold the requests rosetop sends and their runs: --watch sends none (its summary goes to stdout)")
	}
	o.Job = ""
	return nil
}
