package engine

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// seqOf returns n token ids starting at base: distinct bases give distinct prompts.
func seqOf(base, n int) []int32 {
	s := make([]int32, n)
	for i := range s {
		s[i] = int32(base + i)
	}
	return s
}

func TestBlockManagerContiguous(t *testing.T) {
	m := NewBlockManager(KVLayout{BlockSize: 32, NumBlocks: 2}, true)
	if m.PrefixCache() {
		t.Fatal("prefix cache on with a contiguous layout")
	}
	cases := []struct {
		name   string
		prompt int
		ok     bool
	}{
		{"fits with the first output token", 31, true},
		{"no room for the first output token", 32, false},
		{"longer than the region", 40, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, ok := m.Admit(1, seqOf(0, c.prompt))
			if ok != c.ok {
				t.Fatalf("Admit(%d tokens) ok=%v, want %v", c.prompt, ok, c.ok)
			}
			if ok && (len(m.Table(1)) != 1 || m.Used() != 1) {
				t.Fatalf("table %v, used %d: want one block", m.Table(1), m.Used())
			}
			m.Release(1)
			if m.Used() != 0 {
				t.Fatalf("used %d after release", m.Used())
			}
		})
	}

	// One block per sequence, never more; identical prompts share nothing.
	if c, ok := m.Admit(1, seqOf(0, 20)); !ok || c != 0 {
		t.Fatalf("admit 1: cached %d ok %v", c, ok)
	}
	m.Computed(1, seqOf(0, 20), 20)
	if c, ok := m.Admit(2, seqOf(0, 20)); !ok || c != 0 {
		t.Fatalf("admit 2: cached %d ok %v, want a private region", c, ok)
	}
	if m.Table(1)[0] == m.Table(2)[0] {
		t.Fatalf("two sequences in block %d", m.Table(1)[0])
	}
	if _, ok := m.Admit(3, seqOf(0, 5)); ok {
		t.Fatal("admitted a third sequence into a pool of two regions")
	}
	if !m.Grow(1, 32) || m.Grow(1, 33) || len(m.Table(1)) != 1 {
		t.Fatalf("Grow within/beyond the region: table %v", m.Table(1))
	}
	m.Release(1)
	m.Release(2)
	if m.Used() != 0 || m.Free() != 2 || m.Cached() != 0 {
		t.Fatalf("used %d free %d cached %d after releasing all", m.Used(), m.Free(), m.Cached())
	}
}

func TestBlockManagerInvalidLayout(t *testing.T) {
	for _, l := range []KVLayout{{BlockSize: 0, NumBlocks: 4, Paged: true}, {BlockSize: 16, NumBlocks: 0, Paged: true}, {}} {
		m := NewBlockManager(l, true)
		if _, ok := m.Admit(1, []int32{1}); ok || m.Total() != 0 || m.Grow(1, 1) || m.Layout() != l {
			t.Fatalf("layout %+v: admitted into an unusable pool (total %d)", l, m.Total())
		}
	}
}

func TestBlockManagerPagedGrow(t *testing.T) {
	m := NewBlockManager(KVLayout{BlockSize: 4, NumBlocks: 5, Paged: true}, false)
	if _, ok := m.Admit(1, seqOf(0, 7)); !ok { // 8 positions: 2 blocks
		t.Fatal("admit failed")
	}
	if got := len(m.Table(1)); got != 2 {
		t.Fatalf("table has %d blocks, want 2", got)
	}
	if !m.Grow(1, 8) || len(m.Table(1)) != 2 {
		t.Fatalf("Grow to 8 positions: table %v", m.Table(1))
	}
	if table, ok := m.GrowTable(1, 9); !ok || len(table) != 3 || !slices.Equal(table, m.Table(1)) {
		t.Fatalf("GrowTable to 9 positions: %v, table %v", table, m.Table(1))
	}
	if m.Grow(1, 21) || len(m.Table(1)) != 3 {
		t.Fatalf("Grow beyond the pool changed the table: %v", m.Table(1))
	}
	if _, ok := m.GrowTable(1, 21); ok || m.Grow(2, 1) {
		t.Fatal("GrowTable beyond the pool, or Grow of an unknown sequence, succeeded")
	}
	if _, ok := m.Admit(1, seqOf(0, 3)); ok {
		t.Fatal("admitted a sequence id twice")
	}
	if _, ok := m.Admit(2, seqOf(0, 8)); ok { // needs 3 blocks, 2 free
		t.Fatal("admitted beyond the free blocks")
	}
	if m.Used() != 3 {
		t.Fatalf("a failed Admit changed the pool: used %d", m.Used())
	}
	m.Release(1)
	m.Release(1) // unknown now: ignored
	if m.Used() != 0 || m.Free() != 5 {
		t.Fatalf("used %d free %d", m.Used(), m.Free())
	}
}

func TestBlockManagerPrefixHits(t *testing.T) {
	const bs = 4
	p := seqOf(100, 10) // blocks [0,4) [4,8) and a partial one
	cases := []struct {
		name     string
		computed int     // positions of sequence 1 reported computed
		prompt   []int32 // prompt of sequence 2
		cached   int
	}{
		{"nothing computed, nothing hit", 0, p, 0},
		{"one block computed", 5, p, 4},
		{"two blocks computed", 10, p, 8},
		{"a prompt that is exactly the cached blocks keeps one token to compute", 10, p[:8], 4},
		{"longer prompt with the same prefix", 10, append(slices.Clone(p[:8]), 7, 7, 7), 8},
		{"same second block after a different first block", 10, append(seqOf(0, 4), p[4:]...), 0},
		{"first block differs in its last token", 10, append(append(slices.Clone(p[:3]), 9), p[4:]...), 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m := NewBlockManager(KVLayout{BlockSize: bs, NumBlocks: 16, Paged: true}, true)
			if cached, ok := m.Admit(1, p); !ok || cached != 0 {
				t.Fatalf("first admit: cached %d ok %v", cached, ok)
			}
			m.Computed(1, p, c.computed)
			if got := m.CachedPrefix(c.prompt); got != c.cached {
				t.Fatalf("CachedPrefix = %d, want %d", got, c.cached)
			}
			cached, ok := m.Admit(2, c.prompt)
			if !ok || cached != c.cached {
				t.Fatalf("second admit: cached %d ok %v, want %d", cached, ok, c.cached)
			}
			t1, t2 := m.Table(1), m.Table(2)
			if !slices.Equal(t1[:cached/bs], t2[:cached/bs]) {
				t.Fatalf("hit blocks not shared: %v vs %v", t1, t2)
			}
			for _, b := range t2[cached/bs:] {
				if slices.Contains(t1, b) {
					t.Fatalf("block %d of the uncached part is sequence 1's: %v vs %v", b, t1, t2)
				}
			}
			for _, b := range t2[:cached/bs] {
				if m.ref[b] != 2 {
					t.Fatalf("shared block %d has ref %d", b, m.ref[b])
				}
			}
			wantUsed := len(t1) + len(t2) - cached/bs
			if m.Used() != wantUsed {
				t.Fatalf("used %d, want %d", m.Used(), wantUsed)
			}
			m.Release(1)
			if m.Used() != len(t2) {
				t.Fatalf("after releasing 1: used %d, want %d (shared blocks still held)", m.Used(), len(t2))
			}
			m.Release(2)
			if m.Used() != 0 || m.Free() != 16 {
				t.Fatalf("after releasing all: used %d free %d", m.Used(), m.Free())
			}
			if cached, _ := m.Admit(3, p); cached != c.computed/bs*bs {
				t.Fatalf("after releasing all, p hits %d tokens, want %d still cached", cached, c.computed/bs*bs)
			}
		})
	}
}

func TestBlockManagerLRUEviction(t *testing.T) {
	const bs = 4
	m := NewBlockManager(KVLayout{BlockSize: bs, NumBlocks: 4, Paged: true}, true)
	a, e := seqOf(100, 9), seqOf(200, 5) // a: 3 blocks (2 full), e: 2 blocks (1 full)
	admit := func(id SeqID, p []int32) int {
		t.Helper()
		c, ok := m.Admit(id, p)
		if !ok {
			t.Fatalf("admit %d failed: used %d free %d", id, m.Used(), m.Free())
		}
		return c
	}
	admit(1, a)
	m.Computed(1, a, len(a))
	m.Release(1) // cached, oldest first: a[1], a[0]
	admit(2, e)
	m.Computed(2, e, len(e))
	m.Release(2) // cached: a[1], a[0], e[0]
	if m.Cached() != 3 || m.Used() != 0 {
		t.Fatalf("cached %d used %d, want 3 and 0", m.Cached(), m.Used())
	}
	// Taking the a prefix back and releasing it again makes it the most recent.
	if c := admit(3, a); c != 8 {
		t.Fatalf("a hit %d tokens, want 8", c)
	}
	m.Release(3) // cached: e[0], a[1], a[0]
	// Three fresh blocks: one plain free block, then evict e[0], then a[1].
	admit(4, seqOf(300, 11))
	if m.Cached() != 1 {
		t.Fatalf("cached %d after evicting two, want 1", m.Cached())
	}
	if c := m.CachedPrefix(e); c != 0 {
		t.Fatalf("e still hits %d tokens: the least recently used block was not evicted", c)
	}
	if c := m.CachedPrefix(a); c != 4 {
		t.Fatalf("a hits %d tokens, want 4: its head block should outlive its tail", c)
	}
	// The pool is full but for the cached a[0]; a sequence sharing it needs one fresh block, and
	// there is none: Admit must not evict the block it is about to reuse.
	if _, ok := m.Admit(5, seqOf(100, 6)); ok {
		t.Fatal("admitted by evicting its own hit block")
	}
	if c, ok := m.Admit(6, seqOf(100, 3)); !ok || c != 0 {
		t.Fatalf("a 3-token prompt: cached %d ok %v; want a fresh block, no hit", c, ok)
	}
	m.Release(4)
	m.Release(6)
	if m.Used() != 0 {
		t.Fatalf("used %d", m.Used())
	}
}

// TestBlockManagerAdmitUncached: AdmitUncached takes no cached prefix block, even one that holds
// the whole prompt's prefix, and fails as Admit does; the blocks it computes serve later hits
// when no other block holds their prefix, and stay private when one does.
func TestBlockManagerAdmitUncached(t *testing.T) {
	const bs = 4
	p, q := seqOf(100, 10), seqOf(200, 10) // two full blocks and a partial one each
	m := NewBlockManager(KVLayout{BlockSize: bs, NumBlocks: 8, Paged: true}, true)
	if c, ok := m.Admit(1, p); !ok || c != 0 {
		t.Fatalf("admit 1: cached %d ok %v", c, ok)
	}
	m.Computed(1, p, len(p))
	m.Release(1) // p's two full blocks are cached
	if m.Cached() != 2 || m.CachedPrefix(p) != 8 {
		t.Fatalf("cached %d blocks, p hits %d tokens: want 2 and 8", m.Cached(), m.CachedPrefix(p))
	}
	if !m.AdmitUncached(2, p) {
		t.Fatal("AdmitUncached(2, p) failed")
	}
	if len(m.Table(2)) != 3 || m.Used() != 3 || m.Cached() != 2 {
		t.Fatalf("table %v, used %d, cached %d: want 3 fresh blocks and p's cached blocks left alone", m.Table(2), m.Used(), m.Cached())
	}
	m.Computed(2, p, len(p))
	m.Release(2) // another block holds p's prefix: sequence 2's stay private and go back free
	if m.Cached() != 2 || m.CachedPrefix(p) != 8 {
		t.Fatalf("after releasing 2: cached %d, p hits %d: want 2 and 8", m.Cached(), m.CachedPrefix(p))
	}
	// A prompt no block holds yet: its computed blocks are indexed for later sequences.
	if !m.AdmitUncached(3, q) {
		t.Fatal("AdmitUncached(3, q) failed")
	}
	m.Computed(3, q, len(q))
	if c, ok := m.Admit(4, q); !ok || c != 8 {
		t.Fatalf("admit 4 after an uncached admission of the same prompt: cached %d ok %v, want 8", c, ok)
	}
	if got, want := m.Table(4)[:2], m.Table(3)[:2]; !slices.Equal(got, want) {
		t.Fatalf("sequence 4 hit blocks %v, want sequence 3's %v", got, want)
	}
	// Failures change nothing: an empty prompt, an id already admitted, a pool too small.
	used, cached := m.Used(), m.Cached()
	if m.AdmitUncached(5, nil) || m.AdmitUncached(3, q) || m.AdmitUncached(5, seqOf(300, 8*bs)) || m.Holds(5) {
		t.Fatal("AdmitUncached accepted an empty prompt, an admitted id or a prompt larger than the pool")
	}
	if m.Used() != used || m.Cached() != cached {
		t.Fatalf("failed admissions changed the pool: used %d cached %d, want %d and %d", m.Used(), m.Cached(), used, cached)
	}
	// With no plain free block left, a fresh block evicts a cached one, even one holding the
	// prompt's own prefix: 4 blocks in use, 2 plain free and p's 2 cached; p needs 3, so p's
	// tail block (the least recently freed) goes.
	if !m.AdmitUncached(5, p) {
		t.Fatalf("AdmitUncached(5, p) failed: used %d free %d", m.Used(), m.Free())
	}
	if m.Used() != 7 || m.Cached() != 1 || m.CachedPrefix(p) != bs {
		t.Fatalf("used %d, cached %d, p hits %d: want 7, 1, %d", m.Used(), m.Cached(), m.CachedPrefix(p), bs)
	}
	for _, id := range []SeqID{3, 4, 5} {
		m.Release(id)
	}
	if m.Used() != 0 {
		t.Fatalf("used %d after releasing all", m.Used())
	}
}

// TestBlockManagerProperty runs random admits, grows, computes and releases against a shadow of
// the KV contents and checks after every operation that the books balance, that a hit only ever
// returns blocks holding exactly the prompt's tokens, and that no write lands in a shared block.
func TestBlockManagerProperty(t *testing.T) {
	cases := []struct {
		name   string
		layout KVLayout
		prefix bool
	}{
		{"paged", KVLayout{BlockSize: 4, NumBlocks: 24, Paged: true}, false},
		{"paged prefix cache", KVLayout{BlockSize: 4, NumBlocks: 24, Paged: true}, true},
		{"paged prefix cache tiny pool", KVLayout{BlockSize: 2, NumBlocks: 9, Paged: true}, true},
		{"contiguous", KVLayout{BlockSize: 40, NumBlocks: 4}, true},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(42, uint64(i)))
			runProperty(t, NewBlockManager(c.layout, c.prefix), rng, 4000)
		})
	}
}

type shadowSeq struct {
	tokens   []int32 // prompt and generated tokens
	computed int     // positions written
}

func runProperty(t *testing.T, m *BlockManager, rng *rand.Rand, ops int) {
	t.Helper()
	bs := m.bs
	content := make([][]int32, m.Total()) // what the backend would have written, -1 = nothing
	for b := range content {
		content[b] = slices.Repeat([]int32{-1}, bs)
	}
	live := map[SeqID]*shadowSeq{}
	var next SeqID
	var hits, refused, grown, stalled, uncached int // how much each path was exercised
	write := func(id SeqID, s *shadowSeq, upto int) {
		table := m.Table(id)
		for p := s.computed; p < upto; p++ {
			b := table[p/bs]
			if m.ref[b] != 1 || (m.prefix && m.hashed[b]) {
				t.Fatalf("write of position %d into shared/indexed block %d (ref %d)", p, b, m.ref[b])
			}
			content[b][p%bs] = s.tokens[p]
		}
		s.computed = upto
		m.Computed(id, s.tokens, upto)
	}
	for op := range ops {
		switch k := rng.IntN(10); {
		case k < 4: // admit a prompt from a few shared prefixes; one in four takes no cached block
			base := 1000 * rng.IntN(3)
			p := seqOf(base, 1+rng.IntN(30))
			if rng.IntN(4) == 0 {
				p[len(p)-1] = -2 // a different last token
			}
			next++
			used := m.Used()
			var cached int
			var ok bool
			if k == 0 {
				ok = m.AdmitUncached(next, p)
			} else {
				cached, ok = m.Admit(next, p)
			}
			if !ok {
				if m.Used() != used || m.Table(next) != nil {
					t.Fatalf("op %d: failed Admit changed the pool", op)
				}
				refused++
				continue
			}
			if cached >= len(p) || cached%bs != 0 || len(m.Table(next))*bs < len(p)+1 {
				t.Fatalf("op %d: cached %d of %d, table %v", op, cached, len(p), m.Table(next))
			}
			for q := range cached {
				if got := content[m.Table(next)[q/bs]][q%bs]; got != p[q] {
					t.Fatalf("op %d: hit position %d holds %d, prompt has %d", op, q, got, p[q])
				}
			}
			if cached > 0 {
				hits++
			}
			if k == 0 {
				uncached++
			}
			s := &shadowSeq{tokens: p, computed: cached}
			live[next] = s
			write(next, s, len(p))
		case k < 8: // decode a few tokens
			id, s := pick(rng, live)
			if s == nil {
				continue
			}
			for range 1 + rng.IntN(6) {
				s.tokens = append(s.tokens, int32(rng.IntN(5)))
				if !m.Grow(id, len(s.tokens)) {
					s.tokens = s.tokens[:len(s.tokens)-1]
					stalled++
					break
				}
				grown++
				write(id, s, len(s.tokens))
			}
		default:
			if id, s := pick(rng, live); s != nil {
				m.Release(id)
				delete(live, id)
			}
		}
		checkBooks(t, m, live, op)
	}
	if refused == 0 || stalled == 0 || grown == 0 || uncached == 0 || (m.prefix && hits == 0) {
		t.Fatalf("a path was not exercised: hits %d, refused admits %d, grows %d, failed grows %d, uncached admits %d",
			hits, refused, grown, stalled, uncached)
	}
	t.Logf("hits %d, refused admits %d, grows %d, failed grows %d, uncached admits %d", hits, refused, grown, stalled, uncached)
	for id := range live {
		m.Release(id)
	}
	if m.Used() != 0 || m.Free() != m.Total() || len(m.free)+m.lruLen != m.Total() {
		t.Fatalf("after releasing all: used %d free %d (stack %d, cached %d) of %d",
			m.Used(), m.Free(), len(m.free), m.lruLen, m.Total())
	}
}

func pick(rng *rand.Rand, live map[SeqID]*shadowSeq) (SeqID, *shadowSeq) {
	if len(live) == 0 {
		return 0, nil
	}
	ids := make([]SeqID, 0, len(live))
	for id := range live {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	id := ids[rng.IntN(len(ids))]
	return id, live[id]
}

// checkBooks verifies that ref counts equal table membership and that every block is in exactly
// one place: some table, the free heap, or the LRU list.
func checkBooks(t *testing.T, m *BlockManager, live map[SeqID]*shadowSeq, op int) {
	t.Helper()
	refs := make([]int32, m.Total())
	for id, s := range live {
		table := m.Table(id)
		if len(table)*m.bs < len(s.tokens) {
			t.Fatalf("op %d: seq %d has %d blocks for %d tokens", op, id, len(table), len(s.tokens))
		}
		for i, b := range table {
			if slices.Contains(table[:i], b) {
				t.Fatalf("op %d: seq %d holds block %d twice", op, id, b)
			}
			refs[b]++
		}
	}
	where := make([]int, m.Total())
	used := 0
	for b, r := range refs {
		if r != m.ref[b] {
			t.Fatalf("op %d: block %d ref %d, tables hold it %d times", op, b, m.ref[b], r)
		}
		if r > 0 {
			where[b]++
			used++
		}
	}
	for _, b := range m.free {
		where[b]++
	}
	n := 0
	for b := m.head; b != noBlock; b = m.next[b] {
		where[b]++
		n++
		if !m.hashed[b] {
			t.Fatalf("op %d: unindexed block %d on the LRU list", op, b)
		}
	}
	for b, w := range where {
		if w != 1 {
			t.Fatalf("op %d: block %d is in %d places", op, b, w)
		}
	}
	if used != m.Used() || n != m.lruLen {
		t.Fatalf("op %d: used %d (counted %d), cached %d (counted %d)", op, m.Used(), used, m.lruLen, n)
	}
}

// TestBlockManagerLowestFreeFirst: plain free blocks go out lowest index first, whatever order
// they came back in, so a wave of sequences after another gets the same packed blocks as the
// first wave (a stack handed them back in reverse release order).
func TestBlockManagerLowestFreeFirst(t *testing.T) {
	const seqs, bs = 8, 4
	m := NewBlockManager(KVLayout{Paged: true, BlockSize: bs, NumBlocks: 64}, false)
	wave := func() [][]int32 {
		var tables [][]int32
		for id := range SeqID(seqs) {
			if _, ok := m.Admit(id, seqOf(0, bs)); !ok { // two blocks: the prompt and the next token
				t.Fatalf("admit %d failed", id)
			}
		}
		for id := range SeqID(seqs) { // grow together, as a decode batch does
			if !m.Grow(id, 3*bs) {
				t.Fatalf("grow %d failed", id)
			}
		}
		for id := range SeqID(seqs) {
			tables = append(tables, slices.Clone(m.Table(id)))
		}
		return tables
	}
	first := wave()
	if got := slices.Concat(first...); slices.Max(got) != 3*seqs-1 {
		t.Fatalf("first wave holds blocks %v, want 0-%d", got, 3*seqs-1)
	}
	for _, id := range rand.New(rand.NewPCG(5, 6)).Perm(seqs) {
		m.Release(SeqID(id))
	}
	if second := wave(); !slices.EqualFunc(first, second, slices.Equal) {
		t.Fatalf("second wave's tables %v, want the first's %v", second, first)
	}
}

// TestFreeHeap pops random pushes in ascending order, interleaved with more pushes.
func TestFreeHeap(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	var h freeHeap
	var want []int32
	for range 2000 {
		if len(h) > 0 && rng.IntN(3) == 0 {
			slices.Sort(want)
			if got := h.pop(); got != want[0] {
				t.Fatalf("pop %d, want the smallest %d", got, want[0])
			}
			want = want[1:]
			continue
		}
		b := int32(rng.IntN(500))
		h.push(b)
		want = append(want, b)
	}
}
