package bench

import (
	"fmt"
	"math"
	"math/rand/v2"
	"time"
)

// Arrivals is a submit schedule: seed 002's relative and absolute intervals; arrivals at a rate
// (vLLM's `bench serve --request-rate` with --burstiness), optionally ramped up; a replayed
// trace's timestamps. Any of them can be capped at MaxConcurrency requests in flight.
type Arrivals struct {
	Schedule string        // "relative" | "absolute" | "poisson" | "trace"
	Interval time.Duration // relative: sleep after each submit; absolute: target spacing
	Rate     float64       // poisson: mean requests per second (> 0)
	// Burstiness is poisson's gamma shape: the gaps are Gamma(B, 1/(Rate*B)) seconds, mean 1/Rate,
	// coefficient of variation 1/sqrt(B). 1 (or 0, read as 1) is a Poisson process; below 1 the
	// arrivals come in bursts, above 1 they are more even.
	Burstiness float64
	// RampUp (poisson): the rate rises linearly from 0 to Rate over the run's first RampUp.
	RampUp time.Duration
	// Offsets (trace): request i is due Offsets[i] after the run's first submit.
	Offsets        []time.Duration
	MaxConcurrency int    // most requests in flight (submitted, not finished); 0: no limit
	Seed           uint64 // poisson gaps; every run draws the same arrivals
}

// validate checks the schedule's own fields; the error names the flag that sets the bad value.
func (a Arrivals) validate(numRequests int) error {
	checks := []struct {
		bad bool
		msg string
	}{
		{a.Schedule != "relative" && a.Schedule != "absolute" && a.Schedule != "poisson" && a.Schedule != "trace", fmt.Sprintf("--submit-schedule: unknown schedule %q (valid: relative, absolute)", a.Schedule)},
		{a.Interval < 0, fmt.Sprintf("--submit-interval-ms must be >= 0, got %v", ms(a.Interval))},
		{a.Schedule == "poisson" && !(a.Rate > 0 && finite(a.Rate)), fmt.Sprintf("--request-rate must be a finite number > 0, got %v", a.Rate)},
		{!(a.Burstiness >= 0) || math.IsInf(a.Burstiness, 0) || (a.Burstiness > 0 && a.Burstiness < MinBurstiness),
			fmt.Sprintf("--burstiness must be a finite number >= %g, got %v", MinBurstiness, a.Burstiness)},
		{a.RampUp < 0, fmt.Sprintf("--ramp-up-s must be >= 0, got %v", a.RampUp.Seconds())},
		{a.RampUp > 0 && a.Schedule != "poisson", "--ramp-up-s ramps a rate: it needs --request-rate"},
		{a.MaxConcurrency < 0, fmt.Sprintf("--max-concurrency must be >= 0, got %d", a.MaxConcurrency)},
		{a.Schedule == "trace" && len(a.Offsets) < numRequests, fmt.Sprintf("--replay: the trace has %d arrivals for %d requests", len(a.Offsets), numRequests)},
	}
	for _, ch := range checks {
		if ch.bad {
			return &ConfigError{msg: ch.msg}
		}
	}
	for i, off := range a.Offsets {
		if off < 0 || (i > 0 && off < a.Offsets[i-1]) {
			return &ConfigError{msg: fmt.Sprintf("--replay: arrival %d is negative or before arrival %d", i, i-1)}
		}
	}
	return nil
}

// label is the schedule as reports and the dashboard name it.
func (a Arrivals) label() string {
	if a.Schedule == "poisson" && a.Burstiness != 0 && a.Burstiness != 1 {
		return "gamma"
	}
	return a.Schedule
}

// intervalMs is the interval the report prints: the mean gap for arrivals at a rate or a trace's.
func (a Arrivals) intervalMs() float64 {
	switch a.Schedule {
	case "poisson":
		return 1000 / a.Rate
	case "trace":
		if n := len(a.Offsets); n > 1 {
			return ms(a.Offsets[n-1]-a.Offsets[0]) / float64(n-1)
		}
		return 0
	}
	return ms(a.Interval)
}

// hasTargets reports whether the schedule sets each request a due time (its submit lag is then
// measured): absolute with an interval, rates, traces.
func (a Arrivals) hasTargets() bool {
	switch a.Schedule {
	case "absolute":
		return a.Interval > 0
	case "poisson":
		return a.Rate > 0
	case "trace":
		return len(a.Offsets) > 0
	}
	return false
}

// arrivalPlan computes the due times of a run's requests from the schedule in force. Its state
// is reset whenever the schedule changes (rebase). Owned by the submitter goroutine.
type arrivalPlan struct {
	a       Arrivals
	rng     *rand.Rand
	base    time.Duration // when request baseIdx was due
	baseIdx int
	u       float64 // poisson: the next arrival's time since base at the full rate, in seconds
}

func (p *arrivalPlan) rebase(a Arrivals, now time.Duration, i int) {
	p.a, p.base, p.baseIdx, p.u = a, now, i, 0
}

// target returns request i's due time, or false when the schedule sets none (relative, burst).
func (p *arrivalPlan) target(i int) (time.Duration, bool) {
	a := p.a
	switch {
	case a.Schedule == "absolute" && a.Interval > 0:
		return p.base + time.Duration(i-p.baseIdx)*a.Interval, true
	case a.Schedule == "poisson" && a.Rate > 0:
		t := p.base + seconds(rampWarp(p.u, a.RampUp.Seconds()))
		p.u += arrivalGap(p.rng, a.Rate, a.Burstiness)
		return t, true
	case a.Schedule == "trace" && i < len(a.Offsets) && p.baseIdx < len(a.Offsets):
		return p.base + a.Offsets[i] - a.Offsets[p.baseIdx], true
	}
	return 0, false
}

// MinBurstiness is the smallest gamma shape of the gaps: a coefficient of variation of about 32;
// far below it the draw's scale 1/(rate*burstiness) overflows.
const MinBurstiness = 1e-3

// arrivalGap draws one gap in seconds at rate with the given burstiness (gamma shape): mean
// 1/rate, coefficient of variation 1/sqrt(burstiness). vLLM draws its gaps the same way
// (vllm/benchmarks/serve.py, get_request), without its rescaling of their sum.
func arrivalGap(rng *rand.Rand, rate, burstiness float64) float64 {
	if burstiness == 0 || burstiness == 1 {
		return rng.ExpFloat64() / rate
	}
	return gammaDraw(rng, burstiness) / (rate * burstiness)
}

// gammaDraw draws from Gamma(shape, 1) by Marsaglia and Tsang's method ("A simple method for
// generating gamma variables", ACM TOMS 2000); a shape below 1 draws Gamma(shape+1) and scales it
// by U^(1/shape).
func gammaDraw(rng *rand.Rand, shape float64) float64 {
	if shape < 1 {
		u := rng.Float64()
		for u == 0 {
			u = rng.Float64()
		}
		return gammaDraw(rng, shape+1) * math.Pow(u, 1/shape)
	}
	d := shape - 1.0/3
	c := 1 / math.Sqrt(9*d)
	for {
		x := rng.NormFloat64()
		v := 1 + c*x
		if v <= 0 {
			continue
		}
		v = v * v * v
		u := rng.Float64()
		if u < 1-0.0331*x*x*x*x || math.Log(u) < 0.5*x*x+d*(1-v+math.Log(v)) {
			return d * v
		}
	}
}

// rampWarp maps an arrival's time u at the full rate (seconds) to its time under a rate that
// rises linearly from 0 to full over ramp seconds: the t with integral_0^t rate/full = u, that is
// t^2/(2 ramp) = u during the ramp and t - ramp/2 = u after it.
func rampWarp(u, ramp float64) float64 {
	if ramp <= 0 {
		return u
	}
	if u < ramp/2 {
		return math.Sqrt(2 * ramp * u)
	}
	return u + ramp/2
}

func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }
