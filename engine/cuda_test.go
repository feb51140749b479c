//go:build cgo

package engine

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
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
