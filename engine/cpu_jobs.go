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
	quad := &c.quads[w]
	for item := lo; item < hi; item++ {
		t, h := item/NH, item%NH
		blocks := j.b.Seqs[c.tokSeq[t]].Blocks
		pos := int(c.tokPos[t])
		q := c.qkv[t*3*C+h*hd : t*3*C+(h+1)*hd]
		// Scores over positions [0, pos], a block at a time: within a block, the keys of
		// consecutive positions are rows of stride C, four of them per kernel call.
		sc := c.scores[w][:pos+1]
		for p0 := 0; p0 <= pos; p0 += bs {
			n := min(bs, pos+1-p0)
			keys := c.kv[c.kvAt(blocks[p0/bs], j.layer, 0, 0)+h*hd:]
			i := 0
			for ; i+4 <= n; i += 4 {
				c.k.dot4(quad, q, keys[i*C:], C)
				for r, d := range quad {
					sc[p0+i+r] = d * scale
				}
			}
			for ; i < n; i++ {
				sc[p0+i] = c.k.dot(q, keys[i*C:]) * scale
			}
		}
		top := float32(math.Inf(-1))
		for _, s := range sc {
			top = max(top, s)
		}
		var sum float64
		for p, s := range sc {
			e := float32(math.Exp(float64(s - top)))
			sc[p] = e
			sum += float64(e)
		}
		out := c.att[t*C+h*hd : t*C+(h+1)*hd]
		clear(out)
		// out += sum_p e_p v_p: per block, a (positions) x (hd) product with the values' rows
		for p0 := 0; p0 <= pos; p0 += bs {
			n := min(bs, pos+1-p0)
			vals := c.kv[c.kvAt(blocks[p0/bs], j.layer, 1, 0)+h*hd:]
			if hd%16 == 0 {
				for s := 0; s < hd; s += 16 {
					c.k.mm1(out[s:], sc[p0:p0+n], vals[s:], C, n)
				}
				continue
			}
			for i := range n {
				axpyGo(out, vals[i*C:], sc[p0+i])
			}
		}
		inv := float32(1 / sum)
		for i := range out {
			out[i] *= inv
		}
	}
}

// headJob is the LM head (tied to wte) over the rows of c.xf: one item per vocabulary entry; four
// wte rows at a time are read once and used for every row of the batch, two rows at a time.
type headJob struct {
	c    *CPUBackend
	rows int // rows of c.xf (and c.logits) this step
}

func (j *headJob) do(w, lo, hi int) {
	c := j.c
	C, V := c.cfg.NEmbd, c.cfg.VocabSize
	quad, oct := &c.quads[w], &c.octs[w] // per worker: local arrays would escape through the kernels' func values
	v := lo
	for ; v+4 <= hi; v += 4 {
		wv := c.w.WTE[v*C : (v+4)*C]
		r := 0
		for ; r+2 <= j.rows; r += 2 {
			c.k.dot8(oct, c.xf[r*C:(r+2)*C], C, wv, C, C)
			copy(c.logits[r*V+v:r*V+v+4], oct[:4])
			copy(c.logits[(r+1)*V+v:(r+1)*V+v+4], oct[4:])
		}
		if r < j.rows {
			c.k.dot4(quad, c.xf[r*C:(r+1)*C], wv, C)
			copy(c.logits[r*V+v:r*V+v+4], quad[:])
		}
	}
	for ; v < hi; v++ {
		wv := c.w.WTE[v*C : (v+1)*C]
		for r := 0; r < j.rows; r++ {
			c.logits[r*V+v] = c.k.dot(c.xf[r*C:(r+1)*C], wv)
		}
	}
}

// sampleJob samples every sequence's next token from its row of c.logits: one item per sequence.
type sampleJob struct {
	c    *CPUBackend
	b    *Batch
	next []int32
}

func (j *sampleJob) do(w, lo, hi int) {
	c := j.c
	V := c.cfg.VocabSize
	for i := lo; i < hi; i++ {
		s := &j.b.Seqs[i]
		j.next[i] = SampleToken(c.logits[i*V:(i+1)*V], s.Sample, s.Start+len(s.Tokens), &c.samples[w])
	}
}
