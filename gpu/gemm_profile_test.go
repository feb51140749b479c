//go:build cgo

package gpu

import (
	"fmt"
	"os"
	"testing"

	"rosetop/gpu/cu"
)

// TestProfileLMHead logs the LM head's time at 1, 16, 32 and 64 rows (the logits of a decode
// step: rows x 768 @ 768x50264, 77 MB of weights, more than L2 holds, so every call reads them
// from DRAM) on cublasGemmEx and on each of cuBLASLt's candidates, with fp32 and fp16 logits.
func TestProfileLMHead(t *testing.T) {
	r := openProfileGPT2(t)
	defer r.Close()
	s := r.s
	if s.lt == nil {
		t.Skip("no cuBLASLt")
	}
	C, vp := gpt2Cfg.NEmbd, paddedVocab(gpt2Cfg.VocabSize)
	const reps = 8
	for _, m := range []int{1, 16, 32, 64} {
		for _, f32 := range []bool{true, false} {
			us, err := timeGraph(r, 5, func() error {
				for range reps {
					if err := s.ctx.GEMM(s.act.logits, s.act.xlast, s.wts.wteT, m, C, vp, f32, false); err != nil {
						return err
					}
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			line := fmt.Sprintf("LM head %dx%dx%d fp32 %v: cublasGemmEx %.2f us; cuBLASLt:", m, C, vp, f32, us/reps)
			var p *cu.LtPlan
			if err := onWorker(r, func(s *state) (err error) { p, err = s.ctx.NewPlan(s.lt.lib, vp, m, C, !f32, cu.LtPlain); return err }); err != nil {
				t.Fatalf("cuBLASLt plans no LM head at %d rows: %v", m, err)
			}
			for c := range p.Count() {
				us, err := timeGraph(r, 5, func() error {
					for range reps {
						if err := s.ctx.LtMatmul(s.lt.lib, p, c, s.wts.wteT, s.act.xlast, s.act.logits, 0); err != nil {
							return err
						}
					}
					return nil
				})
				if err != nil {
					line += fmt.Sprintf(" [%d] %v", c, err)
					continue
				}
				line += fmt.Sprintf(" [%d] %.2f", c, us/reps)
			}
			r.w.Do(func() { s.lt.lib.FreePlan(p) })
			t.Log(line)
		}
	}
}

// TestProfileSampler times the greedy sampler of a batch-64 step on its own: graph replays of
// argmax_next over the logits of a step of the GPT-2-124M-shaped model, us a call. Set
// ROSETOP_GPU_PROFILE=1.
func TestProfileSampler(t *testing.T) {
	r := openProfileGPT2(t)
	defer r.Close()
	for _, B := range []int{1, 64} {
		st := decodeStep(B, 128, tablesFor(r, B))
		clear(st.Temperature)
		next := make([]int32, B)
		if err := r.Step(st, next); err != nil { // the logits the sampler reads
			t.Fatal(err)
		}
		var prog program
		err := onWorker(r, func(s *state) error {
			p, err := s.newPlan(B, B, true, eagerStep, false)
			s.sampler(&p, &prog)
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		us, err := timeProgram(r, 200, &prog)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("batch %d: greedy sampler %.2f us a call (graph replays)", B, us)
	}
}

// openProfileGPT2 skips unless ROSETOP_GPU_PROFILE is set and opens the profile tests' runner:
// the GPT-2-124M-shaped model with random weights, up to 64 sequences of 1024 positions, paged.
func openProfileGPT2(t *testing.T) *Runner {
	t.Helper()
	if os.Getenv("ROSETOP_GPU_PROFILE") == "" {
		t.Skip("ROSETOP_GPU_PROFILE is not set")
	}
	needGPU(t)
	// small_gemm's copies too (the default on Hopper with wg_gemm has none), for its profile.
	return openNarrow(t, gpt2Cfg, testModel(gpt2Cfg, 1), Options{MaxBatch: 64, MaxSeqLen: 1024, Paged: true, MemoryFraction: 0.1}, smallTo64)
}

// TestProfileLayerGEMMs times the layer GEMMs of a batch-64 decode step as the step runs them
// (cublasGemmEx; the projections as K slices) against each of cuBLASLt's candidates for the
// plain product, over the 12 layers' weights back to back in a graph: us per GEMM. On the H200
// the QKV GEMM had a candidate 4% faster (4.02 against 4.19 us) and the projections none; the
// QKV GEMM and the LM head routed through cuBLASLt, timed at start (lt.go), measured 1.2 us a
// step faster through the scheduler in one device call and 1.4 us slower in the next (the
// timing picks differently): not kept (bench/RESULTS.md).
func TestProfileLayerGEMMs(t *testing.T) {
	r := openProfileGPT2(t)
	defer r.Close()
	s := r.s
	if s.lt == nil {
		t.Skip("no cuBLASLt")
	}
	const m = 64
	C, F, L := gpt2Cfg.NEmbd, gpt2Cfg.Inner, gpt2Cfg.NLayer
	a := &s.act
	type gemm struct {
		name    string
		x, y    cu.Ptr
		w       func(l int) cu.Ptr
		in, out int
		splits  int
	}
	for _, g := range []gemm{
		{"qkv", a.xln, a.y, func(l int) cu.Ptr { return s.wts.layers[l].attnW }, C, 3 * C, 1},
		{"attn proj", a.att, a.y, func(l int) cu.Ptr { return s.wts.layers[l].projW }, C, C, projSplits},
		{"fc proj", a.h, a.y, func(l int) cu.Ptr { return s.wts.layers[l].fcProjW }, F, C, fcProjSplits},
	} {
		us, err := timeGraph(r, 5, func() error {
			for l := range L {
				var err error
				if g.splits > 1 {
					err = s.ctx.GEMMSplitK(g.y, g.x, g.w(l), m, g.in, g.out, g.splits)
				} else {
					err = s.ctx.GEMM(g.y, g.x, g.w(l), m, g.in, g.out, true, false)
				}
				if err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		line := fmt.Sprintf("%s %dx%dx%d: as the step runs it (%d K slices) %.2f us; cuBLASLt:", g.name, m, g.in, g.out, g.splits, us/float64(L))
		var p *cu.LtPlan
		if err := onWorker(r, func(s *state) (err error) {
			p, err = s.ctx.NewPlan(s.lt.lib, g.out, m, g.in, false, cu.LtPlain)
			return err
		}); err != nil {
			t.Fatalf("cuBLASLt plans no %s at %d rows: %v", g.name, m, err)
		}
		for c := range p.Count() {
			us, err := timeGraph(r, 5, func() error {
				for l := range L {
					if err := s.ctx.LtMatmul(s.lt.lib, p, c, g.w(l), g.x, g.y, 0); err != nil {
						return err
					}
				}
				return nil
			})
			if err != nil {
				line += fmt.Sprintf(" [%d] %v", c, err)
				continue
			}
			line += fmt.Sprintf(" [%d] %.2f", c, us/float64(L))
		}
		r.w.Do(func() { s.lt.lib.FreePlan(p) })
		t.Log(line)
	}
}
