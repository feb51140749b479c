package engine

import (
	"fmt"
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

// BenchmarkVectorLogprobs times the backends' fill of one GPT-2-wide row (top 0 and top 20),
// the sampled token a likely one and an unlikely one.
//
//	go test -run XXX -bench VectorLogprobs ./engine/
func BenchmarkVectorLogprobs(b *testing.B) {
	r := rand.New(rand.NewPCG(5, 6))
	logits := make([]float32, 50257)
	for i := range logits {
		logits[i] = float32(r.NormFloat64() * 3)
	}
	best := int32(slices.Index(logits, slices.Max(logits)))
	k := pickKernels()
	var s SampleScratch
	var out TokenLogprobs
	for _, top := range []int{0, MaxTopLogprobs} {
		for _, sampled := range []int32{best, 7} {
			b.Run(fmt.Sprintf("top=%d/sampled=%d", top, sampled), func(b *testing.B) {
				for b.Loop() {
					s.logprobs(&k, &out, logits, sampled, top)
				}
			})
		}
	}
}

// naiveRank is TokenLogprobs.Rank by its definition: the tokens whose logit, non-finite ones as
// -Inf, is at least sampled's (a sampled id outside the row as -Inf too).
func naiveRank(logits []float32, sampled int32) int {
	key := func(x float32) float64 {
		if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
			return math.Inf(-1)
		}
		return float64(x)
	}
	s := math.Inf(-1)
	if sampled >= 0 && int(sampled) < len(logits) {
		s = key(logits[sampled])
	}
	n := 0
	for _, x := range logits {
		if key(x) >= s {
			n++
		}
	}
	return n
}

// TestLogprobsRank: FillLogprobs and both kernel sets' vector fill give the sampled token's rank
// as its definition does: ties count ahead, a -Inf, NaN or +Inf sampled logit ranks last (every
// token at least -Inf), NaN and +Inf logits rank as -Inf, whatever top is.
func TestLogprobsRank(t *testing.T) {
	nan, inf, ninf := float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1))
	fixed := []float32{1, 3, 3, nan, inf, ninf, 2}
	want := map[int32]int{0: 4, 1: 2, 2: 2, 3: 7, 4: 7, 5: 7, 6: 3, -1: 7, 7: 7}
	r := rand.New(rand.NewPCG(7, 8))
	rows := [][]float32{fixed}
	for _, V := range []int{1, 5, 300, 50257} {
		row := make([]float32, V)
		for i := range row {
			row[i] = float32(r.IntN(40)) / 4 // many ties
		}
		for range V / 10 {
			row[r.IntN(V)] = []float32{nan, inf, ninf}[r.IntN(3)]
		}
		rows = append(rows, row)
	}
	fills := map[string]func(*TokenLogprobs, []float32, int32, int){"FillLogprobs": FillLogprobs}
	for _, k := range []kernels{goKernels(), pickKernels()} {
		fills[k.name] = func(out *TokenLogprobs, logits []float32, sampled int32, top int) {
			new(SampleScratch).logprobs(&k, out, logits, sampled, top)
		}
	}
	for name, fill := range fills {
		for ri, row := range rows {
			ids := []int32{-1, int32(len(row))}
			for range 20 {
				ids = append(ids, int32(r.IntN(len(row))))
			}
			if ri == 0 {
				ids = []int32{-1, 0, 1, 2, 3, 4, 5, 6, 7}
			}
			for _, id := range ids {
				for _, top := range []int{0, 3} {
					var got TokenLogprobs
					fill(&got, row, id, top)
					w := naiveRank(row, id)
					if ri == 0 && w != want[id] {
						t.Fatalf("naiveRank(%v, %d) = %d, want %d", row, id, w, want[id])
					}
					if got.Rank != w {
						t.Errorf("%s: row %d (V %d) sampled %d top %d: rank %d, want %d", name, ri, len(row), id, top, got.Rank, w)
					}
				}
			}
		}
	}
}

// lpRow is a row for TestVectorLogprobsExact: normal logits, or many ties, with non-finite
// values and zeros of both signs sprinkled in at rate p; all non-finite when p is 1.
func lpRow(r *rand.Rand, V int, p float64) []float32 {
	row := make([]float32, V)
	ties := r.IntN(2) == 0
	for i := range row {
		switch {
		case r.Float64() < p:
			row[i] = []float32{float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1))}[r.IntN(3)]
		case r.Float64() < p:
			row[i] = specialFloats[r.IntN(len(specialFloats))]
		case ties:
			row[i] = float32(r.IntN(12)) / 4
		default:
			row[i] = float32(r.NormFloat64() * 3)
		}
	}
	return row
}

// TestVectorLogprobsExact: SampleScratch.logprobs with a kernel set's row scan and top-k search
// gives bit for bit what it gives with them as Go loops (scanGo, aboveGo), over random rows
// (ties, NaN, ±Inf, ±0, extremes, all non-finite), every top 0..21 and sampled ids -2..V+1.
func TestVectorLogprobsExact(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	type row struct {
		logits []float32
		tops   []int
	}
	var rows []row
	for range 400 {
		V := 1 + r.IntN(80)
		if r.IntN(4) == 0 {
			V = 1 + r.IntN(3000)
		}
		rows = append(rows, row{lpRow(r, V, []float64{0, 0, 0.01, 0.2, 1}[r.IntN(5)]), []int{r.IntN(22), r.IntN(22)}})
	}
	for _, p := range []float64{0, 0, 0.0005, 0.05, 1} {
		rows = append(rows, row{lpRow(r, 50257, p), []int{0, 1, 2, 7, 20, 21}})
	}
	type fill func(out *TokenLogprobs, logits []float32, sampled int32, top int)
	fills := map[string][2]fill{}
	for _, k := range testKernels() {
		ref := k // the same fill with the row passes as Go loops: scanGo, aboveGo
		ref.scan, ref.above = scanGo, aboveGo
		var s, sRef SampleScratch
		fills[k.name] = [2]fill{
			func(out *TokenLogprobs, logits []float32, sampled int32, top int) {
				s.logprobs(&k, out, logits, sampled, top)
			},
			func(out *TokenLogprobs, logits []float32, sampled int32, top int) {
				sRef.logprobs(&ref, out, logits, sampled, top)
			},
		}
	}
	bits := func(l Logprob) [2]uint32 { return [2]uint32{uint32(l.Token), math.Float32bits(l.Logprob)} }
	for name, f := range fills {
		var got, want TokenLogprobs
		for ri, rw := range rows {
			V := len(rw.logits)
			ids := []int32{-2, -1, 0, int32(V - 1), int32(V), int32(V + 1), int32(r.IntN(V)), int32(r.IntN(V))}
			for _, id := range ids {
				for _, top := range rw.tops {
					f[0](&got, rw.logits, id, top)
					f[1](&want, rw.logits, id, top)
					same := got.Rank == want.Rank && bits(got.Sampled) == bits(want.Sampled) && len(got.Top) == len(want.Top)
					for i := 0; same && i < len(got.Top); i++ {
						same = bits(got.Top[i]) == bits(want.Top[i])
					}
					if !same {
						t.Fatalf("%s: row %d (V %d) sampled %d top %d: %+v, want %+v", name, ri, V, id, top, got, want)
					}
				}
			}
		}
	}
}
