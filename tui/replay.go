package tui

import (
	"strconv"

	"github.com/charmbracelet/bubbles/key"

	"rosetop/bench"
)

// A replay (rosetop replay) is a Session whose views carry a Playback: the dashboard draws the
// recorded views as it drew them live, says REPLAY in the header, shows where playback is in
// the status line and binds the replay keys; the engine keys go to the Session, which explains
// that they do nothing.

// replaying reports whether v is a replay's view.
func replaying(v *bench.View) bool { return v != nil && v.Replay != nil }

// ReplayKeyMap is the keys a replay adds; space (Pause) plays and pauses.
type ReplayKeyMap struct {
	Back, Forward, Slower, Faster, Start, End, NextEvent, PrevEvent key.Binding
}

// DefaultReplayKeyMap returns the replay's keys.
func DefaultReplayKeyMap() ReplayKeyMap {
	b := func(keys []string, k, desc string) key.Binding {
		return key.NewBinding(key.WithKeys(keys...), key.WithHelp(k, desc))
	}
	return ReplayKeyMap{
		Back:      b([]string{"left"}, "←", "back 5 s"),
		Forward:   b([]string{"right"}, "→", "forward 5 s"),
		Slower:    b([]string{"<", ","}, "<", "slower"),
		Faster:    b([]string{">", "."}, ">", "faster"),
		Start:     b([]string{"home"}, "home", "start"),
		End:       b([]string{"end"}, "end", "end"),
		NextEvent: b([]string{"n"}, "n", "next event"),
		PrevEvent: b([]string{"N"}, "N", "previous event"),
	}
}

// actions maps the replay keys to the replay's actions.
func (k ReplayKeyMap) actions() []keyAction {
	return []keyAction{
		{k.Back, bench.ActReplayBack}, {k.Forward, bench.ActReplayForward},
		{k.Slower, bench.ActReplaySlower}, {k.Faster, bench.ActReplayFaster},
		{k.Start, bench.ActReplayStart}, {k.End, bench.ActReplayEnd},
		{k.NextEvent, bench.ActReplayNextEvent}, {k.PrevEvent, bench.ActReplayPrevEvent},
	}
}

// replayShortHelp is the footer's key line in a replay.
func replayShortHelp(k KeyMap, r ReplayKeyMap) []key.Binding {
	return []key.Binding{
		shortKey(k.Pause, "play/pause"), pairKey(r.Back, r.Forward, "seek"), pairKey(r.Slower, r.Faster, "speed"),
		key.NewBinding(key.WithKeys("n", "N"), key.WithHelp("n N", "events")),
		shortKey(k.Window, "window"), shortKey(k.Help, "help"), k.Quit,
	}
}

// replayHelpKeys are the help overlay's key rows in a replay.
func replayHelpKeys() []helpRow {
	return []helpRow{
		{"space", "play / pause (at the end: play from the start)"},
		{"← →", "back / forward 5 s"},
		{"< >", "slower / faster: 0.25x to 16x"},
		{"home end", "the first / the last view"},
		{"n N", "the next / the previous event"},
		{"p g [ ] …", "engine keys do nothing: the recording shows what they did"},
		{"w", "time charts: last 30s, 60s, 2m, 10m, the whole session"},
		{"↑ ↓", "scroll the events (PgUp PgDn too)"},
		{"t", "theme: dark, light, no colour"},
		{"? esc", "close this help"},
		{"q", "quit"},
	}
}

// replayBadge is the header's mark of a replay: REPLAY and when the session was recorded.
func replayBadge(st *paint, p *bench.Playback) string {
	badge := st.Warn.Render("REPLAY")
	if !p.Recorded.IsZero() {
		badge += st.Muted.Render(" of ") + st.Text.Render(p.Recorded.UTC().Format("2006-01-02 15:04 UTC"))
	}
	return badge
}

// replayStatus is the start of the status line in a replay: playing or paused, the speed, the
// position, then the recorded dashboard's last key press (or the replay keys before any), and a
// note when the recording was cut short.
func replayStatus(st *paint, p *bench.Playback) string {
	var state string
	switch {
	case p.Paused && p.Position >= p.Length:
		state = st.Warn.Render("■ end")
	case p.Paused:
		state = st.Warn.Render("⏸ paused")
	default:
		state = st.Good.Render("▶ " + strconv.FormatFloat(p.Speed, 'g', -1, 64) + "x")
	}
	out := state + st.Muted.Render(" · ") + st.Strong.Render(clock(p.Position)) + st.Muted.Render(" of "+clock(p.Length))
	if p.Note != "" {
		out += st.Muted.Render(" · ") + st.Warn.Render(p.Note)
	}
	switch {
	case p.Key == "":
		out += st.Muted.Render(" · spc ← → < > n N · engine keys do nothing")
	case p.KeyRefused:
		out += st.Muted.Render(" · key at "+clock(p.KeyAt)+": ") + st.Bad.Render("✗ "+p.Key)
	default:
		out += st.Muted.Render(" · key at "+clock(p.KeyAt)+": ") + st.Text.Render(p.Key)
	}
	return out
}
