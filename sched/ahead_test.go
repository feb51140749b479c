package sched

import (
	"slices"
	"testing"

	"rosetop/engine"
)

// aheadBackend is the fake backend as an engine.AheadStepper: after each StepAhead it predicts
// the next batch as gpu.Runner does (the same sequences one position further, fed the tokens just
// sampled, the same blocks; no prediction when a next position starts a new block) and counts
// whether the next call asked for exactly that.
type aheadBackend struct {
	*fakeBackend
	pred         []engine.SeqStep // nil: nothing predicted
	predTok      []int32
	ahead        int // StepAhead calls
	hits, misses int // next calls that were, or were not, the prediction
}

func (a *aheadBackend) Step(b *engine.Batch, next []int32) error {
	if a.pred != nil {
		if a.predicted(b) {
			a.hits++
		} else {
			a.misses++
		}
		a.pred = nil
	}
	return a.fakeBackend.Step(b, next)
}

func (a *aheadBackend) StepAhead(b *engine.Batch, next []int32) error {
	a.ahead++
	if err := a.Step(b, next); err != nil {
		return err
	}
	for _, sq := range b.Seqs {
		if p := sq.Start + len(sq.Tokens); len(sq.Tokens) != 1 || p/a.bs != (p-1)/a.bs {
			return nil
		}
	}
	a.pred = a.pred[:0]
	for _, sq := range b.Seqs {
		a.pred = append(a.pred, engine.SeqStep{ID: sq.ID, Start: sq.Start + 1, Blocks: slices.Clone(sq.Blocks), Sample: sq.Sample})
	}
	a.predTok = append(a.predTok[:0], next[:len(b.Seqs)]...)
	return nil
}

func (a *aheadBackend) predicted(b *engine.Batch) bool {
	if len(b.Seqs) != len(a.pred) {
		return false
	}
	for i, sq := range b.Seqs {
		p := a.pred[i]
		if sq.ID != p.ID || sq.Start != p.Start || len(sq.Tokens) != 1 || sq.Tokens[0] != a.predTok[i] ||
			!slices.Equal(sq.Blocks, p.Blocks) || sq.Sample != p.Sample {
			return false
		}
	}
	return true
}

// TestDecodesAgain: the scheduler asks for a step ahead only when the next step decodes exactly
// the same sequences (a full batch, nobody finishing by length, no prefill), so with no EOS every
// prediction holds; an EOS makes one wrong, and the outputs stay the reference's either way.
func TestDecodesAgain(t *testing.T) {
	cases := []struct {
		name       string
		maxNew     []int
		eos        bool
		wantAhead  int // StepAhead calls; -1: some
		wantMisses int
	}{
		// 4 requests in a batch of 4, 20 tokens each: one prefill, 19 decode steps, all but the
		// last (which finishes them) ahead. (Block size 4: where a next position starts a new
		// block, the backend predicts nothing.)
		{"full batch, same length", []int{20, 20, 20, 20}, false, 18, 0},
		// 10 requests queueing for a batch of 4, finishing at different steps.
		{"full batch, requests waiting", []int{5, 9, 12, 7, 30, 3, 11, 8, 17, 6}, false, -1, 0},
		// A batch that is not full: a new request could be admitted at any step, so none ahead.
		{"batch not full", []int{20, 20, 20}, false, 0, 0},
		{"EOS", []int{20, 20, 20, 20}, true, -1, 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			o := pagedOptions(256, Config{MaxBatch: 4, PrefillMaxBatch: 4})
			if c.eos {
				o.EOS = 7
			}
			h := newHarness(t, o)
			if c.eos { // the first request's sequence ends in EOS at 9 tokens
				h.be.model = func(seq []int32) int32 {
					if seq[0] == 1 && len(seq) == 9 {
						return 7
					}
					return nextToken(seq)
				}
			}
			a := &aheadBackend{fakeBackend: h.be}
			h.s.backend = a
			for i, n := range c.maxNew {
				h.submit(Request{Tokens: prompt(int32(i+1), 3), MaxNewTokens: n, StopOnEOS: c.eos})
			}
			h.drain(1000)
			h.checkOutputs()
			if c.wantAhead >= 0 && a.ahead != c.wantAhead || c.wantAhead < 0 && a.ahead == 0 {
				t.Errorf("%d steps ahead, want %d (-1: some)", a.ahead, c.wantAhead)
			}
			if a.misses != c.wantMisses {
				t.Errorf("%d predictions missed (%d held), want %d missed", a.misses, a.hits, c.wantMisses)
			}
		})
	}
}
