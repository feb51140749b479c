package tui

import (
	"testing"
	"time"

	"rosetop/bench"
)

// TestEventsTitle: the steady windows and one-time costs are counted in the events title; the
// costs go first when the title would not fit, and a scrolled pane says how far back it is.
func TestEventsTitle(t *testing.T) {
	steady := bench.LiveCounts{Windows: 483, Requests: 30912, Costs: 116, CostTook: 118 * time.Millisecond}
	for _, c := range []struct {
		name     string
		live     bench.LiveCounts
		scrolled int
		w        int
		want     string
	}{
		{"nothing yet", bench.LiveCounts{}, 0, 80, "events"},
		{"windows", bench.LiveCounts{Windows: 1, Requests: 64}, 0, 80, "events · steady: 1 window, 64 requests"},
		{"windows and costs", steady, 0, 80, "events · steady: 483 windows, 30912 requests, 116 one-time costs 118ms"},
		{"narrower", steady, 0, 57, "events · steady: 483 windows, 30912 reqs, 116 costs 118ms"},
		{"too narrow for the costs", steady, 0, 56, "events · steady: 483 windows, 30912 requests"},
		{"a cost before the first window", bench.LiveCounts{Costs: 1, CostTook: 900 * time.Microsecond}, 0, 80, "events · steady: 1 one-time cost 0.90ms"},
		{"scrolled", steady, 12, 80, "events · 12 lines back (↓)"},
	} {
		if got := eventsTitle(c.live, c.scrolled, c.w); got != c.want {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
	}
}
