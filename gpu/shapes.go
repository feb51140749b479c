//go:build cgo

package gpu

import (
	"fmt"
	"strings"
	"time"
)

// cuBLAS pays several milliseconds the first time it sees a GEMM of a new row-count class (its
// own per-shape setup, not lazy module loading), which a step of a size the process had not run
// yet would pay inside its time to first token. So the GEMMs run for a fixed set of row counts,
// the step's rows rounded up by gemmRows (the rows past the step's are scratch: GEMM rows are
// independent and nothing reads them), and each class pays its first call once: in Open with
// CaptureAhead (warmGEMMs), else in the first eager step that needs it (ensureWarm, recorded in
// the ledger, so the cold run shows the cost and says where it went).

// gemmRows is the row count the GEMMs run for a step of n token rows (or n sequences for the LM
// head): the decode graph buckets up to 64 (1, 2, 4, 8, 16, 24, 32, 48, 64), then 128 and 256,
// then multiples of 256: fewer than 256 rows wasted (under a quarter from 1024 rows on); the
// GEMMs of a step that long take a small part of it.
func gemmRows(n int) int {
	switch {
	case n <= 2:
		return max(n, 1)
	case n <= 4:
		return 4
	case n <= 8:
		return 8
	case n <= 16:
		return 16
	case n <= 32:
		return (n + 7) / 8 * 8
	case n <= 64:
		return (n + 15) / 16 * 16
	case n <= 128:
		return 128
	}
	return (n + 255) / 256 * 256
}

// gemmRowClasses lists gemmRows's values up to gemmRows(n), ascending.
func gemmRowClasses(n int) []int {
	var out []int
	for m := 1; m <= gemmRows(n); m = gemmRows(m + 1) {
		out = append(out, m)
	}
	return out
}

// warmGEMMs runs every cuBLAS GEMM shape of the forward pass once for each row class, on the
// real buffers (their contents do not matter), so that no step pays cuBLAS's first-call cost
// (Options.CaptureAhead: the whole cold start paid in Open).
func (s *state) warmGEMMs() error {
	t0 := time.Now()
	classes := gemmRowClasses(s.opt.MaxTokens)
	calls := 0
	for _, m := range classes {
		n, err := s.warmClass(m, s.caps.onCuBLAS(m), m <= gemmRows(s.opt.MaxBatch))
		if err != nil {
			return err
		}
		calls += n
	}
	if err := s.ctx.Sync(); err != nil {
		return err
	}
	s.record("cuBLAS warm-up", fmt.Sprintf("%d GEMMs, %d row classes (1..%d)", calls, len(classes), classes[len(classes)-1]), time.Since(t0))
	return nil
}

// prewarm pays what warmGEMMs and captureAhead would have paid in Open and no step has paid yet
// (Runner.Prewarm), after the queued predicted steps finish.
func (s *state) prewarm() error {
	if err := s.dropAhead(); err != nil {
		return err
	}
	t0 := time.Now()
	calls, classes := 0, 0
	for _, m := range gemmRowClasses(s.opt.MaxTokens) {
		layers := !s.warmLayers[m] && s.caps.onCuBLAS(m)
		head := !s.warmHead[m] && m <= gemmRows(s.opt.MaxBatch)
		if !layers && !head {
			continue
		}
		n, err := s.warmClass(m, layers, head)
		if err != nil {
			return err
		}
		calls, classes = calls+n, classes+1
	}
	if err := s.ctx.Sync(); err != nil {
		return err
	}
	if calls > 0 {
		s.record("cuBLAS warm-up", fmt.Sprintf("prewarm: %d GEMMs, the %d row classes not used yet", calls, classes), time.Since(t0))
	}
	if !s.opt.Graphs {
		return nil
	}
	if err := s.captureAhead(); err != nil {
		return err
	}
	return s.captureSeen()
}

// ensureWarm pays cuBLAS's first-call cost for an eager step of n token rows and nb sequences
// whose row classes have not run yet, and records it in the ledger: without CaptureAhead this is
// part of the cold start the first run shows. It runs before the step's own work is enqueued
// (never inside a graph capture; decode graphs run their first step eagerly in graphFor).
func (s *state) ensureWarm(n, nb int) error {
	mT, mB := gemmRows(n), gemmRows(nb)
	layers, head := !s.warmLayers[mT] && s.caps.onCuBLAS(mT), !s.warmHead[mB]
	if !layers && !head {
		return nil
	}
	t0 := time.Now()
	if layers {
		if _, err := s.warmClass(mT, true, false); err != nil {
			return err
		}
	}
	if head {
		if _, err := s.warmClass(mB, false, true); err != nil {
			return err
		}
	}
	if err := s.ctx.Sync(); err != nil {
		return err
	}
	var what []string
	if layers {
		what = append(what, fmt.Sprintf("layer GEMMs at %d rows", mT))
	}
	if head {
		what = append(what, fmt.Sprintf("LM head at %d rows", mB))
	}
	s.record("cuBLAS first use", strings.Join(what, ", "), time.Since(t0))
	return nil
}

// warmClass enqueues the cuBLAS GEMMs of row class m (warmProgram) and returns how many.
func (s *state) warmClass(m int, layers, head bool) (int, error) {
	prog := s.warmProgram(m, layers, head)
	return len(prog.ops), s.run(prog)
}

// warmProgram makes s.prog the cuBLAS GEMMs of row class m: the layers' (one layer's weights
// stand for all: the shapes are the same) and/or the LM head's, and marks the class warm.
func (s *state) warmProgram(m int, layers, head bool) *program {
	c, a, L := s.cfg, &s.act, &s.wts.layers[0]
	C, F := c.NEmbd, c.Inner
	prog := &s.prog
	prog.reset()
	if layers {
		prog.gemm("gemm qkv", a.y, a.xln, L.attnW, m, C, 3*C)
		prog.gemmSplitK("gemm attn proj", a.y, a.att, L.projW, m, C, C, splitsAt(m, C, projSplits))
		if s.lt == nil { // else openLt ran cuBLASLt's fc GEMMs
			prog.gemm("gemm fc", a.y, a.xln, L.fcW, m, C, F)
		}
		prog.gemmSplitK("gemm fc proj", a.y, a.h, L.fcProjW, m, F, C, splitsAt(m, F, fcProjSplits))
		s.warmLayers[m] = true
	}
	if head {
		prog.gemm("gemm lm head", a.logits, a.xlast, s.wts.wteT, m, C, paddedVocab(c.VocabSize))
		s.warmHead[m] = true
	}
	return prog
}
