package tui

import (
	"fmt"
	"time"

	"github.com/charmbracelet/bubbles/help"
	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/lipgloss"

	"rosetop/bench"
	"rosetop/themes"
)

// tickInterval is how often the dashboard reads the Session's latest view (~10 Hz).
const tickInterval = 100 * time.Millisecond

// flashTicks is how long a key's result stays in the status line (5 s; errors twice as long).
const flashTicks = 50

// tickID identifies one Model's tick loop: a Model ignores ticks that carry another's ID (two
// dashboards in one program, or a test feeding one model's ticks to another). A pointer to a
// non-zero-size value is unique without any package-level counter.
type tickID struct{ _ int }

type tickMsg struct{ id *tickID }

// maxQueued bounds the actions of keys pressed while an earlier one is still running.
const maxQueued = 64

// actionMsg carries a Session.Do result back into Update.
type actionMsg struct {
	a   bench.Action
	msg string
	err error
}

// Model is the dashboard's Bubble Tea model. Update does all the work; View returns the frame
// Update cached, so a repaint costs nothing.
type Model struct {
	s        Session
	r        *lipgloss.Renderer
	st       themes.Styles
	pt       *paint // st as pens; replaced (never mutated) with st
	keys     KeyMap
	rkeys    ReplayKeyMap // bound when the views are a replay's
	help     help.Model
	id       *tickID
	w, h     int
	showHelp bool        // the help overlay is open
	evScroll int         // lines the events pane is scrolled into the past (0: the newest)
	view     *bench.View // latest view read from s
	flash    string      // the last key result shown in the status line ("" none)
	flashErr bool
	flashN   int            // ticks left
	last     string         // the last key result, kept for the idle status line ("" none yet)
	lastErr  bool           // last was a refusal
	lastAt   time.Duration  // session clock when last came back
	acting   bool           // a Session.Do is running; further keys' actions wait in queued
	queued   []bench.Action // actions of keys pressed while acting, oldest first
	ch       *charts
	cache    *paneCache // the table panes as last drawn; shared by copies, touched only in Update
	lay      layout
	header   string
	panes    [nPanes]string
	frame    string
}

// New returns a dashboard over s, rendering with r in the named theme ("" picks one, see
// ResolveTheme).
func New(s Session, r *lipgloss.Renderer, theme string) (Model, error) {
	theme = ResolveTheme(theme, r)
	st, err := themes.NewFor(r, theme)
	if err != nil {
		return Model{}, fmt.Errorf("tui: %w", err)
	}
	m := Model{
		s: s, r: r, st: st, pt: newPaint(st), keys: DefaultKeyMap(), rkeys: DefaultReplayKeyMap(), help: help.New(), id: &tickID{},
		cache: &paneCache{},
		ch:    newCharts(),
	}
	m.applyHelpStyles()
	return m, nil
}

func (m *Model) applyHelpStyles() {
	hs := help.Styles{
		ShortKey: m.st.HelpKey, ShortDesc: m.st.HelpDesc, ShortSeparator: m.st.HelpSep,
		FullKey: m.st.HelpKey, FullDesc: m.st.HelpDesc, FullSeparator: m.st.HelpSep, Ellipsis: m.st.HelpSep,
	}
	m.help.Styles = hs
}

// Init starts the tick loop.
func (m Model) Init() tea.Cmd { return m.tick() }

func (m Model) tick() tea.Cmd {
	id := m.id
	return tea.Tick(tickInterval, func(time.Time) tea.Msg { return tickMsg{id: id} })
}

// doAction runs Session.Do off the Update goroutine (an engine restart may take a while); the
// closure captures only the session and the action, never the model. Bubble Tea runs commands
// concurrently, so act sends one action at a time.
func doAction(s Session, a bench.Action) tea.Cmd {
	return func() tea.Msg {
		msg, err := s.Do(a)
		return actionMsg{a: a, msg: msg, err: err}
	}
}

// Update handles sizes, ticks, keys and action results.
func (m Model) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	switch msg := msg.(type) {
	case tea.WindowSizeMsg:
		m.w, m.h = msg.Width, msg.Height
		m.refresh(true)
	case tickMsg:
		if msg.id != m.id {
			return m, nil
		}
		if m.flashN > 0 {
			m.flashN--
			if m.flashN == 0 {
				m.flash = ""
			}
		}
		m.refresh(false) // redraws the panes only if the Session published a new view
		return m, m.tick()
	case actionMsg:
		if msg.err != nil {
			m.setFlash(msg.err.Error(), true)
		} else if msg.msg != "" {
			m.setFlash(msg.msg, false)
		} else {
			m.setFlash(actionName(msg.a), false)
		}
		m.refresh(true)
		if len(m.queued) > 0 {
			a := m.queued[0]
			m.queued = m.queued[1:]
			return m, doAction(m.s, a)
		}
		m.acting = false
	case tea.KeyMsg:
		return m.key(msg)
	}
	return m, nil
}

// key handles a key press. Keys typed faster than the input is read arrive as one message
// with several runes ("{{{{"): each is handled, in order.
func (m Model) key(k tea.KeyMsg) (tea.Model, tea.Cmd) {
	if k.Type == tea.KeyRunes && len(k.Runes) > 1 && !k.Paste {
		var cmds []tea.Cmd
		for _, r := range k.Runes {
			var cmd tea.Cmd
			var tm tea.Model
			tm, cmd = m.key(tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune{r}})
			m = tm.(Model)
			cmds = append(cmds, cmd)
		}
		return m, tea.Sequence(cmds...)
	}
	switch {
	case keyMatches(k, m.keys.Quit):
		return m, tea.Quit
	case keyMatches(k, m.keys.Help):
		m.showHelp = !m.showHelp
		m.refresh(true)
		return m, nil
	case keyMatches(k, m.keys.Close):
		if m.showHelp {
			m.showHelp = false
			m.refresh(true)
		}
		return m, nil
	case keyMatches(k, m.keys.Theme):
		m.cycleTheme()
		return m, nil
	case keyMatches(k, m.keys.Window):
		m.setFlash(m.ch.nextSpan(), false)
		m.refresh(true)
		return m, nil
	case keyMatches(k, m.keys.EventsUp), keyMatches(k, m.keys.EventsDown):
		m.scrollEvents(k)
		return m, nil
	}
	actions := m.keys.actions()
	if replaying(m.view) {
		actions = append(m.rkeys.actions(), actions...)
	}
	for _, ka := range actions {
		if keyMatches(k, ka.b) {
			return m.act(ka.a)
		}
	}
	return m, nil
}

// act sends a to the Session, or queues it behind the action still running: the Session gets
// the actions in the order the keys were pressed.
func (m Model) act(a bench.Action) (tea.Model, tea.Cmd) {
	if !m.acting {
		m.acting = true
		return m, doAction(m.s, a)
	}
	if len(m.queued) >= maxQueued {
		m.setFlash(fmt.Sprintf("key ignored: %d actions are waiting for the session", len(m.queued)), true)
		m.refresh(true)
		return m, nil
	}
	m.queued = append(m.queued[:len(m.queued):len(m.queued)], a) // copies: earlier Models keep theirs
	return m, nil
}

// scrollEvents moves the events pane a line (↑ ↓) or a page (PgUp PgDn) into the past or back.
func (m *Model) scrollEvents(k tea.KeyMsg) {
	step := 1
	if k.Type == tea.KeyPgUp || k.Type == tea.KeyPgDown {
		step = max(1, m.lay.heights[pEvents]-paneFrameH(m.pt))
	}
	if keyMatches(k, m.keys.EventsDown) {
		step = -step
	}
	m.evScroll = max(0, m.evScroll+step) // eventsBody clamps it to what there is
	m.refresh(true)
}

func (m *Model) cycleTheme() {
	names := themes.Names()
	next := names[0]
	for i, n := range names {
		if n == m.st.Name {
			next = names[(i+1)%len(names)]
		}
	}
	st, err := themes.NewFor(m.r, next)
	if err != nil {
		m.setFlash(err.Error(), true)
	} else {
		m.st, m.pt = st, newPaint(st)
		m.applyHelpStyles()
		m.setFlash("theme "+next, false)
	}
	m.refresh(true)
}

func (m *Model) setFlash(text string, isErr bool) {
	m.flash, m.flashErr, m.flashN = text, isErr, flashTicks
	m.last, m.lastErr = text, isErr
	if m.view != nil {
		m.lastAt = m.view.Now
	}
	if isErr {
		m.flashN = 2 * flashTicks
	}
}

// View returns the frame cached by the last Update.
func (m Model) View() string { return m.frame }
