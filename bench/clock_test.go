package bench

import (
	"context"
	"errors"
	"testing"
	"time"
)

// TestRealClockSleep: a real Sleep never returns before its duration, whether it ends on the
// timer and a spin or on the spin alone, and a cancelled context cuts either part short with
// the context's error.
func TestRealClockSleep(t *testing.T) {
	c := NewRealClock()
	for _, d := range []time.Duration{500 * time.Microsecond, spinFor + time.Millisecond} {
		t0 := c.Now()
		if err := c.Sleep(context.Background(), d); err != nil {
			t.Fatalf("Sleep(%v): %v", d, err)
		}
		if got := c.Now() - t0; got < d {
			t.Fatalf("Sleep(%v) returned after %v", d, got)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for _, d := range []time.Duration{time.Millisecond, time.Hour} {
		if err := c.Sleep(ctx, d); !errors.Is(err, context.Canceled) {
			t.Fatalf("Sleep(%v) with a cancelled context: %v, want context.Canceled", d, err)
		}
	}
}
