//go:build cgo

package gpu

import (
	"fmt"
	"os"
	"testing"
	"time"

	"rosetop/gpu/cu"
)

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
			{"without wg_gemm", []func(*caps){noWG}},
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
	// Where small_gemm's step stops beating cuBLAS's and wg_gemm's (smallDefaultRows).
	for _, B := range []int{2, 4, 8, 16, 24, 32, 48} {
		profileGraph(t, w, B, "small_gemm + PDL", smallTo64)
		profileGraph(t, w, B, "wg_gemm", wgOnly)
		profileGraph(t, w, B, "cuBLAS", cublasOnly)
	}
	profileLaunch(t, w)
	profileGEMM(t, w)
}

// TestProfileDecodeBatches prints the GPU time of the greedy decode step graph of the
// GPT-2-124M-shaped model at context 128 on the default path, at batch sizes from 1 to 64, twice.
// Set ROSETOP_GPU_PROFILE=1.
func TestProfileDecodeBatches(t *testing.T) {
	if os.Getenv("ROSETOP_GPU_PROFILE") == "" {
		t.Skip("ROSETOP_GPU_PROFILE is not set")
	}
	needGPU(t)
	w := testModel(gpt2Cfg, 1)
	for round := range 2 {
		for _, B := range []int{1, 8, 16, 32, 48, 64} {
			profileGraph(t, w, B, fmt.Sprintf("round %d", round))
		}
	}
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
