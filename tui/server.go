package tui

import (
	"fmt"
	"math"
	"strings"
	"time"

	"rosetop/bench"
)

// serverRows is the server pane's height inside its frame: the gauges line, the column heads,
// one row per latency.
func serverRows(p *bench.ServerPanel) int { return 2 + max(1, len(p.Rows)) }

// serverTitle names the server and the window its histograms span.
func serverTitle(p *bench.ServerPanel) string {
	t := "server " + p.Kind
	if p.Window > 0 {
		t += " · " + spanName(p.Window)
	}
	return t
}

// serverBody is a remote server's own figures beside rosetop's client-side ones, never mixed:
// its queue and KV gauges (or why it has none), then per latency the server's p50 and p99 from
// its histograms over the window (srv; "≤B" where it falls in the first bucket, whose upper
// bound is B), the client's (cli), and the difference at p99 (Δ: cli - srv). In watch mode
// there is no client side: the server's p50, p95, p99 and observations (n) over the window.
// After the gauges, where the server restarted ago, within restartShown (recent), how long ago,
// as far as it fits (a queue note, a router's, is cut for it).
func serverBody(st *paint, p *bench.ServerPanel, iw int, watch bool, ago time.Duration, recent bool) string {
	var b strings.Builder
	gauge := func(name string, g bench.Gauge, pct bool) string {
		v := "–"
		switch {
		case !g.Usable(): // unknown, or a damaged recording's
		case pct:
			v = fmt.Sprintf("%.1f%%", 100*g.V)
		default:
			v = fmt.Sprintf("%.0f", g.V)
		}
		return st.Muted.Render(name+" ") + st.Strong.Render(v)
	}
	line := gauge("waiting", p.Waiting, false) + "  " + gauge("running", p.Running, false) + "  " + gauge("KV", p.KVUsage, true)
	if p.Note != "" {
		line = st.Warn.Render(p.Note)
	}
	if recent {
		notes := restartNotes(ago)
		added := false
		for _, n := range notes[:len(notes)-1] { // the glyph alone says too little here
			if widthOf(line)+2+widthOf(n) <= iw {
				line, added = line+st.Warn.Render("  "+n), true
				break
			}
		}
		short := notes[len(notes)-2]
		if room := iw - 2 - widthOf(short); !added && p.Note != "" && room >= 8 { // the queue's note gives way
			line = st.Warn.Render(fit(p.Note, room) + "  " + short)
		}
	}
	b.WriteString(fit(line, iw))
	// srv: the server's histograms; cli: rosetop's own measurement as its client; Δ: cli - srv.
	cols := []string{"srv50", "cli50", "srv99", "cli99", "Δ99"}
	if watch {
		cols = []string{"p50", "p95", "p99", "n"}
	}
	if iw < 7+len(cols)*(numW+1) {
		cols = cols[2:]
	}
	if len(p.Rows) == 0 {
		return b.String() + "\n" + st.Muted.Render("no latency histograms from the server")
	}
	nameW := min(iw-len(cols)*(numW+1), 12)
	b.WriteString("\n" + st.Muted.Render(fit("ms", nameW)))
	for _, c := range cols {
		b.WriteString(st.Muted.Render(" " + strings.Repeat(" ", numW-widthOf(c)) + c))
	}
	for _, r := range p.Rows {
		srv, cli := r.Server.Dist, r.Client
		if !r.Server.Known || srv.N == 0 {
			srv = bench.Dist{P50: math.NaN(), P95: math.NaN(), P99: math.NaN()}
		}
		if cli.N == 0 {
			cli = bench.Dist{P50: math.NaN(), P99: math.NaN()}
		}
		vals := map[string]float64{"srv50": srv.P50, "cli50": cli.P50, "srv99": srv.P99, "cli99": cli.P99, "Δ99": r.DiffP99,
			"p50": srv.P50, "p95": srv.P95, "p99": srv.P99, "n": float64(srv.N)}
		name := r.Name
		if name == "E2E latency" && widthOf(name) > nameW {
			name = "E2E"
		}
		b.WriteString("\n" + st.Text.Render(fit(name, nameW)))
		for _, c := range cols {
			pen, text := st.Text, num(vals[c])
			isSrv := strings.HasPrefix(c, "srv") || (watch && c != "n")
			switch {
			case c == "n" && r.Server.Known:
				text = fmt.Sprintf("%*s", numW, count(srv.N))
			case c == "n":
				pen, text = st.Muted, fmt.Sprintf("%*s", numW, "–")
			case c == "Δ99":
				pen = st.Strong
			case !r.Server.Known && isSrv:
				pen = st.Muted
			case isSrv && r.Server.Bounded(vals[c]):
				text = fmt.Sprintf("%*s", numW, "≤"+numRaw(r.Server.FirstBound)) // interpolated from 0: a bound
			}
			b.WriteString(" " + pen.Render(text))
		}
	}
	return b.String()
}
