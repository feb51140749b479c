package remotetest

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
)

// Histogram buckets of vllm/v1/metrics/loggers.py (PrometheusStatLogger).
var (
	ttftBuckets = []float64{0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0}
	itlBuckets  = []float64{0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0}
	e2eBuckets  = []float64{0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0}
)

// histogram is a Prometheus histogram: per-bucket counts (not cumulative), their sum.
type histogram struct {
	bounds []float64
	counts []float64 // one per bound, then +Inf
	sum    float64
}

func newHistogram(bounds []float64) histogram {
	return histogram{bounds: bounds, counts: make([]float64, len(bounds)+1)}
}

func (h *histogram) observe(v float64) {
	i := 0
	for i < len(h.bounds) && v > h.bounds[i] {
		i++
	}
	h.counts[i]++
	h.sum += v
}

// write renders h as prometheus_client does: cumulative _bucket lines, _count, _sum.
func (h *histogram) write(b *strings.Builder, name, labels string) {
	fmt.Fprintf(b, "# HELP %s Histogram.\n# TYPE %s histogram\n", name, name)
	cum := 0.0
	for i, c := range h.counts {
		cum += c
		le := "+Inf"
		if i < len(h.bounds) {
			le = strconv.FormatFloat(h.bounds[i], 'f', -1, 64)
		}
		fmt.Fprintf(b, "%s_bucket{%s,le=\"%s\"} %.1f\n", name, labels, le, cum)
	}
	fmt.Fprintf(b, "%s_count{%s} %.1f\n%s_sum{%s} %v\n", name, labels, cum, name, labels, h.sum)
}

// metrics serves the page under vLLM's names, with the requests in flight as running.
func (s *Server) metrics(w http.ResponseWriter, r *http.Request) {
	if s.opts.NoMetrics {
		http.NotFound(w, r)
		return
	}
	labels := fmt.Sprintf(`model_name=%q,engine="0"`, s.opts.Model)
	var b strings.Builder
	s.mu.Lock()
	gauge := func(name string, v float64) {
		fmt.Fprintf(&b, "# HELP %s Gauge.\n# TYPE %s gauge\n%s{%s} %v\n", name, name, name, labels, v)
	}
	counter := func(name string, v float64) {
		fmt.Fprintf(&b, "# HELP %s Counter.\n# TYPE %s counter\n%s{%s} %v\n", name, name, name, labels, v)
	}
	gauge("vllm:num_requests_running", float64(s.running))
	gauge("vllm:num_requests_waiting", 0)
	gauge("vllm:kv_cache_usage_perc", float64(s.running)/100)
	counter("vllm:num_preemptions_total", 0)
	counter("vllm:prompt_tokens_total", s.prompt)
	counter("vllm:generation_tokens_total", s.gen)
	s.ttft.write(&b, "vllm:time_to_first_token_seconds", labels)
	s.itl.write(&b, "vllm:inter_token_latency_seconds", labels)
	s.e2e.write(&b, "vllm:e2e_request_latency_seconds", labels)
	s.mu.Unlock()
	w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
	w.Write([]byte(b.String()))
}
