//go:build cgo

package gpu

import (
	"fmt"
	"unsafe"
)

// activations are the forward pass's device buffers, sized for MaxTokens tokens (T) and
// MaxBatch sequences (B), sub-allocated from one buffer.
type activations struct {
	buf     devPtr
	x       devPtr // fp32 (T, C) residual stream
	xln     devPtr // fp16 (T, C) normalized input of the next GEMM
	qkv     devPtr // fp16 (T, 3C)
	att     devPtr // fp16 (T, C) attention output
	y       devPtr // fp32 (T, max(3C, F)) the last GEMM's output before its bias (or its split-K partials)
	h       devPtr // fp16 (T, F) MLP hidden
	xlast   devPtr // fp16 (B, C) final-normed last rows
	logits  devPtr // fp32 (B, Vp), Vp = V rounded up to 8; the padding columns are never read
	amax    devPtr // uint64 (B, maxArgmaxChunks) argmax_part's and argmax_next's packed per-chunk maxima
	done    devPtr // uint32 (B) argmax_next's count of finished chunks a row: zero between steps
	weights devPtr // float64 (B, Vp) the sampler's scratch
	stats   devPtr // float2 (smallMaxRows, statStride) the folded norms' row statistics (fold.go)
}

// metaBufs hold the per-step metadata: a pinned host copy written by the step and a device copy
// that the kernels (and the graphs) read at fixed addresses. Each step's first kernel, meta_copy,
// reads the host copy through its mapping and writes the device copy: on the H200 a
// host-to-device copy node there took 9.3 us of GPU time per batch-64 step and 11.4 us per
// batch-1 step (the whole graph against the forward pass's alone; bench/RESULTS.md). The host
// copy is rewritten only after the previous step's stream synchronization, so it is never
// overwritten while the kernel may still read it.
type metaBufs struct {
	host    unsafe.Pointer // pinned, bytes long; the device layout followed by next (B int32)
	hostDev devPtr         // the device's address of host (mapped)
	dev     devPtr
	bytes   int64 // the metadata part (what one step uploads)
	// Views of host (Go slices over pinned memory), and offsets of the same arrays on the device.
	ids, pos, slot, tokSeq []int32 // (T)
	last, outPos, topk     []int32 // (B)
	temp, topp             []float32
	tables                 []int32 // (B, width)
	seed                   []uint64
	next                   []int32 // (B) the sampled tokens, written by the sampler through nextDev
	nextDev                devPtr  // the device's address of next (mapped pinned memory: no copy node)
	// nextAlt is a second next for steps run ahead (ahead.go): consecutive predicted steps write
	// next and nextAlt in turn, so the host reads one while the device writes the other.
	nextAlt    []int32
	nextAltDev devPtr
	off        metaOffsets
}

type metaOffsets struct {
	ids, pos, slot, tokSeq, last, outPos, topk, temp, topp, tables, seed int64
}

// kvPool is the KV cache: for each layer, K then V, each (numBlocks+1, bs, C) fp16. Block
// numBlocks is a scratch block that padded graph rows write to; the engine never sees it.
type kvPool struct {
	buf        devPtr
	bytes      int64
	bs         int // positions per block
	numBlocks  int // usable blocks
	width      int // block table row width: ceil(MaxSeqLen / bs)
	layerBytes int64
}

func (k *kvPool) keys(l int) devPtr   { return k.buf + devPtr(int64(2*l)*k.layerBytes) }
func (k *kvPool) values(l int) devPtr { return k.buf + devPtr(int64(2*l+1)*k.layerBytes) }
func (k *kvPool) scratchBlock() int32 { return int32(k.numBlocks) }

// scratchSlot is the first cache slot of the scratch block, where padded rows write.
func (s *state) scratchSlot() int { return int(s.kv.scratchBlock()) * s.kv.bs }

func (s *state) allocBuffers() error {
	c, o := s.cfg, s.opt
	T, B, C, F, V := int64(o.MaxTokens), int64(o.MaxBatch), int64(c.NEmbd), int64(c.Inner), int64(c.VocabSize)
	// The GEMMs run for gemmRows rows: their inputs and outputs are sized for that (Tg, Bg).
	Tg, Bg := int64(gemmRows(o.MaxTokens)), int64(gemmRows(o.MaxBatch))
	sizes := []struct {
		dst *devPtr
		n   int64
	}{
		{&s.act.x, T * C * 4}, {&s.act.xln, Tg * C * 2}, {&s.act.qkv, T * 3 * C * 2}, {&s.act.att, Tg * C * 2},
		{&s.act.y, max(Tg*max(3*C, F), fcProjSplits*fcProjSplitRows*C) * 4},
		{&s.act.h, Tg * F * 2}, {&s.act.xlast, Bg * C * 2},
		{&s.act.logits, Bg * int64(paddedVocab(int(V))) * 4},
		{&s.act.amax, B * maxArgmaxChunks * 8}, {&s.act.done, B * 4}, {&s.act.weights, B * int64(paddedVocab(int(V))) * 8},
		{&s.act.stats, smallMaxRows * int64(statStride(c.NEmbd)) * 8},
	}
	var total int64
	for _, z := range sizes {
		total += align(z.n)
	}
	buf, err := s.rt.alloc(total, "activations")
	if err != nil {
		return err
	}
	s.act.buf = buf
	var off int64
	for _, z := range sizes {
		*z.dst = buf + devPtr(off)
		off += align(z.n)
	}
	if err := s.rt.zero(s.act.done, B*4); err != nil {
		return err
	}

	// Metadata: the same layout on both sides.
	s.kv.bs = o.BlockSize
	s.kv.width = (o.MaxSeqLen + o.BlockSize - 1) / o.BlockSize
	m := &s.meta
	var mo int64
	place := func(n int64) int64 { p := mo; mo += align(n); return p }
	m.off = metaOffsets{
		ids: place(T * 4), pos: place(T * 4), slot: place(T * 4), tokSeq: place(T * 4),
		last: place(B * 4), outPos: place(B * 4), topk: place(B * 4), temp: place(B * 4), topp: place(B * 4),
		tables: place(B * int64(s.kv.width) * 4), seed: place(B * 8),
	}
	m.bytes = mo
	nextOff, altOff := place(B*4), place(B*4)
	if m.host, err = s.rt.allocHost(mo, "step metadata"); err != nil {
		return err
	}
	if m.dev, err = s.rt.alloc(m.bytes, "step metadata"); err != nil {
		return err
	}
	i32 := func(off, n int64) []int32 { return unsafe.Slice((*int32)(unsafe.Add(m.host, off)), n) }
	f32 := func(off, n int64) []float32 { return unsafe.Slice((*float32)(unsafe.Add(m.host, off)), n) }
	m.ids, m.pos, m.slot, m.tokSeq = i32(m.off.ids, T), i32(m.off.pos, T), i32(m.off.slot, T), i32(m.off.tokSeq, T)
	m.last, m.outPos, m.topk = i32(m.off.last, B), i32(m.off.outPos, B), i32(m.off.topk, B)
	m.temp, m.topp = f32(m.off.temp, B), f32(m.off.topp, B)
	m.tables = i32(m.off.tables, B*int64(s.kv.width))
	m.seed = unsafe.Slice((*uint64)(unsafe.Add(m.host, m.off.seed)), B)
	m.next, m.nextAlt = i32(nextOff, B), i32(altOff, B)
	if m.hostDev, err = s.rt.hostDevPtr(m.host); err != nil {
		return err
	}
	m.nextDev, m.nextAltDev = m.hostDev+devPtr(nextOff), m.hostDev+devPtr(altOff)
	return nil
}

func (m *metaBufs) devAt(off int64) devPtr { return m.dev + devPtr(off) }

// allocKV sizes and allocates the KV pool. Paged: as many blocks as MemoryFraction of the free
// memory holds, at most maxPagedBlocks and maxKVSlots' worth. Contiguous: one MaxSeqLen region
// per batch slot, an error when that does not fit.
func (s *state) allocKV() error {
	c, o := s.cfg, s.opt
	perPos := int64(2 * c.NLayer * c.NEmbd * 2) // K and V of every layer, fp16
	perBlock := perPos * int64(s.kv.bs)
	free, _, err := s.rt.memInfo()
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
	if s.kv.buf, err = s.rt.alloc(s.kv.bytes, "KV pool"); err != nil {
		return fitErr(err)
	}
	return nil
}

const attnThreads = 128 // ATT_THREADS in gpt2.cu

// argmaxChunks is how many blocks share one logits row in argmax_part and argmax_next for a step
// of nb rows: about 512 blocks in all, 8 to maxArgmaxChunks a row. The greedy sampler alone over
// GPT-2 logits (TestProfileSampler, H200, us a call) at 64 rows: 32 chunks 9.86, 16 7.94, 8
// 7.19; at 1 row: 32 chunks 5.35, 16 4.94, 8 5.27.
func argmaxChunks(nb int) int { return min(maxArgmaxChunks, max(8, 512/max(nb, 1))) }

const maxArgmaxChunks = 16

// fcProjSplits cuts the MLP's output projection (K = F = 3072 for GPT-2, N = C) into K slices
// run as one batched GEMM for decode-sized steps: at 64 rows cuBLAS took 6.5 us for it whole and
// 3.7 us as 4 slices (H200); residual_ln adds the slices' partial sums.
const (
	fcProjSplits    = 4
	fcProjSplitRows = 64 // most rows a split runs for; longer steps have enough blocks without
	// projSplits cuts the attention's output projection (K = N = C) the same way: at 64 rows
	// cuBLAS took 3.3 us for it whole and 2.7 us as 4 slices (H200).
	projSplits = 4
)

// maxPagedBlocks caps the paged pool: 2^18 blocks of 16 are 4M positions, more than any batch
// uses, and keep the engine's host-side block bookkeeping (~100 bytes a block) near 25 MB. Only
// small models reach it (the tiny model would otherwise get millions of blocks).
const maxPagedBlocks = 1 << 18

// maxKVSlots is the most cache slots (positions) a layer's keys or values may hold: the attention
// kernel addresses them in 32-bit counts of 16-byte words (gpt2.cu kv_slot), C/8 words a slot.
// Only a model of very few layers given most of a GPU's memory comes near it.
func maxKVSlots(C int) int64 { return (1 << 32) / int64(C/8) }
