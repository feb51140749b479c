package tui

import (
	"fmt"
	"strings"

	"github.com/charmbracelet/bubbles/key"

	"rosetop/bench"
)

// A watch session (rosetop --endpoint URL --watch) sends no request: the panes that show what
// rosetop measured as a client say so instead of drawing zeros, and the figures are the
// server's own.

// watching reports whether v is a watch session's: no requests, the server's figures only.
func watching(v *bench.View) bool {
	return v != nil && v.Header.Remote != nil && v.Header.Remote.Watch
}

// watchPane is pane id's title and body in watch mode, given those drawn for a session that
// sends requests: the client-side panes say that they are not measured, the latency pane shows
// the server's totals instead, and the rest stay. Watching a fleet, the ITL pane lists its
// servers and the server pane is named for the fleet, whose sums it shows; watching one server
// run data parallel, the ITL pane is its ranks table (watchedDP).
func watchPane(st *paint, id paneID, v *bench.View, iw, ih int, title, body string) (string, string) {
	r := v.Header.Remote
	switch id {
	case pQueue:
		return strings.Replace(title, "queue depth", "server queue", 1), body
	case pAdmit:
		switch {
		case !r.ServerFirsts && fleet(v) != nil:
			return "first tokens", notMeasured(st, "first tokens", "not every server's /metrics count them", iw)
		case !r.ServerFirsts:
			return "first tokens", notMeasured(st, "first tokens", r.Kind+"'s /metrics do not count them", iw)
		}
	case pLatency:
		return totalsTitle(v.Server), totalsBody(st, v.Server, iw)
	case pServer:
		if fleet(v) != nil {
			return strings.Replace(title, "server "+v.Server.Kind, "fleet "+fleetName(v), 1), body
		}
	case pITL:
		if fleet(v) != nil {
			return fleetTitle(v), fleetBody(st, v, iw, ih)
		}
		if dp := watchedDP(v); dp != nil {
			return dpTitle(dp), dpBody(st, dp, iw, ih)
		}
		return "inter-token latency (client-side)", notMeasured(st, "per-request ITL", "the server's ITL histogram: the server pane", iw)
	case pCold:
		body = st.Muted.Render("no cold or steady runs: watch mode sends no requests")
		if ih >= 3 {
			body += "\n" + strings.Join(ledgerBlock(st, v.Ledger, iw, ih-1), "\n")
		}
		return "connection", body
	}
	return title, body
}

// notMeasured is the body of a client-side pane in watch mode: what it would show, why it
// cannot, and where the server's own figures are.
func notMeasured(st *paint, what, where string, iw int) string {
	return fit(st.Muted.Render(what+": not measured"), iw) + "\n" +
		fit(st.Muted.Render("watch mode sends no requests"), iw) + "\n" +
		fit(st.Muted.Render(where), iw)
}

// rate is a server token rate for the header: "n/a" where the server has no such counter (or no
// two scrapes yet), in a fixed-width slot.
func rate(st *paint, g bench.Gauge) string {
	if !g.Usable() {
		return st.Muted.Render(fmt.Sprintf("%*s", numW, "n/a"))
	}
	return st.Strong.Render(fmt.Sprintf("%*s", numW, numRaw(g.V)))
}

// serverRates are the server's generation and prompt token rates and its finished requests per
// second; unknown without a server panel.
func serverRates(v *bench.View) (gen, prompt, finished bench.Gauge) {
	if v.Server == nil {
		return bench.Gauge{}, bench.Gauge{}, bench.Gauge{}
	}
	return v.Server.GenRate, v.Server.PromptRate, v.Server.ReqRate
}

// watchLine2 is the header's second line in watch mode, in w cells: what is watched (a fleet by
// its size and kind, and how many of its servers do not answer), its throughput (tokens and
// finished requests per second; the status line says that no requests are sent), then the
// shares within --goodput's targets. Where the line would not fit, the prompt rate goes first,
// then the finished requests: the targets were asked for.
func watchLine2(st *paint, v *bench.View, w int) string {
	r := v.Header.Remote
	gen, prompt, finished := serverRates(v)
	what := st.Strong.Render(r.Kind)
	if fleet(v) != nil {
		what = st.Strong.Render(fleetName(v))
		if n := notAnswering(members(v)); n > 0 {
			what += st.Warn.Render(fmt.Sprintf(" · %d not answering", n))
		}
	}
	head := st.Warn.Render("WATCH ") + what + st.Muted.Render("  generation ") + rate(st, gen) + st.Muted.Render(" tok/s")
	prompts := st.Muted.Render("  prompt ") + rate(st, prompt) + st.Muted.Render(" tok/s")
	done := st.Muted.Render("  finished ") + rate(st, finished) + st.Muted.Render(" req/s")
	shares, room := "", 0
	if len(v.Header.SLOs) > 0 {
		shares, room = serverShares(st, v)
	}
	for _, mid := range []string{prompts + done, done} {
		if widthOf(head+mid)+room <= w {
			return head + mid + shares
		}
	}
	return head + shares
}

// watchQueueHead is the queue pane's first line in watch mode: the server's waiting and
// running requests and KV cache use, or why they are not known.
func watchQueueHead(st *paint, v *bench.View) string {
	p := v.Server
	if p == nil {
		return st.Muted.Render("no scrape yet")
	}
	if p.Note != "" {
		return st.Warn.Render(p.Note)
	}
	q := v.QueueLast
	head := st.Series[0].Render("W ") + st.Muted.Render("waiting ") + st.Strong.Render(fmt.Sprintf("%-5d", q.Waiting)) +
		st.Series[1].Render(" R ") + st.Muted.Render("running ") + st.Strong.Render(fmt.Sprintf("%-5d", q.Running))
	kv := "n/a"
	if g := p.KVUsage; g.Usable() {
		kv = fmt.Sprintf("%.1f%%", 100*g.V)
	}
	return head + st.Muted.Render(" KV ") + st.Strong.Render(kv)
}

// totalsTitle names the totals pane and the span it covers.
func totalsTitle(p *bench.ServerPanel) string {
	if p == nil || p.Total == nil {
		return "server · since start"
	}
	return "server · since start · " + clock(p.Total.Span)
}

// totalsRows is totalsBody's height.
const totalsRows = 5

// totalsBody is the server's figures over the whole session, in the latency pane's place: what
// it finished and generated, its mean rates, and the scrapes behind them.
func totalsBody(st *paint, p *bench.ServerPanel, iw int) string {
	if p == nil || p.Total == nil {
		return st.Muted.Render("no scrape yet")
	}
	t := p.Total
	const nameW = 18
	line := func(name string, g bench.Gauge, perSec bool) string {
		out := st.Text.Render(fit(name, nameW))
		if !g.Usable() {
			return out + st.Muted.Render(fmt.Sprintf(" %*s", numW, "n/a")+" the server does not count it")
		}
		out += " " + st.Strong.Render(fmt.Sprintf("%*s", numW, count(int(g.V))))
		if m := t.Mean(g); perSec && m.Usable() {
			out += st.Muted.Render("  mean ") + st.Text.Render(numRaw(m.V)) + st.Muted.Render(" tok/s")
		}
		return out
	}
	lines := []string{
		line("requests finished", t.Requests, false),
		line("generated tokens", t.GenTokens, true),
		line("prompt tokens", t.PromptTokens, true),
		st.Text.Render(fit("scrapes", nameW)) + " " + st.Strong.Render(fmt.Sprintf("%*d", numW, t.Scrapes)) +
			st.Muted.Render(fmt.Sprintf("  %d failed · ", t.Failed)+p.Source),
		st.Muted.Render("rosetop sent 0 requests: the figures are the server's"),
	}
	for i := range lines {
		lines[i] = fit(lines[i], iw)
	}
	return strings.Join(lines, "\n")
}

// boundedValue writes a server p99 line's newest value for the legend: "≤B" where it is at or
// below the first bucket's bound B of that histogram in p (where the chart draws such a p99).
func boundedValue(p *bench.ServerPanel) func(name string, v float64) string {
	return func(name string, v float64) string {
		if p != nil {
			for _, l := range p.Latency {
				if l.Name+" p99" == name && l.FirstBound > 0 && v <= l.FirstBound*(1+1e-9) {
					return "≤" + numRaw(l.FirstBound)
				}
			}
		}
		return numRaw(v)
	}
}

// WatchShortHelp is the footer line in watch mode: only the keys that do something there.
func (k KeyMap) WatchShortHelp() []key.Binding {
	return []key.Binding{k.Window, pairKey(k.EventsUp, k.EventsDown, "events"), k.Theme, k.Help, k.Quit}
}

// watchGlossary is the overlay's glossary in watch mode: the glyphs it still draws, and the
// server pane's columns; watching a fleet, the servers table's too.
func watchGlossary(fleet bool) []helpRow {
	rows := []helpRow{
		{"┊", "time charts: a mark on the events' times"},
		{"W R", "server queue: waiting, running requests as its /metrics say (bucket means)"},
		{"p50 … n", "server pane: its histograms over the window; n: observations in it"},
		{"≤B", "a server p99 within the first bucket: at most B ms; charted at B"},
		{"n/a", "the server's /metrics do not expose it"},
	}
	if fleet {
		rows = append(rows,
			helpRow{"fleet", "queue, totals, server pane: the servers' sums, histograms merged, KV the mean"},
			helpRow{"wait run", "servers table: each server's waiting, running requests"},
			helpRow{"KV% gen/s req/s", "servers table: its KV cache in use, tokens it generates and requests it finishes a second"},
			helpRow{"TTFT99", "servers table: its p99 TTFT, and E2E99 end-to-end latency, over the window (ms)"})
	}
	return rows
}

// watchHelpKeys are the overlay's key rows in watch mode.
func watchHelpKeys() []helpRow {
	rows := []helpRow{{"p g - + …", "load and engine keys do nothing: watch mode sends no requests"}}
	for _, r := range helpKeys() {
		switch r.key {
		case "w", "↑ ↓", "t", "? esc":
			rows = append(rows, r)
		case "q":
			rows = append(rows, helpRow{r.key, "quit (Ctrl-C too): a summary of what the server reported goes to stdout"})
		}
	}
	return rows
}
