package engine

import "math"

// The CPU backend's parallel jobs besides the matmul. Each is a long-lived value owned by the
// backend: forward sets its inputs, hands it to the pool, and clears the references after.

// attnJob is causal self-attention of layer `layer`: one item per (token, head).
type attnJob struct {
	c     *CPUBackend
	b     *Batch
	layer int
}

func (j *attnJob) do(w, lo, hi int) {
	c := j.c
	C, NH := c.cfg.NEmbd, c.cfg.NHead
	hd := C / NH
	scale := float32(1 / math.Sqrt(float64(hd)))
	bs := c.layout.BlockSize
	for item := lo; item < hi; item++ {
		t, h := item/NH, item%NH
		blocks := j.b.Seqs[c.tokSeq[t]].Blocks
		pos := int(c.tokPos[t])
		q := c.qkv[t*3*C+h*hd : t*3*C+(h+1)*hd]
		// Scores over positions [0, pos], a block at a time: within a block, the keys of
		// consecutive positions are rows of stride C.
		sc := c.scores[w][:pos+1]
		for p0 := 0; p0 <= pos; p0 += bs {
			n := min(bs, pos+1-p0)
			c.k.qk(sc[p0:p0+n], q, c.kv[c.kvAt(blocks[p0/bs], j.layer, 0, 0)+h*hd:], C)
		}
		top := float32(math.Inf(-1))
		for i := range sc {
			sc[i] *= scale
			top = max(top, sc[i])
		}
		c.k.exp(sc, top)
		var sum float64
		for _, e := range sc {
			sum += float64(e)
		}
		out := c.att[t*C+h*hd : t*C+(h+1)*hd]
		clear(out)
		for p0 := 0; p0 <= pos; p0 += bs {
			n := min(bs, pos+1-p0)
			c.k.av(out, sc[p0:p0+n], c.kv[c.kvAt(blocks[p0/bs], j.layer, 1, 0)+h*hd:], C)
		}
		inv := float32(1 / sum)
		for i := range out {
			out[i] *= inv
		}
	}
}

// normJob layer-normalizes rows (C wide): one item per output row.
type normJob struct {
	c            *CPUBackend
	out, x, w, b []float32
	src          []int32 // (rows) the row of x each output row normalizes, or nil: the same row
}

func (j *normJob) do(_, lo, hi int) {
	C := j.c.cfg.NEmbd
	for r := lo; r < hi; r++ {
		s := r
		if j.src != nil {
			s = int(j.src[r])
		}
		layerNorm(j.out[r*C:(r+1)*C], j.x[s*C:(s+1)*C], j.w, j.b, j.c.cfg.LayerNormEps)
	}
}

// sampleJob samples every sequence's next token from its row of c.logits, and fills the logprobs
// of those that ask (lp, parallel to b.Seqs; nil when none asks): one item per sequence.
type sampleJob struct {
	c    *CPUBackend
	b    *Batch
	next []int32
	lp   []TokenLogprobs
}

func (j *sampleJob) do(w, lo, hi int) {
	c := j.c
	V := c.cfg.VocabSize
	for i := lo; i < hi; i++ {
		s := &j.b.Seqs[i]
		row := c.logits[i*V : (i+1)*V]
		j.next[i] = SampleToken(row, s.Sample, s.Start+len(s.Tokens), &c.samples[w])
		if s.Logprobs && j.lp != nil {
			c.samples[w].logprobs(&c.k, &j.lp[i], row, j.next[i], s.TopLogprobs)
		}
	}
}

// promptJob fills the prompt logprobs of a pass (b) for the chunk of prompt rows from first
// (promptRows' numbering): one item per row, whose logits follow the sequences' rows in c.logits;
// the row of token j of a sequence that asks gives the logprob of its token j+1 (out parallel to
// b.Seqs).
type promptJob struct {
	c     *CPUBackend
	b     *Batch
	out   [][]TokenLogprobs
	first int
}

func (j *promptJob) do(w, lo, hi int) {
	c := j.c
	V, B := c.cfg.VocabSize, len(j.b.Seqs)
	for item := lo; item < hi; item++ {
		t := c.rowTok[j.first+item]
		i := c.tokSeq[t]
		s := &j.b.Seqs[i]
		k := int(c.tokPos[t]) - s.Start
		c.samples[w].logprobs(&c.k, &j.out[i][k], c.logits[(B+item)*V:(B+item+1)*V], s.Tokens[k+1], s.PromptTopLogprobs)
	}
}
