//go:build cgo

package gpu

import (
	"fmt"
	"unsafe"

	"rosetop/gpu/cu"
)

// check validates a step against the runner's limits; the message names the bad input.
func (s *state) check(in *Step, next []int32, logits []float32) error {
	B := len(in.SeqLens)
	V := s.cfg.VocabSize
	switch {
	case B < 1 || B > s.opt.MaxBatch:
		return fmt.Errorf("gpu: step has %d sequences, want 1..%d", B, s.opt.MaxBatch)
	case len(in.Start) != B || len(in.Temperature) != B || len(in.TopK) != B || len(in.TopP) != B || len(in.Seed) != B:
		return fmt.Errorf("gpu: step with %d sequences has %d starts, %d temperatures, %d top-k, %d top-p, %d seeds; want %d each",
			B, len(in.Start), len(in.Temperature), len(in.TopK), len(in.TopP), len(in.Seed), B)
	case len(in.Tables) != B*s.kv.width:
		return fmt.Errorf("gpu: step has %d block table entries, want %d sequences x width %d", len(in.Tables), B, s.kv.width)
	case len(next) < B:
		return fmt.Errorf("gpu: next has room for %d tokens, want %d", len(next), B)
	case logits != nil && len(logits) < B*V:
		return fmt.Errorf("gpu: logits has %d values, want %d x %d", len(logits), B, V)
	case in.Held != nil && len(in.Held) != B:
		return fmt.Errorf("gpu: step with %d sequences has %d held-block counts, want %d", B, len(in.Held), B)
	case in.LogitRows != nil && len(in.LogitRows) != B:
		return fmt.Errorf("gpu: step with %d sequences has %d logit rows, want %d", B, len(in.LogitRows), B)
	}
	n := 0
	for i, l := range in.SeqLens {
		st := int(in.Start[i])
		if l < 1 || st < 0 || st+int(l) > s.opt.MaxSeqLen {
			return fmt.Errorf("gpu: sequence %d runs positions [%d, %d), want 1+ tokens within [0, %d)", i, st, st+int(l), s.opt.MaxSeqLen)
		}
		row, used := in.Tables[i*s.kv.width:(i+1)*s.kv.width], (st+int(l)-1)/s.kv.bs+1
		if in.Held != nil && (int(in.Held[i]) < used || int(in.Held[i]) > s.kv.width) {
			return fmt.Errorf("gpu: sequence %d holds %d blocks, want %d..%d (its positions' blocks to the table's width)", i, in.Held[i], used, s.kv.width)
		}
		held := used
		if in.Held != nil {
			held = int(in.Held[i])
		}
		for j := range held {
			if row[j] < 0 || int(row[j]) >= s.kv.numBlocks {
				return fmt.Errorf("gpu: sequence %d block table entry %d is %d, want 0..%d", i, j, row[j], s.kv.numBlocks-1)
			}
		}
		n += int(l)
	}
	if n != len(in.Tokens) {
		return fmt.Errorf("gpu: step has %d tokens, its sequence lengths add up to %d", len(in.Tokens), n)
	}
	for i, t := range in.Tokens {
		if t < 0 || int(t) >= V {
			return fmt.Errorf("gpu: token %d is %d, want 0..%d", i, t, V-1)
		}
	}
	return nil
}

// step runs on the worker: a decode step (one token per sequence) replays its bucket's graph
// when graphs are on; a step with more tokens runs eagerly, in chunks of whole sequences when the
// step has more tokens than the activation buffers hold, or from a graph of its shape (graphs.go).
// With rowLogits (StepTokenLogits), the logits of in.TokenRows go to it after each pass.
func (s *state) step(in *Step, next []int32, logits []float32, rowLogits func([]int32, []float32) error) error {
	if err := s.check(in, next, logits); err != nil {
		return fmt.Errorf("%w: %w", ErrBadStep, err)
	}
	if err := checkTokenRows(in, rowLogits != nil); err != nil {
		return fmt.Errorf("%w: %w", ErrBadStep, err)
	}
	if done, err := s.takeAhead(in, next, logits); done || err != nil {
		return err
	}
	// Where greedy decode steps take the argmax in the LM head (caps.head), which writes no
	// logits, a step whose logits are asked for samples through argmax_part + sample (the same
	// tokens) after the plain LM head.
	B, greedy := len(in.SeqLens), greedyStep(in) && (logits == nil || !s.caps.head)
	if s.opt.Graphs && len(in.Tokens) == B {
		return s.decodeGraph(in, next, logits, greedy)
	}
	tok, row := 0, 0 // the pass's first token; its first entry of in.TokenRows
	for first := 0; first < B; {
		end, n := first, 0
		for end < B && n+int(in.SeqLens[end]) <= s.opt.MaxTokens {
			n += int(in.SeqLens[end])
			end++
		}
		nt := s.fill(in, first, end, tok, 0)
		if err := s.ensureWarm(nt, end-first); err != nil {
			return err
		}
		shape := stepShape{rows: nt, seqs: end - first, greedy: greedy}
		run := s.eager
		if first == 0 && end == B { // the whole step in one pass: it may run from a graph (graphs.go)
			run = s.runMulti
		}
		if err := run(shape); err != nil {
			return err
		}
		if err := s.collect(end-first, next[first:end], rowsFrom(logits, first, s.cfg.VocabSize), maskFrom(in.LogitRows, first)); err != nil {
			return err
		}
		if e := passRows(in.TokenRows, row, tok+n); e > row {
			if err := s.tokenLogits(shape, in.TokenRows[row:e], tok, rowLogits); err != nil {
				return err
			}
			row = e
		}
		tok += n
		first = end
	}
	return nil
}

// eager enqueues the metadata upload and the forward pass of a step of this shape.
func (s *state) eager(shape stepShape) error {
	p, err := s.newPlan(shape.rows, shape.seqs, shape.greedy, eagerStep, false)
	if err != nil {
		return err
	}
	return s.run(s.build(&p))
}

// greedyStep reports whether every row of in samples greedily (engine/sample.go's rule:
// temperature <= 0 or top-k 1).
func greedyStep(in *Step) bool {
	for i := range in.SeqLens {
		if in.Temperature[i] > 0 && in.TopK[i] != 1 {
			return false
		}
	}
	return true
}

// maskFrom is rows from sequence first on, or nil (every row).
func maskFrom(rows []bool, first int) []bool {
	if rows == nil {
		return nil
	}
	return rows[first:]
}

func rowsFrom(logits []float32, first, V int) []float32 {
	if logits == nil {
		return nil
	}
	return logits[first*V:]
}

// collect waits for the stream, whose work ends with the sampler writing the ids into the mapped
// pinned meta.next, and hands them (and, for StepLogits, the logits of the rows mask names, or of
// every row when mask is nil) to the caller.
func (s *state) collect(B int, next []int32, logits []float32, mask []bool) error {
	ctx := s.ctx
	if err := ctx.Sync(); err != nil {
		return err
	}
	copy(next[:B], s.meta.next[:B])
	if logits == nil {
		return nil
	}
	// Download the padded rows asked for, a run of consecutive ones a copy, then drop the padding.
	V, vp := s.cfg.VocabSize, paddedVocab(s.cfg.VocabSize)
	want := func(b int) bool { return mask == nil || mask[b] }
	if len(s.logitsHost) < B*vp { // B <= MaxBatch (check); nothing is in flight (synced above)
		if s.logitsHost != nil {
			if err := ctx.FreeHost(ptrOf(s.logitsHost)); err != nil {
				return err
			}
			s.logitsHost = nil
		}
		p, err := ctx.AllocHost(int64(B*vp)*4, "logits rows")
		if err != nil {
			return err
		}
		s.logitsHost = unsafe.Slice((*float32)(p), B*vp)
	}
	for b := 0; b < B; {
		if !want(b) {
			b++
			continue
		}
		e := b + 1
		for e < B && want(e) {
			e++
		}
		if err := ctx.Download(ptrOf(s.logitsHost[b*vp:]), s.act.logits+cu.Ptr(b*vp*4), int64((e-b)*vp)*4); err != nil {
			return err
		}
		b = e
	}
	if err := ctx.Sync(); err != nil {
		return err
	}
	for b := range B {
		if want(b) {
			copy(logits[b*V:(b+1)*V], s.logitsHost[b*vp:b*vp+V])
		}
	}
	return nil
}

// ptrOf is the address of a slice's first element.
func ptrOf[T any](s []T) unsafe.Pointer { return unsafe.Pointer(&s[0]) }
