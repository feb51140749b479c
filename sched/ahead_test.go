package sched

import (
	"fmt"
	"slices"
	"testing"

	"rosetop/engine"
)

// aheadBackend is the fake backend as a speculator: it holds the scheduler to each Repeats hint
// (the next Repeats calls decode the same sequences, one position further each time, fed the
// tokens just sampled, with the same sampling and the same blocks where their positions are) and
// counts the calls that kept it and those that did not. Every batch with a hint must hold the
// blocks of room positions past each sequence's (at most the hinted steps): the pool is never
// short in these tests.
type aheadBackend struct {
	*fakeBackend
	room         int              // MaxAhead
	pred         []engine.SeqStep // the promised next batch, its Tokens unused
	predTok      []int32          // the tokens it is fed: the last call's ids
	promised     int              // calls still promised
	ahead        int              // calls with a hint
	hits, misses int              // calls that were, or were not, the promised batch
}

func (a *aheadBackend) MaxAhead() int { return a.room }

func (a *aheadBackend) Step(b *engine.Batch, next []int32) error {
	if b.Repeats < 0 {
		a.errorf("a hint of %d steps", b.Repeats)
	}
	if b.Repeats > 0 {
		a.ahead++
		for _, sq := range b.Seqs {
			if want := (sq.Start+min(a.room, b.Repeats))/a.bs + 1; len(sq.Blocks) < want {
				a.errorf("a hint of %d steps: sequence %d at position %d holds %d blocks, want %d (room %d)",
					b.Repeats, sq.ID, sq.Start, len(sq.Blocks), want, a.room)
			}
		}
	}
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
	if b.Repeats > 0 {
		a.promised = b.Repeats
	}
	return nil
}

func (a *aheadBackend) kept(b *engine.Batch) bool {
	if len(b.Seqs) != len(a.pred) {
		return false
	}
	for i, sq := range b.Seqs {
		p := a.pred[i]
		used := sq.Start/a.bs + 1                  // the blocks of the positions so far
		n := min(used, len(p.Blocks))              // those the promise named
		newBlock := n < used && sq.Start%a.bs == 0 // or one more, for the position that starts it
		if sq.ID != p.ID || sq.Start != p.Start || len(sq.Tokens) != 1 || sq.Tokens[0] != a.predTok[i] ||
			len(sq.Blocks) < used || !slices.Equal(sq.Blocks[:n], p.Blocks[:n]) || n < used && !newBlock ||
			sq.Sample != p.Sample {
			return false
		}
	}
	return true
}

// TestRepeatsHint: the scheduler hints at steps ahead only while the next steps decode exactly
// the same sequences (a full batch, no prefill, as many steps as the sequence closest to its
// length limit has left), so with no EOS every promise holds; an EOS breaks one, and the outputs
// stay the reference's either way.
func TestRepeatsHint(t *testing.T) {
	cases := []struct {
		name       string
		maxNew     []int
		eos        bool
		wantAhead  int // calls with a hint; -1: some
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
	for _, room := range []int{0, 2} {
		for _, c := range cases {
			t.Run(fmt.Sprintf("%s, room %d", c.name, room), func(t *testing.T) {
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
				a := &aheadBackend{fakeBackend: h.be, room: room}
				h.s.backend, h.s.maxAhead = a, room
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
}
