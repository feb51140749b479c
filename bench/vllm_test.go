package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"rosetop/sched"
)

// vllmKeys are the keys `vllm bench serve --save-result` writes (vllm/benchmarks/serve.py) that
// the issue asks for, then the per-request arrays of --save-detailed.
var vllmKeys = []string{"date", "backend", "model_id", "num_prompts", "request_rate", "burstiness", "max_concurrency",
	"duration", "completed", "failed", "total_input_tokens", "total_output_tokens", "request_throughput",
	"request_goodput", "output_throughput", "total_token_throughput", "max_output_tokens_per_s", "max_concurrent_requests", "rtfx"}

var vllmDetailed = []string{"input_lens", "output_lens", "ttfts", "itls", "latencies", "start_times", "queue_times", "generated_texts", "errors"}

// TestVLLMResult: one object per measured run with vLLM's keys; its numbers agree with rosetop's
// own JSON of the same run, and with the per-request arrays (in seconds, as vLLM's).
func TestVLLMResult(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig(requests(10, 4), runs(1, 2), func(c *Config) {
		c.Arrivals = Arrivals{Schedule: "poisson", Rate: 100, Burstiness: 2, MaxConcurrency: 3, Seed: 1}
		c.Goodput = []SLO{{"ttft", 5}}
	})
	vpath, rpath := filepath.Join(dir, "v.json"), filepath.Join(dir, "r.json")
	_, notes, err := fakeBench(t, context.Background(), newFakeProvider(), cfg, Exports{JSONPath: vpath, JSONFormat: "vllm", Detailed: true, Tool: ToolInfo{Version: "v0", Commit: "abc"},
		VLLMStats: VLLMStats{Metrics: VLLMMetricNames(), Percentiles: []float64{50, 99}}})
	if err != nil {
		t.Fatal(err)
	}
	if want := "wrote " + vpath + ": 2 runs, 20 requests"; !strings.Contains(notes, want) { // the measured runs, not the warmup
		t.Errorf("stderr lacks %q:\n%s", want, notes)
	}
	if _, _, err := fakeBench(t, context.Background(), newFakeProvider(), cfg, Exports{JSONPath: rpath}); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(vpath)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	if len(lines) != 2 {
		t.Fatalf("%d JSON lines, want one per measured run (2)", len(lines))
	}
	var own struct {
		Runs []struct {
			Warmup  bool `json:"warmup"`
			Summary struct {
				Requests int `json:"requests"`
				TTFT     struct {
					P50, P99, Mean float64
				} `json:"ttft_ms"`
				WallS float64 `json:"wall_s"`
			} `json:"summary"`
		} `json:"runs"`
	}
	rdata, _ := os.ReadFile(rpath)
	if err := json.Unmarshal(rdata, &own); err != nil {
		t.Fatal(err)
	}
	for k, line := range lines {
		var v map[string]any
		if err := json.Unmarshal([]byte(line), &v); err != nil {
			t.Fatalf("line %d: %v", k, err)
		}
		for _, key := range append(append([]string{}, vllmKeys...), vllmDetailed...) {
			if _, ok := v[key]; !ok {
				t.Errorf("line %d lacks %q", k, key)
			}
		}
		for _, m := range VLLMMetricNames() { // --max-concurrency and a rate: the client queue's too
			for _, st := range []string{"mean", "median", "std", "p50", "p99"} {
				if _, ok := v[st+"_"+m+"_ms"].(float64); !ok {
					t.Errorf("line %d: %s_%s_ms missing", k, st, m)
				}
			}
		}
		sum := own.Runs[k+1].Summary // run k+1: the warmup comes first in rosetop's JSON
		if v["completed"].(float64) != float64(sum.Requests) || v["num_prompts"].(float64) != 10 || v["request_rate"].(float64) != 100 ||
			v["burstiness"].(float64) != 2 || v["max_concurrency"].(float64) != 3 || v["backend"] != "rosetop" || v["tool_commit"] != "abc" {
			t.Errorf("line %d: header keys %v", k, v)
		}
		if math.Abs(v["p99_ttft_ms"].(float64)-sum.TTFT.P99) > 1e-9 || math.Abs(v["median_ttft_ms"].(float64)-sum.TTFT.P50) > 1e-9 ||
			math.Abs(v["duration"].(float64)-sum.WallS) > 1e-9 {
			t.Errorf("line %d: p99 %v median %v duration %v; rosetop's %+v", k, v["p99_ttft_ms"], v["median_ttft_ms"], v["duration"], sum)
		}
		ttfts := v["ttfts"].([]any)
		mean := 0.0
		for _, x := range ttfts {
			mean += x.(float64) * 1000 / float64(len(ttfts))
		}
		if len(ttfts) != 10 || math.Abs(mean-v["mean_ttft_ms"].(float64)) > 1e-6 {
			t.Errorf("line %d: %d ttfts of mean %.6f ms, mean_ttft_ms %v", k, len(ttfts), mean, v["mean_ttft_ms"])
		}
		if _, err := time.Parse(time.RFC3339Nano, v["epoch"].(string)); err != nil {
			t.Errorf("epoch %v: %v", v["epoch"], err)
		}
	}
}

// TestMaxConcurrencyEngine: on the real engine a burst of 10 requests capped at 2 in flight has,
// whenever a request is submitted, at most one other submitted and not yet finished.
func TestMaxConcurrencyEngine(t *testing.T) {
	path := filepath.Join(t.TempDir(), "out.json")
	cfg := testConfig(requests(10, 4), func(c *Config) {
		c.Arrivals.MaxConcurrency = 2
		c.Workload.UniquePrompts, c.Workload.StopOnEOS = true, false
	})
	var out, errOut bytes.Buffer
	if err := RunBench(context.Background(), cfg, SessionOptions{Provider: cpuEngine(2)}, Exports{JSONPath: path}, &out, &errOut); err != nil {
		t.Fatalf("%v\n%s", err, errOut.String())
	}
	data, _ := os.ReadFile(path)
	var rep struct {
		Runs []struct {
			Requests []struct {
				SubmitStartMs float64 `json:"submit_start_ms"`
				FinishedMs    float64 `json:"finished_ms"`
			} `json:"requests"`
		} `json:"runs"`
	}
	if err := json.Unmarshal(data, &rep); err != nil {
		t.Fatal(err)
	}
	reqs := rep.Runs[0].Requests
	peak := 0
	for i, r := range reqs {
		others := 0
		for j, o := range reqs {
			if j != i && o.SubmitStartMs < r.SubmitStartMs && o.FinishedMs > r.SubmitStartMs {
				others++
			}
		}
		peak = max(peak, others+1)
	}
	if peak != 2 || len(reqs) != 10 {
		t.Errorf("%d requests, at most %d in flight; want 10 and 2", len(reqs), peak)
	}
}

// TestVLLMResultNotDetailed: without --save-detailed vLLM's serve.py deletes input_lens,
// output_lens, start_times, ttfts, itls, generated_texts and errors from its result, and keeps
// latencies (one per request, in seconds), whose mean is mean_e2el_ms where e2el is chosen.
func TestVLLMResultNotDetailed(t *testing.T) {
	path := filepath.Join(t.TempDir(), "v.json")
	cfg := testConfig(requests(6, 4), runs(0, 1))
	exp := Exports{JSONPath: path, JSONFormat: "vllm", VLLMStats: VLLMStats{Metrics: []string{"e2el"}}}
	if _, _, err := fakeBench(t, context.Background(), newFakeProvider(), cfg, exp); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var v map[string]any
	if err := json.Unmarshal(data, &v); err != nil {
		t.Fatal(err)
	}
	for _, key := range vllmDetailed {
		_, ok := v[key]
		if want := key == "latencies" || key == "queue_times"; ok != want {
			t.Errorf("%q present %v, want %v", key, ok, want)
		}
	}
	lats, _ := v["latencies"].([]any)
	mean := 0.0
	for _, x := range lats {
		mean += x.(float64) * 1000 / float64(len(lats))
	}
	if len(lats) != 6 || math.Abs(mean-v["mean_e2el_ms"].(float64)) > 1e-6 {
		t.Errorf("latencies %v (mean %.6f ms), mean_e2el_ms %v", lats, mean, v["mean_e2el_ms"])
	}
}

// TestVLLMPeaks: max_output_tokens_per_s and max_concurrent_requests as vLLM's serve.py
// calculate_metrics computes them over the successful requests: tokens counted in whole seconds
// from the first start, and a sweep over [start, end) with an end before a start at one instant.
func TestVLLMPeaks(t *testing.T) {
	s := func(x float64) time.Duration { return time.Duration(x * float64(time.Second)) }
	req := func(reason sched.FinishReason, start, end float64, toks ...float64) RequestResult {
		tt := sched.Times{SubmitStart: s(start), Finished: s(end)}
		for _, x := range toks {
			tt.Tokens = append(tt.Tokens, s(x))
		}
		tt.FirstToken = tt.Tokens[0]
		return RequestResult{Record: &sched.Record{Reason: reason, Output: make([]int32, len(toks)), Times: tt}}
	}
	reqs := []RequestResult{
		req(sched.FinishLength, 1, 3, 1.5, 1.6, 2.9),        // seconds 0, 0, 1 from the first start
		req(sched.FinishEOS, 3, 4, 3.2, 3.5),                // starts as the first ends: not concurrent with it
		req(sched.FinishLength, 3.5, 5, 3.6, 3.7, 3.8, 4.1), // second 2 holds 3.2, 3.5, 3.6, 3.7, 3.8
		req(sched.FinishError, 1, 9, 1.1, 1.2, 1.3),         // failed: counted in neither
	}
	tok, conc := vllmPeaks(reqs)
	if tok != 5 || conc != 2 {
		t.Errorf("peaks %v tokens/s, %d concurrent; want 5 and 2", tok, conc)
	}
	if tok, conc := vllmPeaks(nil); tok != 0 || conc != 0 {
		t.Errorf("no requests: %v, %d; want 0, 0", tok, conc)
	}
}

// TestVLLMTraffic: request_rate and burstiness name the schedule as vLLM's would (an interval is
// its constant-gap schedule, a burst "inf"), and queue_times (kept without --save-detailed, as in
// vLLM) holds each request's wait for a --max-concurrency slot: a burst's requests queue one
// behind another from the burst's start.
func TestVLLMTraffic(t *testing.T) {
	cases := []struct {
		name        string
		a           Arrivals
		rate, burst any
		queued      bool // every request after the first waited
	}{
		{"burst through one slot", Arrivals{Schedule: "relative", MaxConcurrency: 1}, "inf", 1.0, true},
		{"paced", Arrivals{Schedule: "absolute", Interval: 20 * time.Millisecond}, 50.0, "inf", false},
		{"relative interval", Arrivals{Schedule: "relative", Interval: 4 * time.Millisecond}, 250.0, "inf", false},
		{"poisson", Arrivals{Schedule: "poisson", Rate: 8, Burstiness: 0.5, Seed: 1}, 8.0, 0.5, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "v.json")
			cfg := testConfig(requests(4, 3), runs(0, 1), func(c *Config) { c.Arrivals = tc.a })
			if _, _, err := fakeBench(t, context.Background(), newFakeProvider(), cfg, Exports{JSONPath: path, JSONFormat: "vllm"}); err != nil {
				t.Fatal(err)
			}
			data, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			var v struct {
				Rate   any       `json:"request_rate"`
				Burst  any       `json:"burstiness"`
				Queues []float64 `json:"queue_times"`
			}
			if err := json.Unmarshal(data, &v); err != nil {
				t.Fatal(err)
			}
			if v.Rate != tc.rate || v.Burst != tc.burst || len(v.Queues) != 4 {
				t.Fatalf("request_rate %v, burstiness %v, %d queue_times; want %v, %v, 4", v.Rate, v.Burst, len(v.Queues), tc.rate, tc.burst)
			}
			for i, q := range v.Queues {
				if waited := q > 0; q < 0 || waited != (tc.queued && i > 0) || (waited && q <= v.Queues[i-1]) {
					t.Errorf("queue_times %v: want 0 for requests that did not wait, growing for those that did", v.Queues)
					break
				}
			}
		})
	}
}
