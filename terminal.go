package main

import (
	"errors"
	"io"
	"os"

	"github.com/charmbracelet/lipgloss"
	"github.com/charmbracelet/x/term"

	"rosetop/tui"
)

// errNoTerminal: the dashboard was asked for where no terminal can show it.
var errNoTerminal = errors.New("the dashboard needs a terminal, and there is none: stdin and stderr are not one and /dev/tty cannot be opened; 'rosetop bench' runs the same engine and workload headless")

// errDumbTerminal: the terminal says (TERM=dumb) that it cannot move the cursor, which the
// dashboard does to draw: its escapes would print as text (an editor's shell buffer, a log).
var errDumbTerminal = errors.New("the dashboard needs a terminal that can move the cursor, and TERM=dumb says this one cannot; 'rosetop bench' runs the same engine and workload headless")

// dashTerminal is where the dashboard reads keys and draws: stdin and stderr when they are the
// terminal, else the controlling terminal (/dev/tty), so `rosetop 2>log` and `rosetop </dev/null`
// still draw on, and read keys from, the terminal the user sees.
type dashTerminal struct {
	in    io.Reader
	out   io.Writer
	theme string       // resolved when the terminal is found (see findTerminal)
	close func() error // closes what was opened here
}

// options are the dashboard's tui options on t.
func (t dashTerminal) options() tui.Options {
	return tui.Options{Input: t.in, Output: t.out, AltScreen: true, Theme: t.theme}
}

// quiet turns the input terminal's echo off while the model loads, so that keys typed meanwhile
// do not print over its progress lines, and returns what puts the terminal back. The keys stay
// queued for the dashboard: a q pressed during a slow load quits it as soon as it starts.
func (t dashTerminal) quiet() (restore func()) {
	if f, ok := t.in.(term.File); ok && term.IsTerminal(f.Fd()) {
		return quietInput(int(f.Fd()))
	}
	return func() {}
}

// findTerminal picks the dashboard's terminal; devTTY opens the controlling terminal. Without
// one it returns errNoTerminal, and errDumbTerminal under TERM=dumb, as usage errors (exit 2).
// It picks the theme too, before a model loads: asking the terminal for its background reads
// its input and drops the keys typed meanwhile (a q pressed during a slow load).
func findTerminal(stdin io.Reader, stderr io.Writer, devTTY func() (*os.File, error)) (dashTerminal, error) {
	t := dashTerminal{in: stdin, out: stderr, close: func() error { return nil }}
	if os.Getenv("TERM") == "dumb" {
		return t, usageError{errDumbTerminal}
	}
	inOK, outOK := isTerminal(stdin), isTerminal(stderr)
	if inOK && outOK {
		t.theme = tui.ResolveTheme("", lipgloss.NewRenderer(t.out))
		return t, nil
	}
	tty, err := devTTY()
	if err != nil {
		return t, usageError{errNoTerminal}
	}
	if !inOK {
		t.in = tty
	}
	if !outOK {
		t.out = tty
	}
	t.close = tty.Close
	t.theme = tui.ResolveTheme("", lipgloss.NewRenderer(t.out))
	return t, nil
}

// isTerminal reports whether v is a file open on a terminal.
func isTerminal(v any) bool {
	f, ok := v.(term.File)
	return ok && term.IsTerminal(f.Fd())
}

// openTTY opens the process's controlling terminal.
func openTTY() (*os.File, error) { return os.OpenFile("/dev/tty", os.O_RDWR, 0) }
