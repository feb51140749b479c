//go:build cgo

package engine

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
)

// needCUDA skips without a usable GPU, or fails when ROSETOP_REQUIRE_GPU=1.
func needCUDA(t testing.TB) {
	t.Helper()
	if ok, why := probeCUDA(); !ok {
		if os.Getenv("ROSETOP_REQUIRE_GPU") == "1" {
			t.Fatalf("ROSETOP_REQUIRE_GPU=1 but no usable GPU: %s", why)
		}
		t.Skipf("no usable GPU: %s", why)
	}
}

type gpuMode struct{ paged, graph bool }

func (m gpuMode) String() string { return fmt.Sprintf("paged=%v,graph=%v", m.paged, m.graph) }

var gpuModes = []gpuMode{{false, false}, {false, true}, {true, false}, {true, true}}

func newCUDA(t testing.TB, m *Model, mode gpuMode, maxBatch int) (*Engine, *cudaBackend) {
	t.Helper()
	e, err := New(m, Options{Device: "cuda", Paged: mode.paged, CUDAGraph: mode.graph, MaxBatch: maxBatch, GPUMemoryFraction: 0.1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	return e, e.Backend.(*cudaBackend)
}

// blocksFor gives batch slot i its own blocks covering the whole sequence length.
func blocksFor(e *Engine, i int) []int32 {
	if !e.Layout.Paged {
		return []int32{int32(i)}
	}
	n := (e.Model.Config.NPositions + e.Layout.BlockSize - 1) / e.Layout.BlockSize
	b := make([]int32, n)
	for j := range b {
		b[j] = int32(i*n + j)
	}
	return b
}

// hfRef is scripts/gpu_reference.py's output for one model.
type hfRef struct {
	Prompts [][]int32 `json:"prompts"`
	Greedy  [][]int32 `json:"greedy"`
	logits  []float32 // (prompts, steps+1, V)
}

func loadRef(t *testing.T, dir string, V int) *hfRef {
	b, err := os.ReadFile(filepath.Join(dir, "ref.json"))
	if err != nil {
		t.Fatal(err)
	}
	var r hfRef
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(filepath.Join(dir, "ref_logits.f32"))
	if err != nil {
		t.Fatal(err)
	}
	r.logits = make([]float32, len(raw)/4)
	for i := range r.logits {
		r.logits[i] = math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:]))
	}
	if want := len(r.Prompts) * (len(r.Greedy[0]) + 1) * V; len(r.logits) != want {
		t.Fatalf("%s: %d reference logits, want %d", dir, len(r.logits), want)
	}
	return &r
}

func (r *hfRef) row(p, step, V int) []float32 {
	steps := len(r.Greedy[0]) + 1
	return r.logits[(p*steps+step)*V : (p*steps+step+1)*V]
}

func relErr32(got, want []float32) float64 {
	if firstNonFinite(got) >= 0 {
		return math.Inf(1)
	}
	var d, n float64
	for i := range want {
		e := float64(got[i]) - float64(want[i])
		d += e * e
		n += float64(want[i]) * float64(want[i])
	}
	return math.Sqrt(d / n)
}

// TestCUDATeacherForcedHF compares every step's logits with Hugging Face transformers in fp32
// (scripts/gpu_reference.py, directory in ROSETOP_HF_REF) for the tiny and the 124M-shaped model:
// 4 prompts, the reference's greedy tokens fed for 32 steps, in all four modes, at batch 1 (each
// prompt alone) and batch 64 (16 copies of each prompt in one batch). The modes must sample
// identical tokens.
func TestCUDATeacherForcedHF(t *testing.T) {
	needCUDA(t)
	root := os.Getenv("ROSETOP_HF_REF")
	if root == "" {
		t.Skip("ROSETOP_HF_REF is not set (scripts/gpu-check.sh sets it)")
	}
	for _, name := range []string{"tiny", "big"} {
		t.Run(name, func(t *testing.T) {
			m, err := LoadDir(context.Background(), filepath.Join(root, name), name)
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			V := m.Config.VocabSize
			ref := loadRef(t, filepath.Join(root, name), V)
			steps := len(ref.Greedy[0])
			for _, batch := range []int{1, 64} {
				var firstTokens [][]int32
				for _, mode := range gpuModes {
					t.Run(fmt.Sprintf("%v/batch=%d", mode, batch), func(t *testing.T) {
						e, be := newCUDA(t, m, mode, 64)
						var seqs []int // prompt index of each sequence
						for i := range batch {
							seqs = append(seqs, i%len(ref.Prompts))
						}
						groups := [][]int{seqs}
						if batch == 1 {
							groups = [][]int{{0}, {1}, {2}, {3}}
						}
						tokens := make([][]int32, len(ref.Prompts))
						worst := 0.0
						for _, g := range groups {
							b := &Batch{}
							for slot, p := range g {
								b.Seqs = append(b.Seqs, SeqStep{ID: SeqID(slot), Tokens: ref.Prompts[p], Blocks: blocksFor(e, slot)})
							}
							next := make([]int32, len(g))
							logits := make([]float32, len(g)*V)
							for step := 0; step <= steps; step++ {
								if err := be.stepLogits(b, next, logits); err != nil {
									t.Fatalf("step %d: %v", step, err)
								}
								for i, p := range g {
									e := relErr32(logits[i*V:(i+1)*V], ref.row(p, step, V))
									worst = max(worst, e)
									if e > 1e-2 {
										t.Errorf("prompt %d step %d: relative error %.3g > 1e-2", p, step, e)
									}
									if i < len(ref.Prompts) && (batch == 1 || i == p) {
										tokens[p] = append(tokens[p], next[i])
									}
								}
								if step == steps {
									break
								}
								for i, p := range g {
									s := &b.Seqs[i]
									s.Start += len(s.Tokens)
									s.Tokens = ref.Greedy[p][step : step+1] // teacher forcing
								}
							}
						}
						t.Logf("worst relative error %.3g", worst)
						if firstTokens == nil {
							firstTokens = tokens
						} else if !slices.EqualFunc(tokens, firstTokens, slices.Equal[[]int32]) {
							t.Errorf("greedy tokens differ from mode %v", gpuModes[0])
						}
					})
				}
			}
		})
	}
}

// TestCUDAMatchesCPUGreedyTiny: the GPU and CPU engines generate the same greedy tokens for the
// embedded tiny model's golden prompts.
func TestCUDAMatchesCPUGreedyTiny(t *testing.T) {
	needCUDA(t)
	m, err := LoadTiny()
	if err != nil {
		t.Fatal(err)
	}
	var golden struct {
		Prompts []struct {
			IDs    []int32 `json:"ids"`
			Greedy []int32 `json:"greedy"`
		} `json:"prompts"`
	}
	raw, err := os.ReadFile("../testdata/golden/tiny_golden.json")
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, &golden); err != nil {
		t.Fatal(err)
	}
	cpu, err := New(m, Options{Device: "cpu", MaxBatch: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer cpu.Close()
	for _, mode := range gpuModes {
		g, _ := newCUDA(t, m, mode, 4)
		for i, p := range golden.Prompts {
			want, err := cpu.Generate(context.Background(), p.IDs, len(p.Greedy), SamplingParams{}, false, nil)
			if err != nil {
				t.Fatal(err)
			}
			got, err := g.Generate(context.Background(), p.IDs, len(p.Greedy), SamplingParams{}, false, nil)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, want) {
				t.Errorf("%v prompt %d: GPU %v, CPU %v", mode, i, got, want)
			}
			if !slices.Equal(got, p.Greedy) {
				t.Errorf("%v prompt %d: GPU %v, HF float64 golden %v", mode, i, got, p.Greedy)
			}
		}
	}
}

// TestCUDASamplingFollowsEngineRules: the GPU sampler picks exactly what SampleToken picks from
// the same logits, for a spread of temperatures, top-k, top-p and seeds.
func TestCUDASamplingFollowsEngineRules(t *testing.T) {
	needCUDA(t)
	m, err := LoadTiny()
	if err != nil {
		t.Fatal(err)
	}
	e, be := newCUDA(t, m, gpuMode{true, true}, 64)
	V := m.Config.VocabSize
	params := []SamplingParams{
		{}, {Temperature: 1}, {Temperature: 0.7}, {Temperature: 1.3, TopK: 40}, {Temperature: 1, TopK: 1},
		{Temperature: 0.9, TopP: 0.9}, {Temperature: 1, TopP: 0.5}, {Temperature: 2, TopK: 100, TopP: 0.8},
		{Temperature: 0.5, TopK: 5, TopP: 0.3}, {Temperature: 1, TopK: V - 1}, {Temperature: 1, TopP: 0.999},
	}
	b := &Batch{}
	for i := range 64 {
		sp := params[i%len(params)]
		sp.Seed = uint64(1000 + i)
		b.Seqs = append(b.Seqs, SeqStep{ID: SeqID(i), Tokens: []int32{int32(100 + i), int32(7 * i)}, Blocks: blocksFor(e, i), Sample: sp})
	}
	next := make([]int32, 64)
	logits := make([]float32, 64*V)
	var scratch SampleScratch
	checked, sampled := 0, 0
	for step := range 20 {
		if err := be.stepLogits(b, next, logits); err != nil {
			t.Fatal(err)
		}
		for i := range b.Seqs {
			s := &b.Seqs[i]
			pos := s.Start + len(s.Tokens)
			want := SampleToken(logits[i*V:(i+1)*V], s.Sample, pos, &scratch)
			if next[i] != want {
				t.Errorf("step %d seq %d %+v: GPU sampled %d, SampleToken %d", step, i, s.Sample, next[i], want)
			}
			checked++
			if !s.Sample.Greedy() {
				sampled++
			}
			s.Start = pos
			s.Tokens = []int32{next[i]}
		}
	}
	t.Logf("%d draws checked (%d non-greedy)", checked, sampled)
}

// TestCUDAStepAllocatesNothing: the adapter reuses its flat step, so a steady decode step through
// the Backend interface makes no Go heap allocation.
func TestCUDAStepAllocatesNothing(t *testing.T) {
	needCUDA(t)
	m, err := LoadTiny()
	if err != nil {
		t.Fatal(err)
	}
	for _, mode := range gpuModes {
		e, be := newCUDA(t, m, mode, 8)
		b := &Batch{}
		for i := range 8 {
			b.Seqs = append(b.Seqs, SeqStep{ID: SeqID(i), Tokens: []int32{int32(i)}, Blocks: blocksFor(e, i)})
		}
		next := make([]int32, 8)
		if err := be.Step(b, next); err != nil {
			t.Fatal(err)
		}
		allocs := testing.AllocsPerRun(20, func() {
			for i := range b.Seqs {
				b.Seqs[i].Start++
			}
			if err := be.Step(b, next); err != nil {
				t.Fatal(err)
			}
		})
		if allocs != 0 {
			t.Errorf("%v: a decode step through the backend made %v allocations, want 0", mode, allocs)
		}
	}
}

// TestCUDAPrewarm: the CUDA backend pays its remaining one-time costs in Prewarm and says so in
// the ledger.
func TestCUDAPrewarm(t *testing.T) {
	needCUDA(t)
	e, _ := newCUDA(t, smallModel(t, smallConfig(), 3), gpuMode{paged: true, graph: true}, 4)
	n := e.Ledger.Len()
	if err := e.Prewarm(); err != nil {
		t.Fatal(err)
	}
	var what []string
	for _, l := range e.Ledger.Entries()[n:] {
		what = append(what, l.What+" "+l.Detail)
	}
	if !slices.ContainsFunc(what, func(s string) bool { return strings.HasPrefix(s, "cuBLAS warm-up prewarm: ") }) ||
		!slices.Contains(what, "graph capture batch 4") {
		t.Errorf("ledger entries of Prewarm: %q, want its cuBLAS warm-up and the batch-4 capture", what)
	}
}

// TestCUDALogprobsMatchCPU: the CUDA backend's logprobs, for the embedded tiny model and a
// random GPT-2 124M (not under -race or -short), in all four modes, with mixed sampling and all
// greedy (whose logits the runner computes on another path than its greedy steps without
// logits): each entry of a sequence that asks is the backend's fill over the logits it
// downloaded, bit for bit, with the token it sampled, and within 2e-3 (top ids equal where
// neighbours are farther apart) of FillLogprobs over the CPU backend's logits of the same batch,
// with that token; an entry of a sequence that does not ask is untouched. A prefill step, decode
// steps, and a mixed step (one sequence runs two tokens); both backends are fed the GPU's
// tokens. A step that asks queues nothing ahead (its Repeats hint is dropped), while steps that
// do not still do.
func TestCUDALogprobsMatchCPU(t *testing.T) {
	needCUDA(t)
	for _, name := range []string{"tiny", "random:gpt2"} {
		t.Run(name, func(t *testing.T) {
			m := logprobsModel(t, name)
			for _, greedy := range []bool{false, true} {
				for _, mode := range gpuModes {
					t.Run(fmt.Sprintf("%v/all-greedy=%v", mode, greedy), func(t *testing.T) { cudaLogprobsRun(t, m, mode, greedy) })
				}
			}
		})
	}
}

// cudaLogprobsRun is one mode of TestCUDALogprobsMatchCPU: 18 steps of 4 sequences on the GPU
// and, fed the same tokens, on the CPU.
func cudaLogprobsRun(t *testing.T, m *Model, mode gpuMode, allGreedy bool) {
	const tol = 2e-3
	e, be := newCUDA(t, m, mode, 4)
	cpu := newTestBackend(t, m, false, 4, 64, 0)
	V := m.Config.VocabSize
	seqs := []struct {
		prompt []int32
		sample SamplingParams
		ask    bool
		top    int
	}{
		{batchPrompts[2], SamplingParams{}, true, 5},
		{batchPrompts[0], SamplingParams{Temperature: 0.9, Seed: 7}, true, MaxTopLogprobs},
		{batchPrompts[1], SamplingParams{Temperature: 1.1, TopK: 20, TopP: 0.9, Seed: 11}, false, 0},
		{batchPrompts[2], SamplingParams{}, true, 0},
	}
	var gb, cb Batch
	for j, s := range seqs {
		sp := s.sample
		if allGreedy {
			sp = SamplingParams{}
		}
		gb.Seqs = append(gb.Seqs, SeqStep{ID: SeqID(j), Tokens: s.prompt, Blocks: blocksFor(e, j), Sample: sp, TopLogprobs: s.top})
		cb.Seqs = append(cb.Seqs, SeqStep{ID: SeqID(j), Tokens: s.prompt, Blocks: []int32{int32(j)}, Sample: sp})
	}
	gb.Logprobs = make([]TokenLogprobs, len(seqs))
	gb.Logprobs[2] = TokenLogprobs{Sampled: lpSentinel.Sampled, Top: slices.Clone(lpSentinel.Top)}
	next := make([]int32, len(seqs))
	worst := 0.0
	queuedBefore := 0 // be.r.Stats().Queued at the first plain step of a run of them
	for step := range 18 {
		// Steps 0-5 ask (0: the prefill), 6-9 do not, 10-15 ask (10: sequence 1 runs two
		// tokens), 16-17 do not. Every decode step hints that the next steps repeat it.
		ask := step < 6 || step >= 10 && step < 16
		for j := range gb.Seqs {
			gb.Seqs[j].Logprobs = ask && seqs[j].ask
		}
		gb.Repeats = 0
		if step > 0 {
			gb.Repeats = 4
		}
		if step == 10 {
			gb.Seqs[1].Tokens = append(slices.Clone(gb.Seqs[1].Tokens), 13)
			cb.Seqs[1].Tokens = gb.Seqs[1].Tokens
		}
		before := make([]TokenLogprobs, len(gb.Logprobs)) // deep: a backend reuses an entry's Top
		for j, l := range gb.Logprobs {
			before[j] = TokenLogprobs{Sampled: l.Sampled, Top: slices.Clone(l.Top), Rank: l.Rank}
		}
		queued := be.r.Stats().Queued
		rows, err := cpu.Logits(&cb, false)
		if err != nil {
			t.Fatal(err)
		}
		if err := be.Step(&gb, next); err != nil {
			t.Fatalf("step %d: %v", step, err)
		}
		switch {
		case ask && be.r.Stats().Queued != queued:
			t.Fatalf("step %d asks for logprobs but was served from a step queued ahead", step)
		case step == 6 || step == 16:
			if be.r.Stats().Queued != queued {
				t.Fatalf("step %d follows a step that asked for logprobs, which queued it ahead anyway", step)
			}
			queuedBefore = queued
		case step == 9 && mode.graph && be.r.Stats().Queued == queuedBefore:
			t.Fatalf("steps 6-9 do not ask for logprobs, but none of them was queued ahead (graphs on)")
		}
		for j := range gb.Seqs {
			s := &gb.Seqs[j]
			got := gb.Logprobs[j]
			if !s.Logprobs {
				if !lpEqual(got, before[j]) {
					t.Fatalf("step %d seq %d does not ask, its entry became %+v", step, j, got)
				}
				continue
			}
			var own, want TokenLogprobs
			new(SampleScratch).logprobs(&be.k, &own, be.logits[j*V:(j+1)*V], next[j], s.TopLogprobs)
			if got.Sampled.Token != next[j] || !lpEqual(got, own) {
				t.Fatalf("step %d seq %d: entry %+v, want %+v from the downloaded logits (sampled %d)", step, j, got, own, next[j])
			}
			FillLogprobs(&want, rows[j], next[j], s.TopLogprobs)
			if err := lpClose(got, want, tol); err != nil {
				t.Errorf("step %d seq %d %+v: against the CPU: %v (the rows' logits differ by up to %.3g)",
					step, j, s.Sample, err, maxAbsDiff(be.logits[j*V:(j+1)*V], rows[j]))
			}
			worst = max(worst, math.Abs(float64(got.Sampled.Logprob-want.Sampled.Logprob)))
			for k := range min(len(got.Top), len(want.Top)) {
				worst = max(worst, math.Abs(float64(got.Top[k].Logprob-want.Top[k].Logprob)))
			}
		}
		for j := range gb.Seqs {
			g, c := &gb.Seqs[j], &cb.Seqs[j]
			g.Start += len(g.Tokens)
			g.Tokens = []int32{next[j]}
			c.Start, c.Tokens = g.Start, g.Tokens
		}
	}
	t.Logf("worst logprob difference from the CPU %.3g", worst)
}

// maxAbsDiff is max |a[i] - b[i]|.
func maxAbsDiff(a, b []float32) float64 {
	d := 0.0
	for i := range b {
		d = max(d, math.Abs(float64(a[i])-float64(b[i])))
	}
	return d
}

// TestCUDAPromptLogprobsMatchCPU: the CUDA backend's prompt logprobs (the step's token rows), for
// the embedded tiny model and a random GPT-2 124M (not under -race or -short), in all four modes,
// against FillLogprobs over the CPU backend's logits of every token of the same batch: within
// 2e-3, the same top ids where neighbours are farther apart, the same rank but for tokens whose
// logits are within 2e-3 of the sampled one's. The batch mixes two asking sequences of different
// lengths, a sampled prefill that does not ask and a decode row; the greedy sequences sample the
// CPU's argmax where it leads by more than 2e-3, and their logprobs in that step and in the
// decode steps after it (over the KV entries that step wrote) match the CPU's likewise. Entries
// of sequences that do not ask are untouched.
func TestCUDAPromptLogprobsMatchCPU(t *testing.T) {
	needCUDA(t)
	for _, name := range []string{"tiny", "random:gpt2"} {
		t.Run(name, func(t *testing.T) {
			m := logprobsModel(t, name)
			for _, mode := range gpuModes {
				t.Run(mode.String(), func(t *testing.T) { cudaPromptRun(t, m, mode) })
			}
		})
	}
}

// cudaPromptRun is one mode of TestCUDAPromptLogprobsMatchCPU: sequence 0's prefill alone, the
// mixed step with prompt logprobs, then 4 decode steps, on the GPU and, fed the same tokens, on
// the CPU.
func cudaPromptRun(t *testing.T, m *Model, mode gpuMode) {
	const tol = 2e-3
	e, be := newCUDA(t, m, mode, 4)
	cpu := newTestBackend(t, m, false, 4, 64, 0)
	var gb, cb Batch
	first := SeqStep{ID: 0, Tokens: batchPrompts[1]}
	for _, b := range []*Batch{&gb, &cb} {
		b.Seqs = []SeqStep{first}
	}
	gb.Seqs[0].Blocks, cb.Seqs[0].Blocks = blocksFor(e, 0), []int32{0}
	next := make([]int32, 4)
	if err := be.Step(&gb, next); err != nil {
		t.Fatal(err)
	}
	if _, err := cpu.Logits(&cb, false); err != nil {
		t.Fatal(err)
	}
	seqs := []SeqStep{
		{ID: 0, Tokens: []int32{next[0]}, Start: len(first.Tokens), Logprobs: true, TopLogprobs: 5},
		{ID: 1, Tokens: batchPrompts[2], PromptLogprobs: true, PromptTopLogprobs: 5, Logprobs: true, TopLogprobs: 3},
		{ID: 2, Tokens: batchPrompts[1], Sample: SamplingParams{Temperature: 0.9, Seed: 7}},
		{ID: 3, Tokens: batchPrompts[1], PromptLogprobs: true, PromptTopLogprobs: MaxTopLogprobs, Logprobs: true},
	}
	gb.Seqs, cb.Seqs = nil, nil
	for j, s := range seqs {
		s.Blocks = blocksFor(e, j)
		gb.Seqs = append(gb.Seqs, s)
		s.Blocks = []int32{int32(j)}
		cb.Seqs = append(cb.Seqs, s)
	}
	gb.Logprobs = make([]TokenLogprobs, len(seqs))
	promptEntries(&gb)
	worst := 0.0
	for step := range 5 {
		rows, err := cpu.Logits(&cb, true)
		if err != nil {
			t.Fatal(err)
		}
		if err := be.Step(&gb, next); err != nil {
			t.Fatalf("step %d: %v", step, err)
		}
		row := 0
		for j := range gb.Seqs {
			s := &gb.Seqs[j]
			if step == 0 {
				worst = max(worst, cudaCheckPrompt(t, s, j, gb.PromptLogprobs[j], rows[row:], tol))
			}
			row += len(s.Tokens)
			last := rows[row-1]
			if s.Sample.Greedy() {
				if want, lead := argmaxLead(last); lead > tol && next[j] != want {
					t.Errorf("step %d seq %d: GPU sampled %d, the CPU's argmax is %d (by %.3g)", step, j, next[j], want, lead)
				}
			}
			if s.Logprobs {
				var want TokenLogprobs
				FillLogprobs(&want, last, next[j], s.TopLogprobs)
				if err := lpClose(gb.Logprobs[j], want, tol); err != nil {
					t.Errorf("step %d seq %d: logprobs against the CPU: %v", step, j, err)
				}
			}
		}
		for j := range gb.Seqs {
			g, c := &gb.Seqs[j], &cb.Seqs[j]
			g.Start += len(g.Tokens)
			g.Tokens, g.PromptLogprobs = []int32{next[j]}, false
			c.Start, c.Tokens = g.Start, g.Tokens
		}
		gb.Repeats = 4
	}
	t.Logf("worst prompt logprob difference from the CPU %.3g", worst)
}

// cudaCheckPrompt checks sequence j's prompt logprobs entries got against the CPU's rows of its
// tokens (see TestCUDAPromptLogprobsMatchCPU) and returns the largest logprob difference.
func cudaCheckPrompt(t *testing.T, s *SeqStep, j int, got []TokenLogprobs, rows [][]float32, tol float64) float64 {
	t.Helper()
	n := 0
	if s.PromptLogprobs {
		n = len(s.Tokens) - 1
	}
	for k := n; k < len(got); k++ {
		if !lpEqual(got[k], promptSentinel()) {
			t.Errorf("seq %d: entry %d (past its %d) became %+v", j, k, n, got[k])
		}
	}
	worst := 0.0
	for k := range n {
		var want TokenLogprobs
		tok := s.Tokens[k+1]
		FillLogprobs(&want, rows[k], tok, s.PromptTopLogprobs)
		if err := lpClose(got[k], want, tol); err != nil {
			t.Errorf("seq %d prompt entry %d: against the CPU: %v", j, k, err)
		}
		near := 0 // tokens whose logits are within tol of tok's: their order may differ
		for v, x := range rows[k] {
			if v != int(tok) && math.Abs(float64(x-rows[k][tok])) <= tol {
				near++
			}
		}
		if d := got[k].Rank - want.Rank; d > near || -d > near {
			t.Errorf("seq %d prompt entry %d: rank %d, the CPU's %d (%d tokens within %g)", j, k, got[k].Rank, want.Rank, near, tol)
		}
		worst = max(worst, math.Abs(float64(got[k].Sampled.Logprob-want.Sampled.Logprob)))
	}
	return worst
}

// argmaxLead returns row's most likely token and how far its logit leads the next one's.
func argmaxLead(row []float32) (int32, float64) {
	best, second := 0, -1
	for v := 1; v < len(row); v++ {
		switch {
		case row[v] > row[best]:
			best, second = v, best
		case second < 0 || row[v] > row[second]:
			second = v
		}
	}
	if second < 0 {
		return int32(best), math.Inf(1)
	}
	return int32(best), float64(row[best] - row[second])
}

// TestCUDAPromptLogprobsChecks: a batch where a sequence asks for prompt logprobs is checked
// whole before its step runs (a bad sequence that does not ask fails it with ErrBadBatch naming
// that sequence), and a set Stop ends it with ErrStopped.
func TestCUDAPromptLogprobsChecks(t *testing.T) {
	needCUDA(t)
	m, err := LoadTiny()
	if err != nil {
		t.Fatal(err)
	}
	e, be := newCUDA(t, m, gpuMode{paged: true}, 2)
	b := Batch{Seqs: []SeqStep{
		{ID: 1, Tokens: batchPrompts[2], Blocks: blocksFor(e, 0), PromptLogprobs: true},
		{ID: 2, Tokens: []int32{int32(m.Config.VocabSize)}, Blocks: blocksFor(e, 1)},
	}}
	promptEntries(&b)
	if err := be.Step(&b, make([]int32, 2)); !errors.Is(err, ErrBadBatch) || !strings.Contains(err.Error(), "sequence 1 (id 2)") {
		t.Errorf("a token past the vocabulary: %v, want ErrBadBatch naming sequence 1 (id 2)", err)
	}
	b.Seqs[1].Tokens = batchPrompts[0]
	b.Stop = new(atomic.Bool)
	b.Stop.Store(true)
	if err := be.Step(&b, make([]int32, 2)); !errors.Is(err, ErrStopped) {
		t.Errorf("Stop set: %v, want ErrStopped", err)
	}
}

// TestCUDAPromptStepAllocatesNothing: once grown, a step whose sequences ask for prompt logprobs
// makes no Go heap allocation (the step, its token rows, their entries and the workers are reused).
func TestCUDAPromptStepAllocatesNothing(t *testing.T) {
	needCUDA(t)
	m, err := LoadTiny()
	if err != nil {
		t.Fatal(err)
	}
	for _, mode := range gpuModes {
		e, be := newCUDA(t, m, mode, 4)
		b := Batch{Seqs: []SeqStep{
			{ID: 1, Tokens: batchPrompts[2], Blocks: blocksFor(e, 0), PromptLogprobs: true, PromptTopLogprobs: 5},
			{ID: 2, Tokens: batchPrompts[1], Blocks: blocksFor(e, 1), PromptLogprobs: true, PromptTopLogprobs: MaxTopLogprobs},
		}}
		promptEntries(&b)
		next := make([]int32, 2)
		if err := be.Step(&b, next); err != nil {
			t.Fatal(err)
		}
		allocs := testing.AllocsPerRun(5, func() {
			if err := be.Step(&b, next); err != nil { // the same step again: it rewrites the same KV slots
				t.Fatal(err)
			}
		})
		if allocs != 0 {
			t.Errorf("%v: a step with prompt logprobs made %v allocations, want 0", mode, allocs)
		}
	}
}

// logprobsModel loads the logprobs tests' model name, "tiny" or "random:gpt2" (skipped under
// -race or -short: all 124M parameters run on the CPU too); it closes with the test.
func logprobsModel(t *testing.T, name string) *Model {
	t.Helper()
	var m *Model
	var err error
	if name == "tiny" {
		m, err = LoadTiny()
	} else {
		if testing.Short() || raceEnabled {
			t.Skip("builds all 124M parameters and runs them on the CPU: too slow under -race or -short")
		}
		m, err = NewRandomModel(context.Background(), "gpt2", 1)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}
