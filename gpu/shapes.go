//go:build cgo

package gpu

import (
	"fmt"
	"time"
)

// cuBLAS pays several milliseconds the first time it sees a GEMM of a new row-count class
// (measured on the H200: after a warm-up, 11 of the 64 prefills of k x 2 tokens, k = 1..64, took
// 2-8 ms the first time and 0.55-0.7 ms the second; CUDA_MODULE_LOADING=EAGER changed nothing, so
// it is cuBLAS's own per-shape setup, not lazy module loading). Steps of a size the process had
// not run yet paid it inside their TTFT. So the GEMMs run for a fixed set of row counts, the
// step's rows rounded up by gemmRows (the rows past the step's are scratch: GEMM rows are
// independent and nothing reads them), and Open runs each of them once (warmGEMMs).

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

// splitFCProj reports whether a step of m GEMM rows runs the MLP's output projection as
// fcProjSplits K slices (see fcProjSplits).
func (s *state) splitFCProj(m int) bool {
	return m <= fcProjSplitRows && s.cfg.Inner%(16*fcProjSplits) == 0
}

// warmGEMMs runs every cuBLAS GEMM shape of the forward pass once for each row class, on the
// real buffers (their contents do not matter), so that no step pays cuBLAS's first-call cost.
func (s *state) warmGEMMs() error {
	t0 := time.Now()
	rt, c, a, L := s.rt, s.cfg, &s.act, &s.wts.layers[0]
	C, F := c.NEmbd, c.Inner
	classes := gemmRowClasses(s.opt.MaxTokens)
	calls := 0
	for _, m := range classes {
		gemms := []func() error{
			func() error { return rt.gemm(a.y, a.xln, L.attnW, m, C, 3*C, true) },
			func() error { return rt.gemm(a.y, a.att, L.projW, m, C, C, true) },
		}
		if s.lt == nil { // else openLt ran cuBLASLt's fc GEMMs
			gemms = append(gemms, func() error { return rt.gemm(a.y, a.xln, L.fcW, m, C, F, true) })
		}
		if s.splitFCProj(m) {
			gemms = append(gemms, func() error { return rt.gemmSplitK(a.y, a.h, L.fcProjW, m, F, C, fcProjSplits) })
		} else {
			gemms = append(gemms, func() error { return rt.gemm(a.y, a.h, L.fcProjW, m, F, C, true) })
		}
		if m <= gemmRows(s.opt.MaxBatch) {
			gemms = append(gemms, func() error {
				return rt.gemm(a.logits, a.xlast, s.wts.wteT, m, C, paddedVocab(c.VocabSize), true)
			})
		}
		for _, g := range gemms {
			if err := g(); err != nil {
				return err
			}
			calls++
		}
	}
	if err := rt.sync(); err != nil {
		return err
	}
	s.record("cuBLAS warm-up", fmt.Sprintf("%d GEMMs, %d row classes (1..%d)", calls, len(classes), classes[len(classes)-1]), time.Since(t0))
	return nil
}
