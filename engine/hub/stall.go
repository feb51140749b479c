package hub

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"
)

// defaultStallTimeout is how long a transfer may go without receiving a byte before it is cut
// (and, for a pinned file, resumed): long enough for a slow link, short enough that a dead
// server does not hang the program.
const defaultStallTimeout = 30 * time.Second

// stallWatch cuts a request whose server stops sending: its context is cancelled with ErrStalled
// as the cause when no byte has arrived for timeout, from the request's start (waiting for the
// answer's headers counts) and after each read that returned data.
type stallWatch struct {
	ctx     context.Context
	timeout time.Duration
	timer   *time.Timer // cancels ctx when it fires; reset by Read on the downloading goroutine
}

// watchStall returns a context for one request and its watch; stop releases both.
func watchStall(parent context.Context, timeout time.Duration) (*stallWatch, func()) {
	ctx, cancel := context.WithCancelCause(parent)
	w := &stallWatch{ctx: ctx, timeout: timeout}
	w.timer = time.AfterFunc(timeout, func() {
		cancel(fmt.Errorf("%w: no data from the server for %v", ErrStalled, timeout))
	})
	return w, func() {
		w.timer.Stop()
		cancel(nil)
	}
}

// stalled returns the stall error when the watch cut the request, else nil.
func (w *stallWatch) stalled() error {
	if c := context.Cause(w.ctx); errors.Is(c, ErrStalled) {
		return c
	}
	return nil
}

// body wraps a response body: each read that returns data restarts the clock, and a read cut by
// the watch returns the stall error instead of the bare context error.
func (w *stallWatch) body(r io.Reader) io.Reader { return stallReader{w, r} }

type stallReader struct {
	w *stallWatch
	r io.Reader
}

func (s stallReader) Read(p []byte) (int, error) {
	n, err := s.r.Read(p)
	if n > 0 {
		s.w.timer.Reset(s.w.timeout)
	}
	if err != nil && err != io.EOF {
		if st := s.w.stalled(); st != nil {
			err = st
		}
	}
	return n, err
}
