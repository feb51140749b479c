//go:build cgo

package gpu

import "rosetop/gpu/cu"

// wg_gemm and lm_head_argmax take X, their input rows, either by one bulk copy a row or, in their
// _box kernels, by bulk tensor copies of 64 columns x m rows (gemm_sm90a.cu x_boxes): one copy a
// box, not one a row. The boxes are the faster from 8 rows on, the rows below (bench/RESULTS.md):
// xBoxes picks by that. A tensor map fixes its box, so each of the three buffers a decode step's
// GEMMs read has one map for every row count m in 1..wgMaxRows, whose boxes are m rows: a step's
// copies read its rows and no more.

// xBuffer is an activation buffer wg_gemm reads X from.
type xBuffer uint8

const (
	xLN  xBuffer = iota // act.xln: the QKV and first MLP GEMMs, the LM head (C columns)
	xAtt                // act.att: the attention output projection (C columns)
	xH                  // act.h: the MLP's second GEMM (F columns)
	numXBuffers
)

const (
	xBox        = 64 // the columns of X's tensor copies (128 bytes, the swizzle's span) and the most rows
	xBoxMinRows = 8  // the fewest rows whose X comes by tensor copies
)

// xBoxes reports whether X of m rows comes by tensor copies (the _box kernels) rather than row
// by row.
func xBoxes(m int) bool { return m >= xBoxMinRows }

// xArg is the X argument of a kernel of m rows of x, buffer b: the tensor map of its first m rows
// where boxes, else x.
func xArg(x cu.Ptr, b xBuffer, m int, boxes bool) cu.Arg {
	if boxes {
		return cu.T(int(b)*wgMaxRows + m - 1)
	}
	return cu.P(x)
}

// xBuf is buffer b's device address and its row's columns.
func (s *state) xBuf(b xBuffer) (cu.Ptr, int) {
	switch b {
	case xAtt:
		return s.act.att, s.cfg.NEmbd
	case xH:
		return s.act.h, s.cfg.Inner
	}
	return s.act.xln, s.cfg.NEmbd
}

// setXMaps encodes the maps xArg names over the activation buffers.
func (s *state) setXMaps() error {
	maps := make([]cu.Map2D, 0, int(numXBuffers)*wgMaxRows)
	for b := range numXBuffers {
		base, cols := s.xBuf(b)
		for m := 1; m <= wgMaxRows; m++ {
			maps = append(maps, cu.Map2D{Base: base, Cols: cols, Rows: m, BoxCols: xBox, BoxRows: m})
		}
	}
	return s.ctx.SetTensorMaps(maps)
}
