package tui

import (
	"fmt"
	"math"
	"strings"
	"time"

	"rosetop/bench"

	"github.com/charmbracelet/x/ansi"
)

// latencyBody is the rolling percentile table: one row per metric, fixed-width number columns.
func latencyBody(st *paint, rows []bench.LatencyRow, iw int) string {
	cols := []string{"p50", "p95", "p99", "max"}
	if iw < 12+len(cols)*(numW+1) {
		cols = cols[:3]
	}
	nameW := min(iw-len(cols)*(numW+1), 16)
	var b strings.Builder
	b.WriteString(st.Muted.Render(fit("ms", nameW)))
	for _, c := range cols {
		b.WriteString(st.Muted.Render(fmt.Sprintf(" %*s", numW, c)))
	}
	if len(rows) == 0 {
		b.WriteString("\n" + st.Muted.Render("no finished requests yet"))
	}
	for _, r := range rows {
		b.WriteString("\n" + st.Text.Render(fit(rowName(r.Name, nameW), nameW)))
		d := r.Dist
		vals := []float64{d.P50, d.P95, d.P99, d.Max}
		for i := range cols {
			v := vals[i]
			if d.N == 0 {
				v = math.NaN()
			}
			s := st.Text
			if cols[i] == "p99" {
				s = st.Strong
			}
			b.WriteString(" " + s.Render(num(v)))
		}
	}
	return b.String()
}

// rowName is a latency row's name, or its abbreviation when the name is wider than w (an
// 80-column terminal leaves 12 cells: "Prefill->fi…" would lose the word that matters).
func rowName(name string, w int) string {
	if widthOf(name) <= w {
		return name
	}
	switch name {
	case "Prefill->first":
		return "Prefill→1st"
	case "Queue wait":
		return "Queue"
	}
	return name
}

// latencyN is the request count in the latency pane title: the first row's (TTFT: one sample
// per request; ITL has one per token).
func latencyN(rows []bench.LatencyRow) int {
	if len(rows) == 0 {
		return 0
	}
	return rows[0].Dist.N
}

// coldBody is the cold-vs-steady comparison and, below it, the engine's cold-start ledger.
func coldBody(st *paint, v *bench.View, iw, ih int) string {
	const ratioW = 13 // "2.86× slower"
	nameW := min(iw-2*(numW+1)-(ratioW+1), 22)
	var b strings.Builder
	b.WriteString(st.Muted.Render(fit("", nameW) + fmt.Sprintf(" %*s %*s  %-*s", numW, "cold", numW, "steady", ratioW-1, "cold/steady")))
	if len(v.Compare) == 0 {
		b.WriteString("\n" + st.Muted.Render("waiting for the cold run to finish"))
	}
	for _, c := range v.Compare {
		ratio := st.Muted.Render(fmt.Sprintf("%*s", ratioW, "–"))
		if !math.IsNaN(c.Ratio) && !math.IsInf(c.Ratio, 0) {
			// The ratio is cold/steady whichever way is better; the word says it.
			word, pen := "same", st.Text
			switch c.ColdSlower() {
			case 1:
				word, pen = "slower", st.Warn
			case -1:
				word, pen = "faster", st.Good
			}
			ratio = st.Strong.Render(fmt.Sprintf("%*s", 6, numRaw(c.Ratio)+"×")) + " " + pen.Render(fmt.Sprintf("%-6s", word))
		}
		b.WriteString("\n" + st.Text.Render(fit(metricName(c.Metric, nameW), nameW)) + " " + st.Warn.Render(num(c.Cold)) +
			" " + st.Text.Render(num(c.Steady)) + " " + ratio)
	}
	used := 1 + max(1, len(v.Compare))
	if ih-used < 2 {
		return b.String()
	}
	for _, l := range ledgerBlock(st, v.Ledger, iw, ih-used) {
		b.WriteString("\n" + l)
	}
	return b.String()
}

// ledgerBlock is the cold-start ledger under its heading, in at most room lines (room >= 2).
func ledgerBlock(st *paint, ledger []bench.LedgerEntry, iw, room int) []string {
	groups := bench.GroupLedger(ledger)
	out := []string{st.Muted.Render(fit("cold-start ledger", iw-numW-3) + fmt.Sprintf("%*s", numW+3, "took "))}
	if len(groups) == 0 {
		out = append(out, st.Muted.Render("nothing recorded yet"))
	}
	room--
	lines := ledgerLines(st, groups, iw, true)
	if len(lines) > room { // too short for the wrapped details: one line an entry, its detail cut
		lines = ledgerLines(st, groups, iw, false)
		if len(lines) > room {
			more := len(lines) - room + 1
			lines = append(lines[:room-1], st.Muted.Render(fmt.Sprintf("… %d more", more)))
		}
	}
	for _, l := range lines {
		out = append(out, fit(l, iw))
	}
	return out
}

// ledgerLines are the ledger's entries at inner width iw, each "what  detail ... took": a detail
// that does not fit wraps under its entry (wrap) or is cut short (the time always shows).
func ledgerLines(st *paint, groups []bench.LedgerGroup, iw int, wrap bool) []string {
	var out []string
	for _, g := range groups {
		what := g.What
		if g.N > 1 {
			what += fmt.Sprintf(" ×%d", g.N)
		}
		took := " " + st.Strong.Render(num(ms(g.Took))) + st.Muted.Render("ms")
		textW := iw - numW - 3
		if !wrap || g.Detail == "" || widthOf(what+"  "+g.Detail) <= textW {
			left := st.Text.Render(what)
			if g.Detail != "" {
				left += st.Muted.Render("  " + g.Detail)
			}
			out = append(out, fit(left, textW)+took)
			continue
		}
		out = append(out, fit(st.Text.Render(what), textW)+took)
		for _, part := range strings.Split(ansi.Wrap(g.Detail, max(8, iw-2), ""), "\n") {
			out = append(out, "  "+st.Muted.Render(part))
		}
	}
	return out
}

// ledgerRows is how many rows the ledger takes at inner width iw.
func ledgerRows(v *bench.View, iw int) int {
	return len(ledgerLines(&paint{}, bench.GroupLedger(v.Ledger), iw, true))
}

// metricName is a comparison's metric, or its short form when the long one is wider than w.
func metricName(name string, w int) string {
	if widthOf(name) <= w {
		return name
	}
	short := map[string]string{"TTFT p99 (ms)": "TTFT p99", "Queue wait p99 (ms)": "Queue p99", "TPOT p50 (ms)": "TPOT p50", "Throughput (tok/s)": "tok/s"}
	if s, ok := short[name]; ok {
		return s
	}
	return name
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// eventsBody is the events that fit, oldest at the top like a log, each wrapped under its text
// rather than cut; scroll lines back from the newest (clamped to what there is, and returned).
func eventsBody(st *paint, es []bench.LogEvent, iw, ih, scroll int) (string, int) {
	if len(es) == 0 {
		return st.Muted.Render("no events yet"), 0
	}
	timeW := 5 // "12:34", wider past an hour ("1:02:03"): the latest event's time is the widest
	for _, e := range es {
		timeW = max(timeW, len(clock(e.At)))
	}
	var lines []string
	for _, e := range es {
		glyph, s := "·", st.Text
		switch e.Kind {
		case bench.LogRun:
			glyph, s = "▸", st.Accent
		case bench.LogConfig:
			glyph, s = "◆", st.Marker
		case bench.LogCapture:
			glyph, s = "◇", st.Series[2]
		case bench.LogPreempt:
			glyph, s = "↺", st.Warn
		case bench.LogError:
			glyph, s = "✗", st.Bad
		case bench.LogRestart:
			glyph, s = "↻", st.Warn
		}
		wrapped := strings.Split(ansi.Wrap(e.Text, max(8, iw-timeW-3), ""), "\n")
		for i, part := range wrapped {
			lead := st.Muted.Render(fmt.Sprintf("%*s ", timeW, clock(e.At))) + s.Render(glyph+" ")
			if i > 0 {
				lead = spaces(timeW + 3)
			}
			lines = append(lines, fit(lead+s.Render(part), iw))
		}
	}
	scroll = min(scroll, max(0, len(lines)-ih))
	end := len(lines) - scroll
	return strings.Join(lines[max(0, end-ih):end], "\n"), scroll
}

// eventsTitle is the events pane's title, at most w cells: the steady windows and one-time costs
// counted (not logged one by one) and, when scrolled, how far back it is. The costs are named
// shorter, then left out, when the title would not fit.
func eventsTitle(live bench.LiveCounts, scrolled, w int) string {
	if scrolled > 0 {
		return fmt.Sprintf("events · %d lines back (↓)", scrolled)
	}
	title := func(requests, costs string) string {
		var parts []string
		if live.Windows > 0 {
			parts = append(parts, counted(live.Windows, "window"), counted(live.Requests, requests))
		}
		if costs != "" && live.Costs > 0 {
			parts = append(parts, counted(live.Costs, costs)+" "+numRaw(ms(live.CostTook))+"ms")
		}
		if len(parts) == 0 {
			return "events"
		}
		return "events · steady: " + strings.Join(parts, ", ")
	}
	for _, t := range []string{title("request", "one-time cost"), title("req", "cost")} {
		if widthOf(t) <= w {
			return t
		}
	}
	return title("request", "")
}

// counted is "1 window", "12 windows", "123k windows".
func counted(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return count(n) + " " + noun + "s"
}
