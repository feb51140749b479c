package bench

import (
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"time"
)

// watching reports whether the session only watches a remote server (--watch): it sends no
// request, and its figures are the server's own.
func (s *Session) watching() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.info.Remote != nil && s.info.Remote.Watch
}

// watchReport writes a watch session's summary in place of the runs' table: the server, how
// long it was watched, and what it reported over that time.
func (s *Session) watchReport(w io.Writer) error {
	s.mu.Lock()
	info, m, now, restarts := s.info, s.server, s.clock.Now(), slices.Clone(s.restarts)
	s.mu.Unlock()
	_, err := io.WriteString(w, strings.Join(watchSummary(info, m, now, restarts), "\n")+"\n")
	return err
}

// watchSummary is watchReport's lines. A figure the server does not expose, or that no two
// scrapes measured, reads "n/a": never a NaN, never a made-up zero. A fleet's summary is the
// servers' sums, then a block per server. restarts are the restarts the events told of each
// server (a fleet's in order, else the one's; missing: none seen).
func watchSummary(info ServerInfo, m *ServerMetrics, elapsed time.Duration, restarts []int) []string {
	restartsOf := func(i int) int {
		if i < len(restarts) {
			return restarts[i]
		}
		return 0
	}
	r := info.Remote
	what := r.Kind + " at " + r.Endpoint
	if len(r.Fleet) > 0 {
		kind := r.Kind
		if m != nil && m.Kind != "" {
			kind = m.Kind
		}
		what = fmt.Sprintf("%d servers (%s)", len(r.Fleet), kind)
	}
	lines := []string{fmt.Sprintf("=== rosetop watch: %s, %s ===", what, elapsed.Round(time.Millisecond))}
	row := func(name, value string) { lines = append(lines, fmt.Sprintf("%-26s %s", name+":", value)) }
	row("Model", info.Model)
	row("Requests sent by rosetop", "0 (watch mode)")
	if m == nil || m.Total == nil {
		why := "no scrape worked during the session"
		if m != nil && m.Note != "" {
			why += " (" + m.Note + ")"
		}
		row("Server-side figures", why)
	} else {
		t := m.Total
		row("Metrics", fmt.Sprintf("%s (%d scrapes, %d failed)", m.Source, t.Scrapes, t.Failed))
		row("Server-side span", t.Span.Round(time.Millisecond).String()+" (first to last good scrape)")
		row("Requests finished", requestsText(t.Requests, t.Mean(t.Requests)))
		row("Generated tokens", tokensText(t.GenTokens, t.Mean(t.GenTokens)))
		row("Prompt tokens", tokensText(t.PromptTokens, t.Mean(t.PromptTokens)))
		for _, l := range t.Latency {
			row(l.Name+" (ms)", latencyText(l))
		}
		n := 0
		for i := range max(1, len(r.Fleet)) {
			n += restartsOf(i)
		}
		row("Restarts seen", fmt.Sprint(n))
		if m.Note != "" {
			row("At the end", m.Note)
		}
	}
	if m == nil {
		return lines
	}
	for i := range m.Members {
		ep := m.Members[i].Source
		if i < len(r.Fleet) {
			ep = r.Fleet[i]
		}
		lines = append(lines, "", "Server "+ep)
		lines = append(lines, memberSummary(&m.Members[i], restartsOf(i))...)
	}
	return lines
}

// memberSummary is one server of a fleet over the session, in short: what it finished and
// generated, its TTFT and end-to-end p99, and the restarts seen.
func memberSummary(m *ServerMetrics, restarts int) []string {
	var lines []string
	row := func(name, value string) { lines = append(lines, fmt.Sprintf("  %-24s %s", name+":", value)) }
	kind := m.Kind
	if kind == "" {
		kind = "n/a (no scrape yet)"
	}
	row("Kind", kind)
	if t := m.Total; t == nil {
		row("Server-side figures", "no scrape worked during the session")
	} else {
		row("Metrics", fmt.Sprintf("%s (%d scrapes, %d failed)", m.Source, t.Scrapes, t.Failed))
		row("Requests finished", requestsText(t.Requests, t.Mean(t.Requests)))
		row("Generated tokens", tokensText(t.GenTokens, t.Mean(t.GenTokens)))
		for _, name := range []string{"TTFT", "E2E latency"} {
			row(name+" p99 (ms)", p99Text(t.Latency, name))
		}
		row("Restarts seen", fmt.Sprint(restarts))
	}
	if m.Note != "" {
		row("At the end", m.Note)
	}
	return lines
}

// p99Text is the p99 of the histogram named name among ls, a bound ("≤B") where it falls in the
// first bucket.
func p99Text(ls []ServerLatency, name string) string {
	for _, l := range ls {
		switch {
		case l.Name != name:
			continue
		case !l.Known:
			return "n/a (the server exposes no such histogram)"
		case l.Dist.N == 0:
			return "n/a (none observed)"
		case !finite(l.Dist.P99):
			return "n/a"
		case l.Bounded(l.Dist.P99):
			return fmt.Sprintf("≤%g (%d observations)", l.FirstBound, l.Dist.N)
		}
		return fmt.Sprintf("%.1f (%d observations)", l.Dist.P99, l.Dist.N)
	}
	return "n/a (the server exposes no such histogram)"
}

func countText(g Gauge) string {
	if !g.Usable() {
		return "n/a (the server exposes no such count)"
	}
	return fmt.Sprintf("%.0f", g.V)
}

// requestsText is the requests finished and their mean rate.
func requestsText(g, mean Gauge) string {
	out := countText(g)
	if g.Usable() && mean.Usable() {
		out += fmt.Sprintf(" (%.2f req/s)", mean.V)
	}
	return out
}

// tokensText is a token total and its mean rate.
func tokensText(g, mean Gauge) string {
	if !g.Usable() {
		return "n/a (the server exposes no such counter)"
	}
	out := fmt.Sprintf("%.0f", g.V)
	if mean.Usable() {
		out += fmt.Sprintf(" (%.1f tok/s)", mean.V)
	}
	return out
}

// latencyText is a server histogram's percentiles over the session, a bound ("≤B") where one
// falls in the first bucket.
func latencyText(l ServerLatency) string {
	if !l.Known {
		return "n/a (the server exposes no such histogram)"
	}
	if l.Dist.N == 0 {
		return "n/a (none observed)"
	}
	ms := func(v float64) string {
		switch {
		case math.IsNaN(v) || math.IsInf(v, 0):
			return "n/a"
		case l.Bounded(v):
			return fmt.Sprintf("≤%g", l.FirstBound)
		}
		return fmt.Sprintf("%.1f", v)
	}
	d := l.Dist
	out := fmt.Sprintf("p50 %s  p95 %s  p99 %s  (%d observations)", ms(d.P50), ms(d.P95), ms(d.P99), d.N)
	if l.Target > 0 && l.Within.Usable() { // --goodput's target on it
		floor := ""
		if l.WithinFloor {
			floor = "at least "
		}
		out += fmt.Sprintf("; within %g ms: %s%.1f%%", l.Target, floor, 100*l.Within.V)
	}
	return out
}

// serverTrend is a watched server's p99 over time: one timeline per latency histogram it
// exposes, sampled once per good scrape from the server pane's window, as the client-side p99
// timelines are from rosetop's own windows. Guarded by Session.mu, as liveState is.
type serverTrend struct {
	tls []*timeline   // in the order the server's latencies first came, those it exposed only
	at  time.Duration // the scrape (ServerMetrics.At) last sampled; -1 before the first
}

// sample adds the p99 of each of m's exposed histograms with observations in its window, once
// per good scrape. A p99 within the first bucket says only "at most FirstBound": it is charted
// at that bound (the legend marks it "≤"). A value that is not finite is left out.
func (t *serverTrend) sample(m *ServerMetrics) {
	if m == nil || len(m.Latency) == 0 || m.At <= t.at {
		return
	}
	t.at = m.At
	for _, l := range m.Latency {
		if !l.Known {
			continue
		}
		tl := t.timeline(l.Name)
		v := l.Dist.P99
		if l.Dist.N == 0 || !finite(v) || v < 0 {
			continue
		}
		if l.Bounded(v) {
			v = l.FirstBound
		}
		tl.add(m.At, v)
	}
}

// timeline is the p99 timeline of the histogram named name, made on its first use.
func (t *serverTrend) timeline(name string) *timeline {
	for _, tl := range t.tls {
		if tl.name == name+" p99" {
			return tl
		}
	}
	tl := newTimeline(name+" p99", p99Tracks())
	t.tls = append(t.tls, tl)
	return tl
}

// view is the timelines as published; nil before the server exposed any histogram.
func (t *serverTrend) view() []Timeline {
	var out []Timeline
	for _, tl := range t.tls {
		out = append(out, tl.view())
	}
	return out
}
