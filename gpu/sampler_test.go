//go:build cgo

package gpu

import (
	"math"
	"math/rand/v2"
	"testing"

	"rosetop/internal/gpt2ref"
)

// TestGreedySamplerTies runs both greedy samplers (argmax_next alone, and argmax_part then
// sample) on crafted logits: the maximum in the row's last, unaligned logits, in the first id, at
// two ids of different chunks and at the two sides of a chunk boundary (the lowest id wins),
// all-equal and all-negative rows, a NaN and two +Inf; each sampler twice, so that argmax_next's
// done counters must have been reset. The tokens must be the host's argmax (lowest id on ties).
func TestGreedySamplerTies(t *testing.T) {
	needGPU(t)
	cfg := Config{NLayer: 1, NHead: 4, NEmbd: 64, NPositions: 128, VocabSize: 1003, Inner: 256, Eps: 1e-5} // V % 4 == 3
	const B = 8
	r, err := Open(cfg, testModel(cfg, 5), Options{MaxBatch: B, MaxSeqLen: 64, Paged: true, MemoryFraction: 0.01})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	V, vp := cfg.VocabSize, paddedVocab(cfg.VocabSize)
	c := argmaxChunks(B)
	per := ((V+c-1)/c + 3) &^ 3 // the kernels' chunk length
	rng := rand.New(rand.NewPCG(1, 2))
	logits := make([]float32, B*vp)
	row := func(b int) []float32 { return logits[b*vp : b*vp+V] }
	for b := range B {
		for i := range row(b) {
			row(b)[i] = float32(rng.NormFloat64())
		}
	}
	clear(row(0))
	row(1)[V-1] = 9
	row(2)[7*per+3], row(2)[2*per+1] = 9, 9
	row(3)[per], row(3)[per-1] = 9, 9
	for i := range row(4) {
		row(4)[i] = -1 - float32(rng.IntN(100))
	}
	row(4)[500] = -0.25
	row(5)[0] = 9
	row(6)[3*per+2], row(6)[600] = float32(math.NaN()), 9 // NaN counts as the largest (torch.argmax; the CPU sampler)
	row(7)[900], row(7)[20] = float32(math.Inf(1)), float32(math.Inf(1))
	want := make([]int32, B)
	for b := range B {
		want[b] = gpt2ref.Argmax(row(b))
	}
	for _, greedy := range []bool{true, false, true, false} {
		var got []int32
		err := onWorker(r, func(s *state) error {
			for b := range B {
				s.padRow(b, b) // temperature 0: greedy rows for sample too
			}
			p, err := s.newPlan(B, B, greedy, eagerStep, false)
			if err != nil {
				return err
			}
			var prog program
			s.metaCopy(&prog)
			s.sampler(&p, &prog)
			if err := s.ctx.Upload(s.act.logits, ptrOf(logits), int64(len(logits))*4); err != nil {
				return err
			}
			if err := s.run(&prog); err != nil {
				return err
			}
			if err := s.ctx.Sync(); err != nil {
				return err
			}
			got = append(got, s.meta.next[:B]...)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		for b := range B {
			if got[b] != want[b] {
				t.Errorf("greedy sampler (argmax_next alone %v) row %d: token %d, want %d", greedy, b, got[b], want[b])
			}
		}
	}
}
