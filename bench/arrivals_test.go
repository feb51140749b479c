package bench

import (
	"context"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

// TestBurstinessGapsMeanAndCV: over 100k draws, the gaps' mean is 1/rate and their coefficient
// of variation 1/sqrt(burstiness), each within 3%, as gamma gaps of shape B and scale
// 1/(rate*B) have (vllm/benchmarks/serve.py, get_request).
func TestBurstinessGapsMeanAndCV(t *testing.T) {
	const draws, rate = 100_000, 20.0
	for _, b := range []float64{0.1, 0.25, 0.5, 1, 2, 4, 16} {
		rng := rand.New(rand.NewPCG(1, 2))
		var sum, sumSq float64
		for range draws {
			g := arrivalGap(rng, rate, b)
			if !(g >= 0) {
				t.Fatalf("burstiness %v: gap %v", b, g)
			}
			sum += g
			sumSq += g * g
		}
		mean := sum / draws
		cv := math.Sqrt(sumSq/draws-mean*mean) / mean
		wantMean, wantCV := 1/rate, 1/math.Sqrt(b)
		t.Logf("burstiness %v: mean %.5f s (theory %.5f), CV %.4f (theory %.4f)", b, mean, wantMean, cv, wantCV)
		if math.Abs(mean/wantMean-1) > 0.03 || math.Abs(cv/wantCV-1) > 0.03 {
			t.Errorf("burstiness %v: mean %.5f s (want %.5f), CV %.4f (want %.4f)", b, mean, wantMean, cv, wantCV)
		}
	}
}

// TestRampUpWarp: the warp is continuous, starts slow, and past the ramp runs at the full rate
// half a ramp late; arrivals in the ramp are about half as many as at the full rate.
func TestRampUpWarp(t *testing.T) {
	const ramp = 4.0
	cases := []struct{ u, want float64 }{
		{0, 0}, {0.5, 2}, {ramp / 2, ramp}, {ramp, 1.5 * ramp}, {10, 10 + ramp/2},
	}
	for _, c := range cases {
		if got := rampWarp(c.u, ramp); math.Abs(got-c.want) > 1e-12 {
			t.Errorf("rampWarp(%v) = %v, want %v", c.u, got, c.want)
		}
	}
	if got := rampWarp(3, 0); got != 3 {
		t.Errorf("no ramp: rampWarp(3) = %v", got)
	}
	// At 500 req/s ramped over 4 s, the ramp holds rate*ramp/2 = 1000 arrivals in expectation.
	a := Arrivals{Schedule: "poisson", Rate: 500, RampUp: 4 * time.Second}
	_, targets, _, _ := runSchedule(t, a, 3000, 0)
	inRamp := 0
	for i, tg := range targets {
		if i > 0 && tg < targets[i-1] {
			t.Fatalf("target %d (%v) before target %d (%v)", i, tg, i-1, targets[i-1])
		}
		if tg-targets[0] < 4*time.Second {
			inRamp++
		}
	}
	if inRamp < 900 || inRamp > 1100 {
		t.Errorf("%d arrivals in the 4 s ramp at 500 req/s, want about 1000", inRamp)
	}
}

// TestScheduleTraceTargets: a trace's request i is due at t0 + offset i.
func TestScheduleTraceTargets(t *testing.T) {
	offs := []time.Duration{0, 0, 3 * time.Millisecond, 10 * time.Millisecond, 10500 * time.Microsecond}
	starts, targets, has, _ := runSchedule(t, Arrivals{Schedule: "trace", Offsets: offs}, len(offs), 100*time.Microsecond)
	for i := range offs {
		if !has[i] || targets[i] != starts[0]+offs[i] {
			t.Errorf("request %d: target %v (has %v), want %v", i, targets[i], has[i], starts[0]+offs[i])
		}
	}
}

// TestScheduleAcquireBeforeEachSubmit: with a concurrency limit the submitter takes a slot
// before every submit, after its due time.
func TestScheduleAcquireBeforeEachSubmit(t *testing.T) {
	clock := newFakeClock(0)
	acquired, submitted := 0, 0
	sub := submitter{clock: clock, settings: func() (Arrivals, uint64) { return Arrivals{Schedule: "absolute", Interval: time.Millisecond}, 0 },
		acquire: func(ctx context.Context) error {
			if acquired != submitted {
				t.Errorf("acquire %d after %d submits", acquired, submitted)
			}
			acquired++
			clock.advance(5 * time.Millisecond) // waiting for a slot
			return nil
		}}
	_, err := sub.run(context.Background(), 4, func(i int, target time.Duration, has bool) error {
		submitted++
		if now := clock.Now(); now-target < 5*time.Millisecond {
			t.Errorf("request %d submitted %v after its target: the slot wait is missing", i, now-target)
		}
		return nil
	})
	if err != nil || acquired != 4 || submitted != 4 {
		t.Fatalf("err %v, %d acquired, %d submitted", err, acquired, submitted)
	}
}

// TestArrivalsValidate names the flag of every bad value.
func TestArrivalsValidate(t *testing.T) {
	cases := []struct {
		name string
		a    Arrivals
		n    int
		want string
	}{
		{"negative burstiness", Arrivals{Schedule: "poisson", Rate: 1, Burstiness: -1}, 1, "--burstiness"},
		{"NaN burstiness", Arrivals{Schedule: "poisson", Rate: 1, Burstiness: math.NaN()}, 1, "--burstiness"},
		{"subnormal burstiness", Arrivals{Schedule: "poisson", Rate: 0.001, Burstiness: 5e-324}, 1, "--burstiness must be a finite number >= 0.001"},
		{"ramp without a rate", Arrivals{Schedule: "absolute", RampUp: time.Second}, 1, "--ramp-up-s"},
		{"negative concurrency", Arrivals{Schedule: "relative", MaxConcurrency: -1}, 1, "--max-concurrency"},
		{"short trace", Arrivals{Schedule: "trace", Offsets: []time.Duration{0}}, 2, "--replay"},
		{"unordered trace", Arrivals{Schedule: "trace", Offsets: []time.Duration{0, 2, 1}}, 3, "--replay"},
		{"unknown schedule", Arrivals{Schedule: "sometimes"}, 1, "--submit-schedule"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := c.a.validate(c.n)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("validate = %v, want an error naming %s", err, c.want)
			}
		})
	}
	if err := (Arrivals{Schedule: "poisson", Rate: 3, Burstiness: 0.5, RampUp: time.Second, MaxConcurrency: 4}).validate(10); err != nil {
		t.Errorf("valid arrivals refused: %v", err)
	}
}
