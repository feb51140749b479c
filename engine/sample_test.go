package engine

import (
	"cmp"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"rosetop/internal/gpt2ref"
)

func TestUniformPinned(t *testing.T) {
	// Pinned values, computed by an independent Python rendering of the arithmetic documented on
	// Uniform. The GPU sampler must reproduce them: a change here is a change of the contract.
	cases := []struct {
		seed uint64
		pos  int
		want float64
	}{
		{0, 0, 0.8833108082136426},
		{0, 1, 0.43152799704850997},
		{42, 7, 0.7958530056916532},
		{1 << 63, 1023, 0.9289073933658044},
	}
	for _, tc := range cases {
		if got := Uniform(tc.seed, tc.pos); got != tc.want {
			t.Errorf("Uniform(%d, %d) = %.16g, want %.16g", tc.seed, tc.pos, got, tc.want)
		}
	}
}

func TestUniformRangeAndMean(t *testing.T) {
	const n = 100000
	sum := 0.0
	for i := range n {
		u := Uniform(uint64(i/100), i%100)
		if u < 0 || u >= 1 {
			t.Fatalf("Uniform(%d, %d) = %v, outside [0, 1)", i/100, i%100, u)
		}
		sum += u
	}
	// the mean of n uniforms has standard deviation sqrt(1/12/n) ~ 0.0009: 6 sigma
	if mean := sum / n; math.Abs(mean-0.5) > 0.0055 {
		t.Errorf("mean of %d draws = %v, want 0.5 +- 0.0055", n, mean)
	}
}

func TestGreedy(t *testing.T) {
	cases := []struct {
		name   string
		logits []float32
		p      SamplingParams
		want   int32
	}{
		{"max in the middle", []float32{0.1, 3, -2, 2.9}, SamplingParams{}, 1},
		{"all negative", []float32{-5, -4, -4.5}, SamplingParams{}, 1},
		{"ties take the lowest id", []float32{1, 7, 3, 7, 7}, SamplingParams{}, 1},
		{"negative temperature is greedy", []float32{0, 1, 2}, SamplingParams{Temperature: -1, Seed: 3}, 2},
		{"top-k 1 is greedy", []float32{5, 9, 9, 1}, SamplingParams{Temperature: 2, TopK: 1, Seed: 9}, 1},
		{"single token", []float32{-1}, SamplingParams{Temperature: 1}, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := SampleToken(tc.logits, tc.p, 5, nil); got != tc.want {
				t.Errorf("SampleToken = %d, want %d", got, tc.want)
			}
		})
	}
}

// TestSampleNonFiniteLogits pins the token picked from logits holding NaN or infinities, which
// gpu/kernels/sample.cu picks too: NaN counts as the largest logit (torch.argmax's order), and a
// sampled row whose kept weight is not a positive number (NaN, or every logit -Inf) takes the
// argmax.
func TestSampleNonFiniteLogits(t *testing.T) {
	nan, inf := float32(math.NaN()), float32(math.Inf(1))
	sampled := SamplingParams{Temperature: 1, Seed: 7}
	cases := []struct {
		name   string
		logits []float32
		p      SamplingParams
		want   int32
	}{
		{"greedy NaN", []float32{1, nan, 2}, SamplingParams{}, 1},
		{"greedy NaN and +Inf", []float32{inf, 0, nan}, SamplingParams{}, 2},
		{"sampled NaN", []float32{nan, 1, 2}, sampled, 0},
		{"sampled NaN later", []float32{1, 2, nan, 0}, sampled, 2},
		{"sampled two +Inf", []float32{1, inf, 0, inf}, sampled, 1},
		{"sampled all -Inf", []float32{-inf, -inf, -inf}, sampled, 0},
		{"sampled top-k NaN", []float32{0, 3, nan, 1}, SamplingParams{Temperature: 1, TopK: 2, TopP: 0.5, Seed: 7}, 2},
		{"sampled -Inf dropped", []float32{-inf, 0, -inf}, sampled, 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for pos := range 8 {
				if got := SampleToken(tc.logits, tc.p, pos, nil); got != tc.want {
					t.Fatalf("SampleToken(%v) at position %d = %d, want %d", tc.logits, pos, got, tc.want)
				}
			}
		})
	}
}

func TestTopK1EqualsGreedy(t *testing.T) {
	rng := rand.New(rand.NewPCG(4, 4))
	var s SampleScratch
	for trial := range 200 {
		logits := randLogits(rng, 50, trial%3 == 0)
		p := SamplingParams{Temperature: 0.5 + rng.Float32(), TopK: 1, TopP: 0.7, Seed: uint64(trial)}
		if got, want := SampleToken(logits, p, trial, &s), gpt2ref.Argmax(logits); got != want {
			t.Fatalf("trial %d: top-k 1 sampled %d, argmax is %d", trial, got, want)
		}
	}
}

// randLogits draws n logits; with ties, from a handful of values so equal logits are common.
func randLogits(rng *rand.Rand, n int, ties bool) []float32 {
	l := make([]float32, n)
	for i := range l {
		if ties {
			l[i] = float32(rng.IntN(3))
		} else {
			l[i] = float32(rng.NormFloat64() * 2)
		}
	}
	return l
}

// naiveSample is an independent, slow rendering of the sampling rules (sample.go's header).
func naiveSample(logits []float32, p SamplingParams, pos int) (int32, map[int32]bool) {
	type cand struct {
		id int32
		w  float64
		l  float32
	}
	zmax := math.Inf(-1)
	for _, l := range logits {
		zmax = math.Max(zmax, float64(l)/float64(p.Temperature))
	}
	var cs []cand
	for i, l := range logits {
		cs = append(cs, cand{int32(i), math.Exp(float64(l)/float64(p.Temperature) - zmax), l})
	}
	slices.SortFunc(cs, func(a, b cand) int {
		if c := cmp.Compare(b.l, a.l); c != 0 {
			return c
		}
		return cmp.Compare(a.id, b.id)
	})
	if p.TopK > 0 && p.TopK < len(cs) {
		cs = cs[:p.TopK]
	}
	if p.TopP > 0 && p.TopP < 1 {
		total := 0.0
		for _, c := range cs {
			total += c.w
		}
		run := 0.0
		for i, c := range cs {
			run += c.w
			if run >= float64(p.TopP)*total {
				cs = cs[:i+1]
				break
			}
		}
	}
	set := map[int32]bool{}
	for _, c := range cs {
		set[c.id] = true
	}
	slices.SortFunc(cs, func(a, b cand) int { return cmp.Compare(a.id, b.id) })
	total := 0.0
	for _, c := range cs {
		total += c.w
	}
	target, run := Uniform(p.Seed, pos)*total, 0.0
	for _, c := range cs {
		run += c.w
		if run > target {
			return c.id, set
		}
	}
	return cs[len(cs)-1].id, set
}

// TestSampleMatchesRules checks every combination of top-k and top-p on small vocabularies, with
// and without ties: the token is inside the kept set and is exactly the naive rules' pick.
func TestSampleMatchesRules(t *testing.T) {
	rng := rand.New(rand.NewPCG(8, 8))
	var s SampleScratch
	for V := 2; V <= 7; V++ {
		for _, ties := range []bool{false, true} {
			for _, topP := range []float32{0, 0.2, 0.5, 0.9, 0.999, 1} {
				for topK := 0; topK <= V; topK++ {
					name := fmt.Sprintf("V=%d/ties=%v/topk=%d/topp=%v", V, ties, topK, topP)
					for trial := range 30 {
						logits := randLogits(rng, V, ties)
						p := SamplingParams{Temperature: 0.3 + 1.5*rng.Float32(), TopK: topK, TopP: topP, Seed: rng.Uint64()}
						pos := rng.IntN(1024)
						got := SampleToken(logits, p, pos, &s)
						want, set := naiveSample(logits, p, pos)
						if !set[got] {
							t.Fatalf("%s trial %d: sampled %d outside the kept set %v (logits %v)", name, trial, got, set, logits)
						}
						if topK == 1 {
							want = gpt2ref.Argmax(logits)
						}
						if got != want {
							t.Fatalf("%s trial %d: sampled %d, the rules pick %d (logits %v)", name, trial, got, want, logits)
						}
					}
				}
			}
		}
	}
}

// TestSampleFrequencies draws many tokens (deterministic seeds) and checks the frequencies
// against the renormalized softmax with a chi-square test at the 0.1% level.
func TestSampleFrequencies(t *testing.T) {
	logits := []float32{1.0, 0.2, -0.5, 2.0, 0.0, 1.5}
	cases := []struct {
		name string
		p    SamplingParams
		crit float64 // chi-square critical value at p = 0.001 for the kept tokens - 1 degrees of freedom
	}{
		{"temperature 1", SamplingParams{Temperature: 1}, 20.52},        // 5 df
		{"temperature 0.7", SamplingParams{Temperature: 0.7}, 20.52},    // 5 df
		{"top-k 3", SamplingParams{Temperature: 1, TopK: 3}, 13.82},     // 2 df
		{"top-p 0.8", SamplingParams{Temperature: 1, TopP: 0.8}, 13.82}, // keeps {3,5,0}: 2 df
	}
	const draws = 30000
	var s SampleScratch
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, set := naiveSample(logits, tc.p, 0)
			probs := make([]float64, len(logits))
			total := 0.0
			for id := range set {
				probs[id] = math.Exp(float64(logits[id]) / float64(tc.p.Temperature))
				total += probs[id]
			}
			counts := make([]int, len(logits))
			for i := range draws {
				p := tc.p
				p.Seed = uint64(i / 64)
				counts[SampleToken(logits, p, i%64, &s)]++
			}
			chi := 0.0
			for id, c := range counts {
				if !set[int32(id)] {
					if c != 0 {
						t.Fatalf("token %d outside the kept set drawn %d times", id, c)
					}
					continue
				}
				e := draws * probs[id] / total
				chi += (float64(c) - e) * (float64(c) - e) / e
			}
			if chi > tc.crit {
				t.Errorf("chi-square %.2f > %.2f (counts %v)", chi, tc.crit, counts)
			}
			t.Logf("chi-square %.2f (critical %.2f), counts %v", chi, tc.crit, counts)
		})
	}
}

// TestSampleLargeVocab checks the top-p candidate filter on a GPT-2-sized vocabulary against the
// naive rules, for a flat and a peaked distribution.
func TestSampleLargeVocab(t *testing.T) {
	rng := rand.New(rand.NewPCG(6, 6))
	var s SampleScratch
	for _, spread := range []float64{0.01, 1, 8} {
		logits := make([]float32, 50257)
		for i := range logits {
			logits[i] = float32(rng.NormFloat64() * spread)
		}
		for _, p := range []SamplingParams{
			{Temperature: 1, TopP: 0.9, Seed: 1},
			{Temperature: 0.8, TopP: 0.5, Seed: 2},
			{Temperature: 1.2, TopK: 40, TopP: 0.95, Seed: 3},
			{Temperature: 1, Seed: 4},
		} {
			for pos := range 2 {
				got := SampleToken(logits, p, pos, &s)
				want, _ := naiveSample(logits, p, pos)
				if got != want {
					t.Errorf("spread %v %+v pos %d: sampled %d, the rules pick %d", spread, p, pos, got, want)
				}
			}
		}
	}
}

// TestTopPOf: a top-p setting keeps its meaning in float32: 0 is off, and a positive one too
// small for a float32 stays on (its smallest value), not 0.
func TestTopPOf(t *testing.T) {
	for _, c := range []struct {
		in   float64
		want float32
	}{{0, 0}, {0.9, 0.9}, {1, 1}, {1e-50, math.SmallestNonzeroFloat32}} {
		if got := TopPOf(c.in); got != c.want {
			t.Errorf("TopPOf(%g) = %g, want %g", c.in, got, c.want)
		}
	}
}
