package remote

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"rosetop/bench"
	"rosetop/sched"
)

// rustNum is v as Rust's Display writes an f64: the shortest digits that read back, no exponent
// ("2", "0.0022", "130000").
func rustNum(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }

// rustSeries is one label set of a family: its labels as name, value pairs (written sorted by
// name, as the Rust prometheus crate sorts a metric's label pairs), and its value, or its
// histogram's cumulative counts (one per bound, +Inf last) and sum.
type rustSeries struct {
	labels [][2]string
	value  float64
	counts []float64
	sum    float64
}

func (s rustSeries) labelText(extra ...string) string {
	pairs := slices.Clone(s.labels)
	slices.SortFunc(pairs, func(a, b [2]string) int { return strings.Compare(a[0], b[0]) })
	var parts []string
	for _, p := range pairs {
		parts = append(parts, fmt.Sprintf("%s=%q", p[0], p[1]))
	}
	parts = append(parts, extra...)
	if len(parts) == 0 {
		return ""
	}
	return "{" + strings.Join(parts, ",") + "}"
}

// rustFamily writes a family as the Rust prometheus crate's TextEncoder does (Dynamo's frontend
// uses it): # HELP, # TYPE, then each series; a histogram's buckets with le after the other
// labels, the +Inf bucket, _sum and _count.
func rustFamily(name, help, typ string, bounds []float64, series ...rustSeries) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, typ)
	for _, s := range series {
		if typ != "histogram" {
			fmt.Fprintf(&b, "%s%s %s\n", name, s.labelText(), rustNum(s.value))
			continue
		}
		for i, le := range bounds {
			fmt.Fprintf(&b, "%s_bucket%s %s\n", name, s.labelText(`le="`+rustNum(le)+`"`), rustNum(s.counts[i]))
		}
		fmt.Fprintf(&b, "%s_bucket%s %s\n", name, s.labelText(`le="+Inf"`), rustNum(s.counts[len(bounds)]))
		fmt.Fprintf(&b, "%s_sum%s %s\n", name, s.labelText(), rustNum(s.sum))
		fmt.Fprintf(&b, "%s_count%s %s\n", name, s.labelText(), rustNum(s.counts[len(bounds)]))
	}
	return b.String()
}

// Dynamo's frontend's default buckets (lib/llm/src/http/service/metrics.rs, Metrics::build):
// generate_log_buckets(min, max, count), 0 then count-1 log-spaced values rounded to two
// significant figures.
var (
	dynTTFTBounds = []float64{0, 0.0022, 0.0047, 0.01, 0.022, 0.047, 0.1, 0.22, 0.47, 1, 2.2, 4.7, 10, 22, 48, 100, 220, 480} // 0.001, 480, 18
	dynITLBounds  = []float64{0, 0.0019, 0.0035, 0.0067, 0.013, 0.024, 0.045, 0.084, 0.16, 0.3, 0.56, 1.1, 2}                 // 0.001, 2, 13
	dynDurBounds  = []float64{0, 2, 4, 8, 16, 32, 64, 130, 260, 510}                                                          // 1, 512, 10
	dynISLBounds  = []float64{0, 100, 210, 430, 870, 1800, 3600, 7400, 15000, 31000, 63000, 130000}                           // 50, 128000, 12
	dynOSLBounds  = []float64{0, 100, 210, 430, 880, 1800, 3700, 7600, 16000, 32000}                                          // 50, 32000, 10
)

// cumulative is counts per bucket made cumulative, +Inf last (the total).
func cumulative(per ...float64) []float64 {
	out := make([]float64, len(per))
	var run float64
	for i, c := range per {
		run += c
		out[i] = run
	}
	return out
}

// spread is n observations in bucket i of bounds (0-based; len(bounds) is the +Inf bucket), as
// cumulative counts.
func spread(bounds []float64, at map[int]float64) []float64 {
	per := make([]float64, len(bounds)+1)
	for i, n := range at {
		per[i] = n
	}
	return cumulative(per...)
}

// dynamoState is what a Dynamo frontend's page shows for two models.
type dynamoState struct {
	prefix           string
	inflight, queued [2]float64 // per model; negative: the series was never written
	noQueued         bool       // a frontend from before queued_requests
	noOutputCounter  bool       // ... and before output_tokens_total
	ttft             [2]float64 // observations per model, all in (0.047, 0.1]
	outputTokens     [2]float64
}

var dynModels = [2]string{"Qwen/Qwen3-0.6B", "meta-llama/Llama-3.1-8B-Instruct"}

// dynamoPage is the frontend's /metrics for st, families in name order as the crate's Registry
// gathers them, series in label-value order; the HELP texts and label names are the source's.
// A family without series is left out, as gather prunes it.
func dynamoPage(st dynamoState) string {
	p := st.prefix
	if p == "" {
		p = "dynamo_frontend"
	}
	perModel := func(vals [2]float64) []rustSeries {
		var out []rustSeries
		for i, v := range vals {
			if v >= 0 {
				out = append(out, rustSeries{labels: [][2]string{{"model", dynModels[i]}}, value: v})
			}
		}
		return out
	}
	gauge := func(suffix, help string, vals [2]float64) string {
		s := perModel(vals)
		if len(s) == 0 {
			return ""
		}
		return rustFamily(p+"_"+suffix, help, "gauge", nil, s...)
	}
	hist := func(suffix, help string, bounds []float64, obs [2]float64, at int, mean float64) string {
		var s []rustSeries
		for i, n := range obs {
			if n > 0 {
				s = append(s, rustSeries{labels: [][2]string{{"model", dynModels[i]}}, counts: spread(bounds, map[int]float64{at: n}), sum: n * mean})
			}
		}
		if len(s) == 0 {
			return ""
		}
		return rustFamily(p+"_"+suffix, help, "histogram", bounds, s...)
	}
	requests := st.ttft // and two cancelled where the first model served any
	if requests[0] > 0 {
		requests[0] += 2
	}
	var b strings.Builder
	if !st.noQueued {
		b.WriteString(gauge("active_requests", "Number of requests currently being handled by the frontend, from HTTP handler entry to response completion", st.inflight))
	}
	b.WriteString(rustFamily(p+"_disconnected_clients", "Number of disconnected clients", "gauge", nil, rustSeries{value: 1}))
	b.WriteString(gauge("inflight_requests", "Number of inflight requests", st.inflight))
	b.WriteString(hist("input_sequence_tokens", "Input sequence length in tokens", dynISLBounds, st.ttft, 4, 512))
	b.WriteString(hist("inter_token_latency_seconds", "Inter-token latency in seconds", dynITLBounds, [2]float64{st.outputTokens[0] - st.ttft[0], st.outputTokens[1] - st.ttft[1]}, 4, 0.02))
	b.WriteString(gauge("model_context_length", "Maximum context length in tokens for a worker serving the model", [2]float64{40960, 131072}))
	b.WriteString(gauge("model_kv_cache_block_size", "KV cache block size in tokens for a worker serving the model", [2]float64{16, 16}))
	b.WriteString(gauge("model_total_kv_blocks", "Total KV cache blocks available for a worker serving the model", [2]float64{52000, 26000}))
	// Observed when a request ends: fewer than the tokens counted as they stream.
	b.WriteString(hist("output_sequence_tokens", "Output sequence length in tokens", dynOSLBounds, [2]float64{st.ttft[0] / 2, st.ttft[1] / 2}, 2, 150))
	if !st.noOutputCounter && st.outputTokens != [2]float64{} {
		b.WriteString(rustFamily(p+"_output_tokens_total", "Total number of output tokens generated (updates in real-time)", "counter", nil, perModel(st.outputTokens)...))
	}
	if !st.noQueued {
		b.WriteString(gauge("queued_requests", "Number of requests in HTTP processing queue", st.queued))
	}
	b.WriteString(hist("request_duration_seconds", "Duration of LLM requests", dynDurBounds, requests, 2, 3.5))
	if requests[0] > 0 {
		s := []rustSeries{{labels: [][2]string{{"model", dynModels[0]}, {"endpoint", "chat_completions"}, {"request_type", "stream"}, {"status", "error"}, {"error_type", "cancelled"}}, value: 2}}
		for i, n := range st.ttft {
			if n > 0 {
				s = append(s, rustSeries{labels: [][2]string{{"model", dynModels[i]}, {"endpoint", "chat_completions"}, {"request_type", "stream"}, {"status", "success"}, {"error_type", ""}}, value: n})
			}
		}
		b.WriteString(rustFamily(p+"_requests_total", "Total number of LLM requests processed", "counter", nil, s...))
	}
	b.WriteString(hist("time_to_first_token_seconds", "Time to first token in seconds", dynTTFTBounds, st.ttft, 6, 0.06))
	return b.String()
}

// servePage serves an OpenAI-compatible server's model list and page() as its /metrics.
func servePage(t *testing.T, page func() string) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/v1/models":
			fmt.Fprint(w, `{"object":"list","data":[{"id":"m","object":"model"}]}`)
		case "/metrics":
			w.Header().Set("Content-Type", "text/plain; version=0.0.4")
			fmt.Fprint(w, page())
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

// scrapeOnce reads page over HTTP through a Scraper, as a watcher does.
func scrapeOnce(t *testing.T, page string) Snapshot {
	t.Helper()
	srv := servePage(t, func() string { return page })
	s, err := NewScraper(ScraperConfig{URL: srv.URL + "/metrics"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	snap, err := s.Scrape(context.Background())
	if err != nil {
		t.Fatalf("%v\npage:\n%s", err, page)
	}
	return snap
}

// TestSnapshotDynamo: Dynamo's frontend's page. The queued requests (before their first token)
// are among the in flight: waiting is the queued, running the rest. Generated tokens come from
// the counter updated as they stream, prompt tokens from the input length histogram's sum; the
// frontend knows no KV cache use or preemptions. Its TTFT histogram counts every request's first
// token.
func TestSnapshotDynamo(t *testing.T) {
	page := dynamoPage(dynamoState{inflight: [2]float64{10, 5}, queued: [2]float64{3, 1}, ttft: [2]float64{40, 10}, outputTokens: [2]float64{9000, 1000}})
	s := scrapeOnce(t, page)
	if s.Kind != KindDynamo || s.Kind.String() != "dynamo" {
		t.Fatalf("kind %v", s.Kind)
	}
	checkValues(t, s, map[string]Value{
		"running": {11, true}, "waiting": {4, true}, "kv": {}, "preemptions": {},
		"generation": {10000, true}, // output_tokens_total, not output_sequence_tokens' sum of 3750
		"prompt":     {50 * 512, true},
	})
	if !s.TTFT.Known || s.TTFT.Count != 50 || s.TTFT.countAt(0.047) != 0 || s.TTFT.countAt(0.1) != 50 || math.Abs(s.TTFT.Sum-3) > 1e-9 {
		t.Errorf("TTFT %+v", s.TTFT)
	}
	if s.TTFT.Buckets[0].UpperBound != 0 {
		t.Errorf("TTFT's first bound %v, want the 0 generate_log_buckets starts with", s.TTFT.Buckets[0].UpperBound)
	}
	if !s.ITL.Known || s.ITL.Count != 9950 || !s.E2E.Known || s.E2E.Count != 52 {
		t.Errorf("ITL %+v, E2E %+v", s.ITL, s.E2E)
	}
	if s.Queue.Known || s.Prefill.Known || s.IterationTokens.Known {
		t.Error("histograms the frontend does not have are known")
	}
	if !KindDynamo.countsFirstTokens() {
		t.Error("the frontend's TTFT count is not taken for its first tokens")
	}
}

// TestSnapshotDynamoVersions: the frontend's queue as its pages tell it over its versions and
// states.
func TestSnapshotDynamoVersions(t *testing.T) {
	never := [2]float64{-1, -1}
	for _, tc := range []struct {
		name                      string
		st                        dynamoState
		running, waiting, genToks Value
	}{
		// A model's series are written at its first request: none yet, none in flight.
		{"fresh frontend", dynamoState{inflight: never, queued: never}, Value{0, true}, Value{0, true}, Value{}},
		// One model served, the other not yet: the absent one adds nothing.
		{"one model seen", dynamoState{inflight: [2]float64{4, -1}, queued: [2]float64{1, -1}, ttft: [2]float64{3, 0}, outputTokens: [2]float64{90, 0}},
			Value{3, true}, Value{1, true}, Value{90, true}},
		// The gauges are read one after the other: more queued than in flight reads as none running.
		{"queued read after a request began", dynamoState{inflight: [2]float64{2, 0}, queued: [2]float64{3, 0}, ttft: [2]float64{1, 0}, outputTokens: [2]float64{5, 0}},
			Value{0, true}, Value{3, true}, Value{5, true}},
		// Before queued_requests and output_tokens_total, under the prefix NIM sets: every request
		// in flight is running, waiting unknown; generated tokens from the lengths of those done.
		{"nv_llm_http_service", dynamoState{prefix: "nv_llm_http_service", noQueued: true, noOutputCounter: true, inflight: [2]float64{6, 2}, ttft: [2]float64{20, 4}, outputTokens: [2]float64{400, 100}},
			Value{8, true}, Value{}, Value{12 * 150, true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := scrapeOnce(t, dynamoPage(tc.st))
			if s.Kind != KindDynamo {
				t.Fatalf("kind %v", s.Kind)
			}
			checkValues(t, s, map[string]Value{"running": tc.running, "waiting": tc.waiting, "generation": tc.genToks, "kv": {}})
			if tc.st.ttft == [2]float64{} && (s.TTFT.Known || s.E2E.Known) {
				t.Errorf("a frontend that served nothing has histograms: TTFT %+v E2E %+v", s.TTFT, s.E2E)
			}
		})
	}
}

// sglRouterPage is the current SGLang router's /metrics (MetricsRegistry::render_with_workers),
// written by hand as the router writes it: every family's # HELP and # TYPE whether it has series
// or not, in the router's order, labels in its order, bounds and sums as Rust prints an f64.
// Three workers hold 4, 0 and 7 requests; 30 streamed requests had their first chunk, 42
// finished.
func sglRouterPage() string {
	const model = `model_id="Qwen/Qwen3-8B"`
	ttft := []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.2, 0.4, 0.6, 0.8, 1, 2, 4, 6, 8, 10, 20, 40, 60, 80, 100, 200, 400}
	dur := []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30}
	hist := func(name string, bounds []float64, at int, n, sum float64) string {
		var b strings.Builder
		c := spread(bounds, map[int]float64{at: n})
		for i, le := range bounds {
			fmt.Fprintf(&b, "%s_bucket{%s,le=\"%s\"} %s\n", name, model, rustNum(le), rustNum(c[i]))
		}
		fmt.Fprintf(&b, "%s_bucket{%s,le=\"+Inf\"} %s\n%s_sum{%s} %s\n%s_count{%s} %s\n", name, model, rustNum(n), name, model, rustNum(sum), name, model, rustNum(n))
		return b.String()
	}
	return `# HELP sgl_router_requests_total Total requests received at the router HTTP edge, counted before worker dispatch (true intake).
# TYPE sgl_router_requests_total counter
sgl_router_requests_total{route="/v1/chat/completions",method="POST"} 53
sgl_router_requests_total{route="/v1/models",method="GET"} 2
# HELP sgl_router_worker_requests_total Chat-completions requests dispatched to a worker, by dispatch outcome.
# TYPE sgl_router_worker_requests_total counter
sgl_router_worker_requests_total{worker_url="http://10.0.0.1:30000",model_id="Qwen/Qwen3-8B",mode="plain",outcome="success"} 20
sgl_router_worker_requests_total{worker_url="http://10.0.0.2:30000",model_id="Qwen/Qwen3-8B",mode="plain",outcome="success"} 22
# HELP sgl_router_request_duration_seconds End-to-end latency of chat-completions requests dispatched to a worker, in seconds (streaming requests are measured to stream completion).
# TYPE sgl_router_request_duration_seconds histogram
` + hist("sgl_router_request_duration_seconds", dur, 8, 42, 105) + `# HELP sgl_router_ttft_seconds Time to first token (first upstream response chunk) for streaming requests, in seconds.
# TYPE sgl_router_ttft_seconds histogram
` + hist("sgl_router_ttft_seconds", ttft, 4, 30, 2.25) + `# HELP sgl_router_stream_outcome_total Final outcome of a 2xx stream.
# TYPE sgl_router_stream_outcome_total counter
sgl_router_stream_outcome_total{worker_url="http://10.0.0.1:30000",model_id="Qwen/Qwen3-8B",outcome="ok"} 19
# HELP sgl_router_responses_total Responses returned at the router HTTP edge, by route, method and HTTP status code.
# TYPE sgl_router_responses_total counter
sgl_router_responses_total{route="/v1/chat/completions",method="POST",status_code="200"} 42
# HELP sgl_router_active_load Per-worker active load (prefill_tokens or decode_blocks).
# TYPE sgl_router_active_load gauge
sgl_router_active_load{worker_url="http://10.0.0.1:30000",kind="prefill_tokens"} 8192
# HELP sgl_router_workers Registered workers by mode.
# TYPE sgl_router_workers gauge
sgl_router_workers{mode="plain"} 3
sgl_router_workers{mode="prefill"} 0
sgl_router_workers{mode="decode"} 0
# HELP sgl_router_worker_health Worker health: 1 = circuit breaker admits requests, 0 = rejecting (open within cooldown, or half-open with a probe in flight). May read 1 while sgl_router_worker_cb_state=1 (open but cooldown elapsed).
# TYPE sgl_router_worker_health gauge
sgl_router_worker_health{worker_url="http://10.0.0.1:30000"} 1
sgl_router_worker_health{worker_url="http://10.0.0.2:30000"} 1
sgl_router_worker_health{worker_url="http://10.0.0.3:30000"} 0
# HELP sgl_router_worker_cb_state Circuit breaker state per worker (0=closed, 1=open, 2=half_open).
# TYPE sgl_router_worker_cb_state gauge
sgl_router_worker_cb_state{worker_url="http://10.0.0.1:30000"} 0
sgl_router_worker_cb_state{worker_url="http://10.0.0.2:30000"} 0
sgl_router_worker_cb_state{worker_url="http://10.0.0.3:30000"} 1
# HELP sgl_router_worker_inflight_requests In-flight requests currently dispatched to each worker.
# TYPE sgl_router_worker_inflight_requests gauge
sgl_router_worker_inflight_requests{worker_url="http://10.0.0.1:30000"} 4
sgl_router_worker_inflight_requests{worker_url="http://10.0.0.2:30000"} 0
sgl_router_worker_inflight_requests{worker_url="http://10.0.0.3:30000"} 7
# HELP sgl_router_stale_requests_total Total stale-request cancellations fired by the janitor.
# TYPE sgl_router_stale_requests_total counter
# HELP sgl_router_decode_affinity_total Decode-affinity outcomes from select_decode_with_affinity.
# TYPE sgl_router_decode_affinity_total counter
# HELP sgl_router_sticky_total Sticky-session selection outcomes from StickyPolicy.
# TYPE sgl_router_sticky_total counter
# HELP sgl_router_policy_decisions_total Final Prefill policy decisions by policy and bounded reason.
# TYPE sgl_router_policy_decisions_total counter
sgl_router_policy_decisions_total{policy="cache_aware",reason="cache_hit"} 40
# HELP sgl_router_cache_admission_evaluated_total Cache-Aware candidates evaluated by hard admission.
# TYPE sgl_router_cache_admission_evaluated_total counter
sgl_router_cache_admission_evaluated_total 120
# HELP sgl_router_cache_admission_rejected_total Cache-Aware candidates rejected by hard admission.
# TYPE sgl_router_cache_admission_rejected_total counter
sgl_router_cache_admission_rejected_total 0
`
}

// smeFamily is a family as metrics-exporter-prometheus writes it (the older SGLang router's and
// the SGLang Model Gateway's exporter): # HELP from describe_*, # TYPE, the lines, then an empty
// line.
func smeFamily(name, help, typ string, lines ...string) string {
	return "# HELP " + name + " " + help + "\n# TYPE " + name + " " + typ + "\n" + strings.Join(lines, "\n") + "\n\n"
}

// smeHistogram is a series of a histogram as metrics-exporter-prometheus writes it: the labels in
// the order the metric's key has them, le after them, the +Inf bucket, _sum, _count.
func smeHistogram(name, labels string, bounds []float64, at int, n, sum float64) []string {
	c := spread(bounds, map[int]float64{at: n})
	var out []string
	for i, le := range bounds {
		out = append(out, fmt.Sprintf("%s_bucket{%s,le=\"%s\"} %s", name, labels, rustNum(le), rustNum(c[i])))
	}
	return append(out, fmt.Sprintf("%s_bucket{%s,le=\"+Inf\"} %s", name, labels, rustNum(n)),
		fmt.Sprintf("%s_sum{%s} %s", name, labels, rustNum(sum)), fmt.Sprintf("%s_count{%s} %s", name, labels, rustNum(n)))
}

// smeDurationBuckets are the routers' buckets for names ending duration_seconds (start_prometheus).
var smeDurationBuckets = []float64{0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 15, 30, 45, 60, 90, 120, 180, 240}

// olderSGLRouterPage is sgl-router/src/metrics.rs's page, on --prometheus-port: per worker the
// requests it runs (cache_aware policy), per route the request duration.
func olderSGLRouterPage() string {
	return smeFamily("sgl_router_requests_total", "Total number of requests by route and method", "counter",
		`sgl_router_requests_total{route="/v1/chat/completions"} 64`) +
		smeFamily("sgl_router_running_requests", "Number of running requests per worker", "gauge",
			`sgl_router_running_requests{worker="http://10.0.0.2:30000"} 5`, `sgl_router_running_requests{worker="http://10.0.0.1:30000"} 3`) +
		smeFamily("sgl_router_active_workers", "Number of currently active workers", "gauge", "sgl_router_active_workers 2") +
		smeFamily("sgl_router_request_duration_seconds", "Request duration in seconds by route", "histogram",
			smeHistogram("sgl_router_request_duration_seconds", `route="/v1/chat/completions"`, smeDurationBuckets, 10, 64, 160)...)
}

// smgPage is sgl-model-gateway/src/observability/metrics.rs's page (smg_ names): the requests
// each worker runs, the router's request duration, and its gRPC TTFT, which without buckets set
// for it the exporter writes as a summary.
func smgPage() string {
	const l = `router_type="grpc",backend_type="regular",connection_mode="grpc",model="Qwen/Qwen3-8B",endpoint="chat"`
	const ttftL = `router_type="grpc",backend_type="regular",model="Qwen/Qwen3-8B",endpoint="chat"`
	return smeFamily("smg_router_requests_total", "Total routed requests by router_type, backend_type, connection_mode, model, endpoint, streaming", "counter",
		`smg_router_requests_total{`+l+`,streaming="true"} 25`) +
		smeFamily("smg_worker_requests_active", "Currently running requests per worker", "gauge",
			`smg_worker_requests_active{worker="grpc://10.0.0.1:20000"} 6`, `smg_worker_requests_active{worker="grpc://10.0.0.2:20000"} 2`) +
		smeFamily("smg_router_request_duration_seconds", "Router request duration by router_type, backend_type, connection_mode, model, endpoint", "histogram",
			smeHistogram("smg_router_request_duration_seconds", l, smeDurationBuckets, 9, 25, 30)...) +
		smeFamily("smg_router_ttft_seconds", "Time to first token by router_type, backend_type, model, endpoint (gRPC only)", "summary",
			`smg_router_ttft_seconds{`+ttftL+`,quantile="0"} 0.031`, `smg_router_ttft_seconds{`+ttftL+`,quantile="0.5"} 0.052`,
			`smg_router_ttft_seconds{`+ttftL+`,quantile="0.9"} 0.08`, `smg_router_ttft_seconds{`+ttftL+`,quantile="0.95"} 0.09`,
			`smg_router_ttft_seconds{`+ttftL+`,quantile="0.99"} 0.11`, `smg_router_ttft_seconds{`+ttftL+`,quantile="0.999"} 0.12`,
			`smg_router_ttft_seconds{`+ttftL+`,quantile="1"} 0.12`, `smg_router_ttft_seconds_sum{`+ttftL+`} 1.4`, `smg_router_ttft_seconds_count{`+ttftL+`} 25`)
}

// TestSnapshotSGLangRouter: the SGLang router's pages over its versions. Running is the requests
// dispatched to its workers and not yet done; it has no waiting count and no token counters;
// latency is its request duration and, where it has the histogram, TTFT of the streamed requests,
// which is why its TTFT count is not taken for the first tokens.
func TestSnapshotSGLangRouter(t *testing.T) {
	for _, tc := range []struct {
		name      string
		page      string
		running   Value
		ttft, e2e float64 // observations; -1: the histogram is not known
		e2eBound  float64 // the E2E bucket bound all its observations are in
	}{
		{"sgl-router", sglRouterPage(), Value{11, true}, 30, 42, 2.5},
		{"older sgl-router", olderSGLRouterPage(), Value{8, true}, -1, 64, 5},
		{"SGLang Model Gateway", smgPage(), Value{8, true}, -1, 25, 2.5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := scrapeOnce(t, tc.page)
			if s.Kind != KindSGLangRouter || s.Kind.String() != "sgl-router" {
				t.Fatalf("kind %v", s.Kind)
			}
			checkValues(t, s, map[string]Value{"running": tc.running, "waiting": {}, "kv": {}, "prompt": {}, "generation": {}, "preemptions": {}})
			if got := s.TTFT.Known; got != (tc.ttft >= 0) || (got && s.TTFT.Count != tc.ttft) {
				t.Errorf("TTFT %+v, want %v observations", s.TTFT, tc.ttft)
			}
			if !s.E2E.Known || s.E2E.Count != tc.e2e || s.E2E.countAt(tc.e2eBound) != tc.e2e || s.E2E.countAt(tc.e2eBound/2) != 0 {
				t.Errorf("E2E %+v, want %v observations at %v", s.E2E, tc.e2e, tc.e2eBound)
			}
			if s.ITL.Known || s.Queue.Known {
				t.Errorf("ITL %+v, queue %+v", s.ITL, s.Queue)
			}
		})
	}
	if KindSGLangRouter.countsFirstTokens() {
		t.Error("the router's TTFT count, of streamed requests only, is taken for every first token")
	}
}

// TestWatchDynamo: watching a Dynamo frontend through the session: its page names the server,
// its queue is the panes' from its first scrape (a fresh frontend's: nothing in flight), and the
// first tokens its TTFT histogram counts are the admissions.
func TestWatchDynamo(t *testing.T) {
	never := [2]float64{-1, -1}
	states := []dynamoState{
		{inflight: never, queued: never},
		{inflight: [2]float64{6, 0}, queued: [2]float64{2, 0}, ttft: [2]float64{20, 0}, outputTokens: [2]float64{800, 0}},
		{inflight: [2]float64{5, 4}, queued: [2]float64{0, 1}, ttft: [2]float64{40, 10}, outputTokens: [2]float64{3000, 600}},
	}
	var phase atomic.Int32
	srv := servePage(t, func() string { return dynamoPage(states[phase.Load()]) })
	p, err := NewProvider(ProviderOptions{Client: Config{BaseURL: srv.URL + "/v1"}, Watch: true, ScrapeEvery: ms(5)})
	if err != nil {
		t.Fatal(err)
	}
	var progress bytes.Buffer
	if err := p.Prepare(context.Background(), &progress); err != nil {
		t.Fatal(err)
	}
	if want := "rosetop: watching dynamo at " + srv.URL + "/v1 ("; !strings.HasPrefix(progress.String(), want) {
		t.Errorf("start-up line %q, want it to begin %q", progress.String(), want)
	}
	sess, steps := startWatch(t, p)
	defer sess.Close()
	v := waitView(t, sess, steps, "a fresh frontend's empty queue", func(v *bench.View) bool {
		return v.Server != nil && v.Server.Total != nil && v.QueueLast.At > 0
	})
	if r := v.Header.Remote; r == nil || r.Kind != "dynamo" || !r.ServerFirsts {
		t.Fatalf("remote %+v", r)
	}
	if m := v.Server; m.Note != "" || m.Running != (bench.Gauge{V: 0, Known: true}) || m.Waiting != (bench.Gauge{V: 0, Known: true}) || m.KVUsage.Known {
		t.Errorf("fresh frontend: %+v", m)
	}
	admitted := func(v *bench.View) int {
		n := 0
		for _, a := range v.Admissions {
			n += a.Size
		}
		return n
	}
	phase.Store(1)
	waitView(t, sess, steps, "4 running, 2 waiting", func(v *bench.View) bool { return v.QueueLast.Running == 4 && v.QueueLast.Waiting == 2 })
	phase.Store(2)
	v = waitView(t, sess, steps, "8 running, 1 waiting, 50 first tokens", func(v *bench.View) bool {
		return v.QueueLast.Running == 8 && v.QueueLast.Waiting == 1 && admitted(v) == 50
	})
	for _, name := range []string{"TTFT", "ITL", "E2E latency"} {
		if !slices.ContainsFunc(v.Server.Latency, func(l bench.ServerLatency) bool { return l.Name == name && l.Known }) {
			t.Errorf("no %s in the server pane: %+v", name, v.Server.Latency)
		}
	}
	if tot := v.Server.Total; !tot.GenTokens.Known || tot.GenTokens.V != 3600 {
		t.Errorf("generated tokens since the first scrape %+v, want 3600", tot.GenTokens)
	}
}

// TestWatchSGLangRouter: the SGLang router watched at its own /metrics, and the older one at its
// --prometheus-port page given as the metrics URL: the router is named, its running requests
// shown, and its figures say that it counts no waiting requests (a step then takes no queue from
// it) and not every first token.
func TestWatchSGLangRouter(t *testing.T) {
	for _, tc := range []struct {
		name    string
		page    string
		apart   bool // the page is on a port of its own (--metrics-url)
		running float64
	}{{"own /metrics", sglRouterPage(), false, 11}, {"prometheus port", olderSGLRouterPage(), true, 8}} {
		t.Run(tc.name, func(t *testing.T) {
			page := servePage(t, func() string { return tc.page })
			o := ProviderOptions{Client: Config{BaseURL: page.URL + "/v1"}, Watch: true, ScrapeEvery: ms(5)}
			if tc.apart {
				o.Client.BaseURL = servePage(t, func() string { return "" }).URL + "/v1"
				o.MetricsURL = page.URL + "/metrics"
			}
			p, err := NewProvider(o)
			if err != nil {
				t.Fatal(err)
			}
			var progress bytes.Buffer
			if err := p.Prepare(context.Background(), &progress); err != nil {
				t.Fatal(err)
			}
			if want := "rosetop: watching sgl-router at " + o.Client.BaseURL + " (" + page.URL + "/metrics)"; !strings.HasPrefix(progress.String(), want) {
				t.Errorf("start-up line %q, want it to begin %q", progress.String(), want)
			}
			spec := bench.ServerSpec{Clock: bench.NewRealClock(), MaxBatch: 4}
			if r := p.info(spec).Remote; r.Kind != "sgl-router" || r.ServerFirsts {
				t.Errorf("remote %+v", r)
			}
			w, err := newWatcher(p, spec)
			if err != nil {
				t.Fatal(err)
			}
			defer w.close()
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			landed := make(chan struct{})
			go w.loop(ctx, func() {
				select {
				case landed <- struct{}{}:
				case <-ctx.Done():
				}
			})
			for range 2 { // a window between two scrapes
				select {
				case <-landed:
				case <-time.After(30 * time.Second):
					t.Fatal("no scrape")
				}
			}
			m := w.latest()
			if m.Kind != "sgl-router" || m.Running != (bench.Gauge{V: tc.running, Known: true}) || m.Waiting.Known || m.Note != "queue not known: the server's waiting is absent" {
				t.Errorf("server metrics: %+v", m)
			}
			if !slices.ContainsFunc(m.Latency, func(l bench.ServerLatency) bool { return l.Name == "E2E latency" && l.Known }) {
				t.Errorf("no E2E latency: %+v", m.Latency)
			}
			var snap sched.Snapshot
			if w.fill(&snap) || snap.Running != 0 {
				t.Errorf("a step took the router's queue: %+v", snap)
			}
		})
	}
}

// TestWatchFrontendFleet: a Dynamo frontend and an SGLang router watched as one fleet are of two
// kinds, and the fleet's first tokens are not the server's (the router counts the streamed ones
// only).
func TestWatchFrontendFleet(t *testing.T) {
	dyn := servePage(t, func() string {
		return dynamoPage(dynamoState{inflight: [2]float64{3, 0}, queued: [2]float64{1, 0}, ttft: [2]float64{5, 0}, outputTokens: [2]float64{50, 0}})
	})
	router := servePage(t, sglRouterPage)
	p, err := NewProvider(ProviderOptions{Client: Config{BaseURL: dyn.URL + "/v1"}, Fleet: []string{router.URL + "/v1"}, Watch: true, ScrapeEvery: ms(5)})
	if err != nil {
		t.Fatal(err)
	}
	sess, steps := startWatch(t, p)
	defer sess.Close()
	v := waitView(t, sess, steps, "both servers scraped", func(v *bench.View) bool {
		return v.Server != nil && len(v.Server.Members) == 2 && v.Server.Members[0].Total != nil && v.Server.Members[1].Total != nil
	})
	if r := v.Header.Remote; r.Kind != "mixed" || r.ServerFirsts {
		t.Errorf("remote %+v", r)
	}
	if k0, k1 := v.Server.Members[0].Kind, v.Server.Members[1].Kind; k0 != "dynamo" || k1 != "sgl-router" {
		t.Errorf("members' kinds %q, %q", k0, k1)
	}
	// The queue is summed over the servers that count one: the frontend's alone.
	v = waitView(t, sess, steps, "the frontend's queue", func(v *bench.View) bool { return v.QueueLast.Running == 2 && v.QueueLast.Waiting == 1 })
	if m := v.Server; m.Running != (bench.Gauge{V: 13, Known: true}) {
		t.Errorf("fleet running %+v, want the frontend's 2 and the router's 11", m.Running)
	}
}

// TestTallyCounterAppears: a token counter that a server's page lacked and now has counts from
// zero (Dynamo's frontend writes it at its first tokens), as a histogram that appears does; one
// that appears on another kind of server's page, or on a page naming none, does not.
func TestTallyCounterAppears(t *testing.T) {
	for _, tc := range []struct {
		name     string
		was, now ServerKind
		want     bench.Gauge
	}{
		{"same server", KindDynamo, KindDynamo, bench.Gauge{V: 120, Known: true}},
		{"another server", KindVLLM, KindDynamo, bench.Gauge{}},
		{"no server named", KindUnknown, KindUnknown, bench.Gauge{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			prev := &Snapshot{Kind: tc.was}
			now := &Snapshot{At: ms(500), Kind: tc.now, GenerationTokens: Value{V: 120, Known: true}, PromptTokens: Value{V: 7, Known: true}}
			var tl tally
			tl.add(prev, nil, nil)
			step, _ := gains(now, prev)
			tl.add(now, prev, step)
			if tl.gen != tc.want {
				t.Errorf("generated %+v, want %+v", tl.gen, tc.want)
			}
			if tl.prompt.Known != tc.want.Known {
				t.Errorf("prompt %+v", tl.prompt)
			}
		})
	}
}

// TestSnapshotDynamo2025: frontends of 2025 named the two gauges with a _total suffix
// (lib/llm/tests/http_metrics.rs then asserts dynamo_frontend_inflight_requests_total and
// dynamo_frontend_queued_requests_total): a loaded one is not read as idle.
func TestSnapshotDynamo2025(t *testing.T) {
	const model = `model="Qwen/Qwen3-0.6B"`
	page := strings.Join([]string{
		"# HELP dynamo_frontend_inflight_requests_total Number of inflight requests",
		"# TYPE dynamo_frontend_inflight_requests_total gauge",
		"dynamo_frontend_inflight_requests_total{" + model + "} 7",
		"# HELP dynamo_frontend_queued_requests_total Number of requests in HTTP processing queue",
		"# TYPE dynamo_frontend_queued_requests_total gauge",
		"dynamo_frontend_queued_requests_total{" + model + "} 3",
		"# HELP dynamo_frontend_requests_total Total number of LLM requests processed",
		"# TYPE dynamo_frontend_requests_total counter",
		`dynamo_frontend_requests_total{endpoint="chat_completions",` + model + `,request_type="stream",status="success"} 10`,
		"",
	}, "\n")
	s := scrapeOnce(t, page)
	if s.Kind != KindDynamo {
		t.Fatalf("kind %v", s.Kind)
	}
	checkValues(t, s, map[string]Value{"running": {4, true}, "waiting": {3, true}})
}
