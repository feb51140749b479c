package tokenizer

import (
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
