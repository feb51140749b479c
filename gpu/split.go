//go:build cgo

package gpu

import "fmt"

// rows is the part of a step's token rows one chain of kernels works on: the per-token
// activations and metadata from row first on. A step runs as the rows from 0; a split decode
// step (lanes.go) as two.
type rows struct {
	n                 int         // token rows
	a                 activations // s.act with the per-token buffers moved to row first
	pos, slot, tokSeq devPtr      // the per-token metadata arrays from row first
}

// rowsFrom returns rows [first, first+n) of the step. y moves by first rows of its widest use
// (max(3C, F) floats), so the two lanes' GEMM outputs stay apart.
func (s *state) rowsFrom(first, n int) rows {
	c, m := s.cfg, &s.meta
	C, F := c.NEmbd, c.Inner
	a := s.act
	at := func(p devPtr, rowBytes int) devPtr { return p + devPtr(first*rowBytes) }
	a.x, a.xln, a.att = at(a.x, 4*C), at(a.xln, 2*C), at(a.att, 2*C)
	a.qkv, a.y, a.h = at(a.qkv, 2*3*C), at(a.y, 4*max(3*C, F)), at(a.h, 2*F)
	a.stats = at(a.stats, 8*statStride(C))
	return rows{n: n, a: a,
		pos: at(m.devAt(m.off.pos), 4), slot: at(m.devAt(m.off.slot), 4), tokSeq: at(m.devAt(m.off.tokSeq), 4)}
}

// Two lanes are off unless Options.SplitDecodeRows asks for them: with every runner measured in
// a context of its own (runtime.go openRuntime), no decode step ran faster as two lanes than on
// the better one-lane path (H200, GPU us per step graph: 32 rows 411.5 against 404.2 on
// small_gemm, 48 rows 446.0 against 445.7 on cuBLAS, 64 rows 473.5 against 464.5; the
// decode-heavy and admission jobs agreed; bench/RESULTS.md). The range 32-48 used before came
// from runners measured after the first in one process, which ran slower on every path.
// splitDefaultMaxRows is SplitDecodeMaxRows's default when splitting is asked for.
const splitDefaultMaxRows = 64

// splitRows returns the first lane's rows when a step of n token rows and nb sequences runs as
// two lanes, else 0. Only decode steps (a token per sequence) in the Options' range split, only
// when both lanes' GEMMs run on small_gemm (cuBLAS is bound to the main stream), and not under
// the per-op event profile (its events are on the main stream). The lanes are a GEMM row class
// each (gemmRows), so no GEMM's padding rows could reach into the other lane.
func (s *state) splitRows(n, nb int) int {
	lo, hi := s.opt.SplitDecodeRows, s.opt.SplitDecodeMaxRows
	if hi == 0 {
		hi = splitDefaultMaxRows
	}
	if lo <= 0 || n != nb || n < max(lo, 2) || n > hi || s.prof != nil {
		return 0
	}
	first := gemmRows((n + 1) / 2)
	if first >= n || gemmRows(n-first) != n-first || !s.useSmall(first) {
		return 0
	}
	return first
}

// forwardSplit enqueues the layers of a decode step of n rows as two lanes, rows [0, first) on
// the main stream and [first, n) on the side stream, then joins them for the LM head and the
// sampler. The embedding (all rows) is already enqueued. Each lane ends with ln_f of its rows in
// xln: every decode row is its sequence's last, so xln is the LM head's input.
func (s *state) forwardSplit(n, first int) error {
	rt := s.rt
	lanes := [2]rows{s.rowsFrom(0, first), s.rowsFrom(first, n-first)}
	if err := rt.fork(); err != nil {
		return err
	}
	for i := range lanes {
		if i == 1 {
			rt.onSide()
		}
		if err := s.layers(&lanes[i], n, true); err != nil {
			// Join even so: a capture cannot end with the side stream still in it.
			if jerr := rt.join(); jerr != nil {
				return fmt.Errorf("%w (and joining the lanes: %v)", err, jerr)
			}
			return err
		}
	}
	if err := rt.join(); err != nil {
		return err
	}
	return s.head(n, s.act.xln)
}
