//go:build cgo

package gpu

import "rosetop/gpu/cu"

// The samplers of sample.cu, over nb rows of logits (nb, ld) of which the first V columns count:
// argmax_next alone when every row is greedy; else argmax_part's chunked argmax for the greedy
// rows, then sample. Each writes the ids to next (mapped pinned memory: no copy node) and, in a
// decode graph, moves the device metadata on to the step after it (metaArgs; ahead.go).

// argmaxChunks is how many blocks share one logits row in argmax_part and argmax_next for a step
// of nb rows: about 512 blocks in all, 8 to maxArgmaxChunks a row.
func argmaxChunks(nb int) int { return min(maxArgmaxChunks, max(8, 512/max(nb, 1))) }

const maxArgmaxChunks = 16

const sampleThreads = 1024 // SAMPLE_THREADS in sample.cu

// metaArgs is the metadata a sampler moves on to the step after it (sample.cu META_PARAMS: the
// ids, positions, slots and output positions, the paged tables, the tables' width, log2 of the
// block size). ids 0: nothing moves. Rows at scratchSlot (padding) never move.
type metaArgs struct {
	ids, pos, slot, outPos, tables cu.Ptr
	width, sh, scratchSlot         int
}

func (m metaArgs) args() [8]cu.Arg {
	return [8]cu.Arg{cu.P(m.ids), cu.P(m.pos), cu.P(m.slot), cu.P(m.outPos), cu.P(m.tables), cu.I(m.width), cu.I(m.sh),
		cu.I(m.scratchSlot)}
}

// embedArgs is the embedding argmax_next writes for the next token (sample.cu EMBED_PARAMS, as
// embed_ln_warp's); x 0: none.
type embedArgs struct {
	x, xln, wte, wpe, lnw, lnb cu.Ptr
	C                          int
	eps                        float32
}

func (e embedArgs) args() [8]cu.Arg {
	return [8]cu.Arg{cu.P(e.x), cu.P(e.xln), cu.P(e.wte), cu.P(e.wpe), cu.P(e.lnw), cu.P(e.lnb), cu.I(e.C), cu.F(e.eps)}
}

// argmaxNext appends the greedy sampler of nb rows in one launch (argmax_next): part (nb,
// chunks) and done (nb) are its scratch, done zero between steps.
func (p *program) argmaxNext(next, logits cu.Ptr, V, ld int, part, done cu.Ptr, nb int, m metaArgs, e embedArgs) {
	ma, ea := m.args(), e.args()
	p.launch("sample", kArgmaxNext, nb, argmaxChunks(nb), 256, 0, false, cu.P(next), cu.P(logits), cu.I(V), cu.I(ld), cu.P(part),
		cu.P(done), ma[0], ma[1], ma[2], ma[3], ma[4], ma[5], ma[6], ma[7], ea[0], ea[1], ea[2], ea[3], ea[4], ea[5], ea[6], ea[7])
}

// argmaxPartsNext appends the greedy sampler of nb rows after lm_head_argmax (argmax_parts_next):
// each row's token is the largest of its nparts packed maxima in part (nb, nparts).
func (p *program) argmaxPartsNext(pdl bool, next, part cu.Ptr, nparts, nb int, m metaArgs, e embedArgs) {
	ma, ea := m.args(), e.args()
	p.launch("sample", kArgmaxPartsNext, nb, 1, 256, 0, pdl, cu.P(next), cu.P(part), cu.I(nparts), ma[0], ma[1], ma[2], ma[3],
		ma[4], ma[5], ma[6], ma[7], ea[0], ea[1], ea[2], ea[3], ea[4], ea[5], ea[6], ea[7])
}

// argmaxPart appends each row's per-chunk maxima into part (nb, chunks) (argmax_part).
func (p *program) argmaxPart(logits cu.Ptr, V, ld int, part cu.Ptr, nb int) {
	p.launch("sample", kArgmaxPart, nb, argmaxChunks(nb), 256, 0, false, cu.P(logits), cu.I(V), cu.I(ld), cu.P(part))
}

// sample appends the sampler of nb rows with per-row temperature, top-k, top-p and seed
// (sample): greedy rows take argmaxPart's maxima; wbuf (nb, ld) float64 is its scratch.
func (p *program) sample(next, logits cu.Ptr, V, ld int, temp, topk, topp, seed, outPos, wbuf, part cu.Ptr, nb int, m metaArgs) {
	ma := m.args()
	p.launch("sample", kSample, nb, 1, sampleThreads, 0, false, cu.P(next), cu.P(logits), cu.I(V), cu.I(ld), cu.P(temp),
		cu.P(topk), cu.P(topp), cu.P(seed), cu.P(outPos), cu.P(wbuf), cu.P(part), cu.I(argmaxChunks(nb)), ma[0], ma[1], ma[2],
		ma[3], ma[4], ma[5], ma[6], ma[7])
}
