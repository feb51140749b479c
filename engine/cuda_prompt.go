//go:build cgo

package engine

import (
	"fmt"
)

// Prompt logprobs on the GPU. A batch where a sequence asks for prompt logprobs runs as one step
// whose TokenRows are every asking sequence's tokens but its last (gpu.Runner.StepTokenLogits):
// after the forward pass the runner hands those rows' logits over in chunks, which fill
// Batch.PromptLogprobs in parallel over the fill workers. The step's sampled tokens and logprobs
// come from each sequence's last row, as in any step.

// cudaPrompt is the CUDA backend's prompt-logprobs state, grown to the largest need and reused:
// after the first steps that ask, a step allocates nothing. Used by the backend's caller
// goroutine and, during StepTokenLogits, by the runner's worker (its callback, onRows).
type cudaPrompt struct {
	at     []promptAt // the entry each of the step's TokenRows fills, in order
	done   int        // entries of at filled so far in the step (the chunks come in order)
	pool   *workerPool
	fill   promptFillJob
	onRows func(rows []int32, logits []float32) error // fillRows, bound once
}

// promptAt names the entry a token row's logits fill: PromptLogprobs[seq][j].
type promptAt struct{ seq, j int32 }

// runPrompt is run of a batch where a sequence asks for prompt logprobs (b is valid for
// wantsLogprobs and wantsPromptLogprobs): it checks the whole batch first, so that a bad one
// fails naming its sequence, then runs it as one step that also fills b.PromptLogprobs.
func (c *cudaBackend) runPrompt(b *Batch, next []int32, logits []float32, lp bool) error {
	if err := c.checkBatch(b, next); err != nil {
		return err
	}
	if b.stopped() {
		return ErrStopped
	}
	c.prompt.start(c, b)
	err := c.runBatch(b, next, logits, lp, true)
	c.prompt.fill.b, c.prompt.fill.logits, c.prompt.fill.at = nil, nil, nil
	return err
}

// checkBatch validates b as the runner would its step (sizes, tokens, positions, blocks), with
// errors that name the bad sequence.
func (c *cudaBackend) checkBatch(b *Batch, next []int32) error {
	B := len(b.Seqs)
	if B < 1 || B > c.maxBatch {
		return fmt.Errorf("%w: %d sequences, want 1..%d", ErrBadBatch, B, c.maxBatch)
	}
	if len(next) < B {
		return fmt.Errorf("%w: next has room for %d tokens, the batch has %d sequences", ErrBadBatch, len(next), B)
	}
	for i := range b.Seqs {
		s := &b.Seqs[i]
		if err := checkSeqStep(i, s, c.vocab, c.positions, c.layout); err != nil {
			return err
		}
		for _, blk := range s.Blocks[:min(len(s.Blocks), c.width)] { // the runner checks every held block
			if blk < 0 || int(blk) >= c.layout.NumBlocks {
				return fmt.Errorf("%w: sequence %d (id %d) names block %d, want [0, %d)", ErrBadBatch, i, s.ID, blk, c.layout.NumBlocks)
			}
		}
	}
	return nil
}

// start readies p for b's step: the fill workers (made at the first step that asks) and the
// batch the chunks fill.
func (p *cudaPrompt) start(c *cudaBackend, b *Batch) {
	if p.pool == nil {
		p.pool = newWorkerPool(len(c.scratch()))
		p.fill.c = c
		p.onRows = c.fillRows
	}
	p.fill.b, p.done = b, 0
}

// tokenRows appends to s.TokenRows every token but the last of each sequence of b that asks for
// prompt logprobs (indices into s.Tokens, b flattened in order), and to p.at the entry each fills.
func (p *cudaPrompt) tokenRows(b *Batch, rows []int32) []int32 {
	p.at = p.at[:0]
	off := 0
	for i := range b.Seqs {
		q := &b.Seqs[i]
		if q.PromptLogprobs {
			for j := range len(q.Tokens) - 1 {
				rows = append(rows, int32(off+j))
				p.at = append(p.at, promptAt{seq: int32(i), j: int32(j)})
			}
		}
		off += len(q.Tokens)
	}
	return rows
}

// fillRows is the step's StepTokenLogits callback, on the runner's worker: it fills the entries of
// the next len(rows) token rows from their logits (len(rows), V), a row per item over the pool. A
// set Stop ends the step with ErrStopped.
func (c *cudaBackend) fillRows(rows []int32, logits []float32) error {
	p := &c.prompt
	if p.fill.b.stopped() {
		return ErrStopped
	}
	p.fill.at, p.fill.logits = p.at[p.done:p.done+len(rows)], logits
	p.pool.run(&p.fill, len(rows), 1)
	p.done += len(rows)
	return nil
}

// promptFillJob fills b.PromptLogprobs from a chunk of token rows' logits: one item per row,
// worker w with the backend's scratch w.
type promptFillJob struct {
	c      *cudaBackend
	b      *Batch
	at     []promptAt // the chunk's entries
	logits []float32  // (len(at), V)
}

func (f *promptFillJob) do(w, lo, hi int) {
	c, V := f.c, f.c.vocab
	for r := lo; r < hi; r++ {
		at := f.at[r]
		s := &f.b.Seqs[at.seq]
		c.lpScratch[w].logprobs(&c.k, &f.b.PromptLogprobs[at.seq][at.j], f.logits[r*V:(r+1)*V], s.Tokens[at.j+1], s.PromptTopLogprobs)
	}
}

// close stops the fill workers.
func (p *cudaPrompt) close() {
	if p.pool != nil {
		p.pool.close()
		p.pool = nil
	}
}
