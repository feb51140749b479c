//go:build cgo

package gpu

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"rosetop/internal/gpt2ref"
)

var smallCfg = Config{NLayer: 2, NHead: 4, NEmbd: 64, NPositions: 128, VocabSize: 1000, Inner: 256, Eps: 1e-5}

// plan is one sequence of a scripted run: it joins at step join with its prompt, then decodes
// the reference's greedy tokens (teacher forcing).
type plan struct {
	join   int
	prompt []int32
	greedy []int32     // reference argmax after the prompt and each fed token
	refs   [][]float64 // reference logits for each step of the sequence
}

func makePlans(cfg Config, w *Weights, lens, joins []int, steps int, seed uint64) []*plan {
	rng := rand.New(rand.NewPCG(seed, 1))
	var ps []*plan
	for i, n := range lens {
		p := &plan{join: joins[i]}
		for range n {
			p.prompt = append(p.prompt, int32(rng.IntN(cfg.VocabSize)))
		}
		toks := slices.Clone(p.prompt)
		for range steps - p.join {
			ref := refLogits(cfg, w, toks)
			p.refs = append(p.refs, ref)
			p.greedy = append(p.greedy, gpt2ref.Argmax(ref))
			toks = append(toks, gpt2ref.Argmax(ref))
		}
		ps = append(ps, p)
	}
	return ps
}

type mode struct{ paged, graphs bool }

func (m mode) String() string { return fmt.Sprintf("paged=%v,graph=%v", m.paged, m.graphs) }

var modes = []mode{{false, false}, {false, true}, {true, false}, {true, true}}

// tablesFor gives sequence i a block table that is not the identity, to exercise the lookup.
func tablesFor(r *Runner, n int) [][]int32 {
	_, nb, width := r.Layout()
	out := make([][]int32, n)
	perm := rand.New(rand.NewPCG(3, 3)).Perm(min(nb, n*width))
	for i := range out {
		out[i] = make([]int32, width)
		for j := range width {
			out[i][j] = int32(perm[(i*width+j)%len(perm)])
		}
	}
	return out
}

// runPlans runs the scripted steps on r and returns, per step, the tokens sampled for the
// active sequences, checking every step's logits against the reference.
func runPlans(t *testing.T, r *Runner, cfg Config, ps []*plan, steps int, tol float64) [][]int32 {
	t.Helper()
	tables := tablesFor(r, len(ps))
	var out [][]int32
	worst := 0.0
	for k := range steps {
		st := &Step{}
		var active []*plan
		for i, p := range ps {
			if p.join > k {
				continue
			}
			active = append(active, p)
			if k == p.join {
				st.Tokens = append(st.Tokens, p.prompt...)
				st.SeqLens = append(st.SeqLens, int32(len(p.prompt)))
				st.Start = append(st.Start, 0)
			} else {
				st.Tokens = append(st.Tokens, p.greedy[k-p.join-1])
				st.SeqLens = append(st.SeqLens, 1)
				st.Start = append(st.Start, int32(len(p.prompt)+k-p.join-1))
			}
			st.Tables = append(st.Tables, tables[i]...)
			st.Temperature = append(st.Temperature, 0)
			st.TopK = append(st.TopK, 0)
			st.TopP = append(st.TopP, 0)
			st.Seed = append(st.Seed, 0)
		}
		next := make([]int32, len(active))
		logits := make([]float32, len(active)*cfg.VocabSize)
		if err := r.StepLogits(st, next, logits); err != nil {
			t.Fatalf("step %d: %v", k, err)
		}
		for b, p := range active {
			row := logits[b*cfg.VocabSize : (b+1)*cfg.VocabSize]
			e := relErr(row, p.refs[k-p.join])
			worst = max(worst, e)
			if e > tol {
				t.Errorf("step %d sequence %d: relative error %.3g > %g", k, b, e, tol)
			}
			if am := gpt2ref.Argmax(row); next[b] != am {
				t.Errorf("step %d sequence %d: sampled %d, argmax of the logits is %d", k, b, next[b], am)
			}
		}
		out = append(out, next)
	}
	t.Logf("worst relative error %.3g over %d steps", worst, steps)
	return out
}

// TestForwardMatchesReference: prefill of four prompts of different lengths (more tokens than
// one pass holds, so it runs in chunks), a sequence joining mid-run (a mixed prefill+decode
// step), teacher-forced decode, in all four modes, on the device's paths and on cuBLAS alone;
// all sample identical tokens.
func TestForwardMatchesReference(t *testing.T) {
	needGPU(t)
	cfg := smallCfg
	w := testModel(cfg, 11)
	const steps = 8
	ps := makePlans(cfg, w, []int{1, 9, 30, 50, 7}, []int{0, 0, 0, 0, 3}, steps, 5)
	var first [][]int32
	for _, m := range modes {
		for _, cublas := range []bool{false, true} {
			t.Run(fmt.Sprintf("%v/cublas=%v", m, cublas), func(t *testing.T) {
				var narrow []func(*caps)
				if cublas {
					narrow = append(narrow, cublasOnly)
				}
				r := openNarrow(t, cfg, w, Options{MaxBatch: 8, MaxSeqLen: 64, MaxTokens: 64, Paged: m.paged, Graphs: m.graphs,
					MemoryFraction: 0.02}, narrow...)
				defer r.Close()
				got := runPlans(t, r, cfg, ps, steps, 1e-2)
				if first == nil {
					first = got
				} else if !slices.EqualFunc(first, got, slices.Equal[[]int32]) {
					t.Errorf("sampled tokens differ from mode %v's:\n got %v\nwant %v", modes[0], got, first)
				}
			})
		}
	}
}

func decodeStep(B int, start int32, tables [][]int32) *Step {
	st := &Step{}
	for i := range B {
		addSeq(st, []int32{int32(i + 1)}, start, tables[i], 0.8, 40, 0.9, uint64(i))
	}
	return st
}

// addSeq appends to st a sequence running toks from position start, with its block table and
// sampling parameters.
func addSeq(st *Step, toks []int32, start int32, table []int32, temp float32, topK int32, topP float32, seed uint64) {
	st.Tokens = append(st.Tokens, toks...)
	st.SeqLens = append(st.SeqLens, int32(len(toks)))
	st.Start = append(st.Start, start)
	st.Tables = append(st.Tables, table...)
	st.Temperature = append(st.Temperature, temp)
	st.TopK = append(st.TopK, topK)
	st.TopP = append(st.TopP, topP)
	st.Seed = append(st.Seed, seed)
}

// TestSteadyDecodeAllocatesNothing counts device, pinned and Go heap allocations across decode
// steps once the bucket's graph exists.
func TestSteadyDecodeAllocatesNothing(t *testing.T) {
	needGPU(t)
	w := testModel(smallCfg, 2)
	for _, m := range modes {
		t.Run(m.String(), func(t *testing.T) {
			r, err := Open(smallCfg, w, Options{MaxBatch: 8, MaxSeqLen: 64, Paged: m.paged, Graphs: m.graphs, MemoryFraction: 0.02})
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			const B = 5
			st := decodeStep(B, 0, tablesFor(r, B))
			next := make([]int32, B)
			if err := r.Step(st, next); err != nil { // first use: captures the bucket-8 graph
				t.Fatal(err)
			}
			before := r.Stats()
			allocs := testing.AllocsPerRun(20, func() {
				for i := range st.Start {
					st.Start[i]++
				}
				if err := r.Step(st, next); err != nil {
					t.Fatal(err)
				}
			})
			after := r.Stats()
			if allocs != 0 {
				t.Errorf("a decode step made %v Go heap allocations, want 0", allocs)
			}
			if after != before {
				t.Errorf("decode steps changed the runner's allocations: before %+v, after %+v", before, after)
			}
			if m.graphs && after.Graphs != 1 {
				t.Errorf("%d graphs after decode steps of one bucket, want 1", after.Graphs)
			}
		})
	}
}

// TestRebuildReturnsMemory opens and closes runners in every mode ten times (each capturing a
// graph when graphs are on) while an observer runner stays open to read the device's free
// memory; it returns to its level.
func TestRebuildReturnsMemory(t *testing.T) {
	needGPU(t)
	w := testModel(smallCfg, 3)
	obs, err := Open(smallCfg, w, Options{MaxBatch: 1, MaxSeqLen: 16, MemoryFraction: 0.001})
	if err != nil {
		t.Fatal(err)
	}
	defer obs.Close()
	free0, _, err := obs.MemInfo()
	if err != nil {
		t.Fatal(err)
	}
	for i := range 10 {
		m := modes[i%len(modes)]
		r, err := Open(smallCfg, w, Options{MaxBatch: 8, MaxSeqLen: 64, Paged: m.paged, Graphs: m.graphs, MemoryFraction: 0.1})
		if err != nil {
			t.Fatal(err)
		}
		if err := r.Step(decodeStep(4, 0, tablesFor(r, 4)), make([]int32, 4)); err != nil {
			t.Fatal(err)
		}
		if st := r.Stats(); st.DeviceBytes < 1<<20 {
			t.Fatalf("rebuild %d holds %d device bytes: the KV pool is missing", i, st.DeviceBytes)
		}
		if err := r.Close(); err != nil {
			t.Fatalf("rebuild %d: close: %v", i, err)
		}
	}
	free1, _, err := obs.MemInfo()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("free memory before %d MiB, after 10 rebuilds %d MiB", free0>>20, free1>>20)
	if free1 < free0-(2<<20) {
		t.Errorf("10 rebuilds leaked %d KiB of device memory", (free0-free1)>>10)
	}
}

// TestColdStartLedger: Open reports context, JIT, weights, cuBLAS, KV pool, and with
// CaptureAhead one graph capture per bucket.
func TestColdStartLedger(t *testing.T) {
	needGPU(t)
	var rec recorder
	r, err := Open(smallCfg, testModel(smallCfg, 4), Options{MaxBatch: 16, MaxSeqLen: 64, Paged: true, Graphs: true, CaptureAhead: true, Record: rec.record, MemoryFraction: 0.02})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	all := strings.Join(rec.entries(), "\n")
	t.Logf("ledger:\n%s", all)
	for _, want := range []string{"CUDA context", fmt.Sprintf("kernel module load | %d kernels from fatbin", numKernels), "weight upload", "cuBLAS init | libcublas.so.", "activation buffers", "KV pool allocation | paged", "cuBLAS warm-up | ",
		"graph capture | batch 1\n", "graph capture | batch 2\n", "graph capture | batch 4\n", "graph capture | batch 8\n", "graph capture | batch 16",
		"graph capture | batch 1, sampling\n", "graph capture | batch 16, sampling\n"} {
		if !strings.Contains(all+"\n", want) {
			t.Errorf("ledger lacks %q:\n%s", want, all)
		}
	}
	if st := r.Stats(); st.Graphs != 10 { // 5 buckets, each with the greedy and the sampling sampler
		t.Errorf("%d graphs after capturing ahead, want 10", st.Graphs)
	}
}

func TestBadSteps(t *testing.T) {
	needGPU(t)
	r, err := Open(smallCfg, testModel(smallCfg, 5), Options{MaxBatch: 2, MaxSeqLen: 32, Paged: true, MemoryFraction: 0.001})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	_, nb, width := r.Layout()
	good := func() *Step { return decodeStep(1, 0, [][]int32{make([]int32, width)}) }
	tests := []struct {
		name string
		edit func(*Step)
		want string
	}{
		{"token out of vocabulary", func(s *Step) { s.Tokens[0] = 1000 }, "token 0 is 1000"},
		{"past max sequence length", func(s *Step) { s.Start[0] = 32 }, "positions [32, 33)"},
		{"block out of pool", func(s *Step) { s.Tables[0] = int32(nb) }, "block table entry 0"},
		{"too many sequences", func(s *Step) { *s = *decodeStep(3, 0, [][]int32{s.Tables, s.Tables, s.Tables}) }, "3 sequences"},
		{"lengths do not add up", func(s *Step) { s.SeqLens[0] = 2 }, "lengths add up to 2"},
		{"held counts missing", func(s *Step) { s.Held = []int32{1, 1} }, "2 held-block counts"},
		{"held blocks beyond the table", func(s *Step) { s.Held = []int32{int32(width + 1)} }, "holds"},
		{"held block out of pool", func(s *Step) { s.Held = []int32{2}; s.Tables[1] = int32(nb) }, "block table entry 1"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			st := good()
			tc.edit(st)
			err := r.Step(st, make([]int32, 4))
			if !errors.Is(err, ErrBadStep) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v, want ErrBadStep mentioning %q", err, tc.want)
			}
		})
	}
	if err := r.Step(good(), make([]int32, 1)); err != nil {
		t.Errorf("a good step after bad ones: %v", err)
	}
}

func TestContiguousDoesNotFit(t *testing.T) {
	needGPU(t)
	_, err := Open(smallCfg, testModel(smallCfg, 6), Options{MaxBatch: 1 << 15, MaxSeqLen: 128, MemoryFraction: 0.01})
	if !errors.Is(err, ErrDoesNotFit) {
		t.Fatalf("got %v, want ErrDoesNotFit", err)
	}
	t.Log(err)
}

// TestLazyGEMMWarmup: without CaptureAhead, Open pays no cuBLAS warm-up; the first eager step of
// a row class pays cuBLAS's first-call cost and says so in the ledger, once per class.
func TestLazyGEMMWarmup(t *testing.T) {
	needGPU(t)
	var rec recorder
	count := func(prefix string) int {
		n := 0
		for _, g := range rec.entries() {
			if strings.HasPrefix(g, prefix) {
				n++
			}
		}
		return n
	}
	r, err := Open(smallCfg, testModel(smallCfg, 6), Options{MaxBatch: 4, MaxSeqLen: 64, Paged: true, Record: rec.record, MemoryFraction: 0.01})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if n := count("cuBLAS warm-up"); n != 0 {
		t.Fatalf("Open warmed cuBLAS without CaptureAhead (%d entries)", n)
	}
	tables := tablesFor(r, 2)
	next := make([]int32, 2)
	for k := range 3 {
		if err := r.Step(decodeStep(2, int32(k), tables), next); err != nil {
			t.Fatal(err)
		}
	}
	// The layer GEMMs are cuBLAS's unless small_gemm or wg_gemm runs them (Hopper); the LM head
	// always is.
	want := "cuBLAS first use | layer GEMMs at 2 rows, LM head at 2 rows"
	if !r.s.caps.onCuBLAS(2) {
		want = "cuBLAS first use | LM head at 2 rows"
	}
	if n, all := count(want), count("cuBLAS first use"); n != 1 || all != 1 {
		t.Errorf("%d %q entries (%d 'cuBLAS first use' in all) after 3 steps of 2 rows, want exactly 1:\n%s", n, want, all, strings.Join(rec.entries(), "\n"))
	}
}

// TestPrewarm: after some steps, Prewarm (with a predicted step still queued) pays every row
// class and bucket left, and the steps after it, of every size, pay nothing more and sample what
// a runner that never prewarmed samples.
func TestPrewarm(t *testing.T) {
	needGPU(t)
	var rec recorder
	w := testModel(smallCfg, 7)
	opt := Options{MaxBatch: 16, MaxSeqLen: 64, Paged: true, Graphs: true, MemoryFraction: 0.01}
	ref, err := Open(smallCfg, w, opt)
	if err != nil {
		t.Fatal(err)
	}
	defer ref.Close()
	opt.Record = rec.record
	r, err := Open(smallCfg, w, opt)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	tables := tablesFor(r, 16)
	next, want := make([]int32, 16), make([]int32, 16)
	first := decodeStep(16, 0, tables)
	first.Repeats = 1 // queues the step at position 1
	if err := r.Step(first, next); err != nil {
		t.Fatal(err)
	}
	if err := ref.Step(decodeStep(16, 0, tables), want); err != nil {
		t.Fatal(err)
	}
	if err := r.Prewarm(); err != nil {
		t.Fatal(err)
	}
	all := strings.Join(rec.entries(), "\n")
	if !strings.Contains(all, "cuBLAS warm-up | prewarm: ") || !strings.Contains(all, "graph capture | batch 4") {
		t.Errorf("the ledger after Prewarm lacks its warm-up or a capture:\n%s", all)
	}
	if st := r.Stats(); st.Graphs < len(buckets(16)) {
		t.Errorf("%d graphs after Prewarm, want at least one a bucket (%d)", st.Graphs, len(buckets(16)))
	}
	before, graphs := len(rec.entries()), r.Stats().Graphs
	for _, B := range []int{16, 3, 1, 9, 16} {
		st := decodeStep(B, 1, tables)
		if err := r.Step(st, next); err != nil {
			t.Fatal(err)
		}
		if err := ref.Step(st, want); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(next[:B], want[:B]) {
			t.Errorf("batch %d after Prewarm sampled %v, a runner without it %v", B, next[:B], want[:B])
		}
	}
	prefill := &Step{Tokens: []int32{1, 2, 3, 4, 5}, SeqLens: []int32{2, 3}, Start: []int32{0, 0}, Tables: append(slices.Clone(tables[0]), tables[1]...),
		Temperature: []float32{0, 0}, TopK: []int32{0, 0}, TopP: []float32{0, 0}, Seed: []uint64{0, 0}}
	if err := r.Step(prefill, next); err != nil {
		t.Fatal(err)
	}
	if after := rec.entries(); len(after) != before || r.Stats().Graphs != graphs {
		t.Errorf("steps after Prewarm paid one-time costs: %d graphs -> %d, ledger:\n%s", graphs, r.Stats().Graphs, strings.Join(after[before:], "\n"))
	}
}

// recorder collects a runner's ledger as "what | detail" lines (Options.Record; the runner's
// worker goroutine calls record).
type recorder struct {
	mu  sync.Mutex
	got []string // guarded by mu
}

func (r *recorder) record(what, detail string, took time.Duration) {
	r.mu.Lock()
	r.got = append(r.got, what+" | "+detail)
	r.mu.Unlock()
}

func (r *recorder) entries() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.got)
}
