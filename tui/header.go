package tui

import (
	"fmt"
	"math"
	"strings"

	"rosetop/bench"
)

// headerH is the header's height in rows.
const headerH = 2

// phaseText names where the session is; the run label wins when bench gives one.
func phaseText(h bench.Header) string {
	if h.RunLabel != "" {
		return h.RunLabel
	}
	switch h.Phase {
	case bench.PhaseStarting:
		return "starting"
	case bench.PhaseCold:
		return "cold run"
	case bench.PhaseRun:
		return "run"
	case bench.PhaseLive:
		return "live"
	case bench.PhaseDone:
		return "done"
	}
	return "?"
}

// headerView is two lines: what runs where and how fast; then every tunable setting, each in
// a fixed-width slot so values changing never shift their neighbours.
func headerView(st *paint, v *bench.View, w int) string {
	if v == nil {
		return fit(st.AppName.Render("rosetop")+st.Muted.Render("  waiting for the session…"), w) + "\n" + spaces(w)
	}
	h := v.Header
	phase := phaseText(h)
	ps := st.Accent
	if h.Phase == bench.PhaseCold || h.Phase == bench.PhaseStarting {
		ps = st.Warn
	}
	slot := 10 // the phase's fixed slot: "cold run (engine 2)" fits on wide terminals
	if w >= 120 {
		slot = 20
	}
	tps := st.Strong.Render(fmt.Sprintf("%*s", numW, numRaw(h.TokensPerSec)))
	if watching(v) { // the server's generation rate: rosetop itself receives no tokens
		gen, _, _ := serverRates(v)
		tps = rate(st, gen)
	}
	right := ps.Render(fmt.Sprintf("%-*s", slot, phase))
	right += st.Muted.Render(" ") + st.Text.Render(fmt.Sprintf("%7s", clock(h.Elapsed))) +
		"  " + tps + st.Muted.Render(" tok/s")

	// The left side loses its least important parts first when the terminal is narrow.
	left := st.AppName.Render("rosetop") + "  "
	if v.Replay != nil {
		left = st.AppName.Render("rosetop") + " " + replayBadge(st, v.Replay) + "  "
	}
	switch name, paren := strings.CutSuffix(h.Model, ")"); {
	case h.RandomWeights && paren: // "tiny-gpt2 (embedded)" -> "tiny-gpt2 (embedded, random weights)"
		left += st.Strong.Render(name) + st.Warn.Render(", random weights") + st.Strong.Render(")")
	case h.RandomWeights:
		left += st.Strong.Render(h.Model) + " " + st.Warn.Render("(random weights)")
	default:
		left += st.Strong.Render(h.Model)
	}
	left += st.Muted.Render(" on ") + st.Strong.Render(h.Device)
	if job := st.Muted.Render("  job ") + st.Text.Render(h.Job); h.Job != "" && widthOf(left+job+right)+2 <= w {
		left += job
	}
	line1 := spread(left+"  ", right, w)

	interval := "burst"
	switch {
	case math.IsInf(h.IntervalMs, 1): // a damaged recording's
		interval = "–"
	case h.IntervalMs > 0:
		interval = fmt.Sprintf("%gms", h.IntervalMs)
	}
	submit := st.Text.Render(fmt.Sprintf("%-8s %-6s", h.Schedule, interval))
	if h.Schedule == "external" { // rosetop serve: clients decide the arrivals
		submit = st.Text.Render(fmt.Sprintf("%-15s", "by clients"))
	}
	if h.Paused { // in the slot of the arrivals it stops, so the line never reflows
		paused := "PAUSED (spc)"
		if v.Replay != nil { // space is the replay's own
			paused = "PAUSED"
		}
		submit = st.Warn.Render(fmt.Sprintf("%-15s", paused))
	}
	line2 := st.Muted.Render("paged ") + onOff(st, h.Paged) +
		st.Muted.Render("  graph ") + onOff(st, h.CUDAGraph) +
		st.Muted.Render("  submit ") + submit +
		st.Muted.Render(" max batch ") + st.Strong.Render(fmt.Sprintf("%-4d", h.MaxBatch)) +
		st.Muted.Render(" prefill batch ") + st.Strong.Render(fmt.Sprintf("%-4d", h.PrefillMaxBatch))
	if r := h.Remote; r != nil { // the engine's settings are the server's own
		line2 = st.Muted.Render("server ") + st.Strong.Render(r.Kind) + st.Muted.Render(" · "+r.API+" API") +
			st.Muted.Render("  submit ") + submit + st.Muted.Render(" concurrency ") + st.Strong.Render(fmt.Sprintf("%-5d", h.Concurrency)) +
			st.Muted.Render(" engine keys: set on the server")
	}
	switch {
	case watching(v): // with the shares within the targets, from the server's histograms
		line2 = watchLine2(st, v, w)
	case len(h.SLOs) > 0:
		line2 += st.Muted.Render(" SLO met ") + attainment(st, h)
	}
	return fit(line1, w) + "\n" + fit(line2, w)
}

// serverShares are, in watch mode, the shares of the server's observations over the window
// within each --goodput target, from its histograms: "  TTFT≤200 97.3%"; "≥" where only a lower
// bound is known, "--" before any observation. room is their width with every share at its
// widest (≥100.0%): the header keeps that much, so that its line does not change as they do.
func serverShares(st *paint, v *bench.View) (out string, room int) {
	if v.Server == nil {
		return "", 0
	}
	for _, l := range v.Server.Latency {
		if l.Target <= 0 {
			continue
		}
		label := fmt.Sprintf("  %s≤%g ", strings.TrimSuffix(l.Name, " latency"), l.Target)
		out += st.Muted.Render(label)
		room += widthOf(label) + widthOf("≥100.0%")
		if !l.Within.Usable() {
			out += st.Muted.Render("--")
			continue
		}
		text, pen := fmt.Sprintf("%.1f%%", 100*l.Within.V), st.Strong
		if l.WithinFloor {
			text = "≥" + text
		}
		if l.Within.V < 0.9 {
			pen = st.Warn
		}
		out += pen.Render(text)
	}
	return out, room
}

// attainment is the header's share of recent requests that met every --goodput target.
func attainment(st *paint, h bench.Header) string {
	if h.AttainmentN == 0 || math.IsNaN(h.Attainment) || math.IsInf(h.Attainment, 0) {
		return st.Muted.Render("--")
	}
	s := st.Strong
	if h.Attainment < 90 {
		s = st.Warn
	}
	return s.Render(fmt.Sprintf("%.1f%%", h.Attainment)) + st.Muted.Render(fmt.Sprintf(" of %d", h.AttainmentN))
}
