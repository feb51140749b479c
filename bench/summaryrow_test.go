package bench

import (
	"strings"
	"testing"
	"time"
)

// TestSummaryRowZeroSpan: a window that spans no time (its requests all finished in the step
// that ended the window before) has no throughput: n/a in its row, and left out of the median.
func TestSummaryRowZeroSpan(t *testing.T) {
	empty := Summary{Requests: 4}
	if row := summaryRow("last (requests 9-12)", empty, 24); !strings.HasSuffix(row, "n/a") {
		t.Errorf("zero-span row %q, want n/a for its tokens/s", row)
	}
	runs := []Summary{empty, {Requests: 4, Wall: time.Second, Throughput: 100}, {Requests: 4, Wall: time.Second, Throughput: 300}}
	if m := medianSummary(runs); m.Throughput != 200 || m.Requests != 12 || strings.HasSuffix(summaryRow("steady", m, 24), "n/a") {
		t.Errorf("median %v tok/s over %d requests, want 200 over 12", m.Throughput, m.Requests)
	}
	if m := medianSummary([]Summary{empty}); !strings.HasSuffix(summaryRow("steady", m, 24), "n/a") {
		t.Errorf("median of zero-span windows: %q, want n/a", summaryRow("steady", m, 24))
	}
}

// TestCompareSkipsMissingFigures: the cold-vs-steady pane's steady median is over the windows
// that have the figure; a zero-span window's throughput, or a window without a TPOT, is not 0.
func TestCompareSkipsMissingFigures(t *testing.T) {
	l := newLiveState(30 * time.Second)
	l.steady.push(Summary{Requests: 4, TTFT: Dist{P99: 5, N: 4}})
	l.steady.push(Summary{Requests: 4, Wall: time.Second, Throughput: 100, TTFT: Dist{P99: 7, N: 4}, TPOT: Dist{P50: 2, N: 4}})
	l.steady.push(Summary{Requests: 4, Wall: time.Second, Throughput: 300, TTFT: Dist{P99: 9, N: 4}, TPOT: Dist{P50: 4, N: 4}})
	want := map[string]float64{"TTFT p99 (ms)": 7, "TPOT p50 (ms)": 3, "Throughput (tok/s)": 200}
	for _, c := range l.compare() {
		if w, ok := want[c.Metric]; ok && c.Steady != w {
			t.Errorf("%s steady %v, want %v", c.Metric, c.Steady, w)
		}
	}
}
