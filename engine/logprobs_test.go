package engine

import (
	"math"
	"math/rand/v2"
	"sort"
	"testing"
)

// naiveLogprobs is FillLogprobs by the definition: every token's log-softmax, sorted.
func naiveLogprobs(logits []float32) []Logprob {
	var sum float64
	for _, x := range logits {
		sum += math.Exp(float64(x))
	}
	all := make([]Logprob, len(logits))
	for i, x := range logits {
		all[i] = Logprob{Token: int32(i), Logprob: float32(float64(x) - math.Log(sum))}
	}
	sort.SliceStable(all, func(a, b int) bool { return all[a].Logprob > all[b].Logprob })
	return all
}

func TestFillLogprobsMatchesDefinition(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, V := range []int{1, 2, 7, 50, 1000} {
		logits := make([]float32, V)
		for i := range logits {
			logits[i] = float32(r.NormFloat64() * 3)
		}
		logits[V/2] = logits[0] // a tie: the lower id first
		want := naiveLogprobs(logits)
		for _, top := range []int{0, 1, 5, 20, 25} {
			var got TokenLogprobs
			sampled := int32(V - 1)
			FillLogprobs(&got, logits, sampled, top)
			n := min(top, MaxTopLogprobs, V)
			if len(got.Top) != n {
				t.Fatalf("V %d top %d: %d entries, want %d", V, top, len(got.Top), n)
			}
			for i := range got.Top {
				if got.Top[i].Token != want[i].Token || math.Abs(float64(got.Top[i].Logprob-want[i].Logprob)) > 1e-5 {
					t.Fatalf("V %d top %d: entry %d is %+v, want %+v", V, top, i, got.Top[i], want[i])
				}
			}
			var ws float64
			for _, x := range logits {
				ws += math.Exp(float64(x))
			}
			wantS := float64(logits[sampled]) - math.Log(ws)
			if got.Sampled.Token != sampled || math.Abs(float64(got.Sampled.Logprob)-wantS) > 1e-5 {
				t.Fatalf("V %d: sampled %+v, want token %d logprob %g", V, got.Sampled, sampled, wantS)
			}
		}
	}
}

func TestFillLogprobsNonFinite(t *testing.T) {
	nan := float32(math.NaN())
	logits := []float32{nan, 2, float32(math.Inf(-1)), 2, float32(math.Inf(1))}
	var got TokenLogprobs
	FillLogprobs(&got, logits, 0, 3)
	if !math.IsInf(float64(got.Sampled.Logprob), -1) {
		t.Errorf("a NaN logit's logprob is %g, want -Inf", got.Sampled.Logprob)
	}
	half := float32(math.Log(0.5))
	if got.Top[0] != (Logprob{1, half}) || got.Top[1] != (Logprob{3, half}) || !math.IsInf(float64(got.Top[2].Logprob), -1) {
		t.Errorf("top %+v, want ids 1 and 3 at log 0.5 then a -Inf entry", got.Top)
	}
	FillLogprobs(&got, []float32{nan, nan}, 1, 2)
	for _, e := range append(got.Top, got.Sampled) {
		if !math.IsInf(float64(e.Logprob), -1) {
			t.Errorf("all-NaN row: %+v, want -Inf", e)
		}
	}
}
