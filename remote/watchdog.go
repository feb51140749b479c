package remote

import (
	"context"
	"io"
	"time"
)

// watchdog cancels a request whose body does not start, or stops moving, in time: one timer
// from the POST to the body's first byte, then one re-armed by every read. Both call cancel
// with a cause that classify recognises.
type watchdog struct {
	cancel     context.CancelCauseFunc
	first      *time.Timer // nil when FirstByteTimeout is off
	stallAfter time.Duration
	stall      *time.Timer // armed at the first byte; nil when StallTimeout is off
	started    bool        // the body's first byte arrived; owned by the reading goroutine
}

func newWatchdog(cancel context.CancelCauseFunc, firstByte, stall time.Duration) *watchdog {
	w := &watchdog{cancel: cancel, stallAfter: stall}
	if firstByte > 0 {
		w.first = time.AfterFunc(firstByte, func() { cancel(errFirstByte) })
	}
	return w
}

// body wraps a response body so that its reads feed the watchdog.
func (w *watchdog) body(r io.Reader) io.Reader { return watchedBody{r: r, w: w} }

// read notes that n bytes arrived.
func (w *watchdog) read(n int) {
	if n == 0 {
		return
	}
	if w.started {
		if w.stall != nil {
			w.stall.Reset(w.stallAfter)
		}
		return
	}
	w.started = true
	if w.first != nil {
		w.first.Stop()
	}
	if w.stallAfter > 0 {
		w.stall = time.AfterFunc(w.stallAfter, func() { w.cancel(errStall) })
	}
}

// stop disarms both timers.
func (w *watchdog) stop() {
	if w.first != nil {
		w.first.Stop()
	}
	if w.stall != nil {
		w.stall.Stop()
	}
}

type watchedBody struct {
	r io.Reader
	w *watchdog
}

func (b watchedBody) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	b.w.read(n)
	return n, err
}
