package tui

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/lipgloss"
	"github.com/charmbracelet/x/ansi"
	"github.com/charmbracelet/x/term"
	"github.com/muesli/termenv"

	"rosetop/themes"
)

// ResolveTheme turns "" into a theme for r's terminal: none when NO_COLOR is set or the
// terminal has no colour, else dark or light by its background. Other names pass through.
func ResolveTheme(name string, r *lipgloss.Renderer) string {
	if name != "" {
		return name
	}
	if os.Getenv("NO_COLOR") != "" || r.ColorProfile() == termenv.Ascii {
		return themes.None
	}
	if r.HasDarkBackground() {
		return themes.Dark
	}
	return themes.Light
}

// Run runs the dashboard over s until q, Ctrl-C or ctx is cancelled (a signal), restoring the
// terminal on every path: Bubble Tea restores it on those three, and when the program fails
// (it may have switched to the alternate screen and made the input raw before failing) Run
// leaves the alternate screen, shows the cursor and puts the input back as it found it. It
// does not close s or print its report: the caller does (Close, then Report). It returns nil
// for the three ways out and an error when the program fails.
func Run(ctx context.Context, s Session, o Options) error {
	out := o.Output
	if out == nil {
		out = os.Stdout
	}
	r := lipgloss.NewRenderer(out)
	m, err := New(s, r, o.Theme)
	if err != nil {
		return err
	}
	// Signals reach the program through ctx, which the caller cancels: Bubble Tea's own handler
	// would race it, its quit message sent to an event loop that ctx has already ended, and the
	// program's shutdown would wait for that send for ever.
	g := &gate{w: out}
	opts := []tea.ProgramOption{tea.WithContext(ctx), tea.WithOutput(g.writer()), tea.WithoutSignalHandler()}
	if o.Input != nil {
		opts = append(opts, tea.WithInput(o.Input))
	}
	if o.AltScreen {
		opts = append(opts, tea.WithAltScreen())
	}
	restoreInput := saveInput(o.Input)
	_, err = tea.NewProgram(m, opts...).Run()
	switch {
	case err == nil, errors.Is(err, tea.ErrInterrupted):
		return nil
	case errors.Is(err, tea.ErrProgramKilled) && ctx.Err() != nil:
		return nil
	}
	g.close(ResetSequences(o.AltScreen))
	restoreInput()
	return fmt.Errorf("tui: %w", err)
}

// gate passes the program's output to the terminal until close. A program that fails after
// starting its renderer returns with the renderer's goroutine still running: its late frames
// must neither race Run's reset of the terminal nor land after it.
type gate struct {
	mu     sync.Mutex
	w      io.Writer // the terminal; written under mu
	closed bool      // guarded by mu
}

// writer is the program's output: a terminal stays one (term.File), so that Bubble Tea still
// reads its size and mode through the gate.
func (g *gate) writer() io.Writer {
	if f, ok := g.w.(term.File); ok {
		return gateFile{g, f}
	}
	return g
}

func (g *gate) Write(p []byte) (int, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return len(p), nil
	}
	return g.w.Write(p)
}

// close writes s as the last bytes and drops every later write.
func (g *gate) close(s string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.closed {
		io.WriteString(g.w, s)
		g.closed = true
	}
}

// gateFile is a gate over a terminal: writes go through the gate, the rest to the file.
type gateFile struct {
	*gate
	f term.File
}

func (g gateFile) Read(p []byte) (int, error) { return g.f.Read(p) }
func (g gateFile) Close() error               { return g.f.Close() }
func (g gateFile) Fd() uintptr                { return g.f.Fd() }

// ResetSequences undo what a Bubble Tea program turns on: bracketed paste, the hidden cursor
// and, when asked for, the alternate screen.
func ResetSequences(altScreen bool) string {
	s := ansi.ResetModeBracketedPaste + ansi.ShowCursor
	if altScreen {
		s += ansi.ResetModeAltScreenSaveCursor
	}
	return s
}

// saveInput records the input terminal's mode (cooked or raw) and returns what puts it back; a
// no-op when the input is not a terminal.
func saveInput(in io.Reader) func() {
	f, ok := in.(term.File)
	if !ok || !term.IsTerminal(f.Fd()) {
		return func() {}
	}
	st, err := term.GetState(f.Fd())
	if err != nil {
		return func() {}
	}
	return func() { term.Restore(f.Fd(), st) }
}
