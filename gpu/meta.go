//go:build cgo

package gpu

import (
	"math/bits"
	"unsafe"

	"rosetop/gpu/cu"
)

// metaBufs hold the per-step metadata: a pinned host copy written by the step and a device copy
// that the kernels (and the graphs) read at fixed addresses. Each step's first kernel, meta_copy,
// reads the host copy through its mapping and writes the device copy (a kernel node costs the
// step less GPU time than a host-to-device copy node). The host copy is rewritten only after the
// previous step's stream synchronization, so it is never overwritten while the kernel may still
// read it.
type metaBufs struct {
	host    unsafe.Pointer // pinned, bytes long; the device layout followed by next and nextAlt (B int32 each)
	hostDev cu.Ptr         // the device's address of host (mapped)
	dev     cu.Ptr
	bytes   int64 // the metadata part (what one step uploads)
	// Views of host (Go slices over pinned memory), and offsets of the same arrays on the device.
	ids, pos, slot, tokSeq []int32 // (T)
	last, outPos, topk     []int32 // (B)
	temp, topp             []float32
	tables                 []int32 // (B, width)
	seed                   []uint64
	next                   []int32 // (B) the sampled tokens, written by the sampler through nextDev
	nextDev                cu.Ptr  // the device's address of next (mapped pinned memory: no copy node)
	// nextAlt is a second next for steps queued ahead (ahead.go): consecutive queued steps write
	// next and nextAlt in turn, so the host reads one while the device writes the other.
	nextAlt    []int32
	nextAltDev cu.Ptr
	off        metaOffsets
}

type metaOffsets struct {
	ids, pos, slot, tokSeq, last, outPos, topk, temp, topp, tables, seed int64
}

func (m *metaBufs) devAt(off int64) cu.Ptr { return m.dev + cu.Ptr(off) }

// allocMeta lays out the metadata of T token rows, B sequences and block tables of width
// entries, the same on both sides (each array 256-byte aligned), and allocates it.
func (s *state) allocMeta(T, B, width int64) error {
	m := &s.meta
	var mo int64
	place := func(n int64) int64 { p := mo; mo += align(n); return p }
	m.off = metaOffsets{
		ids: place(T * 4), pos: place(T * 4), slot: place(T * 4), tokSeq: place(T * 4),
		last: place(B * 4), outPos: place(B * 4), topk: place(B * 4), temp: place(B * 4), topp: place(B * 4),
		tables: place(B * width * 4), seed: place(B * 8),
	}
	m.bytes = mo
	nextOff, altOff := place(B*4), place(B*4)
	var err error
	if m.host, err = s.ctx.AllocHost(mo, "step metadata"); err != nil {
		return err
	}
	if m.dev, err = s.ctx.Alloc(m.bytes, "step metadata"); err != nil {
		return err
	}
	i32 := func(off, n int64) []int32 { return unsafe.Slice((*int32)(unsafe.Add(m.host, off)), n) }
	f32 := func(off, n int64) []float32 { return unsafe.Slice((*float32)(unsafe.Add(m.host, off)), n) }
	m.ids, m.pos, m.slot, m.tokSeq = i32(m.off.ids, T), i32(m.off.pos, T), i32(m.off.slot, T), i32(m.off.tokSeq, T)
	m.last, m.outPos, m.topk = i32(m.off.last, B), i32(m.off.outPos, B), i32(m.off.topk, B)
	m.temp, m.topp = f32(m.off.temp, B), f32(m.off.topp, B)
	m.tables = i32(m.off.tables, B*width)
	m.seed = unsafe.Slice((*uint64)(unsafe.Add(m.host, m.off.seed)), B)
	m.next, m.nextAlt = i32(nextOff, B), i32(altOff, B)
	if m.hostDev, err = s.ctx.HostDevPtr(m.host); err != nil {
		return err
	}
	m.nextDev, m.nextAltDev = m.hostDev+cu.Ptr(nextOff), m.hostDev+cu.Ptr(altOff)
	return nil
}

// fill writes the metadata of sequences [first, end) of in (their tokens start at in.Tokens[tok])
// into the pinned host buffers, padded with scratch rows up to pad sequences (0: no padding).
// It returns the number of token rows. Padded rows run token 0 at position 0 of the scratch
// block and sample greedily; their results are dropped.
func (s *state) fill(in *Step, first, end, tok, pad int) int {
	m, w, bs := &s.meta, s.kv.width, int32(s.kv.bs)
	t := 0
	for i := first; i < end; i++ {
		b := i - first
		st, l := in.Start[i], in.SeqLens[i]
		row := in.Tables[i*w : (i+1)*w]
		copy(m.tables[b*w:(b+1)*w], row)
		for k := int32(0); k < l; k++ {
			p := st + k
			m.ids[t] = in.Tokens[tok]
			m.pos[t] = p
			m.slot[t] = row[p/bs]*bs + p%bs
			m.tokSeq[t] = int32(b)
			t++
			tok++
		}
		m.last[b] = int32(t - 1)
		m.outPos[b] = st + l
		m.temp[b], m.topk[b], m.topp[b], m.seed[b] = in.Temperature[i], in.TopK[i], in.TopP[i], in.Seed[i]
	}
	for b := end - first; b < pad; b++ {
		s.padRow(b, t)
		t++
	}
	return t
}

// padRow makes sequence b a one-token scratch row at token row t.
func (s *state) padRow(b, t int) {
	m, w := &s.meta, s.kv.width
	scratch := s.kv.scratchBlock()
	for j := b * w; j < (b+1)*w; j++ {
		m.tables[j] = scratch
	}
	m.ids[t], m.pos[t], m.slot[t], m.tokSeq[t] = 0, 0, scratch*int32(s.kv.bs), int32(b)
	m.last[b], m.outPos[b] = int32(t), 1
	m.temp[b], m.topk[b], m.topp[b], m.seed[b] = 0, 0, 0, 0
}

// metaCopy appends meta_copy of the whole metadata from its pinned host copy to the device (a
// multiple of 256 bytes: align keeps every array so). The previous step ended with a stream
// synchronization, so no earlier copy from the pinned buffer is still in flight.
func (s *state) metaCopy(prog *program) {
	m := &s.meta
	n := int(m.bytes / 16)
	prog.launch("meta copy", kMetaCopy, (n+255)/256, 1, 256, 0, false, cu.P(m.dev), cu.P(m.hostDev), cu.I(n))
}

// tablesRefresh appends tables_refresh: the device's block tables (B rows of width entries) take
// the pinned host copy's, and each row that is not a scratch row gets the slot of its position
// in its new table (ahead.go refreshTables).
func (s *state) tablesRefresh(prog *program, B int) {
	m, w := &s.meta, s.kv.width
	n := (B*w*4 + 15) / 16 // 16-byte words; the region is padded to 256 bytes (align)
	prog.launch("tables refresh", kTablesRefresh, 1, 1, 256, 0, false, cu.P(m.devAt(m.off.tables)), cu.P(m.hostDev+cu.Ptr(m.off.tables)),
		cu.I(n), cu.P(m.devAt(m.off.slot)), cu.P(m.devAt(m.off.pos)), cu.I(B), cu.I(w), cu.I(bits.TrailingZeros(uint(s.kv.bs))),
		cu.I(s.scratchSlot()))
}
