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
			"(20 scrapes, 1 failed)"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := strings.Join(watchSummary(info, tc.m, 90*time.Second), "\n")
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
