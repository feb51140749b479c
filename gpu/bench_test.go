//go:build cgo

package gpu

import (
	"fmt"
	"os"
	"testing"
	"time"

	"rosetop/gpu/cu"
)

var gpt2Cfg = Config{NLayer: 12, NHead: 12, NEmbd: 768, NPositions: 1024, VocabSize: 50257, Inner: 3072, Eps: 1e-5}

// BenchmarkDecodeGPT2 times one greedy decode step of a GPT-2-124M-shaped model at context 128
// in every mode, at batch 1 and 64 (ns/op is one step).
func BenchmarkDecodeGPT2(b *testing.B) {
	needGPU(b)
	w := testModel(gpt2Cfg, 1)
	for _, m := range modes {
		for _, B := range []int{1, 64} {
			b.Run(fmt.Sprintf("%v/batch=%d", m, B), func(b *testing.B) {
				r, err := Open(gpt2Cfg, w, Options{MaxBatch: 64, MaxSeqLen: 1024, Paged: m.paged, Graphs: m.graphs, MemoryFraction: 0.1})
				if err != nil {
					b.Fatal(err)
				}
				defer r.Close()
				st := decodeStep(B, 128, tablesFor(r, B))
				for i := range st.Temperature {
					st.Temperature[i] = 0
				}
				next := make([]int32, B)
				if err := r.Step(st, next); err != nil {
					b.Fatal(err)
				}
				b.ResetTimer()
				for b.Loop() {
					if err := r.Step(st, next); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(B)*float64(b.N)/b.Elapsed().Seconds(), "tokens/s")
			})
		}
	}
}

// BenchmarkDecodeGPT2Sampling is the batch-64 paged graph step with temperature 0.8, top-k 40
// and top-p 0.9 sampling on the GPU (compare with the greedy step above).
func BenchmarkDecodeGPT2Sampling(b *testing.B) {
	needGPU(b)
	w := testModel(gpt2Cfg, 1)
	r, err := Open(gpt2Cfg, w, Options{MaxBatch: 64, MaxSeqLen: 1024, Paged: true, Graphs: true, MemoryFraction: 0.1})
	if err != nil {
		b.Fatal(err)
	}
	defer r.Close()
	st := decodeStep(64, 128, tablesFor(r, 64))
	next := make([]int32, 64)
	if err := r.Step(st, next); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for b.Loop() {
		if err := r.Step(st, next); err != nil {
			b.Fatal(err)
		}
	}
}

// TestProfileDecodeGPT2 prints the GPU time of each op kind of a greedy decode step of the
// GPT-2-124M-shaped model at context 128 (CUDA events, kernels back to back), the GPU time of a
// graph replay on each path the runner could take, the wall time of a whole Step and of a worker
// round trip. Set ROSETOP_GPU_PROFILE=1; ROSETOP_GPU_PROFILE_SAMPLING=1 profiles
// temperature/top-k/top-p too.
func TestProfileDecodeGPT2(t *testing.T) {
	if os.Getenv("ROSETOP_GPU_PROFILE") == "" {
		t.Skip("ROSETOP_GPU_PROFILE is not set")
	}
	needGPU(t)
	w := testModel(gpt2Cfg, 1)
	for _, B := range []int{1, 64} {
		profileStepOps(t, w, B, true)
		for _, v := range []struct {
			name   string
			narrow []func(*caps)
		}{
			{"default", nil},
			{"small_gemm + PDL", []func(*caps){smallTo64}},
			{"small_gemm + PDL, norms not folded", []func(*caps){smallTo64, noFold}},
			{"small_gemm, no PDL", []func(*caps){smallTo64, noPDL}},
			{"cuBLAS", []func(*caps){cublasOnly}},
			{"cublasGemmEx only", []func(*caps){cublasOnly, noLt}},
		} {
			profileGraph(t, w, B, v.name, v.narrow...)
		}
		if os.Getenv("ROSETOP_GPU_PROFILE_SAMPLING") != "" {
			profileStepOps(t, w, B, false)
		}
	}
	// Where small_gemm's step stops beating cuBLAS's (smallDefaultRows).
	for _, B := range []int{2, 4, 8, 16, 24, 32, 48} {
		profileGraph(t, w, B, "small_gemm + PDL", smallTo64)
		profileGraph(t, w, B, "cuBLAS", cublasOnly)
	}
	profileLaunch(t, w)
	profileGEMM(t, w)
}

// profileGEMM logs cuBLAS's time per batch-64 GEMM of each GPT-2 shape, with the weight as
// stored now ([in, out], "NN") and transposed ([out, in], "TN"; the same bytes read as the
// transposed shape), fp32 and fp16 output.
func profileGEMM(t *testing.T, w *Weights) {
	r, err := Open(gpt2Cfg, w, Options{MaxBatch: 64, MaxSeqLen: 1024, Paged: true, MemoryFraction: 0.1})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	s, L := r.s, &r.s.wts.layers[0]
	C, F := gpt2Cfg.NEmbd, gpt2Cfg.Inner
	const reps = 24
	for _, g := range []struct {
		name    string
		x, w    cu.Ptr
		in, out int
		wp      cu.Ptr
		p       smallPlan
	}{{"qkv", s.act.xln, L.attnW, C, 3 * C, L.attnWp, s.caps.small.qkv}, {"attn proj", s.act.att, L.projW, C, C, L.projWp, s.caps.small.proj},
		{"fc", s.act.xln, L.fcW, C, F, L.fcWp, s.caps.small.fc}, {"fc proj", s.act.h, L.fcProjW, F, C, L.fcProjWp, s.caps.small.fcProj}} {
		line := fmt.Sprintf("gemm %-9s 64x%dx%d:", g.name, g.in, g.out)
		if s.caps.small.on {
			// Back to back with PDL, as in a step: each call's weights load during the previous one.
			var prog program
			for range reps {
				prog.smallGEMM("gemm", s.caps.pdl, s.act.y, g.x, g.wp, 64, g.in, g.out, g.p, gemmEpi{}, C, gpt2Cfg.Eps)
			}
			us, err := timeProgram(r, 20, &prog)
			if err != nil {
				t.Fatal(err)
			}
			line += fmt.Sprintf("  small_gemm %+v %.2f us", g.p, us/reps)
		}
		for _, v := range []struct {
			name    string
			f32, wT bool
		}{{"NN fp32", true, false}, {"NN fp16", false, false}, {"TN fp32", true, true}, {"TN fp16", false, true}} {
			us, err := timeGraph(r, 20, func() error {
				for range reps {
					if err := s.ctx.GEMM(s.act.y, g.x, g.w, 64, g.in, g.out, v.f32, v.wT); err != nil {
						return err
					}
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			line += fmt.Sprintf("  %s %.2f us", v.name, us/reps)
		}
		for _, sp := range []int{2, 4, 8} {
			if g.in%(16*sp) != 0 {
				continue
			}
			us, err := timeGraph(r, 20, func() error {
				for range reps {
					if err := s.ctx.GEMMSplitK(s.act.y, g.x, g.w, 64, g.in, g.out, sp); err != nil {
						return err
					}
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			line += fmt.Sprintf("  split%d %.2f us", sp, us/reps)
		}
		t.Log(line)
	}
}

// profileLaunch logs what a graph node costs here: an empty kernel, and a 64-row layernorm.
func profileLaunch(t *testing.T, w *Weights) {
	r, err := Open(gpt2Cfg, w, Options{MaxBatch: 64, MaxSeqLen: 1024, Paged: true, MemoryFraction: 0.1})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	st := decodeStep(64, 128, tablesFor(r, 64))
	if err := r.Step(st, make([]int32, 64)); err != nil {
		t.Fatal(err)
	}
	const nodes = 100
	s := r.s
	var empty, embed program
	m, a, wt := &s.meta, &s.act, s.wts
	for range nodes {
		empty.spin(0)
		embed.embedLN(a.x, a.xln, m.devAt(m.off.ids), m.devAt(m.off.pos), wt.wte, wt.wpe, wt.layers[0].ln1w, wt.layers[0].ln1b,
			gpt2Cfg.NEmbd, gpt2Cfg.Eps, 64, 0)
	}
	emptyUs, err := timeProgram(r, 20, &empty)
	if err != nil {
		t.Fatal(err)
	}
	embedUs, err := timeProgram(r, 20, &embed)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("graph node cost: %.2f us per empty kernel, %.2f us per 64-row embed+layernorm", emptyUs/nodes, embedUs/nodes)
}

// profileStepOps logs the per-op GPU time of an eager paged decode step of B sequences, then
// the same step as graphs of one op kind each (no events between kernels, so these times add up
// to about the whole step's replay).
func profileStepOps(t *testing.T, w *Weights, B int, greedy bool) {
	r, err := Open(gpt2Cfg, w, Options{MaxBatch: 64, MaxSeqLen: 1024, Paged: true, MemoryFraction: 0.1})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	st := decodeStep(B, 128, tablesFor(r, B))
	if greedy {
		clear(st.Temperature)
	}
	runSteps(t, r, st, make([]int32, B), 1) // cuBLAS's first calls
	prog := stepProgram(t, r, st)
	p := profileOps(t, r, prog, 20)
	total := p.total()
	t.Logf("batch %d (greedy %v): %.1f us per step on the GPU, kernels back to back", B, greedy, 1000*total/float64(p.runs))
	for _, op := range p.kinds {
		t.Logf("  %-22s %8.1f us/step  %3d ops  %5.1f%%", op, 1000*p.ms[op]/float64(p.runs), p.count[op], 100*p.ms[op]/total)
	}
	if !greedy {
		return
	}
	whole, err := timeProgram(r, 20, prog)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("batch %d per kind, graph replays (the step alone: %.1f us):", B, whole)
	var sum float64
	for _, op := range p.kinds {
		us, err := timeProgram(r, 20, only(prog, op))
		if err != nil {
			t.Fatal(err)
		}
		sum += us
		t.Logf("  %-22s %8.1f us/step  %3d calls", op, us, p.count[op])
	}
	t.Logf("  %-22s %8.1f us/step", "sum of kinds", sum)
}

// profileGraph logs the GPU time of back-to-back replays of the batch's decode graph on a
// runner narrowed by narrow, the wall time of a Step, and of an empty round trip to the worker
// goroutine.
func profileGraph(t *testing.T, w *Weights, B int, name string, narrow ...func(*caps)) {
	r := openNarrow(t, gpt2Cfg, w, Options{MaxBatch: 64, MaxSeqLen: 1024, Paged: true, Graphs: true, MemoryFraction: 0.1}, narrow...)
	defer r.Close()
	st := decodeStep(B, 128, tablesFor(r, B))
	clear(st.Temperature)
	next := make([]int32, B)
	if err := r.Step(st, next); err != nil {
		t.Fatal(err)
	}
	const n = 200
	key := graphKey{bucket: bucketFor(r.s.buckets, B), greedy: true}
	var gpuMs float64
	var sync time.Duration
	err := onWorker(r, func(s *state) error {
		var err error
		if gpuMs, err = replayMs(s, s.graphs[key], n); err != nil {
			return err
		}
		// One replay at a time, each waited for: the GPU time plus launch and wake-up latency.
		t0 := time.Now()
		for range n {
			if err := s.ctx.Replay(s.graphs[key]); err != nil {
				return err
			}
			if err := s.ctx.Sync(); err != nil {
				return err
			}
		}
		sync = time.Since(t0)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	step := runSteps(t, r, st, next, n)
	t0 := time.Now()
	for range 10 * n {
		r.w.Do(func() {})
	}
	trip := time.Since(t0)
	t.Logf("batch %d graph [%s]: %.1f us GPU per replay (back to back), %.1f us per replay+sync, %.1f us wall per Step, %.1f us per worker round trip (%s)",
		B, name, 1000*gpuMs/n, float64(sync.Microseconds())/n, float64(step.Microseconds())/n, float64(trip.Microseconds())/(10*n),
		ltChoice(r.s, key.bucket))
}

// TestProfileDecodeRun times decode-heavy's decode phase as the job runs it: 64 sequences
// stepping together from position 2 to 257, their KV blocks handed out as they grow (block j of
// sequence i is j*64+i, as the engine's block manager allocates them), greedy. Each variant runs
// on a fresh runner, in alternating order, twice (a runner opened later in a process must be as
// fast as the first: cu.Context); the log shows the wall time per step over bands of
// 32 positions. Set ROSETOP_GPU_PROFILE=1.
func TestProfileDecodeRun(t *testing.T) {
	if os.Getenv("ROSETOP_GPU_PROFILE") == "" {
		t.Skip("ROSETOP_GPU_PROFILE is not set")
	}
	needGPU(t)
	w := testModel(gpt2Cfg, 1)
	variants := []struct {
		name        string
		narrow      []func(*caps)
		ahead, held bool
	}{
		{"default", nil, false, false},
		{"default, Repeats", nil, true, false},
		{"default, Repeats, every block held", nil, true, true},
		{"small_gemm + PDL", []func(*caps){smallTo64}, false, false},
	}
	for round := range 2 {
		for _, v := range variants {
			t.Logf("round %d [%s]: us per step over positions 2-257 in bands of 32: %s", round, v.name, profileRun(t, w, v.ahead, v.held, v.narrow...))
		}
	}
}

// profileRun runs the 256 decode steps of TestProfileDecodeRun on a fresh runner (its caps
// narrowed by narrow) and returns
// the mean wall time per step of each band of 32, then of all. ahead: each step with Repeats, the
// number of steps left (at most 2), as the scheduler asks for them; held: the steps say that the
// sequences hold every block of their tables (Step.Held), so the steps queued ahead go on across
// block boundaries.
func profileRun(t *testing.T, w *Weights, ahead, held bool, narrow ...func(*caps)) string {
	const B, steps, band = 64, 256, 32
	r := openNarrow(t, gpt2Cfg, w, Options{MaxBatch: B, MaxSeqLen: 272, Paged: true, Graphs: true, MemoryFraction: 0.5}, narrow...)
	defer r.Close()
	_, _, width := r.Layout()
	tables := make([][]int32, B)
	for i := range tables {
		tables[i] = make([]int32, width)
		for j := range width {
			tables[i][j] = int32(j*B + i)
		}
	}
	st := decodeStep(B, 2, tables)
	clear(st.Temperature)
	if held {
		for range B {
			st.Held = append(st.Held, int32(width))
		}
	}
	next := make([]int32, B)
	runSteps(t, r, st, next, 3) // the graph's capture and a warm replay
	var out string
	var total time.Duration
	for b := 0; b < steps; b += band {
		t0 := time.Now()
		for k := b; k < b+band; k++ {
			for i := range st.Start {
				st.Start[i] = int32(2 + k)
				st.Tokens[i] = next[i]
			}
			if ahead {
				st.Repeats = min(2, steps-1-k)
			}
			if err := r.Step(st, next); err != nil {
				t.Fatal(err)
			}
		}
		d := time.Since(t0)
		total += d
		out += fmt.Sprintf("%.0f ", float64(d.Microseconds())/band)
	}
	return out + fmt.Sprintf("| all %.1f", float64(total.Microseconds())/steps)
}

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
	r, err := Open(gpt2Cfg, testModel(gpt2Cfg, 1), Options{MaxBatch: 64, MaxSeqLen: 1024, Paged: true, MemoryFraction: 0.1})
	if err != nil {
		t.Fatal(err)
	}
	return r
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

// TestProfilePrefillGPT2 times decode-heavy's first step, which admits all 64 requests: 64
// sequences of 2 prompt tokens from position 0, greedy (128 token rows). It logs the wall time
// per Step once the step's graph exists, against a batch-64 decode step's, and the op kinds of
// the step run eagerly with a CUDA event after every op (ranking only: each event adds ~3 us).
// Set ROSETOP_GPU_PROFILE=1.
func TestProfilePrefillGPT2(t *testing.T) {
	if os.Getenv("ROSETOP_GPU_PROFILE") == "" {
		t.Skip("ROSETOP_GPU_PROFILE is not set")
	}
	needGPU(t)
	const B, n = 64, 50
	w := testModel(gpt2Cfg, 1)
	prefill := func(r *Runner) *Step {
		st, tables := &Step{}, tablesFor(r, B)
		for i := range B {
			addSeq(st, []int32{int32(2 * i), int32(2*i + 1)}, 0, tables[i], 0, 0, 0, uint64(i))
		}
		return st
	}
	decode := func(r *Runner) *Step {
		st := decodeStep(B, 2, tablesFor(r, B))
		clear(st.Temperature)
		return st
	}
	for _, c := range []struct {
		name string
		step func(*Runner) *Step
	}{{"prefill 64 x 2", prefill}, {"decode 64 at position 2", decode}} {
		r, err := Open(gpt2Cfg, w, Options{MaxBatch: B, MaxSeqLen: 1024, Paged: true, Graphs: true, MemoryFraction: 0.1})
		if err != nil {
			t.Fatal(err)
		}
		st, next := c.step(r), make([]int32, B)
		runSteps(t, r, st, next, 3) // first sight, capture, replay
		wall := runSteps(t, r, st, next, n)
		// The same after the GPU has idled for a while, as between a benchmark's runs.
		var idle time.Duration
		for range 10 {
			time.Sleep(3 * time.Millisecond)
			idle += runSteps(t, r, st, next, 1)
		}
		r.Close()
		t.Logf("%s: %.1f us wall per Step (graph replay), back to back; %.1f us after 3 ms idle", c.name,
			float64(wall.Microseconds())/n, float64(idle.Microseconds())/10)
	}
	r, err := Open(gpt2Cfg, w, Options{MaxBatch: B, MaxSeqLen: 1024, Paged: true, MemoryFraction: 0.1})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	st := prefill(r)
	runSteps(t, r, st, make([]int32, B), 1) // cuBLAS's first calls
	p := profileOps(t, r, stepProgram(t, r, st), 20)
	t.Logf("prefill 64 x 2, eager with events: %.1f us per step", 1000*p.total()/float64(p.runs))
	for _, op := range p.kinds {
		t.Logf("  %-22s %8.1f us/step  %3d ops", op, 1000*p.ms[op]/float64(p.runs), p.count[op])
	}
}

// TestProfileIdle measures what a batch-64 decode step costs after the GPU and the runner's
// worker have idled, as between a benchmark's runs: for each idle time, the wall time of a
// Step, the GPU time of its graph alone (CUDA events around one replay, nothing before it on
// the stream) and an empty round trip to the worker goroutine. Set ROSETOP_GPU_PROFILE=1.
func TestProfileIdle(t *testing.T) {
	if os.Getenv("ROSETOP_GPU_PROFILE") == "" {
		t.Skip("ROSETOP_GPU_PROFILE is not set")
	}
	needGPU(t)
	r, err := Open(gpt2Cfg, testModel(gpt2Cfg, 1), Options{MaxBatch: 64, MaxSeqLen: 1024, Paged: true, Graphs: true, MemoryFraction: 0.1})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	const B, reps = 64, 10
	st := decodeStep(B, 128, tablesFor(r, B))
	clear(st.Temperature)
	next := make([]int32, B)
	var e0, e1 cu.Event
	err = onWorker(r, func(s *state) (err error) {
		if e0, err = s.ctx.NewEvent(true); err == nil {
			e1, err = s.ctx.NewEvent(true)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	defer r.w.Do(func() { r.s.ctx.DestroyEvent(e0); r.s.ctx.DestroyEvent(e1) })
	runSteps(t, r, st, next, 3)     // first sight, capture, replay
	wait := func(d time.Duration) { // a spin: sleeps round up to whole timer ticks
		for t0 := time.Now(); time.Since(t0) < d; {
		}
	}
	for _, idle := range []time.Duration{0, 250 * time.Microsecond, time.Millisecond, 3 * time.Millisecond, 10 * time.Millisecond, 50 * time.Millisecond} {
		var step, trip time.Duration
		var gpuMs float64
		for range reps {
			wait(idle)
			step += runSteps(t, r, st, next, 1)
			wait(idle)
			t0 := time.Now()
			r.w.Do(func() {})
			trip += time.Since(t0)
			wait(idle)
			var ms float64
			err := onWorker(r, func(s *state) (err error) {
				ms, err = replayOnce(s.ctx, s.graphs[graphKey{bucket: bucketFor(s.buckets, B), greedy: true}], e0, e1)
				return err
			})
			if err != nil {
				t.Fatal(err)
			}
			gpuMs += ms
		}
		t.Logf("after %v idle: Step %.1f us wall, its graph %.1f us GPU, worker round trip %.1f us", idle,
			float64(step.Microseconds())/reps, 1000*gpuMs/reps, float64(trip.Nanoseconds())/1000/reps)
	}
}

// replayOnce replays g once between events e0 and e1, waits, and returns its GPU time in ms. It
// runs on the worker.
func replayOnce(ctx *cu.Context, g cu.Graph, e0, e1 cu.Event) (float64, error) {
	if err := ctx.Record(e0); err != nil {
		return 0, err
	}
	if err := ctx.Replay(g); err != nil {
		return 0, err
	}
	if err := ctx.Record(e1); err != nil {
		return 0, err
	}
	if err := ctx.Sync(); err != nil {
		return 0, err
	}
	return ctx.Elapsed(e0, e1)
}

// runSteps runs st on r k times, each waited for, and returns the wall time of all of them.
func runSteps(t *testing.T, r *Runner, st *Step, next []int32, k int) time.Duration {
	t.Helper()
	t0 := time.Now()
	for range k {
		if err := r.Step(st, next); err != nil {
			t.Fatal(err)
		}
	}
	return time.Since(t0)
}
