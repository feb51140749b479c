//go:build cgo

package engine

import (
	"errors"
	"fmt"

	"rosetop/gpu"
)

// Prompt logprobs on the GPU. The runner returns each sequence's last-position logits only, so a
// sequence that asks for prompt logprobs runs its tokens but the last as teacher-forced steps of
// one token each: step j runs token j of every asking sequence longer than j+1 at its position,
// and its row of logits gives the logprob of token j+1. The batch's own step then runs each such
// sequence from its last token, over the KV entries those steps wrote.

// cudaPrompt is the CUDA backend's prompt-logprobs state, grown to the largest need and reused:
// after the first steps that ask, a step allocates nothing.
type cudaPrompt struct {
	step   gpu.Step   // one teacher-forced step
	next   []int32    // its sampled tokens, unused
	logits []float32  // (len(at), V): the rows of teacher-forced steps not yet filled
	at     []promptAt // the entry each row of logits fills
	own    Batch      // the batch's own step: each asking sequence from its last token
	pool   *workerPool
	fill   promptFillJob
}

// promptAt names the entry a row of teacher-forced logits fills: PromptLogprobs[seq][j].
type promptAt struct{ seq, j int32 }

// runPrompt is run of a batch where a sequence asks for prompt logprobs (b is valid for
// wantsLogprobs and wantsPromptLogprobs): it checks the whole batch, so that a bad one fails
// before any step writes KV entries, runs the teacher-forced steps, then the batch's own step.
func (c *cudaBackend) runPrompt(b *Batch, next []int32, logits []float32, lp bool) error {
	if err := c.checkBatch(b, next); err != nil {
		return err
	}
	if err := c.teacherForce(b); err != nil {
		return err
	}
	err := c.runBatch(c.prompt.lastTokens(b), next, logits, lp)
	c.prompt.release()
	return err
}

// checkBatch validates b as the runner would its step (sizes, tokens, positions, blocks).
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

// teacherForce runs b's teacher-forced steps and fills b.PromptLogprobs from their logits. Rows
// are kept until a step's would not fit, then filled in parallel: a row per worker at least.
func (c *cudaBackend) teacherForce(b *Batch) error {
	p := &c.prompt
	longest, askers := 0, 0
	for i := range b.Seqs {
		if s := &b.Seqs[i]; s.PromptLogprobs && len(s.Tokens) > 1 {
			longest = max(longest, len(s.Tokens))
			askers++
		}
	}
	capRows := p.grow(c, askers)
	for j := 0; j < longest-1; j++ {
		if b.stopped() {
			p.at = p.at[:0]
			return ErrStopped
		}
		if len(p.at)+askers > capRows {
			c.fillPrompt(b)
		}
		rows := len(p.at)
		k := c.teacherStep(b, j)
		err := c.r.StepLogits(&p.step, p.next[:k], p.logits[rows*c.vocab:(rows+k)*c.vocab])
		if err != nil {
			p.at = p.at[:0]
			if errors.Is(err, gpu.ErrBadStep) {
				return fmt.Errorf("%w: %w", ErrBadBatch, err)
			}
			return err
		}
	}
	c.fillPrompt(b)
	return nil
}

// grow sizes p for teacher-forced steps of up to askers sequences and returns how many rows of
// logits it keeps: at least one per fill worker, so that every worker has one.
func (p *cudaPrompt) grow(c *cudaBackend, askers int) int {
	scratch := c.scratch()
	if p.pool == nil {
		p.pool = newWorkerPool(len(scratch))
		p.fill.c = c
	}
	capRows := max(askers, len(scratch))
	if len(p.logits) < capRows*c.vocab {
		p.logits = make([]float32, capRows*c.vocab)
	}
	if len(p.next) < askers {
		p.next = make([]int32, askers)
	}
	return capRows
}

// teacherStep makes p.step the j-th teacher-forced step of b: Tokens[j] at Start+j of every
// sequence that asks and has more than j+1 tokens, sampled greedily (the token is not used), every
// row's logits asked for. It records the entry each row fills and returns the step's sequences.
func (c *cudaBackend) teacherStep(b *Batch, j int) int {
	p := &c.prompt
	s := &p.step
	resetStep(s)
	s.Repeats, s.LogitRows = 0, nil
	for i := range b.Seqs {
		q := &b.Seqs[i]
		if !q.PromptLogprobs || len(q.Tokens) <= j+1 {
			continue
		}
		c.appendSeq(s, q.Tokens[j:j+1], q.Start+j, q.Blocks, SamplingParams{})
		p.at = append(p.at, promptAt{seq: int32(i), j: int32(j)})
	}
	return len(s.SeqLens)
}

// fillPrompt fills the entries of the rows of logits kept so far, a row per item over the pool,
// and forgets them.
func (c *cudaBackend) fillPrompt(b *Batch) {
	p := &c.prompt
	p.fill.b = b
	p.pool.run(&p.fill, len(p.at), 1)
	p.fill.b = nil
	p.at = p.at[:0]
}

// promptFillJob fills b.PromptLogprobs from the kept rows of teacher-forced logits: one item per
// row, worker w with the backend's scratch w.
type promptFillJob struct {
	c *cudaBackend
	b *Batch
}

func (f *promptFillJob) do(w, lo, hi int) {
	c, V := f.c, f.c.vocab
	p := &c.prompt
	for r := lo; r < hi; r++ {
		at := p.at[r]
		s := &f.b.Seqs[at.seq]
		c.lpScratch[w].logprobs(&c.k, &f.b.PromptLogprobs[at.seq][at.j], p.logits[r*V:(r+1)*V], s.Tokens[at.j+1], s.PromptTopLogprobs)
	}
}

// lastTokens returns b with each sequence that asks for prompt logprobs reduced to its last
// token (its KV entries before it written by the teacher-forced steps), in p.own.
func (p *cudaPrompt) lastTokens(b *Batch) *Batch {
	o := &p.own
	o.Seqs = append(o.Seqs[:0], b.Seqs...)
	for i := range o.Seqs {
		s := &o.Seqs[i]
		if n := len(s.Tokens); s.PromptLogprobs && n > 1 {
			s.Tokens, s.Start = s.Tokens[n-1:], s.Start+n-1
		}
		s.PromptLogprobs = false
	}
	o.Repeats, o.Stop, o.Logprobs, o.PromptLogprobs = b.Repeats, b.Stop, b.Logprobs, nil
	return o
}

// release drops p.own's references to the caller's batch.
func (p *cudaPrompt) release() {
	clear(p.own.Seqs)
	p.own.Seqs, p.own.Stop, p.own.Logprobs = p.own.Seqs[:0], nil, nil
}

// close stops the fill workers.
func (p *cudaPrompt) close() {
	if p.pool != nil {
		p.pool.close()
		p.pool = nil
	}
}
