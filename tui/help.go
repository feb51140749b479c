package tui

import (
	"slices"
	"strings"

	"github.com/charmbracelet/x/ansi"

	"rosetop/bench"
)

// helpRow is one line of the help overlay: a key (or a glyph) and what it does (or means).
type helpRow struct{ key, text string }

// helpKeys are the dashboard's keys as the overlay explains them.
func helpKeys() []helpRow {
	return []helpRow{
		{"p  g", "paged attention / CUDA Graph on-off: a new engine and a cold run"},
		{"r", "restart: a fresh engine and a new cold run"},
		{"", "p g r wait 0.5 s for more: together, one rebuild; twice, none"},
		{"[  ]", "prefill max batch -1 / +1 (at most the max batch), live"},
		{"{  }", "max batch to the power of two below / above, live"},
		{"-  +", "submit interval down / up, live"},
		{"s", "submit schedule relative / absolute, live"},
		{"space", "pause / resume arrivals (requests in flight finish)"},
		{"c  C", "steady state's requests in flight to the power of two below / above, live"},
		{"w", "time charts: last 30s, 60s, 2m, 10m, the whole session"},
		{"↑ ↓", "scroll the events (PgUp PgDn too)"},
		{"t", "theme: dark, light, no colour"},
		{"? esc", "close this help"},
		{"q", "quit (Ctrl-C too): the summary table goes to stdout"},
	}
}

// remoteHelpKeys are the overlay's key rows against a remote server, whose engine is its own.
func remoteHelpKeys() []helpRow {
	rows := []helpRow{{"p g [ ] …", "engine keys do nothing: the engine is the server's"}}
	for _, r := range helpKeys() {
		switch r.key {
		case "p  g", "r", "", "[  ]", "{  }":
		default:
			rows = append(rows, r)
		}
	}
	return rows
}

// helpGlossary explains the dashboard's glyphs, letters and columns.
func helpGlossary() []helpRow {
	return []helpRow{
		{"┊", "time charts: a change you made, or a cold start"},
		{"W R", "queue depth: waiting, running requests (bucket means)"},
		{"T Q P O I", "p99 lines: TTFT, queue wait, prefill→first, TPOT, ITL"},
		{"▸ ◆ ◇ ↺ ✗", "events: a run, a change, a one-time cost, a preemption, an error"},
		{"slower", "cold vs steady: the cold run against the steady median"},
		{"all, req N", "ITL sparklines: every request pooled, the slowest recent"},
		{"live", "the steady state: load kept continuous, filed in windows"},
		{"costs", "events title: one-time costs paid in the steady state (a graph for a new step shape)"},
		{"srv cli Δ", "server pane: the server's own histograms, rosetop's as its client, cli - srv"},
	}
}

// restartLogged reports whether v's events tell of a server's restart, whose glyph the glossary
// then explains.
func restartLogged(v *bench.View) bool {
	return v != nil && slices.ContainsFunc(v.Events, func(e bench.LogEvent) bool { return e.Kind == bench.LogRestart })
}

// helpBox is the overlay: keys, then the glossary, in a rounded box at most w x h.
func (m *Model) helpBox(w, h int) string {
	st := m.pt
	keyW := 10
	var lines []string
	section := func(title string, rows []helpRow) {
		lines = append(lines, st.Title.Render(title))
		for _, r := range rows {
			lines = append(lines, st.Strong.Render(fit(r.key, keyW))+" "+st.Text.Render(r.text))
		}
	}
	switch {
	case replaying(m.view):
		section("replay keys", replayHelpKeys())
	case watching(m.view):
		section("keys", watchHelpKeys())
	case m.view != nil && m.view.Header.Remote != nil:
		section("keys", remoteHelpKeys())
	default:
		section("keys", helpKeys())
	}
	glossary := helpGlossary()
	if watching(m.view) {
		glossary = watchGlossary(fleet(m.view) != nil)
	}
	if restartLogged(m.view) {
		glossary = append(glossary, helpRow{"↻", "events, servers table, server pane: a server restarted (a new process, or its counts went down)"})
	}
	section("glossary", glossary)
	inner := 0
	for _, l := range lines {
		inner = max(inner, widthOf(l))
	}
	inner = min(inner, w-4)
	if len(lines) > h-2 {
		lines = append(lines[:max(0, h-3)], st.Muted.Render("… a taller terminal shows the rest"))
	}
	b := st.Pane.GetBorderStyle()
	var out strings.Builder
	out.WriteString(st.Border.Render(b.TopLeft + strings.Repeat(b.Top, inner+2) + b.TopRight))
	for _, l := range lines {
		out.WriteString("\n" + st.Border.Render(b.Left) + " " + fit(l, inner) + " " + st.Border.Render(b.Right))
	}
	out.WriteString("\n" + st.Border.Render(b.BottomLeft+strings.Repeat(b.Bottom, inner+2)+b.BottomRight))
	return out.String()
}

// overlay draws box centred over frame (w x h cells): the frame's cells around the box stay.
func overlay(frame, box string, w, h int) string {
	rows := strings.Split(frame, "\n")
	bl := strings.Split(box, "\n")
	bw := 0
	for _, l := range bl {
		bw = max(bw, widthOf(l))
	}
	x0, y0 := max(0, (w-bw)/2), max(0, (h-len(bl))/2)
	for i, l := range bl {
		y := y0 + i
		if y >= len(rows) {
			break
		}
		row := rows[y]
		rows[y] = cells(row, 0, x0) + ansi.ResetStyle + l + ansi.ResetStyle + cells(row, x0+bw, w)
	}
	return strings.Join(rows, "\n")
}
