package bench

import (
	"context"
	"errors"
	"testing"
	"time"
)

// runSchedule submits n requests whose add_request costs addCost on the fake clock and returns
// each submit's start, target and whether it had one.
func runSchedule(t *testing.T, a Arrivals, n int, addCost time.Duration) (starts, targets []time.Duration, has []bool, wall time.Duration) {
	t.Helper()
	clock := newFakeClock(time.Second)
	sub := submitter{clock: clock, settings: func() (Arrivals, uint64) { return a, 0 }, seed: 7}
	wall, err := sub.run(context.Background(), n, func(i int, target time.Duration, ok bool) error {
		starts, targets, has = append(starts, clock.Now()), append(targets, target), append(has, ok)
		clock.advance(addCost)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return starts, targets, has, wall
}

func TestScheduleRelativeSpacingIsAddTimePlusInterval(t *testing.T) {
	add, interval := 300*time.Microsecond, 2*time.Millisecond
	starts, _, has, wall := runSchedule(t, Arrivals{Schedule: "relative", Interval: interval}, 5, add)
	for i := 1; i < len(starts); i++ {
		if got := starts[i] - starts[i-1]; got != add+interval {
			t.Errorf("spacing %d = %v, want add_request %v + interval %v", i, got, add, interval)
		}
		if has[i] {
			t.Errorf("relative request %d has a target", i)
		}
	}
	if want := 5 * (add + interval); wall != want {
		t.Errorf("submit wall = %v, want %v (the sleep follows every submit, the last too)", wall, want)
	}
}

func TestScheduleAbsoluteTargetsAndLag(t *testing.T) {
	interval := 2 * time.Millisecond
	// Fast submits: every request starts exactly on its target t0 + i*interval.
	starts, targets, _, _ := runSchedule(t, Arrivals{Schedule: "absolute", Interval: interval}, 5, 300*time.Microsecond)
	t0 := starts[0]
	for i := range starts {
		if want := t0 + time.Duration(i)*interval; targets[i] != want || starts[i] != want {
			t.Errorf("request %d: start %v target %v, want both %v", i, starts[i], targets[i], want)
		}
	}
	// Slow submits (3 ms each, interval 2 ms): targets stay on the grid, the lag grows by 1 ms.
	starts, targets, _, _ = runSchedule(t, Arrivals{Schedule: "absolute", Interval: interval}, 4, 3*time.Millisecond)
	for i := range starts {
		if want := starts[0] + time.Duration(i)*interval; targets[i] != want {
			t.Errorf("slow request %d: target %v, want %v", i, targets[i], want)
		}
		r := RequestResult{HasTarget: true, Target: targets[i]}
		r.Record = recordAt(starts[i])
		if m, want := metricsOf(&r), float64(i); m.Lag != want {
			t.Errorf("slow request %d: lag %v ms, want %v ms", i, m.Lag, want)
		}
	}
}

func TestSchedulePoissonIsSeededAndAbsolute(t *testing.T) {
	a := Arrivals{Schedule: "poisson", Rate: 100}
	s1, t1, _, _ := runSchedule(t, a, 50, 10*time.Microsecond)
	_, t2, _, _ := runSchedule(t, a, 50, 10*time.Microsecond)
	var sum time.Duration
	for i := range t1 {
		if t1[i] != t2[i] {
			t.Fatalf("target %d differs between runs with one seed: %v vs %v", i, t1[i], t2[i])
		}
		if s1[i] != t1[i] {
			t.Errorf("request %d started at %v, not its target %v", i, s1[i], t1[i])
		}
		if i > 0 {
			sum += t1[i] - t1[i-1]
		}
	}
	// 49 exponential gaps of mean 10 ms: the mean is within a few standard errors of 10 ms.
	if mean := sum / 49; mean < 5*time.Millisecond || mean > 15*time.Millisecond {
		t.Errorf("mean gap %v, want about 10ms at 100 req/s", mean)
	}
}

func TestScheduleBurstHasNoSleep(t *testing.T) {
	starts, _, has, wall := runSchedule(t, Arrivals{Schedule: "absolute"}, 3, time.Millisecond)
	if wall != 3*time.Millisecond || starts[2]-starts[0] != 2*time.Millisecond || has[0] {
		t.Errorf("burst: wall %v starts %v has %v", wall, starts, has)
	}
}

// TestScheduleBurstStopsWhenCancelled: a burst, which never sleeps, stops submitting at the
// first request after the context is done instead of submitting (and tokenizing) the rest.
func TestScheduleBurstStopsWhenCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	sub := submitter{clock: newFakeClock(0), settings: func() (Arrivals, uint64) { return Arrivals{Schedule: "relative"}, 0 }}
	submits := 0
	_, err := sub.run(ctx, 1000, func(i int, _ time.Duration, _ bool) error {
		if submits++; submits == 10 {
			cancel()
		}
		return nil
	})
	if !errors.Is(err, context.Canceled) || submits != 10 {
		t.Errorf("err %v after %d submits; want context.Canceled after the 10th", err, submits)
	}
}
