package tokenizer

import (
	"hash/maphash"
	"strings"
	"sync"
)

// pieceCache remembers the ids of long pieces, so a prompt that repeats a long word (a benchmark
// submitting the same filler text every millisecond) pays for its BPE once. It is bounded: each
// shard keeps two generations, and when the current one fills its byte budget the older one is
// dropped and the current one becomes the older. A hit in the older generation is copied into the
// current one, so what is in use survives (a cheap approximation of LRU with O(1) eviction).
// Memory stays below cacheBytes plus map overhead however long the process runs.
type pieceCache struct {
	seed   maphash.Seed // written once by newPieceCache
	shards [cacheShards]cacheShard
}

const (
	cacheShards = 8
	// cacheBytes is the budget for keys and ids over all shards and both generations.
	cacheBytes = 4 << 20
	// genBytes is what one generation of one shard may hold before it is retired.
	genBytes = cacheBytes / cacheShards / 2
	// entryOverhead approximates a map entry's cost beyond its key and ids (headers, buckets).
	entryOverhead = 64
)

// cacheShard is one lock's worth of the cache.
type cacheShard struct {
	mu   sync.Mutex
	cur  map[string][]int32 // guarded by mu; the current generation
	old  map[string][]int32 // guarded by mu; the previous generation, read and then dropped
	size int                // guarded by mu; bytes charged to cur
}

func newPieceCache() *pieceCache {
	return &pieceCache{seed: maphash.MakeSeed()}
}

func cost(piece string, ids []int32) int { return len(piece) + 4*len(ids) + entryOverhead }

func (c *pieceCache) shard(piece string) *cacheShard {
	return &c.shards[maphash.String(c.seed, piece)%cacheShards]
}

// appendCached appends the cached ids of piece to out; ok is false on a miss.
func (c *pieceCache) appendCached(out []int32, piece string) (_ []int32, ok bool) {
	s := c.shard(piece)
	s.mu.Lock()
	defer s.mu.Unlock()
	if ids, hit := s.cur[piece]; hit {
		return append(out, ids...), true
	}
	ids, hit := s.old[piece]
	if !hit {
		return out, false
	}
	delete(s.old, piece)
	s.putLocked(piece, ids) // the key is already a private copy
	return append(out, ids...), true
}

// put remembers ids (which the cache now owns) as the encoding of piece.
func (c *pieceCache) put(piece string, ids []int32) {
	if cost(piece, ids) > genBytes {
		return // a piece this long would evict everything else; it is rare enough to redo
	}
	// Copy the key: piece points into the caller's text, which must not be kept alive.
	piece = strings.Clone(piece)
	s := c.shard(piece)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.putLocked(piece, ids)
}

func (s *cacheShard) putLocked(piece string, ids []int32) {
	if _, dup := s.cur[piece]; dup {
		return // another goroutine encoded it at the same time
	}
	n := cost(piece, ids)
	if s.cur == nil || s.size+n > genBytes {
		s.old, s.cur, s.size = s.cur, make(map[string][]int32), 0
	}
	s.cur[piece] = ids
	s.size += n
}

// len returns the number of cached pieces (for tests).
func (c *pieceCache) len() int {
	n := 0
	for i := range c.shards {
		s := &c.shards[i]
		s.mu.Lock()
		n += len(s.cur) + len(s.old)
		s.mu.Unlock()
	}
	return n
}

// bytes returns the budgeted bytes held (for tests).
func (c *pieceCache) bytes() int {
	n := 0
	for i := range c.shards {
		s := &c.shards[i]
		s.mu.Lock()
		for _, m := range []map[string][]int32{s.cur, s.old} {
			for k, v := range m {
				n += cost(k, v)
			}
		}
		s.mu.Unlock()
	}
	return n
}
