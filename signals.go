package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sync"
	"syscall"

	"github.com/charmbracelet/x/term"

	"rosetop/tui"
)

// signals turns SIGINT, SIGTERM and SIGHUP into a cancelled context, so every command stops,
// keeps what it measured and exits 128+N; a second signal exits at once, first putting back
// the terminal a dashboard had not yet restored.
type signals struct {
	ctx    context.Context
	cancel context.CancelFunc
	ch     chan os.Signal
	done   chan struct{}
	once   sync.Once
	tty    ttyMode    // immutable
	mu     sync.Mutex // guards got
	got    int        // the first signal's number; 0: none yet
}

// watchSignals starts watching for signals; the process's stdin, stdout and stderr say which
// terminal it runs on, and the second signal's notice goes to stderr.
func watchSignals(stdin, stdout, stderr *os.File) *signals {
	ctx, cancel := context.WithCancel(context.Background())
	s := &signals{ctx: ctx, cancel: cancel, ch: make(chan os.Signal, 2), done: make(chan struct{}), tty: saveTTY(stdin, stdout, stderr)}
	signal.Notify(s.ch, os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	// A closed stdout (rosetop bench | head) is a write error the commands report, after writing
	// their files, rather than the end of the process.
	signal.Ignore(syscall.SIGPIPE)
	go s.watch(stderr)
	return s
}

// ttyMode is the terminal the process started on, as it was then.
type ttyMode struct {
	fd  uintptr     // a descriptor on the terminal
	out io.Writer   // the terminal, where a dashboard draws; nil when only stdin is it
	st  *term.State // nil: the process has no terminal
}

func saveTTY(stdin, stdout, stderr *os.File) ttyMode {
	var t ttyMode
	for _, f := range []*os.File{stdin, stderr, stdout} {
		if f == nil || !term.IsTerminal(f.Fd()) {
			continue
		}
		if t.st == nil {
			if st, err := term.GetState(f.Fd()); err == nil {
				t.fd, t.st = f.Fd(), st
			}
		}
		if t.out == nil && f != stdin {
			t.out = f
		}
	}
	return t
}

// restore puts the terminal back as the process found it when its mode differs (a dashboard
// made it raw, or its echo is off while the model loads), and leaves the dashboard's alternate
// screen when it was raw.
func (t ttyMode) restore() {
	if t.st == nil {
		return
	}
	if now, err := term.GetState(t.fd); err != nil || *now == *t.st {
		return
	}
	raw := rawInput(int(t.fd))
	term.Restore(t.fd, t.st)
	if t.out != nil && raw {
		io.WriteString(t.out, tui.ResetSequences(true))
	}
}

// watch runs until stop: the first signal cancels ctx, the second exits the process.
func (s *signals) watch(stderr io.Writer) {
	for {
		select {
		case <-s.done:
			return
		case sig := <-s.ch:
			n := signum(sig)
			s.mu.Lock()
			first := s.got == 0
			if first {
				s.got = n
			}
			s.mu.Unlock()
			if first {
				s.cancel()
				continue
			}
			s.tty.restore()
			fmt.Fprintf(stderr, "\nrosetop: %v again: exiting at once\n", sig)
			os.Exit(128 + n)
		}
	}
}

// first returns the first signal's number, 0 when none came.
func (s *signals) first() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.got
}

func (s *signals) stop() {
	s.once.Do(func() {
		signal.Stop(s.ch)
		close(s.done)
		s.cancel()
	})
}

func signum(sig os.Signal) int {
	if n, ok := sig.(syscall.Signal); ok {
		return int(n)
	}
	return int(syscall.SIGINT)
}
