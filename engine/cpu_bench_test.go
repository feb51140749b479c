package engine

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// BenchmarkDecodeStep124M times one decode step of the GPT-2-124M shape (random weights: speed
// does not depend on the values) for 1, 8 and 16 sequences that each have 64 tokens of context.
//
//	go test -run XXX -bench DecodeStep124M -benchtime 3x ./engine/
func BenchmarkDecodeStep124M(b *testing.B) {
	m, err := NewRandomModel("gpt2", 1)
	if err != nil {
		b.Fatal(err)
	}
	const context, maxBatch = 64, 16
	c := newTestBackend(b, m, false, maxBatch, 128, 0)
	// Prefill one sequence of 64 tokens into slot 0 and copy its KV block to the other slots:
	// every sequence then attends over 64 real positions without 16 prefills.
	rng := rand.New(rand.NewPCG(1, 1))
	prompt := randTokens(rng, context, m.Config.VocabSize)
	next := make([]int32, maxBatch)
	if err := c.Step(&Batch{Seqs: []SeqStep{{Tokens: prompt, Blocks: []int32{0}}}}, next); err != nil {
		b.Fatal(err)
	}
	blockLen := len(c.kv) / c.layout.NumBlocks
	for blk := 1; blk < maxBatch; blk++ {
		copy(c.kv[blk*blockLen:(blk+1)*blockLen], c.kv[:blockLen])
	}
	for _, batch := range []int{1, 8, 16} {
		b.Run(fmt.Sprintf("batch=%d", batch), func(b *testing.B) {
			step := Batch{Seqs: make([]SeqStep, batch)}
			for i := range step.Seqs {
				step.Seqs[i] = SeqStep{ID: SeqID(i), Tokens: []int32{next[0]}, Start: context, Blocks: []int32{int32(i)}}
			}
			if err := c.Step(&step, next); err != nil { // warm the scratch for this batch size
				b.Fatal(err)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				if err := c.Step(&step, next); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(batch)*float64(b.N)/b.Elapsed().Seconds(), "tokens/s")
		})
	}
}
