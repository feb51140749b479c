package engine

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"rosetop/internal/gpt2ref"
)

// TestStepRejectsOverflowingStart: a start so large that start + tokens overflows int is a bad
// batch like any other position past n_positions, not a panic.
func TestStepRejectsOverflowingStart(t *testing.T) {
	cfg := smallConfig()
	c := newTestBackend(t, smallModel(t, cfg, 1), true, 2, 32, 1)
	for _, start := range []int{math.MaxInt, math.MaxInt - 1, math.MaxInt - 16} {
		s := SeqStep{Tokens: []int32{1, 2, 3, 4}, Start: start, Blocks: []int32{0, 1}}
		err := c.Step(&Batch{Seqs: []SeqStep{s}}, make([]int32, 1))
		if !errors.Is(err, ErrBadBatch) {
			t.Fatalf("start %d: Step = %v, want an error wrapping ErrBadBatch", start, err)
		}
	}
}

// TestSampleEdgesProperty draws from random rows holding NaN, ±Inf, huge and tied logits with
// extreme parameters: every token is in range and a NaN or +Inf row gives the argmax; a tiny
// temperature or top-p picks the argmax of a row with one largest logit; top-k at or past the
// vocabulary is top-k off; the same seed and position draw the same token.
func TestSampleEdgesProperty(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 5))
	specials := []float32{float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1)), math.MaxFloat32, -math.MaxFloat32, 0, 1e-38}
	temps := []float32{-1, 0, math.SmallestNonzeroFloat32, 1e-20, 0.5, 1, 100, float32(math.Inf(1)), float32(math.NaN())}
	topPs := []float32{0, math.SmallestNonzeroFloat32, 1e-6, 0.5, 0.999, 1, 2, -1, float32(math.NaN())}
	var scratch SampleScratch
	for it := range 20000 {
		V := 1 + rng.IntN(70)
		logits := make([]float32, V)
		for i := range logits {
			logits[i] = float32(rng.NormFloat64() * 3)
			if rng.IntN(10) == 0 {
				logits[i] = specials[rng.IntN(len(specials))]
			}
			if rng.IntN(8) == 0 && i > 0 {
				logits[i] = logits[rng.IntN(i)] // ties
			}
		}
		p := SamplingParams{Temperature: temps[rng.IntN(len(temps))], TopK: rng.IntN(V+3) - 1, TopP: topPs[rng.IntN(len(topPs))], Seed: rng.Uint64()}
		pos := rng.IntN(2048)
		tok := SampleToken(logits, p, pos, &scratch)
		if tok < 0 || int(tok) >= V {
			t.Fatalf("it %d: token %d of a %d-token vocabulary, params %+v, logits %v", it, tok, V, p, logits)
		}
		if again := SampleToken(logits, p, pos, nil); again != tok {
			t.Fatalf("it %d: the same draw gave %d then %d, params %+v", it, tok, again, p)
		}
		arg := gpt2ref.Argmax(logits)
		nonFinite := false
		for _, l := range logits {
			nonFinite = nonFinite || l != l || math.IsInf(float64(l), 1)
		}
		if nonFinite && tok != arg {
			t.Fatalf("it %d: a row with NaN or +Inf gave %d, want the argmax %d; params %+v, logits %v", it, tok, arg, p, logits)
		}
		if p.TopK >= V {
			q := p
			q.TopK = 0
			if off := SampleToken(logits, q, pos, nil); off != tok {
				t.Fatalf("it %d: top-k %d of %d gave %d, top-k off %d", it, p.TopK, V, tok, off)
			}
		}
		unique := 0
		for _, l := range logits {
			if l == logits[arg] {
				unique++
			}
		}
		if unique == 1 && !nonFinite && p.Temperature > 0 && p.Temperature <= 1e-20 && tok != arg {
			t.Fatalf("it %d: temperature %g gave %d, want the argmax %d; logits %v", it, p.Temperature, tok, arg, logits)
		}
		if unique == 1 && !nonFinite && p.Temperature > 0 && p.Temperature <= 100 && p.TopP > 0 && p.TopP <= 1e-6 && tok != arg {
			t.Fatalf("it %d: top-p %g gave %d, want the argmax %d; params %+v logits %v", it, p.TopP, tok, arg, p, logits)
		}
	}
}

// TestGreedyMatchesReferenceAtBatchEdges decodes greedily, batched, sequences of mixed prompt
// lengths (one token, the whole context less one, and between) up to n_positions, in batches of
// one and of the pool's maximum, in both layouts and split into passes: every token is the float64
// reference's argmax wherever the reference's best two logits are not within rounding of a tie.
func TestGreedyMatchesReferenceAtBatchEdges(t *testing.T) {
	cfg := smallConfig()
	m := smallModel(t, cfg, 9)
	T := cfg.NPositions
	rng := rand.New(rand.NewPCG(9, 9))
	prompts := [][]int32{randTokens(rng, 1, cfg.VocabSize), randTokens(rng, T-1, cfg.VocabSize),
		randTokens(rng, 17, cfg.VocabSize), randTokens(rng, 16, cfg.VocabSize)}
	for _, paged := range []bool{false, true} {
		for _, batch := range []int{1, len(prompts)} {
			for _, passBytes := range []int{0, 1} {
				name := fmt.Sprintf("paged=%v/batch=%d/passbytes=%d", paged, batch, passBytes)
				c := newTestBackend(t, m, paged, batch, T, 3)
				if passBytes > 0 {
					c.stepBytes = passBytes
				}
				for lo := 0; lo < len(prompts); lo += batch {
					group := prompts[lo:min(lo+batch, len(prompts))]
					tables := blockTables(c.layout, len(group), T, 4)
					seqs := make([][]int32, len(group))
					var b Batch
					for j, p := range group {
						seqs[j] = append([]int32(nil), p...)
						b.Seqs = append(b.Seqs, SeqStep{ID: SeqID(j), Tokens: p, Blocks: tables[j]})
					}
					next := make([]int32, len(group))
					for len(b.Seqs) > 0 {
						if err := c.Step(&b, next[:len(b.Seqs)]); err != nil {
							t.Fatalf("%s: %v", name, err)
						}
						kept := b.Seqs[:0]
						for j, s := range b.Seqs {
							seq := seqs[s.ID]
							ref := refLogits(cfg, m.Weights, seq)
							row := ref[len(seq)-1]
							best := gpt2ref.Argmax(row)
							second := math.Inf(-1)
							for i, v := range row {
								if int32(i) != best {
									second = max(second, v)
								}
							}
							if row[best]-second > 1e-4*math.Abs(row[best]) && next[j] != best {
								t.Fatalf("%s: sequence %d at position %d: greedy %d, reference argmax %d", name, s.ID, len(seq), next[j], best)
							}
							seqs[s.ID] = append(seq, next[j])
							s.Start += len(s.Tokens)
							s.Tokens = []int32{next[j]}
							if s.Start+1 < T {
								kept = append(kept, s)
							}
						}
						b.Seqs = kept
					}
				}
			}
		}
	}
}
