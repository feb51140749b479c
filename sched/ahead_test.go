package sched

import (
	"slices"
	"testing"

	"rosetop/engine"
)

// aheadBackend is the fake backend as an engine.AheadStepper: it holds the scheduler to each
// StepAhead's promise (the next steps calls decode the same sequences, one position further each
// time, fed the tokens just sampled, with the same sampling and block tables but for a block
// added where a position starts one) and counts the calls that kept it and those that did not.
type aheadBackend struct {
	*fakeBackend
	pred         []engine.SeqStep // the promised next batch, its Tokens unused
	predTok      []int32          // the tokens it is fed: the last call's ids
	promised     int              // calls still promised
	ahead        int              // StepAhead calls
	hits, misses int              // calls that were, or were not, the promised batch
}

func (a *aheadBackend) Step(b *engine.Batch, next []int32) error {
	if a.promised > 0 {
		if a.kept(b) {
			a.hits++
		} else {
			a.misses++
		}
		a.promised--
	}
	if err := a.fakeBackend.Step(b, next); err != nil {
		return err
	}
	a.pred = a.pred[:0]
	for _, sq := range b.Seqs {
		a.pred = append(a.pred, engine.SeqStep{ID: sq.ID, Start: sq.Start + len(sq.Tokens), Blocks: slices.Clone(sq.Blocks), Sample: sq.Sample})
	}
	a.predTok = append(a.predTok[:0], next[:len(b.Seqs)]...)
	return nil
}

func (a *aheadBackend) StepAhead(b *engine.Batch, next []int32, steps int) error {
	a.ahead++
	if steps < 1 {
		a.errorf("StepAhead of %d steps", steps)
	}
	err := a.Step(b, next)
	a.promised = steps
	return err
}

func (a *aheadBackend) kept(b *engine.Batch) bool {
	if len(b.Seqs) != len(a.pred) {
		return false
	}
	for i, sq := range b.Seqs {
		p := a.pred[i]
		blocks := sq.Blocks
		if len(blocks) == len(p.Blocks)+1 && sq.Start%a.bs == 0 {
			blocks = blocks[:len(p.Blocks)] // a new block for the position that starts it
		}
		if sq.ID != p.ID || sq.Start != p.Start || len(sq.Tokens) != 1 || sq.Tokens[0] != a.predTok[i] ||
			!slices.Equal(blocks, p.Blocks) || sq.Sample != p.Sample {
			return false
		}
	}
	return true
}

// TestDecodesAgain: the scheduler promises steps ahead only while the next steps decode exactly
// the same sequences (a full batch, no prefill, as many steps as the sequence closest to its
// length limit has left), so with no EOS every promise holds; an EOS breaks one, and the outputs
// stay the reference's either way.
func TestDecodesAgain(t *testing.T) {
	cases := []struct {
		name       string
		maxNew     []int
		eos        bool
		wantAhead  int // StepAhead calls; -1: some
		wantMisses int
	}{
		// 4 requests in a batch of 4, 20 tokens each: one prefill, 19 decode steps, all but the
		// last (which finishes them) ahead.
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
			if a.misses != c.wantMisses || a.hits == 0 && c.wantAhead != 0 {
				t.Errorf("%d promised calls broken (%d kept), want %d broken", a.misses, a.hits, c.wantMisses)
			}
		})
	}
}
