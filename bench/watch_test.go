package bench

import (
	"math"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestWatchSummaryNoNaN: a watch session's quit summary says "n/a" for every figure the server
// does not give or that is not a number, never NaN or Inf, from no scrape at all to a full one.
func TestWatchSummaryNoNaN(t *testing.T) {
	nan := math.NaN()
	info := ServerInfo{Model: "m", Remote: &RemoteInfo{Endpoint: "http://h:8000/v1", Kind: "tgi", Watch: true}}
	unknown := Dist{P50: nan, P95: nan, P99: nan, Mean: nan, Max: nan}
	for _, tc := range []struct {
		name  string
		m     *ServerMetrics
		wants []string
	}{
		{"no metrics", nil, []string{"Server-side figures:       no scrape worked during the session"}},
		{"no good scrape", &ServerMetrics{Note: "last scrape failed: timeout"}, []string{"(last scrape failed: timeout)"}},
		{"nothing known", &ServerMetrics{Source: "http://h:8000/metrics", Total: &ServerTotals{
			Requests: Gauge{V: nan, Known: true}, GenTokens: Gauge{V: math.Inf(1), Known: true},
			Latency: []ServerLatency{{Name: "TTFT"}, {Name: "ITL", Known: true, Dist: unknown}, {Name: "Queue", Known: true, Dist: Dist{P50: nan, P95: 4, P99: math.Inf(1), N: 3}}},
		}}, []string{"Requests finished:         n/a", "Generated tokens:          n/a", "TTFT (ms):                 n/a (the server exposes no such histogram)",
			"ITL (ms):                  n/a (none observed)", "Queue (ms):                p50 n/a  p95 4.0  p99 n/a  (3 observations)"}},
		{"full", &ServerMetrics{Source: "http://h:8000/metrics", Total: &ServerTotals{Span: 10 * time.Second, Scrapes: 20, Failed: 1,
			Requests: Gauge{V: 7, Known: true}, GenTokens: Gauge{V: 1000, Known: true}, PromptTokens: Gauge{V: 50, Known: true},
			Latency: []ServerLatency{{Name: "E2E latency", Known: true, FirstBound: 300, Dist: Dist{P50: 100, P95: 900, P99: 1200, N: 7}}},
		}}, []string{"Generated tokens:          1000 (100.0 tok/s)", "E2E latency (ms):          p50 ≤300  p95 900.0  p99 1200.0  (7 observations)",
			"(20 scrapes, 1 failed)", "Restarts seen:             0"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := strings.Join(watchSummary(info, tc.m, 90*time.Second, nil), "\n")
			if !strings.HasPrefix(out, "=== rosetop watch: tgi at http://h:8000/v1, 1m30s ===\n") || strings.Contains(out, "NaN") || strings.Contains(out, "Inf") {
				t.Errorf("summary:\n%s", out)
			}
			for _, w := range tc.wants {
				if !strings.Contains(out, w) {
					t.Errorf("summary lacks %q:\n%s", w, out)
				}
			}
		})
	}
}

// TestServerTrend: the server p99 timelines take one sample per good scrape from the server's
// window: a bounded p99 at its first bucket's bound, nothing for a histogram the server does
// not expose, for a window without observations, or for a p99 that is not finite.
func TestServerTrend(t *testing.T) {
	nan := math.NaN()
	lat := func(name string, known bool, p99 float64, n int, bound float64) ServerLatency {
		return ServerLatency{Name: name, Known: known, Dist: Dist{P50: p99 / 2, P95: p99, P99: p99, N: n}, FirstBound: bound}
	}
	scrapes := []*ServerMetrics{
		{At: 0, Latency: []ServerLatency{lat("TTFT", true, 240, 10, 1), lat("Queue", false, nan, 0, 0)}},
		{At: 0, Latency: []ServerLatency{lat("TTFT", true, 999, 10, 1)}}, // the same scrape again: no sample
		{At: 500 * time.Millisecond, Latency: []ServerLatency{lat("TTFT", true, 0.4, 10, 1), lat("ITL", true, nan, 0, 5)}},
		{At: time.Second, Latency: []ServerLatency{lat("TTFT", true, math.Inf(1), 10, 1), lat("ITL", true, 12, 40, 5)}},
		{At: 1500 * time.Millisecond, Latency: []ServerLatency{lat("TTFT", true, 2480, 20, 1), lat("ITL", true, 3, 40, 5)}},
		{At: 2 * time.Second}, // a failed scrape's view: no latencies, nothing sampled
	}
	tr := serverTrend{at: -1}
	if tr.view() != nil {
		t.Fatal("series before any scrape")
	}
	for _, m := range scrapes {
		tr.sample(m)
	}
	tr.sample(&ServerMetrics{At: 3 * time.Second, Latency: []ServerLatency{lat("TTFT", true, 7, 1, 1), lat("ITL", true, 7, 1, 5)}}) // closes the buckets
	got := map[string][]float64{}
	for _, tl := range tr.view() {
		for _, p := range tl.Tracks[0].Points {
			got[tl.Name] = append(got[tl.Name], p.Value)
		}
	}
	want := map[string][]float64{"TTFT p99": {240, 1, 2480}, "ITL p99": {12, 5}}
	if len(got) != len(want) {
		t.Fatalf("series %v, want %v", got, want)
	}
	for name, w := range want {
		if g := got[name]; !slices.Equal(g, w) {
			t.Errorf("%s: %v, want %v", name, g, w)
		}
	}
}

// TestWatchSummaryFleet: a fleet's quit summary names the fleet, gives its sums as one
// server's, then a block per server with its own totals and p99s, and the note of one that
// stopped answering; "n/a" for what a server does not give, never NaN.
func TestWatchSummaryFleet(t *testing.T) {
	nan := math.NaN()
	eps := []string{"http://gpu-a:8000/v1", "http://gpu-b:8000/v1", "http://gpu-c:8001/v1"}
	info := ServerInfo{Model: "m", Remote: &RemoteInfo{Endpoint: eps[0], Kind: "vllm", Watch: true, Fleet: eps}}
	lat := func(name string, p99 float64, n int, bound float64) ServerLatency {
		return ServerLatency{Name: name, Known: true, Dist: Dist{P50: p99 / 2, P95: p99, P99: p99, Mean: nan, Max: nan, N: n}, FirstBound: bound}
	}
	a := ServerMetrics{Kind: "vllm", Source: "http://gpu-a:8000/metrics", Total: &ServerTotals{Span: 10 * time.Second, Scrapes: 20,
		Requests: Gauge{V: 7, Known: true}, GenTokens: Gauge{V: 1000, Known: true},
		Latency: []ServerLatency{lat("TTFT", 812, 7, 1), lat("E2E latency", 250, 7, 300)}}}
	b := ServerMetrics{Kind: "vllm", Source: "http://gpu-b:8000/metrics", Note: "last scrape failed: connection refused",
		Total: &ServerTotals{Span: 4 * time.Second, Scrapes: 8, Failed: 3, Requests: Gauge{V: 2, Known: true}, GenTokens: Gauge{V: nan, Known: true},
			Latency: []ServerLatency{lat("TTFT", nan, 2, 1), {Name: "E2E latency"}}}}
	c := ServerMetrics{Kind: "vllm", Source: "http://gpu-c:8001/metrics", Note: "HTTP 404: the server has no /metrics"}
	fleet := &ServerMetrics{Kind: "vllm", Source: "3 /metrics pages", Members: []ServerMetrics{a, b, c},
		Total: &ServerTotals{Span: 10 * time.Second, Scrapes: 28, Failed: 3, Requests: Gauge{V: 9, Known: true}, GenTokens: Gauge{V: 1000, Known: true},
			Latency: []ServerLatency{lat("TTFT", 812, 9, 1)}}}
	out := strings.Join(watchSummary(info, fleet, 62*time.Second, []int{0, 2}), "\n")
	if !strings.HasPrefix(out, "=== rosetop watch: 3 servers (vllm), 1m2s ===\n") || strings.Contains(out, "NaN") || strings.Contains(out, "Inf") {
		t.Errorf("summary:\n%s", out)
	}
	blocks := strings.Split(out, "\n\n")
	if len(blocks) != 4 {
		t.Fatalf("%d blocks, want the fleet's and one per server:\n%s", len(blocks), out)
	}
	for i, want := range [][]string{
		{"Metrics:                   3 /metrics pages (28 scrapes, 3 failed)", "Requests finished:         9 (0.90 req/s)", "TTFT (ms):                 p50 406.0  p95 812.0  p99 812.0  (9 observations)",
			"Restarts seen:             2"},
		{"Server http://gpu-a:8000/v1\n", "  Kind:                    vllm", "  Requests finished:       7 (0.70 req/s)", "  Generated tokens:        1000 (100.0 tok/s)",
			"  TTFT p99 (ms):           812.0 (7 observations)", "  E2E latency p99 (ms):    ≤300 (7 observations)", "  Restarts seen:           0"},
		{"Server http://gpu-b:8000/v1\n", "  Requests finished:       2", "  Generated tokens:        n/a", "  TTFT p99 (ms):           n/a",
			"  E2E latency p99 (ms):    n/a (the server exposes no such histogram)", "  Restarts seen:           2", "  At the end:              last scrape failed: connection refused"},
		{"Server http://gpu-c:8001/v1\n", "  Server-side figures:     no scrape worked during the session", "  At the end:              HTTP 404: the server has no /metrics"},
	} {
		for _, w := range want {
			if !strings.Contains(blocks[i], w) {
				t.Errorf("block %d lacks %q:\n%s", i, w, blocks[i])
			}
		}
	}
	if strings.Contains(blocks[1], "At the end") || strings.Contains(blocks[0], "Server http") {
		t.Errorf("a note where there is none, or a server in the fleet's block:\n%s", out)
	}
	mixed := *fleet
	mixed.Kind = "mixed"
	if got := watchSummary(info, &mixed, time.Minute, nil)[0]; got != "=== rosetop watch: 3 servers (mixed), 1m0s ===" {
		t.Errorf("a fleet of several kinds: %q", got)
	}
	if got := watchSummary(info, nil, time.Minute, nil); got[0] != "=== rosetop watch: 3 servers (vllm), 1m0s ===" || len(got) != 4 {
		t.Errorf("a fleet before any scrape: %q", got)
	}
}

// TestWatchSummaryTargets: a latency with a --goodput target says the share of its observations
// within it since the start, "at least" where only a lower bound is known.
func TestWatchSummaryTargets(t *testing.T) {
	info := ServerInfo{Model: "m", Remote: &RemoteInfo{Endpoint: "http://h:8000/v1", Kind: "vllm", Watch: true}}
	m := &ServerMetrics{Kind: "vllm", Source: "http://h:8000/metrics", Total: &ServerTotals{Span: time.Minute, Scrapes: 120, Latency: []ServerLatency{
		{Name: "TTFT", Known: true, Dist: Dist{P50: 80, P95: 150, P99: 210, N: 400}, Target: 200, Within: Gauge{V: 0.9875, Known: true}},
		{Name: "E2E latency", Known: true, Dist: Dist{P50: 900, P95: 2500, P99: 4000, N: 400}, Target: 3000, Within: Gauge{V: 0.95, Known: true}, WithinFloor: true},
	}}}
	out := strings.Join(watchSummary(info, m, time.Minute, nil), "\n")
	for _, want := range []string{"(400 observations); within 200 ms: 98.8%", "(400 observations); within 3000 ms: at least 95.0%"} {
		if !strings.Contains(out, want) {
			t.Errorf("summary lacks %q:\n%s", want, out)
		}
	}
}
