package tokenizer

import (
	"fmt"
	"strings"
	"testing"
)

// english1KB is about 1 KB of ordinary English prose, the size of a typical benchmark prompt.
var english1KB = strings.Repeat("The scheduler admits new requests while running sequences keep decoding; "+
	"each step it chooses prefill or decode, and the paged KV cache hands out blocks of sixteen tokens. ", 6)[:1024]

func BenchmarkEncode1KB(b *testing.B) {
	tok := gpt2(b)
	b.SetBytes(int64(len(english1KB)))
	for b.Loop() {
		tok.Encode(english1KB)
	}
}

func BenchmarkDecode1KB(b *testing.B) {
	tok := gpt2(b)
	ids := tok.Encode(english1KB)
	b.SetBytes(int64(len(english1KB)))
	for b.Loop() {
		tok.Decode(ids)
	}
}

func BenchmarkStream1KB(b *testing.B) {
	tok := gpt2(b)
	ids := tok.Encode(english1KB)
	b.SetBytes(int64(len(english1KB)))
	for b.Loop() {
		s := NewStream(tok)
		for _, id := range ids {
			s.Push(id)
		}
		s.Flush()
	}
}

// BenchmarkGPT2 is the cost of building the embedded tokenizer (once per model load).
func BenchmarkGPT2(b *testing.B) {
	for b.Loop() {
		if _, err := GPT2(); err != nil {
			b.Fatal(err)
		}
	}
}

// longWordPrompt is the prefill-heavy benchmark job's prompt: a marker, then one 1280-byte word.
var longWordPrompt = "in " + strings.Repeat("Hello", 256)

// BenchmarkEncodeLongWord is the first Encode of the long-word prompt: the cache is empty each time.
func BenchmarkEncodeLongWord(b *testing.B) {
	tok := *gpt2(b)
	b.SetBytes(int64(len(longWordPrompt)))
	for b.Loop() {
		tok.cache = newPieceCache()
		tok.Encode(longWordPrompt)
	}
}

// BenchmarkEncodeLongWordCached is every later Encode of the same prompt.
func BenchmarkEncodeLongWordCached(b *testing.B) {
	tok := *gpt2(b)
	tok.cache = newPieceCache()
	tok.Encode(longWordPrompt)
	b.SetBytes(int64(len(longWordPrompt)))
	for b.Loop() {
		tok.Encode(longWordPrompt)
	}
}

// BenchmarkEncodeLongWordTiktoken is tiktoken-go's encoder on the same prompt, for comparison.
func BenchmarkEncodeLongWordTiktoken(b *testing.B) {
	ref := gpt2Reference(b)
	b.SetBytes(int64(len(longWordPrompt)))
	for b.Loop() {
		ref(longWordPrompt)
	}
}

// BenchmarkEncode1KBNoCache is BenchmarkEncode1KB with the cache off (prose has few long pieces,
// so the two should be about equal).
func BenchmarkEncode1KBNoCache(b *testing.B) {
	tok := *gpt2(b)
	tok.cache = nil
	b.SetBytes(int64(len(english1KB)))
	for b.Loop() {
		tok.Encode(english1KB)
	}
}

// BenchmarkEncode1KBTiktoken is tiktoken-go's encoder on the 1 KB of prose, for comparison.
func BenchmarkEncode1KBTiktoken(b *testing.B) {
	ref := gpt2Reference(b)
	b.SetBytes(int64(len(english1KB)))
	for b.Loop() {
		ref(english1KB)
	}
}

// BenchmarkMerge compares the two merges on words of growing length, to place scanMax.
func BenchmarkMerge(b *testing.B) {
	tok := gpt2(b)
	for _, n := range []int{8, 16, 24, 32, 40, 48, 64, 96, 128} {
		piece := strings.Repeat("Hellx", n)[:n] // "Hellx" so that the piece is not one token
		b.Run(fmt.Sprintf("scan/%d", n), func(b *testing.B) {
			for b.Loop() {
				tok.mergeScan(nil, piece)
			}
		})
		b.Run(fmt.Sprintf("heap/%d", n), func(b *testing.B) {
			for b.Loop() {
				tok.mergeHeap(nil, piece)
			}
		})
	}
}
