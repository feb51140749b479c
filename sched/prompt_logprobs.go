package sched

import (
	"fmt"

	"rosetop/engine"
)

// Prompt logprobs (Request.PromptLogprobs): the buffers lent to the backend for them, the check of
// what it filled, and the copies the first token event carries.

// keepPromptLogprobs copies, for each request of the prefill batch owed its prompt logprobs, the
// entries of its sequence (b's sequence off+i for l.pre[i]) for its first token event, then
// trims the buffers lent for them.
func (l *loopState) keepPromptLogprobs(b *engine.Batch, off int) {
	for i, q := range l.pre {
		if q.promptLogprobs {
			q.keepPromptLogprobs(promptLogprobsOf(b, off+i))
		}
	}
	if b.PromptLogprobs != nil {
		l.trimPromptBufs()
	}
}

// promptBufsKeep is how many entries the buffers lent for prompt logprobs keep between calls
// (about 200 bytes each with 20 alternatives): enough for a burst of lm-eval-sized prompts
// without allocating, while one long burst does not keep its memory for the process's life.
const promptBufsKeep = 1 << 16

// trimPromptBufs drops the buffers past the first ones whose entries add up to promptBufsKeep.
func (l *loopState) trimPromptBufs() {
	kept := 0
	for k, buf := range l.promptBufs {
		if kept += cap(buf); kept > promptBufsKeep {
			clear(l.promptBufs[k:])
			l.promptBufs = l.promptBufs[:k]
			return
		}
	}
}

// sizePromptLogprobs sets b.PromptLogprobs to l.promptLPs, an entry per sequence, when one of
// them asks for prompt logprobs (nil otherwise, the steady state: nothing to do). The k-th asking
// sequence's entry is promptBufs[k], one element per token after its first, each marked not
// filled (token -1); the others' are nil. A buffer keeps the longest prompt it has held, within
// promptBufsKeep entries in all (trimPromptBufs).
func (l *loopState) sizePromptLogprobs(b *engine.Batch) {
	b.PromptLogprobs = nil
	if !asksPromptLogprobs(b) {
		return
	}
	n := len(b.Seqs)
	if cap(l.promptLPs) < n {
		l.promptLPs = make([][]engine.TokenLogprobs, n)
	}
	lps, k := l.promptLPs[:n], 0
	for i := range b.Seqs {
		lps[i] = nil
		if b.Seqs[i].PromptLogprobs {
			lps[i] = l.promptBuf(k, len(b.Seqs[i].Tokens)-1)
			k++
		}
	}
	b.PromptLogprobs = lps
}

// asksPromptLogprobs reports whether a sequence of b asks for prompt logprobs.
func asksPromptLogprobs(b *engine.Batch) bool {
	for i := range b.Seqs {
		if b.Seqs[i].PromptLogprobs {
			return true
		}
	}
	return false
}

// promptBuf returns promptBufs[k] cut to n entries, each marked not filled (token -1), adding or
// growing it as needed: old entries keep their Top memory, new ones have none, so no two entries
// share any.
func (l *loopState) promptBuf(k, n int) []engine.TokenLogprobs {
	if k == len(l.promptBufs) {
		l.promptBufs = append(l.promptBufs, nil)
	}
	buf := l.promptBufs[k]
	if cap(buf) < n {
		buf = append(buf[:cap(buf)], make([]engine.TokenLogprobs, n-cap(buf))...)
		l.promptBufs[k] = buf
	}
	buf = buf[:n]
	for j := range buf {
		buf[j].Sampled = engine.Logprob{Token: -1}
	}
	return buf
}

// checkPromptLogprobs reports a backend that did not fill the prompt logprobs of a sequence that
// asked: its entries must be as many as its tokens after the first, each naming its token.
func checkPromptLogprobs(b *engine.Batch) error {
	for i := range b.Seqs {
		sq := &b.Seqs[i]
		if !sq.PromptLogprobs {
			continue
		}
		if i >= len(b.PromptLogprobs) || len(b.PromptLogprobs[i]) != len(sq.Tokens)-1 {
			return fmt.Errorf("the backend did not return the %d prompt logprobs of sequence %d", len(sq.Tokens)-1, i)
		}
		for j, e := range b.PromptLogprobs[i] {
			if want := sq.Tokens[j+1]; e.Sampled.Token != want {
				return fmt.Errorf("the backend reported prompt logprobs of token %d for token %d of sequence %d, which is %d", e.Sampled.Token, j+1, i, want)
			}
		}
	}
	return nil
}

// promptLogprobsOf is b's sequence i's prompt logprobs when it asked, else nil.
func promptLogprobsOf(b *engine.Batch, i int) []engine.TokenLogprobs {
	if b.PromptLogprobs == nil || !b.Seqs[i].PromptLogprobs {
		return nil
	}
	return b.PromptLogprobs[i]
}
