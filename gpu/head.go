//go:build cgo

package gpu

import (
	"fmt"

	"rosetop/gpu/cu"
)

// The LM head of a greedy decode step on the wg_gemm path (gemm_sm90a.cu lm_head_argmax): the
// final norm folded into the tied embedding as into the layer GEMMs (fold.go), packed from the
// uploaded wte on the device at Open (pack_head); the logits are never written, each block's
// per-row argmax goes to argmax_parts_next (sample.cu), which takes the token and moves the
// metadata on. The step loses the final norm's kernel and 12.9 MB of fp32 logits written and
// read back at 64 rows, and the LM head joins the PDL chain. Steps that sample, prefill or return
// their logits keep the plain LM head and the samplers.

const (
	headThreads = 2 * wgGroupThread // two warpgroups, each multiplying half of K
	headTile    = wgBN              // columns a tile of the packed head
)

// headFits reports whether lm_head_argmax takes a model of width C: half of K in a warpgroup's
// registers, from a box of X's first column (xmaps.go).
func headFits(C int) bool { return C%(2*xBox) == 0 && C/2 <= wgMaxSlice }

// headTiles is the 64-column tiles of a vocabulary of V tokens (the last one zero-padded).
func headTiles(V int) int { return (V + headTile - 1) / headTile }

// headBlocks is lm_head_argmax's grid: a block an SM (one fits: headShared), at most a tile each.
func headBlocks(sms, V int) int { return max(1, min(sms, headTiles(V))) }

// headShared is lm_head_argmax's dynamic shared memory at width C: two stages of a tile (64 x C
// halves; X overlays the second: its boxes exactly, its 64 rows of C + 8 halves spilling into the
// swap buffers), the swap buffers (2 x 2 x 64 x 32 floats), 64 row norms and five mbarriers.
func headShared(C int) int { return 2*headTile*C*2 + 2*2*64*32*4 + 64*8 + 5*8 }

// packHead appends pack_head (gpt2.cu): w's LM head tensors (weightSpecs: filled on the device)
// from the uploaded wte and ln_f of a model of width C and V tokens.
func (p *program) packHead(w *devWeights, C, V int) {
	Vh := headTiles(V) * headTile
	p.launch("pack head", kPackHead, (Vh+7)/8, 1, 256, 0, false, cu.P(w.headWg), cu.P(w.headC), cu.P(w.headD), cu.P(w.wte),
		cu.P(w.lnfw), cu.P(w.lnfb), cu.I(V), cu.I(C), cu.I(Vh))
}

// packHead runs pack_head once, at Open, and waits for it.
func (s *state) packHead() error {
	var p program
	p.packHead(s.wts, s.cfg.NEmbd, s.cfg.VocabSize)
	if err := s.run(&p); err != nil {
		return err
	}
	return s.ctx.Sync()
}

// lmHeadArgmax appends lm_head_argmax over m rows of x, act.xln (fp16, the residual stream
// written by the last layer's residual epilogue; row by row or by its tensor maps, xmaps.go) with
// its statistics (parts pairs a row, pstride apart):
// part (m, blocks) gets each block's per-row argmax. wp, colc and d are the folded head
// (devWeights.head*), C the width, V the vocabulary.
func (p *program) lmHeadArgmax(pdl bool, part, x, wp, colc, d, stats cu.Ptr, parts, pstride int, eps float32, m, C, V, blocks int) {
	switch {
	case m < 1 || m > wgMaxRows:
		p.fail(fmt.Errorf("gpu: lm_head_argmax for %d rows, want 1..%d", m, wgMaxRows))
		return
	case !headFits(C):
		p.fail(fmt.Errorf("gpu: lm_head_argmax for width %d, want a multiple of %d up to %d", C, 2*xBox, 2*wgMaxSlice))
		return
	}
	k := kLMHead
	boxes := xBoxes(m)
	if boxes {
		k++
	}
	p.launch("lm head + argmax", k, blocks, 1, headThreads, headShared(C), pdl, cu.P(part), xArg(x, xLN, m, boxes), cu.P(wp), cu.P(colc),
		cu.P(d), cu.P(stats), cu.I(parts), cu.I(pstride), cu.F(eps), cu.I(m), cu.I(C), cu.I(V), cu.I(headTiles(V)))
}
