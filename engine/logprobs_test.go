package engine

import (
	"math"
	"math/rand/v2"
	"slices"
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

// TestVectorLogprobs: the backends' fill (a kernel set's float32 exponential) is within 1e-6 of
// FillLogprobs, with the same top ids, for both kernel sets, finite and non-finite rows alike.
func TestVectorLogprobs(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for _, k := range []kernels{goKernels(), pickKernels()} {
		var s SampleScratch
		for _, V := range []int{1, 7, 1000, 50257} {
			logits := make([]float32, V)
			for i := range logits {
				logits[i] = float32(r.NormFloat64()*8 - 40)
			}
			if V > 7 {
				logits[3], logits[5] = float32(math.NaN()), float32(math.Inf(1))
				logits[6] = logits[0] - 200 // past the kernels' clamp at 87
			}
			if V == 7 { // non-finite logits beside one far from 0: m - 1000 == m in float32
				logits[0], logits[1], logits[2] = 1e12, float32(math.NaN()), float32(math.Inf(-1))
			}
			var want, got TokenLogprobs
			FillLogprobs(&want, logits, int32(V-1), 20)
			s.logprobs(&k, &got, logits, int32(V-1), 20)
			if err := lpClose(got, want, 1e-6); err != nil || !slices.Equal(lpIDs(got.Top), lpIDs(want.Top)) {
				t.Errorf("%s kernels, V %d: %v; top %v, want %v", k.name, V, err, lpIDs(got.Top), lpIDs(want.Top))
			}
		}
	}
}

func lpIDs(l []Logprob) []int32 {
	ids := make([]int32, len(l))
	for i, e := range l {
		ids[i] = e.Token
	}
	return ids
}
