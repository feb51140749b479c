//go:build cgo

package gpu

import (
	"math"
	"math/bits"

	"rosetop/gpu/cu"
)

// build makes s.prog the program of a step planned by p: the metadata upload (p.upload), then
// the forward pass.
func (s *state) build(p *stepPlan) *program {
	prog := &s.prog
	prog.reset()
	if p.upload {
		s.metaCopy(prog)
	}
	s.forward(p, prog)
	return prog
}

// forward appends the whole model for plan p: the embedding, the layers, the final norm of each
// sequence's last row, the logits and the sampler.
func (s *state) forward(p *stepPlan, prog *program) {
	s.embed(p, prog)
	for l := range s.cfg.NLayer {
		s.attentionBlock(p, l, prog)
		s.mlpBlock(p, l, prog)
	}
	s.head(p, prog)
}

// embed appends x = wte[ids] + wpe[pos] and ln_1 of the first layer into xln (with folded norms:
// x in fp16 and its statistics), unless the step before's sampler embedded the rows.
func (s *state) embed(p *stepPlan, prog *program) {
	if p.embedded {
		return
	}
	c, a, m, w := s.cfg, &s.act, &s.meta, s.wts
	var stats cu.Ptr
	if p.gemms.folded() {
		stats = a.stats
	}
	prog.embedLN(a.x, a.xln, m.devAt(m.off.ids), m.devAt(m.off.pos), w.wte, w.wpe, w.layers[0].ln1w, w.layers[0].ln1b,
		c.NEmbd, c.Eps, p.rows, stats)
}

// attentionBlock appends layer l's QKV GEMM, attention (with the KV write), output projection and
// the residual add + ln_2 into xln (folded: the residual add in the projection's epilogue, ln_2
// in the MLP's first GEMM).
func (s *state) attentionBlock(p *stepPlan, l int, prog *program) {
	c, a, m, L := s.cfg, &s.act, &s.meta, &s.wts.layers[l]
	C, NH, n, eps := c.NEmbd, c.NHead, p.rows, c.Eps
	switch {
	case p.gemms.folded(): // ln_1 in the epilogue, from the statistics of the embedding or the last layer's MLP
		parts := C / foldParts
		if l > 0 {
			parts = s.resParts(p, gemmFCProj)
		}
		s.layerGEMM(p, prog, L, gemmQKV, a.y, gemmEpi{kind: epiLN, bias: L.qkvD, colc: L.qkvC, stats: a.stats, parts: parts,
			next: L.projWg, nextBytes: C * C * 2})
	case p.gemms == viaSmall:
		s.layerGEMM(p, prog, L, gemmQKV, a.y, gemmEpi{})
	default:
		prog.gemm("gemm qkv", a.y, a.xln, L.attnW, p.m, C, 3*C)
	}
	kc, vc, width, bs := s.kv.keys(l), s.kv.values(l), s.kv.width, s.kv.bs
	slot, tokSeq, pos, tables := m.devAt(m.off.slot), m.devAt(m.off.tokSeq), m.devAt(m.off.pos), m.devAt(m.off.tables)
	scale := float32(1 / math.Sqrt(float64(C/NH)))
	if p.decode {
		prog.attentionDecode(p.pdl, s.opt.Paged, a.att, a.y, L.attnB, slot, kc, vc, tokSeq, pos, tables, width, bs, C, NH, scale, n)
	} else {
		prog.qkvBiasKV(p.pdl, a.qkv, a.y, L.attnB, kc, vc, slot, C, n)
		prog.attention(p.pdl, s.opt.Paged, a.att, a.qkv, kc, vc, tokSeq, pos, tables, width, bs, C, NH, scale, n)
	}
	switch {
	case p.gemms.folded():
		s.layerGEMM(p, prog, L, gemmProj, a.x, gemmEpi{kind: epiRes, bias: L.projB, stats: a.stats, x16: a.xln,
			next: L.fcWg, nextBytes: C * c.Inner * 2})
		return
	case p.gemms == viaSmall:
		s.layerGEMM(p, prog, L, gemmProj, a.y, gemmEpi{})
	default:
		prog.gemmSplitK("gemm attn proj", a.y, a.att, L.projW, p.m, C, C, p.projSplits)
	}
	prog.residualLN(p.pdl, a.x, a.y, p.projSplits, p.m*C, L.projB, L.ln2w, L.ln2b, a.xln, C, eps, n)
}

// mlpBlock appends layer l's MLP and the residual add + the next norm: the next layer's ln_1 into
// xln, or after the last layer ln_f of each sequence's last row into xlast (folded: the residual
// add and the next norm's statistics in the second GEMM's epilogue, except in the last layer,
// whose plain product goes through the final norm's kernel unless lm_head_argmax folds ln_f).
func (s *state) mlpBlock(p *stepPlan, l int, prog *program) {
	c, w, a := s.cfg, s.wts, &s.act
	L, last := &w.layers[l], l+1 == c.NLayer
	C, F, n, eps, m := c.NEmbd, c.Inner, p.rows, c.Eps, p.m
	switch {
	case p.gemms.folded():
		s.layerGEMM(p, prog, L, gemmFC, a.h, gemmEpi{kind: epiLNGELU, bias: L.fcD, colc: L.fcC, stats: a.stats,
			parts: s.resParts(p, gemmProj), next: L.fcProjWg, nextBytes: F * C * 2})
		switch {
		case !last:
			s.layerGEMM(p, prog, L, gemmFCProj, a.x, gemmEpi{kind: epiRes, bias: L.fcProjB, stats: a.stats, x16: a.xln,
				next: w.layers[l+1].attnWg, nextBytes: 3 * C * C * 2})
			return
		case p.head: // ln_f is folded into lm_head_argmax, which reads x in fp16 and its statistics
			s.layerGEMM(p, prog, L, gemmFCProj, a.x, gemmEpi{kind: epiRes, bias: L.fcProjB, stats: a.stats, x16: a.xln})
			return
		}
		s.layerGEMM(p, prog, L, gemmFCProj, a.y, gemmEpi{})
	case p.gemms == viaSmall:
		s.layerGEMM(p, prog, L, gemmFC, a.h, gemmEpi{kind: epiGELU, bias: L.fcB})
		s.layerGEMM(p, prog, L, gemmFCProj, a.y, gemmEpi{})
	default:
		if p.fc != nil { // cuBLASLt adds the bias, applies GELU and writes h itself
			prog.ltFC(a.h, a.xln, L.fcW, L.fcBh, m, C, F, p.fc)
		} else {
			prog.gemm("gemm fc", a.y, a.xln, L.fcW, m, C, F)
			prog.biasGELU(p.pdl, a.h, a.y, L.fcB, F, n)
		}
		prog.gemmSplitK("gemm fc proj", a.y, a.h, L.fcProjW, m, F, C, p.fcProjSplits)
	}
	if !last {
		nx := &w.layers[l+1]
		prog.residualLN(p.pdl, a.x, a.y, p.fcProjSplits, m*C, L.fcProjB, nx.ln1w, nx.ln1b, a.xln, C, eps, n)
		return
	}
	mt := &s.meta
	prog.residualLNLast(p.pdl, a.x, a.y, p.fcProjSplits, p.yRows()*C, L.fcProjB, w.lnfw, w.lnfb, a.xlast, mt.devAt(mt.off.last), C, eps, p.seqs)
}

// layerGEMM names one of a layer's four weight GEMMs.
type layerGEMM uint8

const (
	gemmQKV    layerGEMM = iota // (C, 3C)
	gemmProj                    // attention's output projection (C, C)
	gemmFC                      // the MLP's first (C, F)
	gemmFCProj                  // the MLP's second (F, C)
)

// layerGEMM appends layer L's GEMM g, y = x W through epilogue e, on the step's small-step path:
// small_gemm (viaSmall, viaFolded) or wg_gemm (viaWG), from W's packed copy for that path; x is
// g's input buffer (xBuf).
func (s *state) layerGEMM(p *stepPlan, prog *program, L *devLayer, g layerGEMM, y cu.Ptr, e gemmEpi) {
	C, F := s.cfg.NEmbd, s.cfg.Inner
	sg, wg := &s.caps.small, s.caps.wg.at(p.rows)
	shape := [...]struct {
		name     string
		in, out  int
		mma, wgp cu.Ptr
		sp       smallPlan
		wp       wgPlan
		xb       xBuffer // x
	}{
		gemmQKV:    {"gemm qkv", C, 3 * C, L.attnWp, L.attnWg, sg.qkv, wg.qkv, xLN},
		gemmProj:   {"gemm attn proj", C, C, L.projWp, L.projWg, sg.proj, wg.proj, xAtt},
		gemmFC:     {"gemm fc", C, F, L.fcWp, L.fcWg, sg.fc, wg.fc, xLN},
		gemmFCProj: {"gemm fc proj", F, C, L.fcProjWp, L.fcProjWg, sg.fcProj, wg.fcProj, xH},
	}[g]
	x, _ := s.xBuf(shape.xb)
	if p.gemms == viaWG {
		prog.wgGEMM(shape.name, p.pdl, y, x, shape.xb, shape.wgp, p.rows, shape.in, shape.out, shape.wp, e, C, s.cfg.Eps)
		return
	}
	prog.smallGEMM(shape.name, p.pdl, y, x, shape.mma, p.rows, shape.in, shape.out, shape.sp, e, C, s.cfg.Eps)
}

// resParts is the statistics pairs a row gets from GEMM g's residual epilogue on the step's
// folded path: one per block of columns.
func (s *state) resParts(p *stepPlan, g layerGEMM) int {
	C := s.cfg.NEmbd
	switch {
	case p.gemms == viaWG:
		return C / wgBN
	case g == gemmProj:
		return C / (32 * s.caps.small.proj.nt)
	}
	return C / (32 * s.caps.small.fcProj.nt)
}

// head appends the LM head on the final-normed last rows (xlast) and the sampler; with p.head the
// LM head on the rows' fp16 residual stream with ln_f folded in, taking its argmax itself.
func (s *state) head(p *stepPlan, prog *program) {
	c, a, w := s.cfg, &s.act, s.wts
	if p.head {
		prog.lmHeadArgmax(p.pdl, a.amax, a.xln, w.headWg, w.headC, w.headD, a.stats, s.resParts(p, gemmFCProj), statStride(c.NEmbd),
			c.Eps, p.rows, c.NEmbd, c.VocabSize, s.caps.headGrid)
	} else {
		prog.gemm("gemm lm head", a.logits, a.xlast, w.wteT, p.mHead, c.NEmbd, paddedVocab(c.VocabSize))
	}
	s.sampler(p, prog)
}

// sampler appends the sampler of the step's logits: argmax_next alone when every row is greedy,
// else argmax_part then sample; after lm_head_argmax, argmax_parts_next. In a graph it moves the
// device metadata on (p.advance) and, greedy, embeds the next step's rows (p.embedNext).
func (s *state) sampler(p *stepPlan, prog *program) {
	c, a, m, w := s.cfg, &s.act, &s.meta, s.wts
	V, vp := c.VocabSize, paddedVocab(c.VocabSize)
	meta := metaArgs{scratchSlot: s.scratchSlot()}
	if p.advance {
		meta = metaArgs{ids: m.devAt(m.off.ids), pos: m.devAt(m.off.pos), slot: m.devAt(m.off.slot), outPos: m.devAt(m.off.outPos),
			width: s.kv.width, sh: bits.TrailingZeros(uint(s.kv.bs)), scratchSlot: s.scratchSlot()}
		if s.opt.Paged {
			meta.tables = m.devAt(m.off.tables)
		}
	}
	if p.greedy {
		var e embedArgs
		if p.embedNext {
			e = embedArgs{x: a.x, xln: a.xln, wte: w.wte, wpe: w.wpe, lnw: w.layers[0].ln1w, lnb: w.layers[0].ln1b, C: c.NEmbd, eps: c.Eps}
		}
		if p.head {
			prog.argmaxPartsNext(p.pdl, p.next, a.amax, s.caps.headGrid, p.seqs, meta, e)
			return
		}
		prog.argmaxNext(p.next, a.logits, V, vp, a.amax, a.done, p.seqs, meta, e)
		return
	}
	prog.argmaxPart(a.logits, V, vp, a.amax, p.seqs)
	prog.sample(p.next, a.logits, V, vp, m.devAt(m.off.temp), m.devAt(m.off.topk), m.devAt(m.off.topp), m.devAt(m.off.seed),
		m.devAt(m.off.outPos), a.weights, a.amax, p.seqs, meta)
}
