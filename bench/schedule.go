package bench

import (
	"context"
	"math/rand/v2"
	"time"
)

// intervalMs is the interval the report prints: the mean gap for Poisson arrivals.
func (a Arrivals) intervalMs() float64 {
	if a.Schedule == "poisson" {
		return 1000 / a.Rate
	}
	return ms(a.Interval)
}

// submitter submits one run's requests on the schedule. It runs on one goroutine per run.
type submitter struct {
	clock Clock
	// settings returns the schedule in force and a generation number bumped on every change; a
	// change re-bases absolute targets at the moment it is seen (the dashboard changes it live).
	settings func() (Arrivals, uint64)
	// waitResume blocks while arrivals are paused and reports whether it did; nil: never paused.
	waitResume func(ctx context.Context) (bool, error)
	seed       uint64 // Poisson gaps; every run draws the same arrivals
}

// run submits requests 0..n-1: submit(i, target, hasTarget) is called at request i's time.
// relative: spacing = add_request time + interval (the sleep follows each submit, the last one
// too, as in the seed, so Submit wall includes it). absolute: request i is due at
// t0 + i*interval; the submitter sleeps until then. poisson: exponential gaps at Rate, due at
// their cumulative sums. It returns the submit wall: t0 -> after the last submit (and sleep).
func (s *submitter) run(ctx context.Context, n int, submit func(i int, target time.Duration, hasTarget bool) error) (time.Duration, error) {
	rng := rand.New(rand.NewPCG(s.seed, 0x5eed))
	t0 := s.clock.Now()
	base, baseIdx, next := t0, 0, t0
	a, gen := s.settings()
	for i := 0; i < n; i++ {
		rebase := false
		if s.waitResume != nil {
			paused, err := s.waitResume(ctx)
			if err != nil {
				return s.clock.Now() - t0, err
			}
			rebase = paused
		}
		if cur, g := s.settings(); g != gen || rebase {
			a, gen = cur, g
			base, baseIdx = s.clock.Now(), i
			next = base
		}
		var target time.Duration
		has := false
		switch {
		case a.Schedule == "absolute" && a.Interval > 0:
			target, has = base+time.Duration(i-baseIdx)*a.Interval, true
		case a.Schedule == "poisson" && a.Rate > 0:
			target, has = next, true
			next += time.Duration(rng.ExpFloat64() / a.Rate * float64(time.Second))
		}
		if has {
			if now := s.clock.Now(); now < target {
				if err := s.clock.Sleep(ctx, target-now); err != nil {
					return s.clock.Now() - t0, err
				}
			}
		}
		if err := submit(i, target, has); err != nil {
			return s.clock.Now() - t0, err
		}
		if a.Schedule == "relative" && a.Interval > 0 {
			if err := s.clock.Sleep(ctx, a.Interval); err != nil {
				return s.clock.Now() - t0, err
			}
		}
	}
	return s.clock.Now() - t0, nil
}
