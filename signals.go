package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sync"
	"syscall"
)

// signals turns SIGINT, SIGTERM and SIGHUP into a cancelled context, so every command stops,
// keeps what it measured and exits 128+N; a second signal exits at once.
type signals struct {
	ctx    context.Context
	cancel context.CancelFunc
	ch     chan os.Signal
	done   chan struct{}
	once   sync.Once
	mu     sync.Mutex // guards got
	got    int        // the first signal's number; 0: none yet
}

func watchSignals(stderr io.Writer) *signals {
	ctx, cancel := context.WithCancel(context.Background())
	s := &signals{ctx: ctx, cancel: cancel, ch: make(chan os.Signal, 2), done: make(chan struct{})}
	signal.Notify(s.ch, os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	go s.watch(stderr)
	return s
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
