package tui

import (
	"fmt"
	"math"
	"net/url"
	"slices"
	"strings"

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

// endpointNames are the servers' names in the table, each its own and short: host:port; where
// several share a host and port, with what tells those apart: the path, and a scheme other than
// http (https://h:8000 beside h:8000), or both; the endpoint whole where it is not a URL with a
// host; and " #2", " #3" after a name that is still an earlier one's (one endpoint twice, in a
// damaged recording).
func endpointNames(eps []string) []string {
	type ep struct{ whole, scheme, host, path string }
	parsed := make([]ep, len(eps))
	hosts := map[string][]int{} // the endpoints of each host:port
	for i, raw := range eps {
		e := ep{whole: outside(raw)}
		if u, err := url.Parse(e.whole); err == nil && u.Host != "" {
			e.scheme, e.host, e.path = u.Scheme, u.Host, strings.TrimSuffix(u.Path, "/")
			hosts[e.host] = append(hosts[e.host], i)
		}
		parsed[i] = e
	}
	names := make([]string, len(eps))
	for i, e := range parsed {
		names[i] = e.whole
		if e.host == "" {
			continue
		}
		names[i] = e.host
		if share := hosts[e.host]; len(share) > 1 {
			differ := func(of func(ep) string) bool {
				return slices.ContainsFunc(share, func(j int) bool { return of(parsed[j]) != of(e) })
			}
			if differ(func(e ep) string { return e.path }) {
				names[i] += e.path
			}
			if e.scheme != "http" && differ(func(e ep) string { return e.scheme }) {
				names[i] = e.scheme + "://" + names[i]
			}
		}
		names[i] = outside(names[i]) // the URL's path is unescaped: %1b is an escape again
	}
	return numbered(names)
}

// numbered is names with " #2", " #3"... after each name an earlier one has, the first number
// that no name has.
func numbered(names []string) []string {
	taken := make(map[string]bool, len(names)) // every name so far, numbered ones too
	for _, n := range names {
		taken[n] = true
	}
	for i, n := range names {
		if !slices.Contains(names[:i], n) {
			continue
		}
		k := 2
		for ; taken[fmt.Sprintf("%s #%d", n, k)]; k++ {
		}
		names[i] = fmt.Sprintf("%s #%d", n, k)
		taken[names[i]] = true
	}
	return names
}

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

// kindW fits every kind a server names itself by ("sgl-router" the longest).
const kindW = 10

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

// fleetBody is the servers table in iw x ih: a head, then per server (in fleet order) its name,
// kind, queue, KV cache use, generation rate and p99s over the window; its note in their place
// where its figures are missing. Rows past the height are counted on the last line.
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
	row := func(i int) string {
		out := st.Text.Render(fit(names[i], nameW))
		if i >= len(ms) || (ms[i].At == 0 && ms[i].Note == "") {
			return fit(out+st.Muted.Render(" no scrape yet"), iw)
		}
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
