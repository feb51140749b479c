package engine

import (
	"encoding/binary"
	"hash/maphash"
)

// prefixHasher computes the prefix-cache key of a full KV block: a hash of the previous block's
// key and the block's own token ids, so that a key stands for the whole token prefix up to and
// including the block. Keys are 64-bit; a lookup also compares the stored parent key and token ids,
// so two different blocks never share KV through a colliding key of their own.
type prefixHasher struct {
	seed maphash.Seed // per manager: keys are never compared across managers
	buf  []byte       // scratch: 8 bytes of parent key + 4 bytes per token
}

func newPrefixHasher(blockSize int) prefixHasher {
	return prefixHasher{seed: maphash.MakeSeed(), buf: make([]byte, 0, 8+4*blockSize)}
}

// sum returns the key of a block with the given tokens whose predecessor has key parent (0 for the
// first block of a sequence).
func (h *prefixHasher) sum(parent uint64, tokens []int32) uint64 {
	b := binary.LittleEndian.AppendUint64(h.buf[:0], parent)
	for _, t := range tokens {
		b = binary.LittleEndian.AppendUint32(b, uint32(t))
	}
	h.buf = b
	return maphash.Bytes(h.seed, b)
}
