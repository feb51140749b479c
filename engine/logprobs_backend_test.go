package engine

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// The backends' logprobs (SeqStep.Logprobs, Batch.Logprobs) on the CPU; cuda_test.go compares
// the CUDA backend's with these.

// lpSentinel marks an entry a backend must leave as it is (its sequence did not ask).
var lpSentinel = TokenLogprobs{Sampled: Logprob{Token: 12345, Logprob: 7}, Top: []Logprob{{Token: 1, Logprob: 2}}}

// lpSeqs are the logprobs settings of the sequences of the CPU tests: a greedy sequence with 5
// alternatives, a sampled one with the most, a sampled one that does not ask.
var lpSeqs = []struct {
	ask bool
	top int
}{{true, 5}, {true, MaxTopLogprobs}, {false, 0}}

// TestCPUStepLogprobs: for each sequence that asks, Step's entry is the backend's fill (its
// kernels' exponential) over the row of logits its Logits method returns for the same batch (on a
// twin backend), bit for bit, with the token Step sampled; the entry of the sequence that does not ask is untouched.
// A prefill step and decode steps, greedy and sampled, in one pass and split into passes of one
// sequence (each pass fills its own sequences' entries).
func TestCPUStepLogprobs(t *testing.T) {
	m := tinyModel(t)
	idx := []int{2, 0, 1} // greedy, sampled, sampled top-k/top-p (batchSampling[idx[j]])
	for _, passBytes := range []int{0, 1} {
		t.Run(fmt.Sprintf("pass bound %d", passBytes), func(t *testing.T) {
			c := newTestBackend(t, m, true, 3, 64, 0)
			if passBytes > 0 {
				c.stepBytes = passBytes
			}
			ref := newTestBackend(t, m, true, 3, 64, 0)
			tables := blockTables(c.layout, len(idx), 64, 5)
			var b Batch
			for j, i := range idx {
				b.Seqs = append(b.Seqs, SeqStep{ID: SeqID(i), Tokens: batchPrompts[i], Blocks: tables[j], Sample: batchSampling[i],
					Logprobs: lpSeqs[j].ask, TopLogprobs: lpSeqs[j].top})
			}
			b.Logprobs = make([]TokenLogprobs, len(idx))
			b.Logprobs[2] = lpSentinel
			next := make([]int32, len(idx))
			for step := range 6 {
				rows, err := ref.Logits(&b, false)
				if err != nil {
					t.Fatal(err)
				}
				if err := c.Step(&b, next); err != nil {
					t.Fatal(err)
				}
				for j := range b.Seqs {
					s := &b.Seqs[j]
					got := b.Logprobs[j]
					if !s.Logprobs {
						if !lpEqual(got, lpSentinel) {
							t.Fatalf("step %d seq %d does not ask, its entry became %+v", step, j, got)
						}
						continue
					}
					var want TokenLogprobs
					new(SampleScratch).logprobs(&c.k, &want, rows[j], next[j], s.TopLogprobs)
					if got.Sampled.Token != next[j] || !lpEqual(got, want) {
						t.Fatalf("step %d seq %d (%+v): entry %+v, want %+v (sampled %d)", step, j, s.Sample, got, want, next[j])
					}
					if k := slices.IndexFunc(got.Top, func(l Logprob) bool { return l.Token == next[j] }); k >= 0 && got.Top[k] != got.Sampled {
						t.Fatalf("step %d seq %d: sampled %+v, but Top has %+v", step, j, got.Sampled, got.Top[k])
					}
				}
				for j := range b.Seqs {
					s := &b.Seqs[j]
					s.Start += len(s.Tokens)
					s.Tokens = []int32{next[j]}
				}
			}
		})
	}
}

// TestCPUStepLogprobsReference: Step's logprobs of a small random model, every position of a
// prefill and then of decode steps, greedy and sampled, against FillLogprobs over the float64
// reference's logits (internal/gpt2ref) of the whole sequence so far: within 1e-4, and the same
// top ids where neighbours differ by more than that.
func TestCPUStepLogprobsReference(t *testing.T) {
	cfg := smallConfig()
	m := smallModel(t, cfg, 21)
	c := newTestBackend(t, m, true, 2, cfg.NPositions, 0)
	tables := blockTables(c.layout, 2, cfg.NPositions, 9)
	prompts := [][]int32{{5, 17, 42, 3, 88}, {60}}
	b := Batch{Logprobs: make([]TokenLogprobs, 2)}
	for j, p := range prompts {
		b.Seqs = append(b.Seqs, SeqStep{ID: SeqID(j + 1), Tokens: p, Blocks: tables[j], Logprobs: true, TopLogprobs: MaxTopLogprobs,
			Sample: SamplingParams{Temperature: float32(j), Seed: 3}}) // greedy, then sampled at temperature 1
	}
	seqs := [][]int32{slices.Clone(prompts[0]), slices.Clone(prompts[1])}
	next := make([]int32, 2)
	const tol = 1e-4
	for step := range 10 {
		if err := c.Step(&b, next); err != nil {
			t.Fatal(err)
		}
		for j := range b.Seqs {
			ref := refLogits(cfg, m.Weights, seqs[j])
			row := make([]float32, cfg.VocabSize)
			for v, x := range ref[len(ref)-1] {
				row[v] = float32(x)
			}
			var want TokenLogprobs
			FillLogprobs(&want, row, next[j], MaxTopLogprobs)
			if err := lpClose(b.Logprobs[j], want, tol); err != nil {
				t.Fatalf("step %d seq %d: %v", step, j, err)
			}
			seqs[j] = append(seqs[j], next[j])
			s := &b.Seqs[j]
			s.Start += len(s.Tokens)
			s.Tokens = []int32{next[j]}
		}
	}
}

// TestStepLogprobsBadBatch: a batch whose Logprobs has too few entries for a sequence that
// asks, or that asks for TopLogprobs outside 0..MaxTopLogprobs, fails with ErrBadBatch before
// any KV entry is written; without a sequence that asks, Logprobs may be nil.
func TestStepLogprobsBadBatch(t *testing.T) {
	m := tinyModel(t)
	for _, c := range []struct {
		name    string
		entries int
		top     int
		ask     bool
		bad     bool
	}{
		{"no entries", 0, 0, true, true},
		{"one entry of two", 1, 3, true, true},
		{"top -1", 2, -1, true, true},
		{"top too many", 2, MaxTopLogprobs + 1, true, true},
		{"none asks, no entries", 0, MaxTopLogprobs + 1, false, false},
		{"top 0", 2, 0, true, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			be := newTestBackend(t, m, true, 2, 64, 0)
			tables := blockTables(be.layout, 2, 64, 3)
			b := Batch{Logprobs: make([]TokenLogprobs, c.entries)}
			for j := range 2 {
				b.Seqs = append(b.Seqs, SeqStep{ID: SeqID(j + 1), Tokens: batchPrompts[j], Blocks: tables[j]})
			}
			b.Seqs[1].Logprobs, b.Seqs[1].TopLogprobs = c.ask, c.top
			err := be.Step(&b, make([]int32, 2))
			if c.bad != errors.Is(err, ErrBadBatch) || !c.bad && err != nil {
				t.Fatalf("Step: %v, want ErrBadBatch: %v", err, c.bad)
			}
			if c.bad && slices.ContainsFunc(be.kv, func(v float32) bool { return v != 0 }) {
				t.Fatal("KV pool written by a failed step")
			}
		})
	}
}

// TestFillBatchLogprobs: the CUDA backend's parallel fill gives each row that asks exactly the
// serial fill's entry (the same kernels) and leaves the others as they are.
func TestFillBatchLogprobs(t *testing.T) {
	r := rand.New(rand.NewPCG(4, 5))
	const B, V = 37, 300
	logits := make([]float32, B*V)
	for i := range logits {
		logits[i] = float32(r.NormFloat64() * 2)
	}
	for _, asking := range []int{0, 1, 2, 5, B} {
		b := Batch{Logprobs: make([]TokenLogprobs, B)}
		next := make([]int32, B)
		for i := range B {
			b.Seqs = append(b.Seqs, SeqStep{ID: SeqID(i)})
			next[i] = int32(r.IntN(V))
			b.Logprobs[i] = TokenLogprobs{Sampled: lpSentinel.Sampled, Top: slices.Clone(lpSentinel.Top)} // Tops must not alias
		}
		for _, i := range r.Perm(B)[:asking] {
			b.Seqs[i].Logprobs, b.Seqs[i].TopLogprobs = true, r.IntN(MaxTopLogprobs+1)
		}
		k := pickKernels()
		fillBatchLogprobs(&b, logits, next, V, &k, make([]SampleScratch, 4))
		for i := range B {
			want := lpSentinel
			if s := &b.Seqs[i]; s.Logprobs {
				want = TokenLogprobs{}
				new(SampleScratch).logprobs(&k, &want, logits[i*V:(i+1)*V], next[i], s.TopLogprobs)
			}
			if !lpEqual(b.Logprobs[i], want) {
				t.Fatalf("%d rows ask: row %d is %+v, want %+v", asking, i, b.Logprobs[i], want)
			}
		}
	}
}

// lpEqual reports whether two entries are the same, bit for bit, their ranks included.
func lpEqual(a, b TokenLogprobs) bool {
	same := func(x, y Logprob) bool {
		return x.Token == y.Token && math.Float32bits(x.Logprob) == math.Float32bits(y.Logprob)
	}
	return same(a.Sampled, b.Sampled) && slices.EqualFunc(a.Top, b.Top, same) && a.Rank == b.Rank
}

// lpClose says how got differs from want beyond tol: the sampled token and the number of
// alternatives must be equal, every logprob within tol, and the alternatives' ids equal where
// the gap to a neighbour in want exceeds tol (within a closer run of ties either order is fine:
// then each id of got must be within tol of want's logprob at that rank).
func lpClose(got, want TokenLogprobs, tol float64) error {
	near := func(a, b float32) bool {
		if math.IsInf(float64(a), -1) || math.IsInf(float64(b), -1) {
			return math.IsInf(float64(a), -1) && math.IsInf(float64(b), -1)
		}
		return math.Abs(float64(a)-float64(b)) <= tol
	}
	if got.Sampled.Token != want.Sampled.Token || !near(got.Sampled.Logprob, want.Sampled.Logprob) {
		return fmt.Errorf("sampled %+v, want %+v (tolerance %g)", got.Sampled, want.Sampled, tol)
	}
	if len(got.Top) != len(want.Top) {
		return fmt.Errorf("%d alternatives, want %d", len(got.Top), len(want.Top))
	}
	for k := range want.Top {
		if !near(got.Top[k].Logprob, want.Top[k].Logprob) {
			return fmt.Errorf("alternative %d is %+v, want %+v (tolerance %g)", k, got.Top[k], want.Top[k], tol)
		}
		// A rank whose neighbours in want are farther than tol holds a definite id (the
		// last rank's lower neighbour is unknown: not checked).
		apart := (k == 0 || float64(want.Top[k-1].Logprob-want.Top[k].Logprob) > tol) &&
			k+1 < len(want.Top) && float64(want.Top[k].Logprob-want.Top[k+1].Logprob) > tol
		if apart && got.Top[k].Token != want.Top[k].Token {
			return fmt.Errorf("alternative %d is token %d, want %d (%+v, its neighbours more than %g apart)", k, got.Top[k].Token, want.Top[k].Token, want.Top[k], tol)
		}
	}
	return nil
}
