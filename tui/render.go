package tui

import (
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/charmbracelet/bubbles/key"
	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/lipgloss"

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

func (m *Model) footerH() int {
	if m.showHelp {
		return 1 + len(strings.Split(m.help.FullHelpView(m.keys.FullHelp()), "\n"))
	}
	return 2
}

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
		memo, table := paneInputs(id, v, st, w, h)
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
			title, body = "queue depth · last "+clockSpan(x1-x0), m.queueBody(v, x0, x1, iw, ih)
		case pAdmit:
			title, body = "prefill admissions per step", m.ch.admit.body(st, v.Admissions, iw, ih)
		case pP99:
			title, body = "p99 latency (ms, log scale)", m.p99Body(v, x0, x1, iw, ih)
		case pLatency:
			title = "latency"
			if n := latencyN(v.Latency); n > 0 {
				title = fmt.Sprintf("latency · last %d requests", n)
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
		case pEvents:
			title, body = "events", eventsBody(st, v.Events, iw, ih)
		}
		m.panes[id] = renderPane(st, title, body, w, h)
		if table {
			m.cache.put(id, memo, m.panes[id])
		}
	}
}

// paneInputs is what a table pane is drawn from (table is false for the chart panes, which
// change with the clock on every frame).
func paneInputs(id paneID, v *bench.View, st *paint, w, h int) (memo paneMemo, table bool) {
	memo = paneMemo{pt: st, w: w, h: h}
	switch id {
	case pLatency:
		memo.latency = v.Latency
	case pCold:
		memo.compare, memo.ledger, memo.steady = v.Compare, v.Ledger, len(v.Steady)
	case pEvents:
		memo.events = v.Events
	default:
		return memo, false
	}
	return memo, true
}

// window is the time range of the charts, [now-span, now] in seconds. span covers the oldest
// point bench kept, rounded up to 10 s; it only changes when the data outgrows it or shrinks
// below half of it, so the axis labels do not jitter from tick to tick.
func (c *charts) window(v *bench.View) (x0, x1 float64) {
	now := v.Now.Seconds()
	oldest := now
	if len(v.Queue) > 0 {
		oldest = math.Min(oldest, v.Queue[0].At.Seconds())
	}
	for _, s := range v.P99 {
		if len(s.Points) > 0 {
			oldest = math.Min(oldest, s.Points[0].At.Seconds())
		}
	}
	need := now - oldest
	if need > c.span || need < c.span/2 {
		c.span = math.Min(math.Max(math.Ceil(need/10)*10, 10), 600)
	}
	if now < c.span {
		return 0, c.span
	}
	return now - c.span, now
}

func (m *Model) queueBody(v *bench.View, x0, x1 float64, iw, ih int) string {
	st := m.pt
	var wait, run []bench.Point
	top := 1.0
	for _, q := range v.Queue {
		wait = append(wait, bench.Point{At: q.At, Value: float64(q.Waiting)})
		run = append(run, bench.Point{At: q.At, Value: float64(q.Running)})
		top = math.Max(top, float64(max(q.Waiting, q.Running)))
	}
	head := st.Muted.Render("no steps yet")
	if n := len(v.Queue); n > 0 {
		last := v.Queue[n-1]
		head = st.Series[0].Render("▬ ") + st.Muted.Render("waiting ") + st.Strong.Render(fmt.Sprintf("%-5d", last.Waiting)) +
			st.Series[1].Render(" ▬ ") + st.Muted.Render("running ") + st.Strong.Render(fmt.Sprintf("%-5d", last.Running))
		if kv := st.Muted.Render(" KV blocks ") + st.Text.Render(fmt.Sprintf("%d/%d", v.KVUsed, v.KVTotal)); v.KVTotal > 0 && widthOf(head+kv) <= iw {
			head += kv
		}
	}
	m.ch.queue.SetSize(iw, ih-1)
	chart := m.ch.queue.draw(st, x0, x1, 0, niceMax(top), []tseries{
		{pts: wait, ink: inkSeries}, {pts: run, ink: inkSeries + 1},
	}, v.Markers)
	return fit(head, iw) + "\n" + chart
}

func (m *Model) p99Body(v *bench.View, x0, x1 float64, iw, ih int) string {
	st := m.pt
	var series []tseries
	var items []string
	lo, hi := math.Inf(1), 0.0
	for i, s := range v.P99 {
		style := st.Series[i%len(st.Series)]
		series = append(series, tseries{pts: s.Points, ink: inkSeries + ink(i%len(st.Series))})
		last := math.NaN()
		for _, p := range s.Points {
			if x := p.At.Seconds(); x >= x0 && x <= x1 && p.Value > 0 {
				lo, hi = math.Min(lo, p.Value), math.Max(hi, p.Value)
			}
			last = p.Value
		}
		items = append(items, style.Render("▬")+st.Muted.Render(shortName(s.Name)+" ")+st.Strong.Render(fmt.Sprintf("%-5s", numRaw(last))))
	}
	// --goodput targets of a metric charted here: a flat marker-coloured line at the target.
	for _, o := range v.Header.SLOs {
		if !sloCharted(o.Metric) || !(o.Ms > 0) {
			continue
		}
		at := func(x float64) time.Duration { return time.Duration(x * float64(time.Second)) }
		series = append(series, tseries{pts: []bench.Point{{At: at(x0), Value: o.Ms}, {At: at(x1), Value: o.Ms}}, ink: inkMarker})
		lo, hi = math.Min(lo, o.Ms), math.Max(hi, o.Ms)
		items = append(items, st.Muted.Render("┈ "+strings.ToUpper(o.Metric)+" target ")+st.Strong.Render(numRaw(o.Ms)))
	}
	ymin, ymax := logRange(lo, hi)
	head := st.Muted.Render("no finished requests yet")
	if len(items) > 0 {
		head = legend(items, iw)
	}
	m.ch.p99.SetSize(iw, ih-1)
	return fit(head, iw) + "\n" + m.ch.p99.draw(st, x0, x1, ymin, ymax, series, v.Markers)
}

// sloCharted reports whether the p99 chart has the metric a --goodput target is about (TTFT
// and TPOT; end-to-end latency has no series of its own).
func sloCharted(metric string) bool { return metric == "ttft" || metric == "tpot" }

// shortName turns bench's series names into legend words: "Queue wait p99" -> "queue".
func shortName(n string) string {
	n = strings.TrimSuffix(n, " p99")
	switch n {
	case "Queue wait":
		return "queue"
	case "Prefill->first":
		return "prefill"
	}
	return n
}

// clockSpan formats a chart span in seconds: "60s", "5m".
func clockSpan(s float64) string {
	if s >= 120 && math.Mod(s, 60) == 0 {
		return fmt.Sprintf("%.0fm", s/60)
	}
	return fmt.Sprintf("%.0fs", s)
}

// compose joins header, panes and footer into the frame: exactly w x h cells.
func (m *Model) compose() {
	l := m.lay
	if m.w == 0 || m.h == 0 {
		m.frame = ""
		return
	}
	if l.tooSmall {
		msg := m.pt.Warn.Render(fmt.Sprintf("rosetop needs at least %d×%d", MinWidth, MinHeight)) + "\n" +
			m.pt.Muted.Render(fmt.Sprintf("this terminal is %d×%d · q quits", m.w, m.h))
		m.frame = lipgloss.Place(m.w, m.h, lipgloss.Center, lipgloss.Center, msg)
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
	left, right := col(pQueue, pAdmit, pP99), col(pLatency, pITL, pCold, pEvents)
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
	}
	var help string
	if m.showHelp {
		help = m.help.FullHelpView(m.keys.FullHelp())
	} else {
		help = m.help.ShortHelpView(m.keys.ShortHelp())
	}
	return fit(status, m.w) + "\n" + fitLines(help, m.w, m.footerH()-1)
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
	case bench.PhaseRun, bench.PhaseLive:
		state = phaseText(h) + " running"
	case bench.PhaseDone:
		state = "done: q quits and prints the summaries"
	}
	out := st.Text.Render(state)
	if h.Paused {
		out += st.Muted.Render(" · ") + st.Warn.Render("arrivals paused") + st.Muted.Render(" (space resumes)")
	}
	switch {
	case m.last == "":
		out += st.Muted.Render(" · p g r: new engine, cold run · other keys apply live")
	case m.lastErr:
		out += st.Muted.Render(" · last key at "+clock(m.lastAt)+": ") + st.Bad.Render("✗ "+m.last)
	default:
		out += st.Muted.Render(" · last change at "+clock(m.lastAt)+": ") + st.Text.Render(m.last)
	}
	return out
}
