//go:build cgo

package gpu

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

// mixedStep is a step of prompts of the given lengths (random tokens from rng) at position 0 of
// sequences 0.., then one decode row at position pos of the next sequence (pos 0: a one-token
// prompt); the last prompt's row samples at temperature temp (0: every row greedy).
func mixedStep(rng *rand.Rand, lens []int, pos int32, temp float32, tables [][]int32) *Step {
	st := &Step{}
	for i, n := range lens {
		toks := make([]int32, n)
		for k := range toks {
			toks[k] = int32(rng.IntN(smallCfg.VocabSize))
		}
		addSeq(st, toks, 0, tables[i], 0, 0, 0, uint64(i))
	}
	i := len(lens)
	addSeq(st, []int32{int32(rng.IntN(smallCfg.VocabSize))}, pos, tables[i], 0, 0, 0, uint64(i))
	st.Temperature[len(lens)-1] = temp
	return st
}

// TestStepGraphsMatchEager runs the same prefill and mixed steps on a runner with graphs and on
// an eager one: a shape met a second time is captured and replayed from then on, Prewarm captures
// shapes met once, the cache evicts past maxStepGraphs, and every step's logits and tokens are
// bit-identical to the eager runner's.
func TestStepGraphsMatchEager(t *testing.T) {
	needGPU(t)
	w := testModel(smallCfg, 21)
	open := func(graphs bool, rec *recorder) *Runner {
		opt := Options{MaxBatch: 8, MaxSeqLen: 64, Paged: true, Graphs: graphs, MemoryFraction: 0.02}
		if rec != nil {
			opt.Record = rec.record
		}
		r, err := Open(smallCfg, w, opt)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { r.Close() })
		return r
	}
	rec := &recorder{}
	g, e := open(true, rec), open(false, nil)
	tables := tablesFor(g, 8)
	rng := rand.New(rand.NewPCG(21, 1))
	captures := func() int {
		n := 0
		for _, l := range rec.entries() {
			if strings.Contains(l, "prefill or mixed step") {
				n++
			}
		}
		return n
	}
	// step runs st on both runners and compares what they return.
	step := func(what string, st *Step) {
		t.Helper()
		B, V := len(st.SeqLens), smallCfg.VocabSize
		gn, en := make([]int32, B), make([]int32, B)
		gl, el := make([]float32, B*V), make([]float32, B*V)
		if err := g.StepLogits(st, gn, gl); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if err := e.StepLogits(st, en, el); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		for j := range gl {
			if math.Float32bits(gl[j]) != math.Float32bits(el[j]) {
				t.Fatalf("%s: logit %d is %v with graphs, %v eagerly", what, j, gl[j], el[j])
			}
		}
		for b := range B {
			if gn[b] != en[b] {
				t.Fatalf("%s: sequence %d sampled %d with graphs, %d eagerly", what, b, gn[b], en[b])
			}
		}
	}
	// Every decode row below reads positions these prompts wrote on both runners.
	step("prompts of 10 tokens", mixedStep(rng, []int{10, 10, 10, 10, 10, 10, 10}, 0, 0, tables))
	for round, want := range []int{0, 1, 1} { // met once: eager; twice: captured; then replayed
		step("greedy mixed step", mixedStep(rng, []int{3, 5, 2}, 9, 0, tables))
		step("sampling mixed step", mixedStep(rng, []int{3, 5, 2}, 9, 0.8, tables))
		if got := captures(); got != 2*want {
			t.Fatalf("round %d: %d step graphs captured, want %d", round, got, 2*want)
		}
	}
	step("a shape met once", mixedStep(rng, []int{4, 4}, 3, 0, tables))
	if err := g.Prewarm(); err != nil {
		t.Fatal(err)
	}
	if got := captures(); got != 4 { // and the first step's shape
		t.Fatalf("Prewarm left %d step graphs captured, want 4", got)
	}
	before := len(rec.entries())
	step("a shape Prewarm captured", mixedStep(rng, []int{4, 4}, 3, 0, tables))
	if after := rec.entries(); len(after) != before {
		t.Fatalf("a shape Prewarm captured paid one-time costs:\n%s", strings.Join(after[before:], "\n"))
	}
	// Past the cache's size the least recently used graphs go; their shapes run right again.
	for round := range 2 {
		for n := 2; n < 2+maxStepGraphs; n++ {
			step("one prompt of each length", mixedStep(rng, []int{n}, 1, 0, tables))
		}
		if got := len(g.s.multi.graphs); got > maxStepGraphs {
			t.Fatalf("round %d: %d step graphs kept, want at most %d", round, got, maxStepGraphs)
		}
	}
	step("an evicted shape", mixedStep(rng, []int{3, 5, 2}, 9, 0, tables))
	step("an evicted shape again", mixedStep(rng, []int{3, 5, 2}, 9, 0, tables))
	if st, kept := g.Stats(), len(g.s.multi.graphs)+len(g.s.graphs)+len(g.s.pred.graphs); st.Graphs != kept {
		t.Errorf("%d graphs instantiated, %d kept: evicted step graphs were not destroyed", st.Graphs, kept)
	}
}
