package bench

import (
	"context"
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

func (c realClock) Sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
