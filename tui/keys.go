package tui

import (
	"github.com/charmbracelet/bubbles/key"

	"rosetop/bench"
)

// KeyMap is every key the dashboard answers to.
type KeyMap struct {
	Paged        key.Binding
	Graph        key.Binding
	Schedule     key.Binding
	PrefillDown  key.Binding
	PrefillUp    key.Binding
	BatchDown    key.Binding
	BatchUp      key.Binding
	IntervalDown key.Binding
	IntervalUp   key.Binding
	Restart      key.Binding
	Pause        key.Binding
	ConcDown     key.Binding
	ConcUp       key.Binding
	Window       key.Binding
	EventsUp     key.Binding
	EventsDown   key.Binding
	Theme        key.Binding
	Help         key.Binding
	Close        key.Binding
	Quit         key.Binding
}

// DefaultKeyMap returns the dashboard's keys.
func DefaultKeyMap() KeyMap {
	b := func(keys []string, k, desc string) key.Binding {
		return key.NewBinding(key.WithKeys(keys...), key.WithHelp(k, desc))
	}
	return KeyMap{
		Paged:        b([]string{"p"}, "p", "paged attn"),
		Graph:        b([]string{"g"}, "g", "CUDA graph"),
		Schedule:     b([]string{"s"}, "s", "schedule"),
		PrefillDown:  b([]string{"["}, "[", "prefill batch -"),
		PrefillUp:    b([]string{"]"}, "]", "prefill batch +"),
		BatchDown:    b([]string{"{"}, "{", "max batch ÷2"),
		BatchUp:      b([]string{"}"}, "}", "max batch ×2"),
		IntervalDown: b([]string{"-", "_"}, "-", "interval -"),
		IntervalUp:   b([]string{"+", "="}, "+", "interval +"),
		Restart:      b([]string{"r"}, "r", "restart (cold)"),
		Pause:        b([]string{" "}, "spc", "pause arrivals"),
		ConcDown:     b([]string{"c"}, "c", "concurrency ÷2"),
		ConcUp:       b([]string{"C"}, "C", "concurrency ×2"),
		Window:       b([]string{"w"}, "w", "chart window"),
		EventsUp:     b([]string{"up", "pgup"}, "↑", "older events"),
		EventsDown:   b([]string{"down", "pgdown"}, "↓", "newer events"),
		Theme:        b([]string{"t"}, "t", "theme"),
		Help:         b([]string{"?"}, "?", "help"),
		Close:        b([]string{"esc"}, "esc", "close help"),
		Quit:         b([]string{"q", "ctrl+c"}, "q", "quit"),
	}
}

// ShortHelp is the footer line: the keys people reach for first, short enough for 80 columns.
// Paired keys are shown as one entry (display only: matching uses the real bindings).
func (k KeyMap) ShortHelp() []key.Binding {
	return []key.Binding{
		shortKey(k.Paged, "paged"), shortKey(k.Graph, "graph"), pairKey(k.PrefillDown, k.PrefillUp, "prefill"),
		shortKey(k.Restart, "restart"), shortKey(k.Pause, "pause"), shortKey(k.Window, "window"), shortKey(k.Help, "help"), k.Quit,
	}
}

// shortKey is b with a shorter description, for a footer line.
func shortKey(b key.Binding, desc string) key.Binding {
	return key.NewBinding(key.WithKeys(b.Keys()...), key.WithHelp(b.Help().Key, desc))
}

// pairKey is a and b shown as one footer entry (display only: matching uses the real bindings).
func pairKey(a, b key.Binding, desc string) key.Binding {
	return key.NewBinding(key.WithKeys(append(a.Keys(), b.Keys()...)...), key.WithHelp(a.Help().Key+b.Help().Key, desc))
}

// RemoteShortHelp is the footer line against a remote server: the load keys, which work there,
// in place of the engine keys, which only say that the engine is the server's.
func (k KeyMap) RemoteShortHelp() []key.Binding {
	return []key.Binding{
		pairKey(k.IntervalDown, k.IntervalUp, "interval"), shortKey(k.Schedule, "schedule"), shortKey(k.Pause, "pause"),
		pairKey(k.ConcDown, k.ConcUp, "concurrency"), shortKey(k.Window, "window"), shortKey(k.Help, "help"), k.Quit,
	}
}

// FullHelp is every key, one column per group (the help overlay lists them with what they do).
func (k KeyMap) FullHelp() [][]key.Binding {
	return [][]key.Binding{
		{k.Paged, k.Graph, k.Restart},
		{k.PrefillDown, k.PrefillUp, k.BatchDown, k.BatchUp},
		{k.Schedule, k.IntervalDown, k.IntervalUp, k.Pause, k.ConcDown, k.ConcUp},
		{k.Window, k.EventsUp, k.EventsDown, k.Theme, k.Help, k.Quit},
	}
}

// keyAction is a key and the Session action it sends.
type keyAction struct {
	b key.Binding
	a bench.Action
}

// actions maps the Session's keys to their actions, in the order they are matched.
func (k KeyMap) actions() []keyAction {
	return []keyAction{
		{k.Paged, bench.ActTogglePaged},
		{k.Graph, bench.ActToggleGraph},
		{k.Schedule, bench.ActToggleSchedule},
		{k.PrefillDown, bench.ActPrefillBatchDown},
		{k.PrefillUp, bench.ActPrefillBatchUp},
		{k.BatchDown, bench.ActMaxBatchDown},
		{k.BatchUp, bench.ActMaxBatchUp},
		{k.IntervalDown, bench.ActIntervalDown},
		{k.IntervalUp, bench.ActIntervalUp},
		{k.Restart, bench.ActRestart},
		{k.Pause, bench.ActTogglePause},
		{k.ConcDown, bench.ActConcurrencyDown},
		{k.ConcUp, bench.ActConcurrencyUp},
	}
}

// actionName is a fallback flash text when the Session returns no message.
func actionName(a bench.Action) string {
	switch a {
	case bench.ActTogglePaged:
		return "paged attention toggled"
	case bench.ActToggleGraph:
		return "CUDA Graph toggled"
	case bench.ActToggleSchedule:
		return "submit schedule toggled"
	case bench.ActPrefillBatchDown, bench.ActPrefillBatchUp:
		return "prefill max batch changed"
	case bench.ActMaxBatchDown, bench.ActMaxBatchUp:
		return "max batch changed"
	case bench.ActIntervalDown, bench.ActIntervalUp:
		return "submit interval changed"
	case bench.ActRestart:
		return "restarting engine"
	case bench.ActTogglePause:
		return "arrivals toggled"
	case bench.ActConcurrencyDown, bench.ActConcurrencyUp:
		return "concurrency changed"
	}
	return "done"
}
