//go:build cgo

package gpu

import (
	"errors"
	"fmt"
	"time"
	"unsafe"

	"rosetop/gpu/cu"
)

// Logits of token rows other than the sequences' last (Step.TokenRows, StepTokenLogits). After
// a multi-token step's forward pass the activations still hold, for every token row, the
// residual stream x before the last layer's MLP add and that MLP's output y (or its split-K
// partials): residual_ln_last over a list of rows, then the LM head GEMM, gives those rows'
// logits as the step's own last rows get theirs. The rows go in chunks of at most rowChunkMax (the
// LM head's buffers hold that many rows at least), after each pass of the step and before the next one
// overwrites the activations, eagerly (also after a replayed step graph). Two chunks are in
// flight: the device computes and downloads one while the caller's callback reads the other.

// rowChunkMax is the most rows a chunk of token rows holds: as many rows as the caller's fill
// has threads to share, whatever MaxBatch (allocBuffers sizes the LM head's buffers for it).
const rowChunkMax = 64

// tokenRowBufs are the pinned buffers of the token rows' chunks, allocated at the first step
// that asks and kept: two halves, used by chunks in turn. Owned by the worker goroutine.
type tokenRowBufs struct {
	chunk  int
	ids    [2][]int32     // (chunk) a chunk's row indices into the pass's rows, read by residual_ln_last...
	idsDev [2]cu.Ptr      // ... through the mapping (no upload)
	logits [2][]float32   // (chunk, V) a chunk's logits, packed (the pitched download drops the padding)
	ev     [2]cu.Event    // recorded after each half's download
	host   unsafe.Pointer // the one pinned allocation holding ids and logits
}

// StepTokenLogits is StepLogits that also computes the logits of the rows in.TokenRows names and
// hands them to rowLogits, in order, in chunks of at most 64 rows: rows are the chunk's entries
// of in.TokenRows, logits (len(rows), V) row-major. rowLogits runs on the runner's worker
// goroutine during the call: it must not keep either slice, nor call the Runner (which waits for
// that worker: a deadlock); its error ends the call and is returned as it is.
func (r *Runner) StepTokenLogits(in *Step, next []int32, logits []float32, rowLogits func(rows []int32, logits []float32) error) error {
	s := r.s
	if s == nil {
		return ErrClosed
	}
	c := &s.call
	c.in, c.next, c.logits, c.rowLogits = in, next, logits, rowLogits
	r.w.Do(c.run)
	c.in, c.next, c.logits, c.rowLogits = nil, nil, nil, nil
	return c.err
}

// checkTokenRows validates in.TokenRows: strictly ascending indices into in.Tokens, none a
// sequence's last row, and a callback to hand them to. in's lengths add up (check).
func checkTokenRows(in *Step, hasFn bool) error {
	rows := in.TokenRows
	if len(rows) == 0 {
		return nil
	}
	if !hasFn {
		return fmt.Errorf("gpu: step names %d token rows, but no callback takes their logits (StepTokenLogits)", len(rows))
	}
	seq, end := 0, int(in.SeqLens[0]) // sequence seq's rows are [end-SeqLens[seq], end)
	for k, t := range rows {
		switch {
		case t < 0 || int(t) >= len(in.Tokens):
			return fmt.Errorf("gpu: token row %d is %d, want 0..%d", k, t, len(in.Tokens)-1)
		case k > 0 && t <= rows[k-1]:
			return fmt.Errorf("gpu: token row %d is %d, want more than the row before it (%d)", k, t, rows[k-1])
		}
		for int(t) >= end {
			seq++
			end += int(in.SeqLens[seq])
		}
		if int(t) == end-1 {
			return fmt.Errorf("gpu: token row %d is %d, the last row of sequence %d (its logits are the step's own)", k, t, seq)
		}
	}
	return nil
}

// passRows returns the end of the run of rows from rows[from] on that lie before token row end
// (rows ascend).
func passRows(rows []int32, from, end int) int {
	for from < len(rows) && int(rows[from]) < end {
		from++
	}
	return from
}

// tokenLogits hands fn the logits of rows (indices into the step's tokens) of the pass of shape
// just run, whose first token is the step's token base: chunk k+1 is enqueued before fn reads
// chunk k. The pass has been collected, so nothing reads the step's logits buffer any more.
func (s *state) tokenLogits(shape stepShape, rows []int32, base int, fn func([]int32, []float32) error) error {
	p, err := s.newPlan(shape.rows, shape.seqs, shape.greedy, eagerStep, false)
	if err != nil {
		return err
	}
	rb, err := s.tokenRowBuffers()
	if err != nil {
		return err
	}
	n := len(rows)
	chunks := (n + rb.chunk - 1) / rb.chunk
	if err := s.warmHeadAt(gemmRows(min(n, rb.chunk))); err != nil {
		return err
	}
	if err := s.warmHeadAt(gemmRows(n - (chunks-1)*rb.chunk)); err != nil { // the last chunk's
		return err
	}
	part := func(k int) []int32 { return rows[k*rb.chunk : min(n, (k+1)*rb.chunk)] }
	if err := s.enqueueRows(&p, part(0), base, 0); err != nil {
		return err
	}
	for k := range chunks {
		if k+1 < chunks {
			if err := s.enqueueRows(&p, part(k+1), base, (k+1)%2); err != nil {
				return err
			}
		}
		if err := s.ctx.WaitEvent(rb.ev[k%2]); err != nil {
			return err
		}
		c := part(k)
		if err := fn(c, rb.logits[k%2][:len(c)*s.cfg.VocabSize]); err != nil {
			if serr := s.ctx.Sync(); serr != nil { // the next chunk may be in flight
				return serr
			}
			return err
		}
	}
	return nil
}

// enqueueRows enqueues the logits of rows (at most a chunk) into half h of the row buffers: the
// final norm of each row (residual_ln_last, from x and the last layer's MLP output as plan p
// left them) into xlast, the LM head and the pitched download. Half h's previous chunk has been
// read (tokenLogits waited for it before handing it out).
func (s *state) enqueueRows(p *stepPlan, rows []int32, base, h int) error {
	c, a, w, rb := s.cfg, &s.act, s.wts, &s.rows
	C, V, vp := c.NEmbd, c.VocabSize, paddedVocab(c.VocabSize)
	for i, t := range rows {
		rb.ids[h][i] = t - int32(base)
	}
	prog := &s.prog
	prog.reset()
	L := &w.layers[c.NLayer-1]
	prog.residualLNLast(false, a.x, a.y, p.fcProjSplits, p.yRows()*C, L.fcProjB, w.lnfw, w.lnfb, a.xlast, rb.idsDev[h], C, c.Eps, len(rows))
	prog.gemm("gemm lm head", a.logits, a.xlast, w.wteT, gemmRows(len(rows)), C, vp)
	if err := s.run(prog); err != nil {
		return err
	}
	if err := s.ctx.DownloadRows(ptrOf(rb.logits[h]), int64(V)*4, a.logits, int64(vp)*4, int64(V)*4, len(rows)); err != nil {
		return err
	}
	return s.ctx.Record(rb.ev[h])
}

// tokenRowBuffers returns the row buffers, allocating them and their events at the first use.
func (s *state) tokenRowBuffers() (*tokenRowBufs, error) {
	rb := &s.rows
	if rb.host != nil {
		return rb, nil
	}
	chunk, V := rowChunkMax, int64(s.cfg.VocabSize)
	idsBytes, logitsBytes := align(int64(chunk)*4), int64(chunk)*V*4
	host, err := s.ctx.AllocHost(2*(idsBytes+logitsBytes), "token row logits")
	if err != nil {
		return nil, err
	}
	fail := func(err error) (*tokenRowBufs, error) { // frees what was made: a later step tries again
		for h := range rb.ev {
			if rb.ev[h] != (cu.Event{}) {
				err = errors.Join(err, s.ctx.DestroyEvent(rb.ev[h]))
			}
		}
		*rb = tokenRowBufs{}
		return nil, errors.Join(err, s.ctx.FreeHost(host))
	}
	dev, err := s.ctx.HostDevPtr(host)
	if err != nil {
		return fail(err)
	}
	for h := range 2 {
		off := int64(h) * idsBytes
		rb.ids[h] = unsafe.Slice((*int32)(unsafe.Add(host, off)), chunk)
		rb.idsDev[h] = dev + cu.Ptr(off)
		rb.logits[h] = unsafe.Slice((*float32)(unsafe.Add(host, 2*idsBytes+int64(h)*logitsBytes)), int64(chunk)*V)
		if rb.ev[h], err = s.ctx.NewEvent(false); err != nil {
			return fail(err)
		}
	}
	rb.host, rb.chunk = host, chunk
	return rb, nil
}

// warmHeadAt pays cuBLAS's first call for the LM head at m GEMM rows when no step has (ledger:
// cuBLAS first use), outside any capture; its GEMM overwrites the logits buffer.
func (s *state) warmHeadAt(m int) error {
	if s.warmHead[m] {
		return nil
	}
	t0 := time.Now()
	if _, err := s.warmClass(m, false, true); err != nil {
		return err
	}
	if err := s.ctx.Sync(); err != nil {
		return err
	}
	s.record("cuBLAS first use", fmt.Sprintf("LM head at %d rows", m), time.Since(t0))
	return nil
}

// closeTokenRows destroys the row buffers' events (the context frees the pinned memory).
func (s *state) closeTokenRows(keep func(error)) {
	rb := &s.rows
	for h := range rb.ev {
		keep(s.ctx.DestroyEvent(rb.ev[h]))
		rb.ev[h] = cu.Event{}
	}
	*rb = tokenRowBufs{}
}
