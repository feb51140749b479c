package bench

import (
	"math"
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
