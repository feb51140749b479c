package bench

import (
	"context"
	"math/rand/v2"
	"time"
)

// submitter submits one run's requests on the schedule. It runs on one goroutine per run.
type submitter struct {
	clock Clock
	// settings returns the schedule in force and a generation number bumped on every change; a
	// change re-bases due times at the moment it is seen (the dashboard changes it live).
	settings func() (Arrivals, uint64)
	// waitResume blocks while arrivals are paused and reports whether it did; nil: never paused.
	waitResume func(ctx context.Context) (bool, error)
	// acquire blocks until one more request may be in flight (--max-concurrency); nil: no limit.
	acquire func(ctx context.Context) error
	seed    uint64 // poisson gaps; every run draws the same arrivals
}

// run submits requests 0..n-1: submit(i, target, hasTarget) is called at request i's time.
// relative: spacing = add_request time + interval (the sleep follows each submit, the last one
// too, as in the seed, so Submit wall includes it). absolute: request i is due at
// t0 + i*interval; the submitter sleeps until then. poisson: gamma (exponential by default) gaps
// at Rate, due at their cumulative sums, stretched by the ramp-up. trace: due at t0 + offset i.
// A request due while MaxConcurrency requests are in flight waits for one to finish; its lag
// counts the wait (under the relative schedule it is due when the loop reaches it, in a burst
// when the burst starts). It returns the submit wall: t0 -> after the last submit (and sleep).
func (s *submitter) run(ctx context.Context, n int, submit func(i int, target time.Duration, hasTarget bool) error) (time.Duration, error) {
	t0 := s.clock.Now()
	a, gen := s.settings()
	plan := arrivalPlan{rng: rand.New(rand.NewPCG(s.seed, 0x5eed))}
	plan.rebase(a, t0, 0)
	for i := 0; i < n; i++ {
		if err := ctx.Err(); err != nil { // a burst never sleeps: stop between two submits
			return s.clock.Now() - t0, err
		}
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
			plan.rebase(a, s.clock.Now(), i)
		}
		target, has := plan.target(i)
		if !has && s.acquire != nil {
			// Due when it arrives (a burst's, all at once), so the wait for a slot is its lag:
			// vLLM's client queue time.
			target, has = s.clock.Now(), true
			if a.Interval == 0 {
				target = plan.base
			}
		}
		if has {
			if now := s.clock.Now(); now < target {
				if err := s.clock.Sleep(ctx, target-now); err != nil {
					return s.clock.Now() - t0, err
				}
			}
		}
		if s.acquire != nil {
			if err := s.acquire(ctx); err != nil {
				return s.clock.Now() - t0, err
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
