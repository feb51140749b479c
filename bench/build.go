package bench

import (
	"context"
	"fmt"
	"io"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// build is how a dataset is read and its requests made: the per-request work (tokenizing) spread
// over workers goroutines, stopped when ctx is done, and a slow read's or build's progress noted
// on notes. Results never depend on workers: each request's work draws only from its own random
// stream.
type build struct {
	ctx     context.Context
	workers int       // goroutines for the per-request work, at least 1
	clock   Clock     // times the progress notes
	notes   io.Writer // progress notes; io.Discard for none
}

// newBuild is a build on every core (GOMAXPROCS), timed by clock and noting on notes (nil: none).
func newBuild(ctx context.Context, clock Clock, notes io.Writer) build {
	if notes == nil {
		notes = io.Discard
	}
	return build{ctx: ctx, workers: runtime.GOMAXPROCS(0), clock: clock, notes: notes}
}

// buildNoteAfter is how long a build runs silent before it notes its progress (then every
// progressEvery): a quick build prints nothing.
const buildNoteAfter = 2 * time.Second

// each calls f(i) for every i in [0, n) on the build's workers and waits for them. When ctx is
// done it stops handing out indices and returns ctx's error once the calls in flight return.
// tick (nil: none) is told, on the caller's goroutine, how many calls have returned.
func (b build) each(n int, tick func(done int), f func(i int)) error {
	var next atomic.Int64               // the next index to hand out; shared by the workers
	finished := make(chan struct{}, 64) // one value per returned call: workers -> caller
	var wg sync.WaitGroup
	for range min(max(b.workers, 1), n) {
		wg.Go(func() {
			for b.ctx.Err() == nil {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				f(i)
				select {
				case finished <- struct{}{}:
				case <-b.ctx.Done():
					return
				}
			}
		})
	}
	defer wg.Wait()
	for done := 0; done < n; {
		select {
		case <-finished:
			if done++; tick != nil {
				tick(done)
			}
		case <-b.ctx.Done():
			return b.ctx.Err()
		}
	}
	return nil
}

// progress notes how far a slow build has got, as a run's progress is noted: nothing for its
// first buildNoteAfter, then "rosetop: WHAT: DONE/TOTAL, about 20s left" every progressEvery,
// and a last line when it is done if it noted anything. Used by one goroutine.
type progress struct {
	w     io.Writer
	now   func() time.Duration
	what  string                         // "building 1000 prompts (--dataset random)"
	count func(done, total int64) string // "41200/100000"; nil: the plain numbers
	start time.Duration
	next  time.Duration // when the next note is due
	noted bool
}

// progress starts a build's progress notes about what.
func (b build) progress(what string) *progress {
	now := b.clock.Now()
	return &progress{w: b.notes, now: b.clock.Now, what: what, start: now, next: now + buildNoteAfter}
}

// update notes done of total when a note is due; a nil p does nothing.
func (p *progress) update(done, total int64) {
	if p == nil {
		return
	}
	now := p.now()
	if now < p.next || done <= 0 || done >= total {
		return
	}
	p.next, p.noted = now+progressEvery, true
	count := fmt.Sprintf("%d/%d", done, total)
	if p.count != nil {
		count = p.count(done, total)
	}
	left := time.Duration(float64(now-p.start) * float64(total-done) / float64(done))
	fmt.Fprintf(p.w, "rosetop: %s: %s, about %s left\n", p.what, count, left.Round(time.Second))
}

// done closes the notes with the time taken, when any were written; a nil p does nothing.
func (p *progress) done() {
	if p == nil || !p.noted {
		return
	}
	p.noted = false
	fmt.Fprintf(p.w, "rosetop: %s: done in %.1f s\n", p.what, (p.now() - p.start).Seconds())
}
