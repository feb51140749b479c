//go:build cgo

package gpu

import (
	"fmt"

	"rosetop/gpu/cu"
)

// activations are the forward pass's device buffers, sized for MaxTokens tokens (T) and
// MaxBatch sequences (B), sub-allocated from one buffer.
type activations struct {
	buf     cu.Ptr
	x       cu.Ptr // fp32 (T, C) residual stream
	xln     cu.Ptr // fp16 (T, C) normalized input of the next GEMM
	qkv     cu.Ptr // fp16 (T, 3C)
	att     cu.Ptr // fp16 (T, C) attention output
	y       cu.Ptr // fp32 (T, max(3C, F)) the last GEMM's output before its bias (or its split-K partials)
	h       cu.Ptr // fp16 (T, F) MLP hidden
	xlast   cu.Ptr // fp16 (max(B, 64), C) final-normed last rows, or a chunk of token rows (rows.go)
	logits  cu.Ptr // fp32 (max(B, 64), Vp), Vp = V rounded up to 8; the padding columns are never read
	amax    cu.Ptr // uint64 (B, max(maxArgmaxChunks, SMs)) the samplers' packed per-chunk maxima, lm_head_argmax's per block
	done    cu.Ptr // uint32 (B) argmax_next's count of finished chunks a row: zero between steps
	weights cu.Ptr // float64 (B, Vp) the sampler's scratch
	stats   cu.Ptr // float2 (smallMaxRows, statStride) the folded norms' row statistics (fold.go)
}

// kvPool is the KV cache: for each layer, K then V, each (numBlocks+1, bs, C) fp16. Block
// numBlocks is a scratch block that padded graph rows write to; the engine never sees it.
type kvPool struct {
	buf        cu.Ptr
	bytes      int64
	bs         int // positions per block
	numBlocks  int // usable blocks
	width      int // block table row width: ceil(MaxSeqLen / bs)
	layerBytes int64
}

func (k *kvPool) keys(l int) cu.Ptr   { return k.buf + cu.Ptr(int64(2*l)*k.layerBytes) }
func (k *kvPool) values(l int) cu.Ptr { return k.buf + cu.Ptr(int64(2*l+1)*k.layerBytes) }
func (k *kvPool) scratchBlock() int32 { return int32(k.numBlocks) }

// scratchSlot is the first cache slot of the scratch block, where padded rows write.
func (s *state) scratchSlot() int { return int(s.kv.scratchBlock()) * s.kv.bs }

func (s *state) allocBuffers() error {
	c, o := s.cfg, s.opt
	T, B, C, F, V := int64(o.MaxTokens), int64(o.MaxBatch), int64(c.NEmbd), int64(c.Inner), int64(c.VocabSize)
	// The GEMMs run for gemmRows rows: their inputs and outputs are sized for that (Tg, Bg).
	Tg, Bg := int64(gemmRows(o.MaxTokens)), int64(gemmRows(o.MaxBatch))
	Hg := max(Bg, int64(gemmRows(rowChunkMax))) // the LM head's: a step's sequences, or a chunk of token rows
	sizes := []struct {
		dst *cu.Ptr
		n   int64
	}{
		{&s.act.x, T * C * 4}, {&s.act.xln, Tg * C * 2}, {&s.act.qkv, T * 3 * C * 2}, {&s.act.att, Tg * C * 2},
		{&s.act.y, max(Tg*max(3*C, F), fcProjSplits*splitMaxRows*C) * 4},
		{&s.act.h, Tg * F * 2}, {&s.act.xlast, Hg * C * 2},
		{&s.act.logits, Hg * int64(paddedVocab(int(V))) * 4},
		{&s.act.amax, B * int64(max(maxArgmaxChunks, s.ctx.Info().SMs)) * 8}, {&s.act.done, B * 4}, {&s.act.weights, B * int64(paddedVocab(int(V))) * 8},
		{&s.act.stats, smallMaxRows * int64(statStride(c.NEmbd)) * 8},
	}
	var total int64
	for _, z := range sizes {
		total += align(z.n)
	}
	buf, err := s.ctx.Alloc(total, "activations")
	if err != nil {
		return err
	}
	s.act.buf = buf
	var off int64
	for _, z := range sizes {
		*z.dst = buf + cu.Ptr(off)
		off += align(z.n)
	}
	if err := s.ctx.Zero(s.act.done, B*4); err != nil {
		return err
	}

	s.kv.bs = o.BlockSize
	s.kv.width = (o.MaxSeqLen + o.BlockSize - 1) / o.BlockSize
	// The attention kernels hold a sequence's block table in dynamic shared memory beside their
	// static arrays (26 KB in the decode ones): long contexts in small blocks need more than the
	// default 48 KB a block allows.
	for _, k := range []kernelID{kAttnPaged, kAttnContig, kAttnDecodePaged, kAttnDecodeContig} {
		if err := s.ctx.SetMaxShared(s.k[k], 4*s.kv.width); err != nil {
			return err
		}
	}
	return s.allocMeta(T, B, int64(s.kv.width))
}

// allocKV sizes and allocates the KV pool. Paged: as many blocks as MemoryFraction of the free
// memory holds, at most maxPagedBlocks and maxKVSlots' worth. Contiguous: one MaxSeqLen region
// per batch slot, an error when that does not fit.
func (s *state) allocKV() error {
	c, o := s.cfg, s.opt
	perPos := int64(2 * c.NLayer * c.NEmbd * 2) // K and V of every layer, fp16
	perBlock := perPos * int64(s.kv.bs)
	free, _, err := s.ctx.MemInfo()
	if err != nil {
		return err
	}
	budget := int64(float64(free) * o.MemoryFraction)
	slots := maxKVSlots(c.NEmbd)
	if o.Paged {
		s.kv.numBlocks = int(min(budget/perBlock-1, maxPagedBlocks, slots/int64(s.kv.bs)-1))
		if s.kv.numBlocks < s.kv.width {
			return fmt.Errorf("gpu: %w: a %d-position sequence needs %d KV blocks of %d KB; %.0f%% of the free %d MB holds %d",
				ErrDoesNotFit, o.MaxSeqLen, s.kv.width, perBlock>>10, o.MemoryFraction*100, free>>20, max(s.kv.numBlocks, 0))
		}
	} else {
		s.kv.numBlocks = o.MaxBatch
		if n := int64(o.MaxBatch+1) * int64(s.kv.bs); n > slots {
			return fmt.Errorf("gpu: %w: contiguous KV for %d sequences of %d positions is %d slots a layer; the kernels address at most %d",
				ErrDoesNotFit, o.MaxBatch, o.MaxSeqLen, n, slots)
		}
		if need := int64(o.MaxBatch+1) * perBlock; need > budget {
			return fmt.Errorf("gpu: %w: contiguous KV for %d sequences of %d positions needs %d MB; %.0f%% of the free %d MB is %d MB",
				ErrDoesNotFit, o.MaxBatch, o.MaxSeqLen, need>>20, o.MemoryFraction*100, free>>20, budget>>20)
		}
	}
	s.kv.layerBytes = int64(s.kv.numBlocks+1) * int64(s.kv.bs) * int64(c.NEmbd) * 2
	s.kv.bytes = 2 * int64(c.NLayer) * s.kv.layerBytes
	if s.kv.buf, err = s.ctx.Alloc(s.kv.bytes, "KV pool"); err != nil {
		return fitErr(err)
	}
	return nil
}

// The output projections of cuBLAS steps of up to splitMaxRows GEMM rows run as K slices in one
// batched GEMM (more blocks for a long K and few rows): the MLP's (K = F) in fcProjSplits, the
// attention's (K = C) in projSplits. The residual add sums the slices' partials.
const (
	fcProjSplits = 4
	projSplits   = 4
	splitMaxRows = 64
)

// maxPagedBlocks caps the paged pool: 2^18 blocks of 16 are 4M positions, more than any batch
// uses, and keep the engine's host-side block bookkeeping (~100 bytes a block) near 25 MB. Only
// small models reach it (the tiny model would otherwise get millions of blocks).
const maxPagedBlocks = 1 << 18

// maxKVSlots is the most cache slots (positions) a layer's keys or values may hold: the attention
// kernel addresses them in 32-bit counts of 16-byte words (gpt2.cu kv_slot), C/8 words a slot.
// Only a model of very few layers given most of a GPU's memory comes near it.
func maxKVSlots(C int) int64 { return (1 << 32) / int64(C/8) }
