package tui

import (
	"fmt"
	"strings"

	"github.com/charmbracelet/bubbles/key"
	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/lipgloss"
	"github.com/charmbracelet/x/ansi"

	"rosetop/bench"
)

func keyMatches(k tea.KeyMsg, b key.Binding) bool { return key.Matches(k, b) }

// refresh reads the latest view, recomputes the layout and, when the data changed (or full),
// redraws every pane; then composes the frame View returns. Called only from Update.
func (m *Model) refresh(redraw bool) {
	if v := m.s.View(); v != m.view {
		m.view, redraw = v, true
	}
	m.help.Width = m.w
	m.help.ShortSeparator = " • "
	if m.w < 100 { // the short help must fit the 80-column minimum whole
		m.help.ShortSeparator = "  "
	}
	lay := computeLayout(m.pt, m.w, m.h, m.footerH(), m.view)
	if lay != m.lay {
		m.lay, redraw = lay, true
	}
	if redraw && !m.lay.tooSmall {
		m.renderPanes()
	}
	m.compose()
}

// footerH is the footer's height: the status line and the short help (the full help is an
// overlay, so opening it never moves the panes).
func (m *Model) footerH() int { return 2 }

// renderPanes draws the header and every shown pane at its layout size; a table pane whose
// inputs equal those it was last drawn from is reused (see paneCache).
func (m *Model) renderPanes() {
	st, l := m.pt, m.lay
	v := m.view
	if v == nil { // before the session's first view: empty panes
		v = &bench.View{}
	}
	m.header = headerView(st, m.view, l.w)
	x0, x1 := m.ch.window(v)
	for id := range nPanes {
		h := l.heights[id]
		w := l.leftW
		if id >= pLatency {
			w = l.rightW
		}
		if h == 0 {
			m.panes[id] = ""
			continue
		}
		memo, table := paneInputs(id, v, st, w, h, m.evScroll)
		if table {
			if out, ok := m.cache.get(id, memo); ok {
				m.panes[id] = out
				continue
			}
		}
		iw, ih := paneInner(st, w, h)
		var title, body string
		switch id {
		case pQueue:
			title, body = "queue depth · "+spanName(chartSpans[m.ch.span]), m.queueBody(v, x0, x1, iw, ih)
		case pAdmit:
			title = "prefill admissions per step"
			if r := v.Header.Remote; r != nil && r.ServerFirsts && len(r.Fleet) > 0 {
				title = "first tokens per scrape of a server (servers' count)" // a bar a member's scrape, all members' new ones
			} else if r != nil && r.ServerFirsts {
				title = "first tokens per scrape (server's count)"
			} else if r != nil {
				title = "first tokens per step (client's count)"
			}
			body = m.ch.admit.body(st, v.Admissions, iw, ih)
		case pP99:
			long, short := "p99 latency (ms, log scale)", "p99 ms (log)"
			if watching(v) {
				long, short = "server p99 (ms, log scale)", "server p99 ms (log)"
			}
			if title = long + " · " + spanName(chartSpans[m.ch.span]); widthOf(title) > w-6 {
				title = short + " · " + spanName(chartSpans[m.ch.span])
			}
			body = m.p99Body(v, x0, x1, iw, ih)
		case pLatency:
			title = "latency"
			if v.LatencyWindow > 0 {
				title += " · " + spanName(v.LatencyWindow)
			}
			if n := latencyN(v.Latency); n > 0 {
				title += fmt.Sprintf(" · %d requests", n)
			}
			body = latencyBody(st, v.Latency, iw)
		case pITL:
			title, body = "inter-token latency (ms)", m.ch.itl.body(st, v, iw, ih)
		case pCold:
			title = "cold vs steady"
			if n := len(v.Steady); n > 0 {
				title = fmt.Sprintf("cold vs steady (median of %d)", n)
			}
			body = coldBody(st, v, iw, ih)
		case pServer:
			ago, recent := recentRestart(v.LastRestarts(), 0, v.Now)
			recent = recent && fleet(v) == nil // a fleet's restarts are in its servers table
			title, body = serverTitle(v.Server), serverBody(st, v.Server, iw, watching(v), ago, recent)
			if dp := watchedDP(v); dp != nil && l.heights[pITL] == 0 { // no room for the ranks table
				title = dpServerTitle(title, v.Server.Kind, dp, w-6)
			}
		case pEvents:
			var scrolled int
			body, scrolled = eventsBody(st, v.Events, iw, ih, m.evScroll)
			m.evScroll = scrolled
			title = eventsTitle(v.Live, scrolled, w-6)
		}
		if watching(v) {
			title, body = watchPane(st, id, v, iw, ih, title, body)
		}
		m.panes[id] = renderPane(st, title, body, w, h)
		if table {
			m.cache.put(id, memo, m.panes[id])
		}
	}
}

// paneInputs is what a table pane is drawn from (table is false for the chart panes, which
// change with the clock on every frame).
func paneInputs(id paneID, v *bench.View, st *paint, w, h, scroll int) (memo paneMemo, table bool) {
	memo = paneMemo{pt: st, w: w, h: h}
	if id == pLatency && watching(v) { // the server's totals in its place: new with every scrape
		return memo, false
	}
	switch id {
	case pLatency:
		memo.latency = v.Latency
	case pCold:
		memo.compare, memo.ledger, memo.steady = v.Compare, v.Ledger, len(v.Steady)
	case pEvents:
		memo.events, memo.live, memo.scroll = v.Events, v.Live, scroll
	default:
		return memo, false
	}
	return memo, true
}

// compose joins header, panes and footer into the frame: exactly w x h cells.
func (m *Model) compose() {
	l := m.lay
	if m.w == 0 || m.h == 0 {
		m.frame = ""
		return
	}
	if l.tooSmall {
		m.frame = m.tooSmallFrame()
		return
	}
	col := func(ids ...paneID) string {
		var parts []string
		for _, id := range ids {
			if l.heights[id] > 0 {
				parts = append(parts, m.panes[id])
			}
		}
		return strings.Join(parts, "\n")
	}
	left, right := col(pQueue, pAdmit, pP99), col(pLatency, pServer, pITL, pCold, pEvents)
	footer := m.footer()
	// Each column is fitted to exactly bodyH lines of its width; they are joined line by line.
	var b strings.Builder
	b.Grow(len(m.header) + len(left) + len(right) + len(footer) + l.bodyH + 1)
	b.WriteString(m.header)
	lc, rc := newLines(left), newLines(right)
	for range l.bodyH {
		b.WriteByte('\n')
		b.WriteString(fit(lc.next(), l.leftW))
		b.WriteString(fit(rc.next(), l.rightW))
	}
	b.WriteByte('\n')
	b.WriteString(footer)
	m.frame = b.String()
	if m.showHelp {
		m.frame = overlay(m.frame, m.helpBox(m.w, m.h), m.w, m.h)
	}
}

// tooSmallFrame says that the terminal is too small, in a shorter form where the long one would
// be cut; each line is cut to the width before it is centred, so blank rows stay blank.
func (m *Model) tooSmallFrame() string {
	lines := []string{fmt.Sprintf("rosetop needs at least %d×%d", MinWidth, MinHeight), fmt.Sprintf("this terminal is %d×%d · q quits", m.w, m.h)}
	if widthOf(lines[1]) > m.w {
		lines = []string{fmt.Sprintf("needs %d×%d", MinWidth, MinHeight), fmt.Sprintf("is %d×%d", m.w, m.h), "q quits"}
	}
	for i, l := range lines {
		if widthOf(l) > m.w {
			l = ansi.Truncate(l, m.w, "…")
		}
		pen := m.pt.Muted
		if i == 0 {
			pen = m.pt.Warn
		}
		lines[i] = pen.Render(l)
	}
	// Placed, then fitted: the message is taller than the shortest terminals.
	return fitLines(lipgloss.Place(m.w, m.h, lipgloss.Center, lipgloss.Center, strings.Join(lines, "\n")), m.w, m.h)
}

// footer is the status line (a key's result, else idleStatus) and the key help.
func (m *Model) footer() string {
	st := m.pt
	status := m.idleStatus()
	if m.flash != "" {
		if m.flashErr {
			status = st.Bad.Render("✗ " + m.flash)
		} else {
			status = st.Good.Render("✓ " + m.flash)
		}
		if v := m.view; v != nil && engineChange(v.Header) != "" { // what the key set on its way
			status += st.Muted.Render(" · ") + st.Warn.Render(engineChange(v.Header))
		}
	}
	keys := m.keys.ShortHelp()
	if replaying(m.view) {
		keys = replayShortHelp(m.keys, m.rkeys)
	} else if watching(m.view) {
		keys = m.keys.WatchShortHelp()
	} else if m.view != nil && m.view.Header.Remote != nil {
		keys = m.keys.RemoteShortHelp()
	}
	help := m.help.ShortHelpView(keys)
	return fit(status, m.w) + "\n" + fitLines(help, m.w, m.footerH()-1)
}

// runProgress is a planned run's progress: requests and tokens done, a bar, the time left.
func runProgress(st *paint, p *bench.RunProgress) string {
	frac := 0.0
	if p.MaxTokens > 0 { // clamped: a damaged recording's counts may be out of range either way
		frac = max(0, min(1, float64(p.Tokens)/float64(p.MaxTokens)))
	}
	const barW = 12
	full := int(frac * barW) // 0 to barW
	bar := strings.Repeat("█", full) + strings.Repeat("░", barW-full)
	out := st.Accent.Render(bar) + st.Text.Render(fmt.Sprintf(" %3.0f%%", 100*frac)) +
		st.Muted.Render(fmt.Sprintf(" · %d/%d requests · %s/%s tokens", p.Finished, p.Requests, numRaw(float64(p.Tokens)), numRaw(float64(p.MaxTokens))))
	if p.ETA > 0 {
		out += st.Muted.Render(" · about ") + st.Strong.Render(clock(p.ETA)) + st.Muted.Render(" left")
	}
	return out
}

// idleStatus is the status line between key results: where the session is, then the last
// change made (or, before any, how changes apply).
func (m *Model) idleStatus() string {
	st, v := m.pt, m.view
	if v == nil {
		return st.Muted.Render("waiting for the session's first numbers…")
	}
	h := v.Header
	var state string
	switch h.Phase {
	case bench.PhaseStarting:
		state = "starting: loading the model and building the engine"
	case bench.PhaseCold:
		state = "cold run on a fresh engine"
	case bench.PhaseRun:
		state = phaseText(h) + " running"
	case bench.PhaseLive:
		state = "steady state"
		if watching(v) {
			state = "watching " + h.Remote.Kind + "'s /metrics"
		}
		if n := len(fleet(v)); n > 0 {
			state = fmt.Sprintf("watching %d servers' /metrics", n)
		}
	case bench.PhaseDone:
		state = "done: q quits and prints the summaries"
	}
	out := st.Text.Render(state)
	if h.Phase == bench.PhaseDone && h.Stopped != "" {
		out = st.Bad.Render("✗ stopped: "+h.Stopped) + st.Muted.Render(" · q quits and prints the summaries")
	}
	if p := h.Run; p != nil && (h.Phase == bench.PhaseCold || h.Phase == bench.PhaseRun) {
		out = st.Text.Render(phaseText(h)+" ") + runProgress(st, p)
	}
	if c := engineChange(h); c != "" && h.Phase == bench.PhaseStarting {
		out = st.Warn.Render(c)
	} else if c != "" { // before the run it is about to stop
		out = st.Warn.Render(c) + st.Muted.Render(" · ") + out
	}
	if h.Paused && replaying(v) { // space is the replay's own
		out += st.Muted.Render(" · ") + st.Warn.Render("arrivals paused")
	} else if h.Paused {
		out += st.Muted.Render(" · ") + st.Warn.Render("arrivals paused") + st.Muted.Render(" (space resumes)")
	}
	if replaying(v) {
		return replayStatus(st, v.Replay) + st.Muted.Render(" · ") + out
	}
	switch {
	case m.last == "" && watching(v):
		out += st.Muted.Render(" · no requests sent: the load and engine keys do nothing")
	case m.last == "" && h.Remote != nil:
		out += st.Muted.Render(" · the load keys apply live; the engine's are the server's")
	case m.last == "":
		out += st.Muted.Render(" · p g r: new engine, cold run · other keys apply live")
	case m.lastErr:
		out += st.Muted.Render(" · last key at "+clock(m.lastAt)+": ") + st.Bad.Render("✗ "+m.last)
	default:
		out += st.Muted.Render(" · last change at "+clock(m.lastAt)+": ") + st.Text.Render(m.last)
	}
	return out
}

// engineChange is the status line's account of an engine change under way: the engine being
// built (or the run being stopped for it) and the one asked for since; "" when there is none.
func engineChange(h bench.Header) string {
	opts := func(p *bench.EnginePlan) string {
		return fmt.Sprintf("paged attention %s, CUDA Graph %s", onOffText(p.Paged), onOffText(p.CUDAGraph))
	}
	var parts []string
	if b := h.Building; b != nil {
		parts = append(parts, fmt.Sprintf("building engine %d: %s", b.Engine, opts(b)))
	}
	switch p := h.Pending; {
	case p == nil:
	case h.Building != nil:
		parts = append(parts, fmt.Sprintf("then engine %d: %s", p.Engine, opts(p)))
	case p.Restart:
		parts = append(parts, fmt.Sprintf("restart pending: engine %d, %s", p.Engine, opts(p)))
	default:
		parts = append(parts, fmt.Sprintf("rebuild pending: engine %d, %s", p.Engine, opts(p)))
	}
	return strings.Join(parts, "; ")
}
