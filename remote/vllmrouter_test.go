package remote

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"strconv"
	"strings"
	"testing"
	"time"

	"rosetop/bench"
	"rosetop/sched"
)

// pyNum is a value as prometheus_client writes it (floatToGoString): Python's repr ("3.0",
// "0.05"), "+Inf", and from 10^6 on an exponent as Go writes one ("1.7356896e+09").
func pyNum(v float64) string {
	switch {
	case math.IsInf(v, 1):
		return "+Inf"
	case v >= 1e6:
		return strconv.FormatFloat(v, 'e', -1, 64)
	case v == math.Trunc(v):
		return strconv.FormatFloat(v, 'f', 1, 64)
	}
	return strconv.FormatFloat(v, 'f', -1, 64)
}

// pySample is one sample line: name{labels} value, labels in the metric's label names' order.
func pySample(name, labels string, v float64) string {
	if labels == "" {
		return name + " " + pyNum(v) + "\n"
	}
	return name + "{" + labels + "} " + pyNum(v) + "\n"
}

// pyCreated is when prometheus_client made a counter's or histogram's series.
const pyCreated = 1.7356896e+09

// pyFamily is one metric as prometheus_client's generate_latest writes it: HELP and TYPE (a
// counter's under its name with _total), its samples, then where it has created series their
// _created samples in a gauge family of their own. A labelled metric with no series yet is its
// HELP and TYPE alone.
func pyFamily(name, typ, help, samples string, created ...string) string {
	shown := name
	if typ == "counter" {
		shown += "_total"
	}
	out := fmt.Sprintf("# HELP %s %s\n# TYPE %s %s\n%s", shown, help, shown, typ, samples)
	if len(created) > 0 {
		out += fmt.Sprintf("# HELP %s_created %s\n# TYPE %s_created gauge\n", name, help, name)
		for _, l := range created {
			out += pySample(name+"_created", l, pyCreated)
		}
	}
	return out
}

// routerLatencyBounds are vllm:request_latency_seconds' buckets (metrics_service/__init__.py),
// +Inf added by prometheus_client.
var routerLatencyBounds = []float64{0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, math.Inf(1)}

// routerBackend is what the router's page says of one backend it sent requests to.
type routerBackend struct {
	url               string
	prefill, decoding float64 // its requests awaiting the answer's first byte, and after it
	qps               float64
	prompt, gen       float64 // token counters of its answers not streamed; -1: no series yet
	// latency are the requests finished there by status label: each its count in the bucket
	// of bound index at (routerLatencyBounds), its latency sum.
	latency []routerLatency
}

type routerLatency struct {
	status string
	at     int
	n, sum float64
}

// routerState is a production stack router's state as its page shows it.
type routerState struct {
	start    float64 // process_start_time_seconds
	usage    bool    // router_*_usage_percent (routers from June 2025 on)
	counters bool    // the token and error counters, the latency histogram (from 2026 on)
	healthy  []string
	backends []routerBackend
}

// vllmRouterPage is the router's GET /metrics (routers/metrics_router.py) as prometheus_client
// writes it: the default registry's collectors (GC, platform, process), then
// services/metrics_service/__init__.py's metrics in the order they are defined, labels in their
// label names' order (le last), then the router's own usage gauges. Its gauges per backend are
// set from the request stats at each GET (prefill + decoding as num_requests_running);
// vllm:num_requests_waiting is never set.
func vllmRouterPage(s routerState) string {
	var b strings.Builder
	b.WriteString(pyFamily("python_gc_objects_collected", "counter", "Objects collected during gc",
		`python_gc_objects_collected_total{generation="0"} 8214.0`+"\n"))
	b.WriteString(pyFamily("python_info", "gauge", "Python platform information",
		`python_info{implementation="CPython",major="3",minor="12",patchlevel="9",version="3.12.9"} 1.0`+"\n"))
	b.WriteString(pyFamily("process_resident_memory_bytes", "gauge", "Resident memory size in bytes.", pySample("process_resident_memory_bytes", "", 2.3e8)))
	b.WriteString(pyFamily("process_start_time_seconds", "gauge", "Start time of the process since unix epoch in seconds.",
		pySample("process_start_time_seconds", "", s.start)))
	b.WriteString(pyFamily("process_cpu_seconds", "counter", "Total user and system CPU time spent in seconds.",
		pySample("process_cpu_seconds_total", "", 12.5)))
	server := func(url string) string { return `server="` + url + `"` }
	perBackend := func(name, help string, v func(routerBackend) float64) {
		var samples string
		for _, be := range s.backends {
			samples += pySample(name, server(be.url), v(be))
		}
		b.WriteString(pyFamily(name, "gauge", help, samples))
	}
	perBackend("vllm:num_requests_running", "Number of running requests", func(be routerBackend) float64 { return be.prefill + be.decoding })
	b.WriteString(pyFamily("vllm:num_requests_waiting", "gauge", "Number of waiting requests", ""))
	// From the engines' own pages, as the router's engine stats scraper last read them.
	perBackend("vllm:gpu_prefix_cache_hit_rate", "GPU Prefix Cache Hit Rate", func(routerBackend) float64 { return 0.4 })
	perBackend("vllm:gpu_prefix_cache_hits_total", "Total GPU Prefix Cache Hits", func(routerBackend) float64 { return 100 })
	perBackend("vllm:gpu_prefix_cache_queries_total", "Total GPU Prefix Cache Queries", func(routerBackend) float64 { return 250 })
	perBackend("vllm:current_qps", "Current Queries Per Second", func(be routerBackend) float64 { return be.qps })
	perBackend("vllm:avg_decoding_length", "Average Decoding Length", func(routerBackend) float64 { return -1 })
	perBackend("vllm:num_prefill_requests", "Number of Prefill Requests", func(be routerBackend) float64 { return be.prefill })
	perBackend("vllm:num_decoding_requests", "Number of Decoding Requests", func(be routerBackend) float64 { return be.decoding })
	if s.counters {
		incoming, created := "", []string(nil)
		if len(s.backends) > 0 {
			incoming, created = pySample("vllm:num_incoming_requests_total", `model="m"`, 40), []string{`model="m"`}
		}
		b.WriteString(pyFamily("vllm:num_incoming_requests", "counter",
			"Total valid incoming requests to router (including when no backends available).", incoming, created...))
	}
	var healthy string
	for _, url := range s.healthy {
		healthy += pySample("vllm:healthy_pods_total", server(url), 1)
	}
	b.WriteString(pyFamily("vllm:healthy_pods_total", "gauge", "Number of healthy vLLM pods", healthy))
	perBackend("vllm:avg_latency", "Average end-to-end request latency", func(routerBackend) float64 { return 1.25 })
	perBackend("vllm:avg_itl", "Average Inter-Token Latency", func(routerBackend) float64 { return -1 })
	perBackend("vllm:num_requests_swapped", "Number of swapped requests", func(routerBackend) float64 { return 0 })
	if s.counters {
		tokens := func(name, help string, v func(routerBackend) float64) {
			var samples string
			var created []string
			for _, be := range s.backends {
				if l := server(be.url) + `,model="m"`; v(be) >= 0 {
					samples, created = samples+pySample(name+"_total", l, v(be)), append(created, l)
				}
			}
			b.WriteString(pyFamily(name, "counter", help, samples, created...))
		}
		tokens("vllm:input_tokens", "Total input tokens processed", func(be routerBackend) float64 { return be.prompt })
		tokens("vllm:output_tokens", "Total output tokens generated", func(be routerBackend) float64 { return be.gen })
		b.WriteString(pyFamily("vllm:request_errors", "counter", "Total request errors", ""))
		const name = "vllm:request_latency_seconds"
		var samples string
		var created []string
		for _, be := range s.backends {
			for _, l := range be.latency {
				labels := server(be.url) + `,model="m",status="` + l.status + `"`
				for i, le := range routerLatencyBounds {
					c := 0.0
					if i >= l.at {
						c = l.n
					}
					samples += pySample(name+"_bucket", labels+`,le="`+pyNum(le)+`"`, c)
				}
				samples += pySample(name+"_count", labels, l.n) + pySample(name+"_sum", labels, l.sum)
				created = append(created, labels)
			}
		}
		b.WriteString(pyFamily(name, "histogram", "End-to-end request latency observed at the router", samples, created...))
	}
	if s.usage {
		b.WriteString(pyFamily("router_cpu_usage_percent", "gauge", "CPU usage percent", pySample("router_cpu_usage_percent", "", 3.1)))
		b.WriteString(pyFamily("router_memory_usage_percent", "gauge", "Memory usage percent", pySample("router_memory_usage_percent", "", 41.7)))
		b.WriteString(pyFamily("router_disk_usage_percent", "gauge", "Disk usage percent", pySample("router_disk_usage_percent", "", 62)))
	}
	return b.String()
}

// busyRouter is a router that sent requests to two backends and discovered a third: 3 and 2
// requests in flight, 2000 prompt and 500 generated tokens counted (from answers not
// streamed), and 17 requests finished: 10 in (0.5, 1] s and 1 error in (0.05, 0.1] s at the
// first backend, 6 in (1, 2.5] s at the second.
func busyRouter() routerState {
	return routerState{start: 1.7356896e+09, usage: true, counters: true,
		healthy: []string{"http://10.0.0.1:8000", "http://10.0.0.2:8000", "http://10.0.0.3:8000"},
		backends: []routerBackend{
			{url: "http://10.0.0.1:8000", prefill: 1, decoding: 2, qps: 1.5, prompt: 1200, gen: 300,
				latency: []routerLatency{{"success", 4, 10, 8}, {"error", 1, 1, 0.07}}},
			{url: "http://10.0.0.2:8000", prefill: 0, decoding: 2, qps: 0.75, prompt: 800, gen: 200,
				latency: []routerLatency{{"success", 5, 6, 10.5}}},
		}}
}

// TestSnapshotVLLMRouter: the production stack router's pages over its versions are the
// router's, not a vLLM engine's, though their names share vLLM's prefix. Running is the
// requests it sent its backends and that are not done, summed (not added to its prefill and
// decoding counts, which it is made of); it has no waiting count (declared, never set), no KV
// cache use, no preemptions, no TTFT, ITL or queue histogram; tokens come from its counters,
// E2E latency from its request latency histogram, every status's.
func TestSnapshotVLLMRouter(t *testing.T) {
	older := busyRouter()
	older.usage, older.counters = false, false
	for _, tc := range []struct {
		name        string
		page        string
		running     Value
		prompt, gen Value
		e2e         float64 // observations; -1: not known
	}{
		{"busy", vllmRouterPage(busyRouter()), Value{5, true}, Value{2000, true}, Value{500, true}, 17},
		// Before June 2025: neither the usage gauges nor the counters and histogram.
		{"older router", vllmRouterPage(older), Value{5, true}, Value{}, Value{}, -1},
		// Backends discovered, no request sent yet: no series per backend but their health.
		{"nothing sent", vllmRouterPage(routerState{start: 1.7356896e+09, usage: true, counters: true, healthy: []string{"http://10.0.0.1:8000"}}),
			Value{0, true}, Value{}, Value{}, -1},
		// No backend found: the router's usage gauges alone.
		{"no backends", vllmRouterPage(routerState{start: 1.7356896e+09, usage: true, counters: true}), Value{0, true}, Value{}, Value{}, -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := scrapeOnce(t, tc.page)
			if s.Kind != KindVLLMRouter || s.Kind.String() != "vllm-router" {
				t.Fatalf("kind %v", s.Kind)
			}
			checkValues(t, s, map[string]Value{"running": tc.running, "waiting": {}, "kv": {}, "preemptions": {}, "prompt": tc.prompt, "generation": tc.gen})
			if s.Started != (Value{V: 1.7356896e+09, Known: true}) {
				t.Errorf("started %+v", s.Started)
			}
			if got := s.E2E.Known; got != (tc.e2e >= 0) {
				t.Fatalf("E2E %+v, want %v observations", s.E2E, tc.e2e)
			}
			if tc.e2e >= 0 && (s.E2E.Count != tc.e2e || s.E2E.countAt(0.05) != 0 || s.E2E.countAt(0.1) != 1 || s.E2E.countAt(1) != 11 || s.E2E.countAt(2.5) != 17 ||
				math.Abs(s.E2E.Sum-18.57) > 1e-9) {
				t.Errorf("E2E %+v", s.E2E)
			}
			if s.TTFT.Known || s.ITL.Known || s.Queue.Known || s.Prefill.Known || s.IterationTokens.Known {
				t.Errorf("histograms the router does not have: TTFT %v ITL %v queue %v prefill %v iteration %v", s.TTFT.Known, s.ITL.Known, s.Queue.Known, s.Prefill.Known, s.IterationTokens.Known)
			}
		})
	}
	if KindVLLMRouter.countsFirstTokens() {
		t.Error("the router, with no TTFT histogram, is taken to count first tokens")
	}
	// A vLLM engine's page, whatever of the router's vLLM names it shares, is the engine's.
	if s := scrapeOnce(t, vllmPage()); s.Kind != KindVLLM {
		t.Errorf("a vLLM engine's page read as %v", s.Kind)
	}
}

// TestWatchVLLMRouter: the router watched through its /metrics, page by page: named at start,
// its running requests shown from its first scrape (none yet), its figures saying that it
// counts no waiting requests (a step takes no queue from it) and not every first token; its
// counters and histogram, which appear with its first requests, count from zero, and its rates
// follow them.
func TestWatchVLLMRouter(t *testing.T) {
	busy, later := busyRouter(), busyRouter()
	later.backends[0].gen, later.backends[0].prompt = 500, 1500
	later.backends[1].latency[0].n, later.backends[1].latency[0].sum = 9, 15
	fresh := routerState{start: busy.start, usage: true, counters: true, healthy: busy.healthy}
	srv := newPagedServer(t, "m", vllmRouterPage(fresh), vllmRouterPage(fresh), vllmRouterPage(busy), vllmRouterPage(later))
	p, err := NewProvider(ProviderOptions{Client: Config{BaseURL: srv.URL + "/v1"}, Watch: true})
	if err != nil {
		t.Fatal(err)
	}
	var progress bytes.Buffer
	if err := p.Prepare(context.Background(), &progress); err != nil {
		t.Fatal(err)
	}
	if want := "rosetop: watching vllm-router at " + srv.URL + "/v1 ("; !strings.HasPrefix(progress.String(), want) {
		t.Errorf("start-up line %q, want it to begin %q", progress.String(), want)
	}
	clk := newSleepClock()
	spec := bench.ServerSpec{Clock: clk, Window: time.Minute, MaxBatch: 4}
	if r := p.info(spec).Remote; r.Kind != "vllm-router" || r.ServerFirsts {
		t.Errorf("remote %+v", r)
	}
	w, err := newWatcher(p, spec)
	if err != nil {
		t.Fatal(err)
	}
	defer w.close()
	scrapeAt(t, w, clk, srv, 1, time.Second)
	m := w.latest()
	if m.Kind != "vllm-router" || m.Running != (bench.Gauge{V: 0, Known: true}) || m.Waiting.Known || m.KVUsage.Known || m.Note != "queue not known: the server's waiting is absent" {
		t.Errorf("fresh router: %+v", m)
	}
	scrapeAt(t, w, clk, srv, 2, 10*time.Second)
	scrapeAt(t, w, clk, srv, 3, 11*time.Second)
	m = w.latest()
	if m.Running != (bench.Gauge{V: 5, Known: true}) {
		t.Errorf("running %+v, want 5", m.Running)
	}
	// In the last second: 200 tokens generated, 300 prompt tokens, 3 requests finished.
	if m.GenRate != (bench.Gauge{V: 200, Known: true}) || m.PromptRate != (bench.Gauge{V: 300, Known: true}) || m.ReqRate != (bench.Gauge{V: 3, Known: true}) {
		t.Errorf("rates: generation %+v, prompt %+v, requests %+v; want 200, 300, 3", m.GenRate, m.PromptRate, m.ReqRate)
	}
	for _, l := range m.Latency {
		if want := l.Name == "E2E latency"; l.Known != want || (want && l.Dist.N != 20) {
			t.Errorf("%s: known %v, %d observations", l.Name, l.Known, l.Dist.N)
		}
	}
	if tot := m.Total; tot == nil || tot.GenTokens != (bench.Gauge{V: 700, Known: true}) || tot.PromptTokens != (bench.Gauge{V: 2300, Known: true}) ||
		tot.Requests != (bench.Gauge{V: 20, Known: true}) {
		t.Errorf("totals %+v, want 700 generated, 2300 prompt tokens, 20 requests", tot)
	}
	var snap sched.Snapshot
	if w.fill(&snap) || snap.Running != 0 || snap.Admitted != 0 {
		t.Errorf("a step took the router's queue or first tokens: %+v", snap)
	}
}
