package engine

import "slices"

// KV cache bookkeeping. The backends own the KV memory; the BlockManager only decides which block
// of the pool holds which positions of which sequence, and which blocks hold a prompt prefix that a
// later sequence can reuse without computing it again.
//
// A block is in exactly one of three states:
//   - in use: ref > 0, listed in the block table of ref sequences;
//   - cached: ref == 0 but its contents are a known, computed token prefix (it is in the prefix
//     index and on the LRU list); a new sequence with the same prefix takes it back for free, and
//     an allocation that finds no plain free block evicts the least recently freed one;
//   - free: ref == 0 and holding nothing worth keeping (in the free heap).
// Plain free blocks are handed out lowest index first, so the blocks in use stay packed at the
// start of the pool whatever order they were released in (see freeHeap).
// Free() counts cached blocks too: they can be handed out at any time.

// noBlock ends the LRU list.
const noBlock = -1

// BlockManager hands out KV cache blocks to sequences. It is not safe for concurrent use: the
// scheduler's goroutine owns it.
type BlockManager struct {
	layout    KVLayout
	bs        int  // positions per block (layout.BlockSize; 1 when the layout is invalid)
	numBlocks int  // blocks in the pool (0 when the layout is invalid)
	prefix    bool // prefix caching on (paged layouts only)

	ref    []int32  // (numBlocks) sequences holding each block
	hashed []bool   // (numBlocks) block is in the prefix index
	hash   []uint64 // (numBlocks) prefix hash of a hashed block: tokens [0, (i+1)*bs) of its sequence
	parent []uint64 // (numBlocks) prefix hash of the block before a hashed block (0 for block 0)
	toks   []int32  // (numBlocks*bs) token ids of each hashed block, checked on every hit
	prev   []int32  // (numBlocks) LRU links of cached blocks; noBlock at the ends
	next   []int32  // (numBlocks)
	head   int32    // least recently freed cached block (evicted first), noBlock when none
	tail   int32    // most recently freed cached block
	lruLen int      // cached blocks
	free   freeHeap // plain free blocks
	used   int      // blocks with ref > 0

	index map[uint64]int32     // prefix hash -> the cached or in-use block holding that prefix
	seqs  map[SeqID]*seqBlocks // sequences holding blocks
	spare []*seqBlocks         // released sequence records, reused to keep Admit allocation-free
	hr    prefixHasher         // hashes token blocks; owns its scratch buffer
	match []int32              // scratch: blocks matched by the last prefix lookup
	mhash []uint64             // scratch: their prefix hashes
}

// seqBlocks is one sequence's share of the pool.
type seqBlocks struct {
	table []int32 // block table: block i holds positions [i*bs, (i+1)*bs)
	// hashes[i] is the prefix hash of tokens [0, (i+1)*bs): known for every leading full block
	// whose contents are computed. It extends the hash chain even when another block already owns
	// the prefix in the index.
	hashes []uint64
}

// NewBlockManager returns a manager of an empty pool with the given layout. Prefix caching needs a
// paged layout: with a contiguous layout (one block of MaxSeqLen positions per sequence) it is off.
// A layout with BlockSize < 1 or NumBlocks < 1 gives a pool that admits nothing.
func NewBlockManager(layout KVLayout, prefixCache bool) *BlockManager {
	m := &BlockManager{layout: layout, bs: layout.BlockSize, numBlocks: layout.NumBlocks}
	if m.bs < 1 || m.numBlocks < 1 {
		m.bs, m.numBlocks = 1, 0
	}
	m.prefix = prefixCache && layout.Paged
	n := m.numBlocks
	m.ref = make([]int32, n)
	m.free = make(freeHeap, n)
	for i := range m.free {
		m.free[i] = int32(i) // ascending: already a heap
	}
	m.head, m.tail = noBlock, noBlock
	m.seqs = make(map[SeqID]*seqBlocks)
	if m.prefix {
		m.hashed = make([]bool, n)
		m.hash = make([]uint64, n)
		m.parent = make([]uint64, n)
		m.toks = make([]int32, n*m.bs)
		m.prev = make([]int32, n)
		m.next = make([]int32, n)
		m.index = make(map[uint64]int32)
		m.hr = newPrefixHasher(m.bs)
	}
	return m
}

// Layout returns the pool's layout as given to NewBlockManager.
func (m *BlockManager) Layout() KVLayout { return m.layout }

// Total is the number of blocks in the pool.
func (m *BlockManager) Total() int { return m.numBlocks }

// Used is the number of blocks held by sequences.
func (m *BlockManager) Used() int { return m.used }

// Free is the number of blocks that can be handed out now: plain free blocks plus cached ones.
func (m *BlockManager) Free() int { return m.numBlocks - m.used }

// Cached is the number of free blocks that still hold a reusable prefix.
func (m *BlockManager) Cached() int { return m.lruLen }

// PrefixCache reports whether prefix caching is on.
func (m *BlockManager) PrefixCache() bool { return m.prefix }

// blocksFor is the number of blocks that hold n positions.
func (m *BlockManager) blocksFor(n int) int { return (n + m.bs - 1) / m.bs }

// Holds reports whether id holds blocks (was admitted and not released).
func (m *BlockManager) Holds(id SeqID) bool { _, ok := m.seqs[id]; return ok }

// Admit reserves blocks for sequence id to hold prompt and the first output token
// (len(prompt)+1 positions) and returns how many leading prompt tokens are already in the cache:
// a multiple of the block size, always < len(prompt) so that at least one token is computed and
// yields the next token's logits. The block table (Table) covers the cached prefix first. With
// ok == false (empty prompt, id already admitted, or not enough free blocks) nothing changes.
func (m *BlockManager) Admit(id SeqID, prompt []int32) (cached int, ok bool) {
	return m.admit(id, prompt, true)
}

// AdmitUncached is Admit taking no cached prefix: every block is fresh, so the whole prompt is
// computed (for a sequence that wants the logits of every prompt position). Its full blocks still
// enter the prefix index as Computed reports them, unless another block holds that prefix.
func (m *BlockManager) AdmitUncached(id SeqID, prompt []int32) bool {
	_, ok := m.admit(id, prompt, false)
	return ok
}

// admit is Admit, looking up cached prefix blocks only when hit is set.
func (m *BlockManager) admit(id SeqID, prompt []int32, hit bool) (cached int, ok bool) {
	if len(prompt) == 0 || m.Holds(id) {
		return 0, false
	}
	need := m.blocksFor(len(prompt) + 1)
	if (!m.layout.Paged && need > 1) || need > m.numBlocks {
		return 0, false
	}
	m.match, m.mhash = m.match[:0], m.mhash[:0]
	hits := 0
	if hit {
		hits = m.lookup(prompt)
	}
	revive := 0 // hits that sit on the LRU list and leave it
	for _, b := range m.match[:hits] {
		if m.ref[b] == 0 {
			revive++
		}
	}
	fresh := need - hits
	if fresh > len(m.free)+m.lruLen-revive {
		return 0, false
	}
	s := m.newSeq()
	for i, b := range m.match[:hits] {
		if m.ref[b] == 0 {
			m.lruRemove(b)
			m.used++
		}
		m.ref[b]++
		s.table = append(s.table, b)
		s.hashes = append(s.hashes, m.mhash[i])
	}
	for range fresh {
		s.table = append(s.table, m.take())
	}
	m.seqs[id] = s
	return hits * m.bs, true
}

// CachedPrefix returns how many leading tokens of prompt Admit would find in the cache now. It
// changes nothing (the LRU order included).
func (m *BlockManager) CachedPrefix(prompt []int32) int {
	if len(prompt) == 0 {
		return 0
	}
	return m.lookup(prompt) * m.bs
}

// Grow ensures that sequence id holds room for n positions in total. It returns false, changing
// nothing, when id holds no blocks or the pool (or, contiguous, the one block) is too small.
func (m *BlockManager) Grow(id SeqID, n int) bool {
	s, ok := m.seqs[id]
	return ok && m.grow(s, n)
}

// GrowTable is Grow followed by Table with a single lookup: the scheduler's per-step decode path.
func (m *BlockManager) GrowTable(id SeqID, n int) ([]int32, bool) {
	s, ok := m.seqs[id]
	if !ok || !m.grow(s, n) {
		return nil, false
	}
	return s.table, true
}

func (m *BlockManager) grow(s *seqBlocks, n int) bool {
	more := m.blocksFor(n) - len(s.table)
	if more <= 0 {
		return true
	}
	if !m.layout.Paged || more > len(m.free)+m.lruLen {
		return false
	}
	for range more {
		s.table = append(s.table, m.take())
	}
	return true
}

// Table returns the block table of sequence id (nil when it holds none). The slice belongs to the
// manager: callers must not modify it, and it is valid only until the next Grow, GrowTable or
// Release of id.
func (m *BlockManager) Table(id SeqID) []int32 {
	if s, ok := m.seqs[id]; ok {
		return s.table
	}
	return nil
}

// Computed tells the manager that the KV entries of positions [0, n) of sequence id are written,
// tokens being the sequence's token ids (at least n of them). With prefix caching on, each newly
// completed full block is entered in the prefix index, so later sequences can hit it; blocks are
// never indexed before their contents exist. Cheap when no block completed: call it every step.
func (m *BlockManager) Computed(id SeqID, tokens []int32, n int) {
	if !m.prefix {
		return
	}
	s, ok := m.seqs[id]
	if !ok {
		return
	}
	n = min(n, len(tokens))
	full := min(n/m.bs, len(s.table))
	for i := len(s.hashes); i < full; i++ {
		var parent uint64
		if i > 0 {
			parent = s.hashes[i-1]
		}
		blk := tokens[i*m.bs : (i+1)*m.bs]
		h := m.hr.sum(parent, blk)
		s.hashes = append(s.hashes, h)
		b := s.table[i]
		if m.hashed[b] {
			continue // a block taken from the cache: already indexed under h
		}
		if _, taken := m.index[h]; taken {
			continue // another block holds this prefix already; this one stays private
		}
		m.hashed[b], m.hash[b], m.parent[b] = true, h, parent
		copy(m.toks[int(b)*m.bs:], blk)
		m.index[h] = b
	}
}

// Release returns every block of sequence id to the pool; unknown ids are ignored. Blocks are
// released last first, so that among cached blocks a prefix's tail is evicted before its head.
func (m *BlockManager) Release(id SeqID) {
	s, ok := m.seqs[id]
	if !ok {
		return
	}
	delete(m.seqs, id)
	for i := len(s.table) - 1; i >= 0; i-- {
		b := s.table[i]
		m.ref[b]--
		if m.ref[b] > 0 {
			continue
		}
		m.used--
		if m.prefix && m.hashed[b] {
			m.lruPush(b)
		} else {
			m.free.push(b)
		}
	}
	s.table, s.hashes = s.table[:0], s.hashes[:0]
	m.spare = append(m.spare, s)
}

// newSeq returns an empty sequence record, reusing a released one when it can.
func (m *BlockManager) newSeq() *seqBlocks {
	if n := len(m.spare); n > 0 {
		s := m.spare[n-1]
		m.spare = m.spare[:n-1]
		return s
	}
	return &seqBlocks{}
}

// take hands out one block with ref == 0: a plain free one, else the least recently freed cached
// one, which leaves the prefix index. The caller has checked that one exists.
func (m *BlockManager) take() int32 {
	var b int32
	if len(m.free) > 0 {
		b = m.free.pop()
	} else {
		b = m.head
		m.lruRemove(b)
		if m.index[m.hash[b]] == b {
			delete(m.index, m.hash[b])
		}
		m.hashed[b] = false
	}
	m.ref[b] = 1
	m.used++
	return b
}

// lookup fills m.match/m.mhash with the blocks holding prompt's leading full blocks and returns
// how many there are. It stops one token short of the prompt's end, and at the first block whose
// hash is unknown or whose stored parent hash or tokens differ (a hash collision is never a hit).
func (m *BlockManager) lookup(prompt []int32) int {
	m.match, m.mhash = m.match[:0], m.mhash[:0]
	if !m.prefix {
		return 0
	}
	var parent uint64
	for i := range (len(prompt) - 1) / m.bs {
		blk := prompt[i*m.bs : (i+1)*m.bs]
		h := m.hr.sum(parent, blk)
		b, ok := m.index[h]
		if !ok || m.parent[b] != parent || !slices.Equal(m.toks[int(b)*m.bs:int(b+1)*m.bs], blk) {
			break
		}
		m.match = append(m.match, b)
		m.mhash = append(m.mhash, h)
		parent = h
	}
	return len(m.match)
}

// lruPush appends b as the most recently freed cached block.
func (m *BlockManager) lruPush(b int32) {
	m.prev[b], m.next[b] = m.tail, noBlock
	if m.tail != noBlock {
		m.next[m.tail] = b
	} else {
		m.head = b
	}
	m.tail = b
	m.lruLen++
}

// lruRemove unlinks cached block b.
func (m *BlockManager) lruRemove(b int32) {
	p, n := m.prev[b], m.next[b]
	if p != noBlock {
		m.next[p] = n
	} else {
		m.head = n
	}
	if n != noBlock {
		m.prev[n] = p
	} else {
		m.tail = p
	}
	m.prev[b], m.next[b] = noBlock, noBlock
	m.lruLen--
}

// freeHeap is a binary min-heap of block indices: the lowest free block is handed out first, so
// a wave of sequences that allocates as the first one did gets the same blocks, not a new
// scatter of them each wave (bench/RESULTS.md has why that matters). The heap's slice never
// grows past the pool, so push and pop allocate nothing.
type freeHeap []int32

func (h *freeHeap) push(b int32) {
	*h = append(*h, b)
	s := *h
	for i := len(s) - 1; i > 0; {
		p := (i - 1) / 2
		if s[p] <= s[i] {
			break
		}
		s[p], s[i] = s[i], s[p]
		i = p
	}
}

func (h *freeHeap) pop() int32 {
	s := *h
	b, n := s[0], len(s)-1
	s[0] = s[n]
	s = s[:n]
	for i := 0; ; {
		l, m := 2*i+1, i
		if l < n && s[l] < s[m] {
			m = l
		}
		if r := l + 1; r < n && s[r] < s[m] {
			m = r
		}
		if m == i {
			break
		}
		s[i], s[m] = s[m], s[i]
		i = m
	}
	*h = s
	return b
}
