package tokenizer

import (
	"math"
	"slices"
)

// Rank-based byte-pair encoding, as tiktoken does it: a piece starts as its bytes; while some two
// adjacent parts join into a token, join the pair whose token has the lowest rank (rank == id),
// the leftmost such pair on a tie. For GPT-2 this is the same as applying merges.txt in order
// (TestEmbeddedMerges, checkMerges).
//
// tiktoken-go finds each lowest pair by scanning all parts, O(n²) for a piece of n bytes.
// mergeHeap keeps the candidate pairs in a min-heap instead, O(n log n); mergeScan is the plain
// scan, for the short pieces that ordinary text is made of, where it costs less.

// scanMax is the longest piece mergeScan handles, with its parts on the stack; longer pieces go
// to mergeHeap. It sits near where BenchmarkMerge has the two cost the same; pieces that long are
// rare in prose, so the exact value matters little.
const scanMax = 16

// noRank marks a part with no pair to its right that joins into a token.
const noRank = math.MaxInt32

// rankOf returns the rank of the token spelled b (at least 2 bytes), or noRank.
func (t *Tokenizer) rankOf(b string) int32 {
	switch {
	case len(b) == 2:
		return t.pairRank[uint16(b[0])<<8|uint16(b[1])]
	case len(b) > t.maxTokenLen:
		return noRank
	}
	if id, ok := t.ranks[b]; ok {
		return int32(id)
	}
	return noRank
}

// pairRanks returns the table of Tokenizer.pairRank, and the length of the longest token.
func pairRanks(ranks map[string]int) (table []int32, maxLen int) {
	table = make([]int32, 1<<16)
	for i := range table {
		table[i] = noRank
	}
	for tok, id := range ranks {
		if len(tok) == 2 {
			table[uint16(tok[0])<<8|uint16(tok[1])] = int32(id)
		}
		maxLen = max(maxLen, len(tok))
	}
	return table, maxLen
}

// appendMerged appends the ids of piece (at least 2 bytes) to out.
func (t *Tokenizer) appendMerged(out []int32, piece string) []int32 {
	if len(piece) <= scanMax {
		return t.mergeScan(out, piece)
	}
	return t.mergeHeap(out, piece)
}

// mergeScan is tiktoken's loop (any length, but O(n²)): start[k] is where part k begins and rank[k] the rank of joining
// parts k and k+1; each round joins the lowest (leftmost on ties) and updates its two neighbours.
func (t *Tokenizer) mergeScan(out []int32, piece string) []int32 {
	var startBuf, rankBuf [scanMax + 1]int32
	n := len(piece)
	start, rank := startBuf[:], rankBuf[:]
	if n > scanMax { // only tests and BenchmarkMerge call it on longer pieces
		start, rank = make([]int32, n+1), make([]int32, n+1)
	}
	start, rank = start[:n+1], rank[:n+1]
	for k := range n + 1 {
		start[k], rank[k] = int32(k), noRank
	}
	for k := 0; k+1 < n; k++ {
		rank[k] = t.rankOf(piece[k : k+2])
	}
	// pairRank is the rank of joining parts k and k+1 (parts k..k+1 exist while k+2 < len(start)).
	pairRank := func(k int) int32 {
		if k+2 < len(start) {
			return t.rankOf(piece[start[k]:start[k+2]])
		}
		return noRank
	}
	for len(start) > 2 {
		best, at := int32(noRank), -1
		for k, r := range rank[:len(start)-1] {
			if r < best {
				best, at = r, k
			}
		}
		if at < 0 {
			break
		}
		start = append(start[:at+1], start[at+2:]...)
		rank = append(rank[:at+1], rank[at+2:]...)
		rank[at] = pairRank(at)
		if at > 0 {
			rank[at-1] = pairRank(at - 1)
		}
	}
	for k := 0; k+1 < len(start); k++ {
		out = append(out, int32(t.ranks[piece[start[k]:start[k+1]]]))
	}
	return out
}

// mergeHeap gives the same result as mergeScan in O(n log n). Parts are a linked list indexed by
// the byte where each part starts; q holds, for each part that can join its right neighbour into a
// token, that token's rank, so its minimum is the pair tiktoken's scan would pick.
func (t *Tokenizer) mergeHeap(out []int32, piece string) []int32 {
	n := len(piece)
	sc := t.scratch.Get().(*mergeScratch)
	defer func() {
		if cap(sc.buf) <= maxPooledScratch { // an outsized word's arrays go to the GC
			t.scratch.Put(sc)
		}
	}()
	buf := slices.Grow(sc.buf[:0], 4*n)[:4*n]
	sc.buf = buf
	// next[k] (n) is where the part after the part starting at k starts (n after the last);
	// prev[k] (n) where the part before it starts (-1 before the first); id[k] (n) its token id;
	// q.pos[k] (n) the index in q.keys of its pair (-1 if none).
	next, prev, id := buf[0*n:1*n], buf[1*n:2*n], buf[2*n:3*n]
	q := pairQueue{keys: sc.keys[:0], pos: buf[3*n : 4*n]}
	for k := range n {
		next[k], prev[k], id[k], q.pos[k] = int32(k+1), int32(k-1), t.byteID[piece[k]], -1
		if k+1 < n {
			if r := t.rankOf(piece[k : k+2]); r != noRank {
				q.pos[k] = int32(len(q.keys))
				q.keys = append(q.keys, pairKey(r, int32(k)))
			}
		}
	}
	q.init()
	// spanRank is the rank of joining the part at k with the part after it.
	spanRank := func(k int32) int32 {
		if nx := next[k]; nx < int32(n) {
			return t.rankOf(piece[k:next[nx]])
		}
		return noRank
	}
	for len(q.keys) > 0 {
		key := q.keys[0]
		r, k := int32(key>>32), int32(uint32(key))
		right := next[k]
		next[k] = next[right]
		if next[k] < int32(n) {
			prev[next[k]] = k
		}
		id[k] = r
		q.set(right, noRank) // the right part is gone, and with it its pair
		q.set(k, spanRank(k))
		if p := prev[k]; p >= 0 {
			q.set(p, spanRank(p))
		}
	}
	sc.keys = q.keys
	for k := int32(0); k < int32(n); k = next[k] {
		out = append(out, id[k])
	}
	return out
}

// maxPooledScratch bounds the working memory kept for reuse (in int32s: pieces up to 16 KB).
const maxPooledScratch = 1 << 16

// mergeScratch is mergeHeap's working memory, reused through Tokenizer.scratch.
type mergeScratch struct {
	buf  []int32
	keys []uint64
}

// pairKey orders pairs by rank, then by position: the minimum is the lowest rank, leftmost.
func pairKey(rank, start int32) uint64 { return uint64(rank)<<32 | uint64(start) }

// pairQueue is a binary min-heap of pairKey values with at most one entry per part, which pos
// locates, so that a part's rank can be changed or removed in place.
type pairQueue struct {
	keys []uint64 // heap of pairKey(rank, part)
	pos  []int32  // (n) index in keys of part k's entry, -1 if none
}

func (q *pairQueue) swap(i, j int) {
	q.keys[i], q.keys[j] = q.keys[j], q.keys[i]
	q.pos[uint32(q.keys[i])] = int32(i)
	q.pos[uint32(q.keys[j])] = int32(j)
}

func (q *pairQueue) up(i int) {
	for i > 0 {
		p := (i - 1) / 2
		if q.keys[p] <= q.keys[i] {
			return
		}
		q.swap(p, i)
		i = p
	}
}

func (q *pairQueue) down(i int) {
	for n := len(q.keys); ; {
		c := 2*i + 1
		if c >= n {
			return
		}
		if c+1 < n && q.keys[c+1] < q.keys[c] {
			c++
		}
		if q.keys[i] <= q.keys[c] {
			return
		}
		q.swap(i, c)
		i = c
	}
}

// init orders keys filled in any order (Floyd's bottom-up construction).
func (q *pairQueue) init() {
	for i := len(q.keys)/2 - 1; i >= 0; i-- {
		q.down(i)
	}
}

// set gives part k's pair the rank r, or removes it when r is noRank.
func (q *pairQueue) set(k, r int32) {
	i := int(q.pos[k])
	switch {
	case r == noRank && i < 0:
	case r == noRank:
		last := len(q.keys) - 1
		q.swap(i, last)
		q.keys = q.keys[:last]
		q.pos[k] = -1
		if i < last {
			q.down(i)
			q.up(i)
		}
	case i < 0:
		q.pos[k] = int32(len(q.keys))
		q.keys = append(q.keys, pairKey(r, k))
		q.up(len(q.keys) - 1)
	default:
		old := q.keys[i]
		q.keys[i] = pairKey(r, k)
		if q.keys[i] < old {
			q.up(i)
		} else {
			q.down(i)
		}
	}
}
