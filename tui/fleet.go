package tui

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/charmbracelet/x/ansi"

	"rosetop/bench"
)

// A fleet is several servers watched as one (--endpoint given more than once with --watch):
// the panes show the fleet's sums and merged histograms, and the inter-token latency pane, which
// watch mode leaves empty, becomes a table of the servers each as itself.

// fleet is the watched servers' API roots when v watches several; nil otherwise.
func fleet(v *bench.View) []string {
	if !watching(v) {
		return nil
	}
	return v.Header.Remote.Fleet
}

// members is the fleet's servers each as itself, in fleet order; nil before the first scrape.
func members(v *bench.View) []bench.ServerMetrics {
	if v.Server == nil {
		return nil
	}
	return v.Server.Members
}

// outside is text from outside (an endpoint, a server's kind or note) made safe to draw and
// measure: its escape sequences dropped whole, its other control characters as spaces.
func outside(s string) string { return printable(ansi.Strip(s)) }

// fleetName names the fleet by its size and kind: "3 × vllm", or "3 servers (mixed)".
func fleetName(v *bench.View) string {
	n := len(fleet(v))
	kind := v.Header.Remote.Kind
	if v.Server != nil && v.Server.Kind != "" {
		kind = v.Server.Kind
	}
	switch kind = outside(kind); kind {
	case "":
		return fmt.Sprintf("%d servers", n)
	case "mixed":
		return fmt.Sprintf("%d servers (mixed)", n)
	}
	return fmt.Sprintf("%d × %s", n, kind)
}

// notAnswering counts the fleet's servers whose figures are missing (those with a note).
func notAnswering(ms []bench.ServerMetrics) int {
	n := 0
	for _, m := range ms {
		if m.Note != "" {
			n++
		}
	}
	return n
}

// endpointNames are the servers' names in the table (bench.ServerNames), made safe to draw.
func endpointNames(eps []string) []string { return bench.ServerNames(eps, outside) }

// fleetCol is a column of the servers table: its head, its width, and its cell for a server;
// left for text, else right-aligned. prio orders which columns stay when the pane is narrow
// (lower first).
type fleetCol struct {
	head string
	w    int
	left bool
	prio int
	cell func(st *paint, m *bench.ServerMetrics) string
}

// fleetCols are the table's columns in the order drawn.
func fleetCols() []fleetCol {
	num := func(head string, prio int, text func(m *bench.ServerMetrics) string) fleetCol {
		return fleetCol{head, numW, false, prio, func(st *paint, m *bench.ServerMetrics) string {
			t, pen := text(m), st.Text
			if t == "n/a" {
				pen = st.Muted
			}
			return pen.Render(fmt.Sprintf("%*s", numW, t))
		}}
	}
	return []fleetCol{
		{"kind", kindW, true, 7, func(st *paint, m *bench.ServerMetrics) string { return st.Text.Render(fit(outside(m.Kind), kindW)) }},
		num("wait", 0, func(m *bench.ServerMetrics) string { return countText(m.Waiting) }),
		num("run", 1, func(m *bench.ServerMetrics) string { return countText(m.Running) }),
		num("KV%", 4, func(m *bench.ServerMetrics) string { return gaugeText(m.KVUsage, 100) }),
		num("gen/s", 3, func(m *bench.ServerMetrics) string { return gaugeText(m.GenRate, 1) }),
		num("req/s", 5, func(m *bench.ServerMetrics) string { return gaugeText(m.ReqRate, 1) }),
		num("TTFT99", 2, func(m *bench.ServerMetrics) string { return p99Text(m, "TTFT") }),
		num("E2E99", 6, func(m *bench.ServerMetrics) string { return p99Text(m, "E2E latency") }),
	}
}

// kindW fits every kind a server names itself by ("vllm-router" the longest).
const kindW = 11

// fleetNameW is the least the server column keeps before columns are dropped.
const fleetNameW = 14

// countText is a gauge counting requests, "n/a" where unknown.
func countText(g bench.Gauge) string {
	switch {
	case !g.Usable():
		return "n/a"
	case g.V >= 0 && g.V < 99999.5:
		return fmt.Sprintf("%.0f", g.V)
	}
	return numRaw(g.V)
}

// gaugeText is g times scale in numW cells, "n/a" where unknown.
func gaugeText(g bench.Gauge, scale float64) string {
	if !g.Usable() || !finite(g.V*scale) {
		return "n/a"
	}
	return numRaw(g.V * scale)
}

// p99Text is the p99 in ms over the window of m's histogram named name: "≤B" where it falls in
// the first bucket, "n/a" where the server does not expose it or observed nothing.
func p99Text(m *bench.ServerMetrics, name string) string {
	for _, l := range m.Latency {
		if l.Name != name {
			continue
		}
		v := l.Dist.P99
		switch {
		case !l.Known || l.Dist.N == 0 || !finite(v):
			return "n/a"
		case l.Bounded(v):
			return "≤" + numRaw(l.FirstBound)
		}
		return numRaw(v)
	}
	return "n/a"
}

// finite reports whether v is a number to print: neither NaN nor infinite.
func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }

// fleetRows is the servers table's height: its head and a row per server.
func fleetRows(v *bench.View) int { return 1 + max(len(fleet(v)), len(members(v))) }

// fleetTitle names the servers table.
func fleetTitle(v *bench.View) string {
	return fmt.Sprintf("servers · %d watched", len(fleet(v)))
}

// fleetBody is the servers table in iw x ih: a head, then per server (in fleet order) its name
// (and how long ago it restarted, where that is recent, and its data-parallel ranks in short
// where it has them and they fit: serverCell), kind, queue, KV cache use, generation
// rate and p99s over the window; its note in their place where its figures are missing. Rows
// past the height are counted on the last line.
func fleetBody(st *paint, v *bench.View, iw, ih int) string {
	eps, ms := fleet(v), members(v)
	n := max(len(eps), len(ms))
	for i := len(eps); i < n; i++ { // more members than endpoints: a damaged recording's
		eps = append(slices.Clip(eps), ms[i].Source)
	}
	names := endpointNames(eps)
	all := fleetCols()
	keep, room := make([]bool, len(all)), iw-fleetNameW
	for p := range len(all) { // by priority, while they fit
		for i, c := range all {
			if c.prio == p && c.w+1 <= room {
				keep[i], room = true, room-c.w-1
			}
		}
	}
	var cols []fleetCol
	used := 0
	for i, c := range all {
		if keep[i] {
			cols, used = append(cols, c), used+c.w+1
		}
	}
	nameW := max(1, iw-used)

	head := st.Muted.Render(fit("server", nameW))
	for _, c := range cols {
		if c.left {
			head += st.Muted.Render(" " + fit(c.head, c.w))
		} else {
			head += st.Muted.Render(fmt.Sprintf(" %*s", c.w, c.head))
		}
	}
	lines := []string{fit(head, iw)}
	restarts := v.LastRestarts()
	row := func(i int) string {
		ago, recent := recentRestart(restarts, i, v.Now)
		if i >= len(ms) || (ms[i].At == 0 && ms[i].Note == "") {
			return fit(serverName(st, names[i], nameW, ago, recent)+st.Muted.Render(" no scrape yet"), iw)
		}
		out := serverCell(st, names[i], nameW, ago, recent, ms[i].DP)
		m := &ms[i]
		if m.Note != "" { // the row names the server: its page's address is left out of the note
			return fit(out+st.Warn.Render(" "+outside(strings.Replace(m.Note, "GET "+m.Source+": ", "", 1))), iw)
		}
		for _, c := range cols {
			out += " " + c.cell(st, m)
		}
		return fit(out, iw)
	}
	shown := n
	if 1+n > ih {
		shown = max(0, ih-2)
	}
	for i := range shown {
		lines = append(lines, row(i))
	}
	if shown < n {
		more := fmt.Sprintf("+%d more", n-shown)
		if k := notAnswering(ms[min(shown, len(ms)):]); k > 0 {
			more += fmt.Sprintf(" (%d not answering)", k)
		}
		lines = append(lines, fit(st.Muted.Render(more), iw))
	}
	if len(lines) > ih { // a pane of one row: the count alone
		lines = lines[len(lines)-ih:]
	}
	return strings.Join(lines, "\n")
}

// restartShown is how long after a server's restart its row in the servers table, or the server
// pane, says so (the events pane keeps it).
const restartShown = 2 * time.Minute

// recentRestart is how long before now server i of v (of its fleet, else the one) was last seen
// to restart (restarts: v.LastRestarts()), and whether that is within restartShown.
func recentRestart(restarts []time.Duration, i int, now time.Duration) (time.Duration, bool) {
	if i >= len(restarts) || restarts[i] < 0 {
		return 0, false
	}
	ago := max(0, now-restarts[i])
	return ago, ago < restartShown
}

// agoText is a span shorter than an hour, in short: "12s", "1m05s".
func agoText(d time.Duration) string {
	s := int(d / time.Second)
	if s < 60 {
		return fmt.Sprintf("%ds", s)
	}
	return fmt.Sprintf("%dm%02ds", s/60, s%60)
}

// restartNotes say how long ago a server restarted, longest first, down to the glyph alone.
func restartNotes(ago time.Duration) []string {
	a := agoText(ago)
	return []string{"↻ restarted " + a + " ago", "↻ " + a + " ago", "↻ " + a, "↻"}
}

// serverName is the table's first cell, nameW wide: a server's name and, where it restarted
// ago, within restartShown (recent), the longest note that fits beside the whole name; where
// none does, the name in the warning colour alone (the name is what tells the rows apart; the
// events pane says it restarted).
func serverName(st *paint, name string, nameW int, ago time.Duration, recent bool) string {
	if !recent {
		return st.Text.Render(fit(name, nameW))
	}
	for _, n := range restartNotes(ago) {
		if widthOf(name)+1+widthOf(n) <= nameW {
			return st.Text.Render(name) + st.Warn.Render(fit(" "+n, nameW-widthOf(name)))
		}
	}
	return st.Warn.Render(fit(name, nameW))
}

// serverCell is serverName with, after the name and its restart note, the server's
// data-parallel ranks in short (dpSummary) where they fit whole in nameW (the restart note
// taking the longest form that leaves them room), in the warning colour where a rank stands
// out (dpHot); where they do not fit, or it has none, serverName alone.
func serverCell(st *paint, name string, nameW int, ago time.Duration, recent bool, dp *bench.DPRanks) string {
	sum := dpSummary(dp)
	if sum == "" {
		return serverName(st, name, nameW, ago, recent)
	}
	out, used := st.Text.Render(name), widthOf(name)
	if recent {
		note := ""
		for _, n := range restartNotes(ago) {
			if used+1+widthOf(n)+1+widthOf(sum) <= nameW {
				note = n
				break
			}
		}
		if note == "" {
			return serverName(st, name, nameW, ago, recent)
		}
		out, used = out+st.Warn.Render(" "+note), used+1+widthOf(note)
	}
	if used+1+widthOf(sum) > nameW {
		return serverName(st, name, nameW, ago, recent)
	}
	pen := st.Muted
	if q, kv := dpHot(dp.Ranks); q >= 0 || kv >= 0 {
		pen = st.Warn
	}
	return out + pen.Render(fit(" "+sum, nameW-used))
}
