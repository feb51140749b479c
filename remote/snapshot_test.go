package remote

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"
)

// pySeries is one label set of a histogram.
type pySeries struct {
	labels string
	counts []float64 // cumulative, one per bound
	sum    float64
}

// pyHistogram renders a histogram as Python's prometheus_client writes it (vLLM and SGLang use
// it): per label set, cumulative _bucket lines with le last among the labels, then _count and
// _sum; then the _created gauges in a family of their own.
func pyHistogram(name string, bounds []string, series ...pySeries) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# HELP %s Histogram.\n# TYPE %s histogram\n", name, name)
	for _, s := range series {
		for i, le := range bounds {
			fmt.Fprintf(&b, "%s_bucket{%s,le=\"%s\"} %.1f\n", name, s.labels, le, s.counts[i])
		}
		fmt.Fprintf(&b, "%s_count{%s} %.1f\n%s_sum{%s} %v\n", name, s.labels, s.counts[len(s.counts)-1], name, s.labels, s.sum)
	}
	fmt.Fprintf(&b, "# HELP %s_created Histogram.\n# TYPE %s_created gauge\n", name, name)
	for _, s := range series {
		fmt.Fprintf(&b, "%s_created{%s} 1.7356896e+09\n", name, s.labels)
	}
	return b.String()
}

// vllmPage is a vLLM v1 page with two engines (data parallel): names, label names (model_name,
// engine) and bucket bounds from vllm/v1/metrics/loggers.py (PrometheusStatLogger); counters
// carry _total and a _created family, as prometheus_client writes them.
func vllmPage() string {
	const e0, e1 = `model_name="meta-llama/Llama-3.1-8B-Instruct",engine="0"`, `model_name="meta-llama/Llama-3.1-8B-Instruct",engine="1"`
	ttft := []string{"0.001", "0.005", "0.01", "0.02", "0.04", "0.06", "0.08", "0.1", "0.25", "0.5", "0.75", "1.0", "2.5", "5.0", "7.5", "10.0", "20.0", "40.0", "80.0", "160.0", "640.0", "2560.0", "+Inf"}
	c0 := []float64{0, 0, 0, 2, 5, 9, 12, 14, 18, 20, 20, 20, 20, 20, 20, 20, 20, 20, 20, 20, 20, 20, 20}
	c1 := []float64{0, 0, 1, 3, 6, 10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 10}
	return `# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{` + e0 + `} 24.0
vllm:num_requests_running{` + e1 + `} 16.0
# HELP vllm:num_requests_waiting Number of requests waiting to be processed.
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{` + e0 + `} 3.0
vllm:num_requests_waiting{` + e1 + `} 0.0
# HELP vllm:gpu_cache_usage_perc GPU KV-cache usage. 1 means 100 percent usage.DEPRECATED: Use vllm:kv_cache_usage_perc instead.
# TYPE vllm:gpu_cache_usage_perc gauge
vllm:gpu_cache_usage_perc{` + e0 + `} 0.5
vllm:gpu_cache_usage_perc{` + e1 + `} 0.25
# HELP vllm:kv_cache_usage_perc KV-cache usage. 1 means 100 percent usage.
# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{` + e0 + `} 0.625
vllm:kv_cache_usage_perc{` + e1 + `} 0.125
# HELP vllm:num_preemptions_total Cumulative number of preemption from the engine.
# TYPE vllm:num_preemptions_total counter
vllm:num_preemptions_total{` + e0 + `} 2.0
vllm:num_preemptions_total{` + e1 + `} 1.0
# HELP vllm:num_preemptions_created Cumulative number of preemption from the engine.
# TYPE vllm:num_preemptions_created gauge
vllm:num_preemptions_created{` + e0 + `} 1.7356896e+09
vllm:num_preemptions_created{` + e1 + `} 1.7356896e+09
# HELP vllm:prompt_tokens_total Number of prefill tokens processed.
# TYPE vllm:prompt_tokens_total counter
vllm:prompt_tokens_total{` + e0 + `} 51200.0
vllm:prompt_tokens_total{` + e1 + `} 25600.0
# HELP vllm:generation_tokens_total Number of generation tokens processed.
# TYPE vllm:generation_tokens_total counter
vllm:generation_tokens_total{` + e0 + `} 8192.0
vllm:generation_tokens_total{` + e1 + `} 4096.0
` + pyHistogram("vllm:time_to_first_token_seconds", ttft, pySeries{e0, c0, 1.9}, pySeries{e1, c1, 0.45}) +
		pyHistogram("vllm:inter_token_latency_seconds", []string{"0.01", "0.025", "0.05", "+Inf"}, pySeries{e0, []float64{100, 4000, 8100, 8192}, 150.2}) +
		pyHistogram("vllm:iteration_tokens_total", []string{"1", "8", "16", "32", "64", "128", "+Inf"}, pySeries{e0, []float64{0, 3, 10, 40, 200, 250, 260}, 16000})
}

func TestSnapshotVLLM(t *testing.T) {
	s, err := ParseSnapshot(strings.NewReader(vllmPage()), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if s.Kind != KindVLLM || s.At != time.Second {
		t.Fatalf("kind %v at %v", s.Kind, s.At)
	}
	checkValues(t, s, map[string]Value{
		"running": {40, true}, "waiting": {3, true}, "kv": {0.375, true}, // kv_cache_usage_perc, averaged
		"preemptions": {3, true}, "prompt": {76800, true}, "generation": {12288, true},
	})
	// The engines' TTFT histograms sum: 30 requests, 15 at or under 0.06 s.
	if !s.TTFT.Known || s.TTFT.Count != 30 || s.TTFT.countAt(0.06) != 19 || s.TTFT.Sum != 2.35 {
		t.Errorf("TTFT %+v", s.TTFT)
	}
	if q, ok := s.TTFT.Quantile(0.5); !ok || math.Abs(q-(0.04+0.02*(4.0/8))) > 1e-12 {
		t.Errorf("TTFT median %v %v", q, ok)
	}
	if !s.ITL.Known || s.ITL.Count != 8192 || !s.IterationTokens.Known || s.IterationTokens.Count != 260 {
		t.Errorf("ITL %+v, iteration tokens %+v", s.ITL, s.IterationTokens)
	}
	if s.E2E.Known || s.Queue.Known || s.Prefill.Known {
		t.Error("histograms the page lacks are known")
	}
}

// TestSnapshotOlderVLLM: before vllm:kv_cache_usage_perc and vllm:inter_token_latency_seconds,
// the older names stand in.
func TestSnapshotOlderVLLM(t *testing.T) {
	page := "# TYPE vllm:gpu_cache_usage_perc gauge\nvllm:gpu_cache_usage_perc{model_name=\"m\"} 0.9\n" +
		pyHistogram("vllm:time_per_output_token_seconds", []string{"0.01", "+Inf"}, pySeries{`model_name="m"`, []float64{5, 7}, 0.2})
	s, err := ParseSnapshot(strings.NewReader(page), 0)
	if err != nil {
		t.Fatal(err)
	}
	if s.Kind != KindVLLM || s.KVUsage != (Value{0.9, true}) || !s.ITL.Known || s.ITL.Count != 7 || s.Running.Known {
		t.Fatalf("%+v", s)
	}
}

func TestSnapshotServers(t *testing.T) {
	tests := []struct {
		name   string
		source string
		page   string
		kind   ServerKind
		values map[string]Value
		hists  map[string]float64 // histogram name -> count
	}{
		{
			name:   "sglang",
			source: "python/sglang/srt/metrics/collector.py (SchedulerMetricsCollector gauges, TokenizerMetricsCollector counters and histograms)",
			page: `# HELP sglang:num_running_reqs The number of running requests.
# TYPE sglang:num_running_reqs gauge
sglang:num_running_reqs{model_name="Qwen/Qwen2.5-7B-Instruct",engine_type="unified"} 12.0
# HELP sglang:num_queue_reqs The number of requests in the waiting queue.
# TYPE sglang:num_queue_reqs gauge
sglang:num_queue_reqs{model_name="Qwen/Qwen2.5-7B-Instruct",engine_type="unified"} 7.0
# HELP sglang:token_usage The token usage.
# TYPE sglang:token_usage gauge
sglang:token_usage{model_name="Qwen/Qwen2.5-7B-Instruct",engine_type="unified"} 0.42
# HELP sglang:prompt_tokens_total Number of prefill tokens processed.
# TYPE sglang:prompt_tokens_total counter
sglang:prompt_tokens_total{model_name="Qwen/Qwen2.5-7B-Instruct"} 9000.0
# HELP sglang:generation_tokens_total Number of generation tokens processed.
# TYPE sglang:generation_tokens_total counter
sglang:generation_tokens_total{model_name="Qwen/Qwen2.5-7B-Instruct"} 3000.0
` + pyHistogram("sglang:time_to_first_token_seconds", []string{"0.1", "0.2", "0.4", "+Inf"}, pySeries{`model_name="Qwen/Qwen2.5-7B-Instruct"`, []float64{1, 5, 9, 11}, 2.7}) +
				// SchedulerMetricsCollector.queue_time: its buckets start at 0.0; labelled per rank.
				pyHistogram("sglang:queue_time_seconds", []string{"0.0", "0.1", "0.2", "0.5", "1.0", "+Inf"},
					pySeries{`engine_type="unified",model_name="Qwen/Qwen2.5-7B-Instruct",pp_rank="0",tp_rank="0"`, []float64{2, 8, 9, 9, 10, 10}, 1.25}),
			kind:   KindSGLang,
			values: map[string]Value{"running": {12, true}, "waiting": {7, true}, "kv": {0.42, true}, "prompt": {9000, true}, "generation": {3000, true}, "preemptions": {}},
			hists:  map[string]float64{"ttft": 11, "queue": 10},
		},
		{
			name:   "tgi",
			source: "router/src/server.rs (PrometheusBuilder buckets, describe_* names) and backends/v3/src/queue.rs, backend.rs (tgi_queue_size, tgi_batch_current_size), written by metrics-exporter-prometheus",
			page: `# HELP tgi_queue_size Current queue size
# TYPE tgi_queue_size gauge
tgi_queue_size 4
# HELP tgi_batch_current_size Current batch size
# TYPE tgi_batch_current_size gauge
tgi_batch_current_size 32
# HELP tgi_request_count Total number of requests
# TYPE tgi_request_count counter
tgi_request_count 120
# HELP tgi_request_duration Request duration
# TYPE tgi_request_duration histogram
tgi_request_duration_bucket{le="0.5"} 10
tgi_request_duration_bucket{le="1"} 60
tgi_request_duration_bucket{le="+Inf"} 100
tgi_request_duration_sum 120.5
tgi_request_duration_count 100
# HELP tgi_request_generated_tokens Generated tokens
# TYPE tgi_request_generated_tokens histogram
tgi_request_generated_tokens_bucket{le="256"} 100
tgi_request_generated_tokens_bucket{le="+Inf"} 100
tgi_request_generated_tokens_sum 25600
tgi_request_generated_tokens_count 100
`,
			kind:   KindTGI,
			values: map[string]Value{"running": {32, true}, "waiting": {4, true}, "generation": {25600, true}, "prompt": {}, "kv": {}},
			hists:  map[string]float64{"e2e": 100},
		},
		{
			name:   "llama.cpp",
			source: "tools/server/server-context.cpp (metrics: counters then gauges, each as # HELP, # TYPE and one unlabelled sample)",
			page: `# HELP llamacpp:prompt_tokens_total Number of prompt tokens processed.
# TYPE llamacpp:prompt_tokens_total counter
llamacpp:prompt_tokens_total 1024
# HELP llamacpp:prompt_seconds_total Prompt process time
# TYPE llamacpp:prompt_seconds_total counter
llamacpp:prompt_seconds_total 0.512
# HELP llamacpp:tokens_predicted_total Number of generation tokens processed.
# TYPE llamacpp:tokens_predicted_total counter
llamacpp:tokens_predicted_total 2048
# HELP llamacpp:prompt_tokens_seconds Average prompt throughput in tokens/s
# TYPE llamacpp:prompt_tokens_seconds gauge
llamacpp:prompt_tokens_seconds 2000
# HELP llamacpp:requests_processing Number of requests processing
# TYPE llamacpp:requests_processing gauge
llamacpp:requests_processing 4
# HELP llamacpp:requests_deferred Number of requests deferred
# TYPE llamacpp:requests_deferred gauge
llamacpp:requests_deferred 9
`,
			kind:   KindLlamaCpp,
			values: map[string]Value{"running": {4, true}, "waiting": {9, true}, "prompt": {1024, true}, "generation": {2048, true}, "kv": {}},
		},
		{
			name:   "unknown server",
			source: "a Go program's default registry",
			page: `# HELP go_goroutines Number of goroutines that currently exist.
# TYPE go_goroutines gauge
go_goroutines 12
`,
			kind:   KindUnknown,
			values: map[string]Value{"running": {}, "waiting": {}, "kv": {}, "prompt": {}, "generation": {}, "preemptions": {}},
		},
		{
			name:   "NaN samples are left out",
			source: "a vLLM page mid-restart",
			page:   "# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running{engine=\"0\"} NaN\nvllm:num_requests_running{engine=\"1\"} 2\n# TYPE vllm:kv_cache_usage_perc gauge\nvllm:kv_cache_usage_perc NaN\n",
			kind:   KindVLLM,
			values: map[string]Value{"running": {2, true}, "kv": {}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := ParseSnapshot(strings.NewReader(tt.page), 0)
			if err != nil {
				t.Fatalf("%s: %v", tt.source, err)
			}
			if s.Kind != tt.kind {
				t.Fatalf("kind %v, want %v", s.Kind, tt.kind)
			}
			checkValues(t, s, tt.values)
			for name, count := range tt.hists {
				h := map[string]Histogram{"ttft": s.TTFT, "e2e": s.E2E, "queue": s.Queue}[name]
				if !h.Known || h.Count != count {
					t.Errorf("%s: %+v, want %v observations", name, h, count)
				}
			}
		})
	}
}

func checkValues(t *testing.T, s Snapshot, want map[string]Value) {
	t.Helper()
	got := map[string]Value{"running": s.Running, "waiting": s.Waiting, "kv": s.KVUsage,
		"preemptions": s.Preemptions, "prompt": s.PromptTokens, "generation": s.GenerationTokens}
	for k, w := range want {
		if g := got[k]; g.Known != w.Known || math.Abs(g.V-w.V) > 1e-9 {
			t.Errorf("%s = %+v, want %+v", k, g, w)
		}
	}
}

func TestSnapshotMalformed(t *testing.T) {
	for _, page := range []string{
		"vllm:num_requests_running{engine=\"0\" 1\n",
		"# TYPE x gauge\nx one\n",
		"# TYPE x histogram\nx_bucket{le=\"0.1\"} -1.5\n",
	} {
		if _, err := ParseSnapshot(strings.NewReader(page), 0); !errors.Is(err, ErrMalformed) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%q: %v", page, err)
		}
	}
}

// FuzzParseSnapshot: any page gives a snapshot whose values are finite and whose histograms
// are ordered, end with +Inf and give finite quantiles, or an ErrMalformed error.
func FuzzParseSnapshot(f *testing.F) {
	f.Add(vllmPage())
	f.Add("# TYPE tgi_queue_size gauge\ntgi_queue_size 4\n")
	f.Add("# TYPE rosetop_time_to_first_token_seconds histogram\nrosetop_time_to_first_token_seconds_bucket{le=\"1\"} 2\nrosetop_time_to_first_token_seconds_bucket{le=\"0.5\"} 3\nrosetop_time_to_first_token_seconds_count 1\n")
	f.Fuzz(func(t *testing.T, page string) {
		s, err := ParseSnapshot(strings.NewReader(page), 0)
		if err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("error %v", err)
			}
			return
		}
		for _, v := range []Value{s.Running, s.Waiting, s.KVUsage, s.Preemptions, s.PromptTokens, s.GenerationTokens} {
			if math.IsNaN(v.V) || math.IsInf(v.V, 0) {
				t.Fatalf("value %v", v)
			}
		}
		for _, h := range []Histogram{s.TTFT, s.ITL, s.E2E, s.Queue, s.Prefill, s.IterationTokens} {
			if !h.Known {
				continue
			}
			n := len(h.Buckets)
			if n == 0 || !math.IsInf(h.Buckets[n-1].UpperBound, 1) {
				t.Fatalf("buckets %+v", h.Buckets)
			}
			for i := 1; i < n; i++ {
				if !(h.Buckets[i-1].UpperBound < h.Buckets[i].UpperBound) {
					t.Fatalf("unordered buckets %+v", h.Buckets)
				}
			}
			for _, q := range []float64{0, 0.5, 0.99, 1} {
				if v, ok := h.Quantile(q); ok && (math.IsNaN(v) || math.IsInf(v, 0)) {
					t.Fatalf("quantile %v = %v", q, v)
				}
				if v, ok := h.Sub(h).Quantile(q); ok {
					t.Fatalf("a histogram minus itself has quantile %v", v)
				}
			}
		}
	})
}
