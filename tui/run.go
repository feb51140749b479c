package tui

import (
	"context"
	"errors"
	"fmt"
	"os"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/lipgloss"
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

// Run runs the dashboard over s until q, Ctrl-C or ctx is cancelled, restoring the terminal on
// every path. It does not close s or print its report: the caller does (Close, then Report).
// It returns nil for those three ways out and an error when the program fails.
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
	opts := []tea.ProgramOption{tea.WithContext(ctx), tea.WithOutput(out)}
	if o.Input != nil {
		opts = append(opts, tea.WithInput(o.Input))
	}
	if o.AltScreen {
		opts = append(opts, tea.WithAltScreen())
	}
	_, err = tea.NewProgram(m, opts...).Run()
	switch {
	case err == nil, errors.Is(err, tea.ErrInterrupted):
		return nil
	case errors.Is(err, tea.ErrProgramKilled) && ctx.Err() != nil:
		return nil
	}
	return fmt.Errorf("tui: %w", err)
}
