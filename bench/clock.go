package bench

import (
	"context"
	"runtime"
	"time"
)

// Clock is monotonic time measured from an epoch, plus a sleep that a context cuts short. The
// session hands the same clock to the scheduler, so submit targets and the scheduler's request
// timestamps share one time base. Tests use a fake clock: nothing in bench sleeps on its own.
type Clock interface {
	Now() time.Duration
	Sleep(ctx context.Context, d time.Duration) error
}

// realClock reads the monotonic wall clock.
type realClock struct {
	epoch time.Time // immutable after construction
}

// NewRealClock returns a Clock whose epoch is now.
func NewRealClock() Clock { return realClock{epoch: time.Now()} }

func (c realClock) Now() time.Duration { return time.Since(c.epoch) }

// spinFor is how much of a real Sleep's end is spent yielding in a loop instead of on a timer.
// With every goroutine parked, Go waits for its timers in epoll with a whole number of
// milliseconds, so a timer could wake up to a millisecond late: prefill-heavy's submissions
// (one every 1 ms, absolute) measured a submit lag p99 of 0.03 to 0.93 ms from run to run on
// the GPU machine, the same with either of two builds. A goroutine that yields in a loop keeps
// its thread running and sees the deadline within microseconds.
const spinFor = 2 * time.Millisecond

// Sleep waits d on a timer, except for its last spinFor, which it spends yielding in a loop.
func (c realClock) Sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	end := time.Now().Add(d)
	if d > spinFor {
		t := time.NewTimer(d - spinFor)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	for time.Now().Before(end) {
		if err := ctx.Err(); err != nil {
			return err
		}
		runtime.Gosched()
	}
	return nil
}
