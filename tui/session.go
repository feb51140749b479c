// Package tui is rosetop's live dashboard: a Bubble Tea program over a Session. It never
// computes a metric: every number it draws comes from the Session's immutable bench.View, read
// on the program's own ~10 Hz tick; keys become bench.Actions sent back through the Session.
package tui

import (
	"io"

	"rosetop/bench"
)

// Session is what the dashboard needs from a running benchmark session (bench.Session
// satisfies it). Methods are called from the Bubble Tea program's goroutines, so the
// implementation must be safe for concurrent use.
type Session interface {
	// View returns the latest immutable view; nil before the first one is published.
	View() *bench.View
	// Do applies a key's action. msg says what happened ("restarting engine"); err explains a
	// refusal ("CUDA Graph needs a GPU (device: cpu)").
	Do(a bench.Action) (msg string, err error)
	// Report writes the summary table of what was measured so far.
	Report(w io.Writer) error
	// Close stops every goroutine of the session.
	Close() error
}

// Options configure Run.
type Options struct {
	Theme     string    // "dark" | "light" | "none"; "" picks: NO_COLOR or no colour -> none, else by background
	Input     io.Reader // nil: the terminal (stdin)
	Output    io.Writer // nil: stdout
	AltScreen bool      // draw on the alternate screen (restored on exit)
}
