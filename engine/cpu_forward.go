package engine

import "fmt"

// The CPU forward pass: a batch's tokens are laid out as one (n, C) matrix in batch order, every
// sequence's tokens consecutive; the matmuls see n rows and never care which sequence a row is.
// Only attention and the KV writes look at a row's sequence and position.

// rowSet chooses the tokens whose logits a forward pass computes.
type rowSet int

const (
	lastRows   rowSet = iota // each sequence's last token: row i is sequence i's
	allRows                  // every token, in batch order
	promptRows               // lastRows, then the other tokens of the sequences that ask for prompt logprobs, in batch order
)

// forward runs every layer over b's tokens and leaves in c.xf the final norm of the rows set
// names (c.rows of them) and in c.logits the logits of the first c.heads: all of them, but with
// promptRows the sequences' last tokens alone.
func (c *CPUBackend) forward(b *Batch, set rowSet) error {
	if c.pool == nil {
		return fmt.Errorf("%w: backend is closed", ErrBadBatch)
	}
	n, err := c.prepare(b, set)
	if err != nil {
		return err
	}
	c.embed(b, n)
	for l := range c.w.Layers {
		if b.stopped() {
			return ErrStopped
		}
		lw, pw := &c.w.Layers[l], &c.packed[l]
		c.norm(c.xn, c.x, lw.LN1W, lw.LN1B, n, nil)
		c.matmul(c.qkv, c.xn, &pw.attn, lw.AttnB, n, epiStore)
		c.writeKV(b, l, n)
		c.attn.layer, c.attn.b = l, b
		c.pool.run(&c.attn, n*c.cfg.NHead, 1)
		c.attn.b = nil
		c.matmul(c.x, c.att, &pw.attnProj, lw.AttnProjB, n, epiResidual)
		if b.stopped() { // a layer of a long prefill takes seconds on few cores: check twice
			return ErrStopped
		}
		c.norm(c.xn, c.x, lw.LN2W, lw.LN2B, n, nil)
		c.matmul(c.fc, c.xn, &pw.fc, lw.FCB, n, epiGELU)
		c.matmul(c.x, c.fc, &pw.fcProj, lw.FCProjB, n, epiResidual)
	}
	c.norm(c.xf, c.x, c.w.LNFW, c.w.LNFB, c.rows, c.rowTok[:c.rows])
	// The LM head is one more matmul: logits (heads, V) = xf (heads, C) @ wte^T, no bias. Prompt
	// rows past the heads are Step's, a chunk at a time (fillPrompt).
	c.matmul(c.logits, c.xf, &c.head, nil, c.heads, epiStore)
	return nil
}

// prepare checks b, sizes the scratch for it and fills the per-token and per-row tables.
// It returns the number of tokens.
func (c *CPUBackend) prepare(b *Batch, set rowSet) (int, error) {
	n, rows := 0, len(b.Seqs)
	for i := range b.Seqs {
		s := &b.Seqs[i]
		if err := c.checkSeq(i, s); err != nil {
			return 0, err
		}
		n += len(s.Tokens)
		if set == promptRows && s.PromptLogprobs {
			rows += len(s.Tokens) - 1
		}
	}
	if n == 0 {
		return 0, fmt.Errorf("%w: no sequences", ErrBadBatch)
	}
	all := set == allRows
	if all {
		rows = n
	}
	heads := rows
	if set == promptRows {
		heads = len(b.Seqs)
	}
	c.grow(n, rows, min(rows, heads+promptChunk))
	t := 0
	for i := range b.Seqs {
		s := &b.Seqs[i]
		for j := range s.Tokens {
			c.tokSeq[t], c.tokPos[t] = int32(i), int32(s.Start+j)
			if all {
				c.rowTok[t] = int32(t)
			}
			t++
		}
		if !all {
			c.rowTok[i] = int32(t - 1)
		}
	}
	if rows > len(b.Seqs) && !all {
		c.promptRowTable(b)
	}
	c.rows, c.heads = rows, heads
	return n, nil
}

// promptRowTable points the rows past the sequences' last tokens (promptRows) at every other
// token of the sequences that ask for prompt logprobs, in batch order.
func (c *CPUBackend) promptRowTable(b *Batch) {
	t, r := 0, len(b.Seqs)
	for i := range b.Seqs {
		s := &b.Seqs[i]
		if s.PromptLogprobs {
			for j := range len(s.Tokens) - 1 {
				c.rowTok[r+j] = int32(t + j)
			}
			r += len(s.Tokens) - 1
		}
		t += len(s.Tokens)
	}
}

// checkSeq validates one sequence of a batch against the model and the KV layout.
func (c *CPUBackend) checkSeq(i int, s *SeqStep) error {
	return checkSeqStep(i, s, c.cfg.VocabSize, c.cfg.NPositions, c.layout)
}

// checkSeqStep validates sequence i of a batch: tokens within [0, vocab), positions within
// [0, positions), and a block table that covers them with blocks of layout's pool.
func checkSeqStep(i int, s *SeqStep, vocab, positions int, layout KVLayout) error {
	if len(s.Tokens) == 0 {
		return fmt.Errorf("%w: sequence %d (id %d) has no tokens", ErrBadBatch, i, s.ID)
	}
	// Start is compared before the sum is taken: start + tokens may overflow int.
	if s.Start < 0 || s.Start > positions-len(s.Tokens) {
		return fmt.Errorf("%w: sequence %d (id %d) has %d tokens at position %d, want within [0, n_positions=%d)", ErrBadBatch, i, s.ID, len(s.Tokens), s.Start, positions)
	}
	end := s.Start + len(s.Tokens)
	bs := layout.BlockSize
	need := (end + bs - 1) / bs
	if len(s.Blocks) < need {
		return fmt.Errorf("%w: sequence %d (id %d) has %d blocks of %d positions, needs %d for %d positions", ErrBadBatch, i, s.ID, len(s.Blocks), bs, need, end)
	}
	for _, blk := range s.Blocks[:need] {
		if blk < 0 || int(blk) >= layout.NumBlocks {
			return fmt.Errorf("%w: sequence %d (id %d) names block %d, want [0, %d)", ErrBadBatch, i, s.ID, blk, layout.NumBlocks)
		}
	}
	for _, tok := range s.Tokens {
		if tok < 0 || int(tok) >= vocab {
			return fmt.Errorf("%w: sequence %d (id %d) has token %d, want [0, %d)", ErrBadBatch, i, s.ID, tok, vocab)
		}
	}
	return nil
}

// grow makes the scratch hold n tokens, rows LM-head rows and logits rows of logits; it only
// ever grows.
func (c *CPUBackend) grow(n, rows, logits int) {
	C, V := c.cfg.NEmbd, c.cfg.VocabSize
	if n > c.capTok {
		c.capTok = n
		c.x = make([]float32, n*C)
		c.xn = make([]float32, n*C)
		c.qkv = make([]float32, n*3*C)
		c.att = make([]float32, n*C)
		c.fc = make([]float32, n*innerDim(c.cfg))
		c.tokSeq = make([]int32, n)
		c.tokPos = make([]int32, n)
	}
	if rows > c.capRow {
		c.capRow = rows
		c.rowTok = make([]int32, rows)
		c.xf = make([]float32, rows*C)
	}
	if logits > c.capLogit {
		c.capLogit = logits
		c.logits = make([]float32, logits*V)
	}
}

// embed writes wte[token] + wpe[position] of every token into the residual stream.
func (c *CPUBackend) embed(b *Batch, n int) {
	C := c.cfg.NEmbd
	t := 0
	for i := range b.Seqs {
		for _, tok := range b.Seqs[i].Tokens {
			p := int(c.tokPos[t])
			x := c.x[t*C : (t+1)*C]
			te := c.w.WTE[int(tok)*C : (int(tok)+1)*C]
			pe := c.w.WPE[p*C : (p+1)*C]
			for j := range x {
				x[j] = te[j] + pe[j]
			}
			t++
		}
	}
}

// norm layer-normalizes n rows into out: row r from x's row src[r], or row r when src is nil.
// Four rows or more per chunk: waking a helper costs more than normalizing a few rows.
func (c *CPUBackend) norm(out, x, w, b []float32, n int, src []int32) {
	j := &c.ln
	j.out, j.x, j.w, j.b, j.src = out, x, w, b, src
	c.pool.run(j, n, c.pool.split(n, 1, 4))
	j.out, j.x, j.w, j.b, j.src = nil, nil, nil, nil, nil
}

// matmul runs y = x W + b (with the epilogue) over the worker pool, a few panels per chunk.
func (c *CPUBackend) matmul(y, x []float32, w *packedMat, b []float32, n int, epi epilogue) {
	j := &c.mm
	j.x, j.w, j.b, j.y = x, w, b, y
	j.n, j.epi = n, epi
	panels := (w.out + panelW - 1) / panelW
	c.pool.run(j, panels, c.pool.split(panels, 4, 1))
	j.x, j.w, j.b, j.y = nil, nil, nil, nil
}

// kvAt returns the offset in c.kv of layer l's keys (kv=0) or values (kv=1) at slot off of block blk.
func (c *CPUBackend) kvAt(blk int32, l, kv, off int) int {
	bs, C := c.layout.BlockSize, c.cfg.NEmbd
	return (((int(blk)*c.cfg.NLayer+l)*2+kv)*bs + off) * C
}

// writeKV copies the keys and values of the step's tokens into their slots.
func (c *CPUBackend) writeKV(b *Batch, l, n int) {
	C, bs := c.cfg.NEmbd, c.layout.BlockSize
	for t := 0; t < n; t++ {
		s := &b.Seqs[c.tokSeq[t]]
		p := int(c.tokPos[t])
		blk, off := s.Blocks[p/bs], p%bs
		row := c.qkv[t*3*C : (t+1)*3*C]
		k := c.kvAt(blk, l, 0, off)
		v := c.kvAt(blk, l, 1, off)
		copy(c.kv[k:k+C], row[C:2*C])
		copy(c.kv[v:v+C], row[2*C:3*C])
	}
}
