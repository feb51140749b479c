package tui

import (
	"math"
	"slices"

	"rosetop/bench"
)

// paneMemo is a table pane as last drawn and the inputs it was drawn from. The cold-vs-steady
// comparison, the ledger and the events change only at run boundaries and on config changes, so
// most frames reuse them; the latency table changes whenever a request finished. Inputs are
// compared by value (a new View carries new slices even when nothing changed), which costs far
// less than drawing: a few dozen small structs.
type paneMemo struct {
	pt   *paint // the theme it was drawn in (a new theme is a new paint)
	w, h int
	out  string

	latency []bench.LatencyRow
	compare []bench.Comparison
	ledger  []bench.LedgerEntry
	steady  int
	events  []bench.LogEvent
	live    bench.LiveCounts
	scroll  int  // the events pane's scroll
	ok      bool // out is valid
}

// paneCache holds the memos of the table panes. It lives behind a pointer shared by the
// Model's copies and is touched only inside Update.
type paneCache struct {
	memo [nPanes]paneMemo
}

// get returns the memo of pane id when it was drawn at this size and theme from inputs equal to
// want's; the caller draws and stores a fresh one otherwise.
func (c *paneCache) get(id paneID, want paneMemo) (string, bool) {
	m := &c.memo[id]
	if !m.ok || m.pt != want.pt || m.w != want.w || m.h != want.h || m.steady != want.steady || m.live != want.live || m.scroll != want.scroll ||
		!slices.EqualFunc(m.latency, want.latency, sameLatency) ||
		!slices.EqualFunc(m.compare, want.compare, sameComparison) ||
		!slices.Equal(m.ledger, want.ledger) || !slices.Equal(m.events, want.events) {
		return "", false
	}
	return m.out, true
}

func (c *paneCache) put(id paneID, m paneMemo, out string) {
	m.out, m.ok = out, true
	c.memo[id] = m
}

// sameFloat is == except that NaN (no data yet, drawn as "–") equals NaN.
func sameFloat(a, b float64) bool { return a == b || (math.IsNaN(a) && math.IsNaN(b)) }

func sameDist(a, b bench.Dist) bool {
	return a.N == b.N && sameFloat(a.P50, b.P50) && sameFloat(a.P95, b.P95) && sameFloat(a.P99, b.P99) &&
		sameFloat(a.Mean, b.Mean) && sameFloat(a.Max, b.Max)
}

func sameLatency(a, b bench.LatencyRow) bool { return a.Name == b.Name && sameDist(a.Dist, b.Dist) }

func sameComparison(a, b bench.Comparison) bool {
	return a.Metric == b.Metric && sameFloat(a.Cold, b.Cold) && sameFloat(a.Steady, b.Steady) && sameFloat(a.Ratio, b.Ratio)
}
