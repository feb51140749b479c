//go:build cgo

package gpu

import (
	"fmt"
	"os"
	"slices"
	"testing"
	"time"
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
// graph replay, the wall time of a whole Step and of a worker round trip. Set
// ROSETOP_GPU_PROFILE=1; ROSETOP_GPU_PROFILE_SAMPLING=1 profiles temperature/top-k/top-p too.
func TestProfileDecodeGPT2(t *testing.T) {
	if os.Getenv("ROSETOP_GPU_PROFILE") == "" {
		t.Skip("ROSETOP_GPU_PROFILE is not set")
	}
	needGPU(t)
	w := testModel(gpt2Cfg, 1)
	for _, B := range []int{1, 64} {
		profileOps(t, w, B, true)
		for _, v := range []struct {
			name string
			opt  Options
		}{
			{"default", Options{}},
			{"one lane, small_gemm + PDL", Options{SmallGEMMRows: 64, SplitDecodeRows: -1}},
			{"one lane, small_gemm + PDL, norms not folded", Options{SmallGEMMRows: 64, SplitDecodeRows: -1, NoFold: true}},
			{"one lane, small_gemm, no PDL", Options{SmallGEMMRows: 64, SplitDecodeRows: -1, NoPDL: true}},
			{"one lane, cuBLAS", Options{SmallGEMMRows: -1}},
			{"one lane, cublasGemmEx only", Options{SmallGEMMRows: -1, NoCublasLt: true}},
			{"two lanes", Options{SplitDecodeRows: 2, SplitDecodeMaxRows: 64}},
			{"two lanes, norms not folded", Options{SplitDecodeRows: 2, SplitDecodeMaxRows: 64, NoFold: true}},
			{"two lanes, no PDL", Options{SplitDecodeRows: 2, SplitDecodeMaxRows: 64, NoPDL: true}},
		} {
			profileGraph(t, w, B, v.name, v.opt)
		}
		if os.Getenv("ROSETOP_GPU_PROFILE_SAMPLING") != "" {
			profileOps(t, w, B, false)
		}
	}
	// Where small_gemm's step stops beating cuBLAS's (Options.SmallGEMMRows's default), and where
	// two lanes start beating one (Options.SplitDecodeRows's).
	for _, B := range []int{2, 4, 8, 16, 24, 32, 48} {
		profileGraph(t, w, B, "one lane, small_gemm + PDL", Options{SmallGEMMRows: 64, SplitDecodeRows: -1})
		profileGraph(t, w, B, "one lane, cuBLAS", Options{SmallGEMMRows: -1})
		profileGraph(t, w, B, "two lanes", Options{SplitDecodeRows: 2, SplitDecodeMaxRows: 64})
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
		x, w    devPtr
		in, out int
		wp      devPtr
		p       smallPlan
	}{{"qkv", s.act.xln, L.attnW, C, 3 * C, L.attnWp, s.small.qkv}, {"attn proj", s.act.att, L.projW, C, C, L.projWp, s.small.proj},
		{"fc", s.act.xln, L.fcW, C, F, L.fcWp, s.small.fc}, {"fc proj", s.act.h, L.fcProjW, F, C, L.fcProjWp, s.small.fcProj}} {
		line := fmt.Sprintf("gemm %-9s 64x%dx%d:", g.name, g.in, g.out)
		if s.small.on {
			// Back to back with PDL, as in a step: each call's weights load during the previous one.
			us, err := timeGraph(r, 20, func() error {
				for range reps {
					if err := s.smallGEMM(s.act.y, g.x, g.wp, 64, g.in, g.out, g.p, gemmEpi{}); err != nil {
						return err
					}
				}
				return nil
			})
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
					if err := s.rt.gemmLayout(s.act.y, g.x, g.w, 64, g.in, g.out, v.f32, v.wT); err != nil {
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
					if err := s.rt.gemmSplitK(s.act.y, g.x, g.w, 64, g.in, g.out, sp); err != nil {
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

// timeGraph captures body once and returns the GPU time of one replay in us (reps back to back).
func timeGraph(r *Runner, reps int, body func() error) (float64, error) {
	var us float64
	var err error
	r.w.do(func() {
		rt := r.s.rt
		// Once eagerly first: cuBLAS loads its kernels outside the capture.
		if err = body(); err != nil {
			return
		}
		if err = rt.sync(); err != nil {
			return
		}
		var g graphExec
		if g, err = rt.capture(body); err != nil {
			return
		}
		defer rt.destroyGraph(g)
		var ms float64
		ms, err = replayMs(rt, g, reps)
		us = 1000 * ms / float64(reps)
	})
	return us, err
}

// replayMs replays g reps times back to back behind a spin kernel (so the host's enqueueing is
// hidden) and returns the GPU time of all of them, in milliseconds, from CUDA events. It runs on
// the worker.
func replayMs(rt *cudaRuntime, g graphExec, reps int) (float64, error) {
	e0, err := rt.newEvent()
	if err != nil {
		return 0, err
	}
	defer rt.destroyEvent(e0)
	e1, err := rt.newEvent()
	if err != nil {
		return 0, err
	}
	defer rt.destroyEvent(e1)
	_ = rt.launch(rt.fn.spin, 1, 1, 1, 0, arg(profileSpinNs))
	_ = rt.record(e0)
	for range reps {
		if err = rt.replay(g); err != nil {
			return 0, err
		}
	}
	_ = rt.record(e1)
	if err = rt.sync(); err != nil {
		return 0, err
	}
	return rt.elapsed(e0, e1)
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
	empty, err := timeGraph(r, 20, func() error {
		for range nodes {
			if err := s.rt.launch(s.rt.fn.spin, 1, 1, 1, 0, arg(0)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	m, a, wt := &s.meta, &s.act, s.wts
	embed, err := timeGraph(r, 20, func() error {
		for range nodes {
			if err := s.rt.launch(s.rt.fn.embedLN, 64, 1, 256, 0, pArg(a.x), pArg(a.xln), pArg(m.devAt(m.off.ids)), pArg(m.devAt(m.off.pos)),
				pArg(wt.wte), pArg(wt.wpe), pArg(wt.layers[0].ln1w), pArg(wt.layers[0].ln1b), iArg(768), fArg(1e-5)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("graph node cost: %.2f us per empty kernel, %.2f us per 64-row embed+layernorm", empty/nodes, embed/nodes)
}

// profileOps logs the per-op GPU time of eager paged steps.
func profileOps(t *testing.T, w *Weights, B int, greedy bool) {
	// One lane: the kind graphs below replay the calls of the event-profiled (one-lane) step.
	r, err := Open(gpt2Cfg, w, Options{MaxBatch: 64, MaxSeqLen: 1024, Paged: true, MemoryFraction: 0.1, SplitDecodeRows: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	st := decodeStep(B, 128, tablesFor(r, B))
	if greedy {
		clear(st.Temperature)
	}
	p, total := eventProfile(t, r, st, 20)
	kinds := slices.Clone(p.kinds)
	t.Logf("batch %d (greedy %v): %.1f us per step on the GPU, kernels back to back", B, greedy, 1000*total/float64(p.steps))
	for _, op := range p.ops {
		t.Logf("  %-22s %8.1f us/step  %3d ops  %5.1f%%", op, 1000*p.ms[op]/float64(p.steps), p.count[op], 100*p.ms[op]/total)
	}
	if !greedy {
		return
	}
	// The same step as graphs of one op kind each: no events between kernels, so these times
	// add up to about the whole step's replay.
	s := r.s
	step := func() error {
		s.rt.calls = 0
		return s.forward(B, B)
	}
	whole, err := timeGraph(r, 20, step)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("batch %d per kind, graph replays (the forward pass alone: %.1f us):", B, whole)
	var sum float64
	for _, op := range p.ops {
		only := make([]bool, len(kinds))
		for i, k := range kinds {
			only[i] = k == op
		}
		r.w.do(func() { s.rt.only = only })
		us, err := timeGraph(r, 20, step)
		r.w.do(func() { s.rt.only = nil })
		if err != nil {
			t.Fatal(err)
		}
		sum += us
		t.Logf("  %-22s %8.1f us/step  %3d calls", op, us, countOf(kinds, op))
	}
	t.Logf("  %-22s %8.1f us/step", "sum of kinds", sum)
}

// startProfile turns r's op profiler on: a CUDA event after every op of an eager step
// (opProfile). stopProfile turns it off.
func startProfile(t *testing.T, r *Runner) *opProfile {
	t.Helper()
	var p *opProfile
	var err error
	r.w.do(func() {
		if p, err = newOpProfile(r.s.rt, 512); err == nil {
			r.s.prof = p
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func stopProfile(r *Runner, p *opProfile) { r.w.do(func() { r.s.prof = nil; p.close() }) }

// eventProfile runs st on r (without graphs) once, then steps times with a CUDA event after
// every op (opProfile, ranking only: each event adds ~3 us), and returns the profile and the
// GPU milliseconds of all its ops over all steps. r profiles nothing once it returns.
func eventProfile(t *testing.T, r *Runner, st *Step, steps int) (*opProfile, float64) {
	t.Helper()
	next := make([]int32, len(st.SeqLens))
	if err := r.Step(st, next); err != nil {
		t.Fatal(err)
	}
	p := startProfile(t, r)
	defer stopProfile(r, p)
	runSteps(t, r, st, next, steps)
	if p.err != nil {
		t.Fatal(p.err)
	}
	var total float64
	for _, op := range p.ops {
		total += p.ms[op]
	}
	return p, total
}

// profileGraph logs the GPU time of back-to-back replays of the batch's decode graph, the wall
// time of a Step, and of an empty round trip to the worker goroutine.
func profileGraph(t *testing.T, w *Weights, B int, name string, opt Options) {
	opt.MaxBatch, opt.MaxSeqLen, opt.Paged, opt.Graphs, opt.MemoryFraction = 64, 1024, true, true, 0.1
	r, err := Open(gpt2Cfg, w, opt)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	st := decodeStep(B, 128, tablesFor(r, B))
	clear(st.Temperature)
	next := make([]int32, B)
	if err := r.Step(st, next); err != nil {
		t.Fatal(err)
	}
	const n = 200
	var gpuMs float64
	r.w.do(func() {
		gpuMs, err = replayMs(r.s.rt, r.s.graphs[graphKey{bucket: bucketFor(r.s.buckets, B), greedy: true}], n)
	})
	if err != nil {
		t.Fatal(err)
	}
	// One replay at a time, each waited for: the GPU time plus launch and wake-up latency.
	var sync time.Duration
	r.w.do(func() {
		g := r.s.graphs[graphKey{bucket: bucketFor(r.s.buckets, B), greedy: true}]
		t0 := time.Now()
		for range n {
			if err = r.s.rt.replay(g); err != nil {
				return
			}
			if err = r.s.rt.sync(); err != nil {
				return
			}
		}
		sync = time.Since(t0)
	})
	if err != nil {
		t.Fatal(err)
	}
	step := runSteps(t, r, st, next, n)
	t0 := time.Now()
	for range 10 * n {
		r.w.do(func() {})
	}
	trip := time.Since(t0)
	var choices string
	r.w.do(func() { choices = r.s.ltChoice(bucketFor(r.s.buckets, B)) })
	t.Logf("batch %d graph [%s]: %.1f us GPU per replay (back to back), %.1f us per replay+sync, %.1f us wall per Step, %.1f us per worker round trip (%s)",
		B, name, 1000*gpuMs/n, float64(sync.Microseconds())/n, float64(step.Microseconds())/n, float64(trip.Microseconds())/(10*n), choices)
}

func countOf(xs []string, x string) int {
	n := 0
	for _, v := range xs {
		if v == x {
			n++
		}
	}
	return n
}

// TestProfileDecodeRun times decode-heavy's decode phase as the job runs it: 64 sequences
// stepping together from position 2 to 257, their KV blocks handed out as they grow (block j of
// sequence i is j*64+i, as the engine's block manager allocates them), greedy. Each variant runs
// on a fresh runner, in alternating order, twice (a runner opened later in a process must be as
// fast as the first: runtime.go openRuntime); the log shows the wall time per step over bands of
// 32 positions. Set ROSETOP_GPU_PROFILE=1.
func TestProfileDecodeRun(t *testing.T) {
	if os.Getenv("ROSETOP_GPU_PROFILE") == "" {
		t.Skip("ROSETOP_GPU_PROFILE is not set")
	}
	needGPU(t)
	w := testModel(gpt2Cfg, 1)
	variants := []struct {
		name        string
		opt         Options
		ahead, held bool
	}{
		{"default", Options{}, false, false},
		{"default, Repeats", Options{}, true, false},
		{"default, Repeats, every block held", Options{}, true, true},
		{"two lanes at 64", Options{SplitDecodeRows: 2, SplitDecodeMaxRows: 64}, false, false},
		{"one lane, small_gemm + PDL", Options{SmallGEMMRows: 64, SplitDecodeRows: -1}, false, false},
	}
	for round := range 2 {
		for _, v := range variants {
			t.Logf("round %d [%s]: us per step over positions 2-257 in bands of 32: %s", round, v.name, profileRun(t, w, v.opt, v.ahead, v.held))
		}
	}
}

// profileRun runs the 256 decode steps of TestProfileDecodeRun on a fresh runner and returns
// the mean wall time per step of each band of 32, then of all. ahead: each step with Repeats, the
// number of steps left (at most 2), as the scheduler asks for them; held: the steps say that the
// sequences hold every block of their tables (Step.Held), so the steps queued ahead go on across
// block boundaries.
func profileRun(t *testing.T, w *Weights, opt Options, ahead, held bool) string {
	const B, steps, band = 64, 256, 32
	opt.MaxBatch, opt.MaxSeqLen, opt.Paged, opt.Graphs, opt.MemoryFraction = B, 272, true, true, 0.5
	r, err := Open(gpt2Cfg, w, opt)
	if err != nil {
		t.Fatal(err)
	}
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
					if err := s.rt.gemm(s.act.logits, s.act.xlast, s.wts.wteT, m, C, vp, f32); err != nil {
						return err
					}
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			line := fmt.Sprintf("LM head %dx%dx%d fp32 %v: cublasGemmEx %.2f us; cuBLASLt:", m, C, vp, f32, us/reps)
			dtype := 2
			if f32 {
				dtype = 0
			}
			var p *ltPlan
			r.w.do(func() {
				var st int
				if p, st = s.lt.newPlan(vp, m, C, dtype, 1); st != 0 {
					err = fmt.Errorf("cuBLASLt plans no LM head at %d rows: status %d", m, st)
				}
			})
			if err != nil {
				t.Fatal(err)
			}
			for c := range p.count() {
				us, err := timeGraph(r, 5, func() error {
					for range reps {
						if err := s.ltRun(s.lt, p, c, s.wts.wteT, s.act.xlast, s.act.logits, 0, "LM head"); err != nil {
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
			r.w.do(func() { s.lt.free(p) })
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
		us, err := timeGraph(r, 200, func() error { r.s.greedy = true; return r.s.sampler(B) })
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
		x, y    devPtr
		w       func(l int) devPtr
		in, out int
		splits  int
	}
	for _, g := range []gemm{
		{"qkv", a.xln, a.y, func(l int) devPtr { return s.wts.layers[l].attnW }, C, 3 * C, 1},
		{"attn proj", a.att, a.y, func(l int) devPtr { return s.wts.layers[l].projW }, C, C, projSplits},
		{"fc proj", a.h, a.y, func(l int) devPtr { return s.wts.layers[l].fcProjW }, F, C, fcProjSplits},
	} {
		us, err := timeGraph(r, 5, func() error {
			for l := range L {
				var err error
				if g.splits > 1 {
					err = s.rt.gemmSplitK(g.y, g.x, g.w(l), m, g.in, g.out, g.splits)
				} else {
					err = s.rt.gemm(g.y, g.x, g.w(l), m, g.in, g.out, true)
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
		var p *ltPlan
		r.w.do(func() {
			var st int
			if p, st = s.lt.newPlan(g.out, m, g.in, 0, 1); st != 0 {
				err = fmt.Errorf("cuBLASLt plans no %s at %d rows: status %d", g.name, m, st)
			}
		})
		if err != nil {
			t.Fatal(err)
		}
		for c := range p.count() {
			us, err := timeGraph(r, 5, func() error {
				for l := range L {
					if err := s.ltRun(s.lt, p, c, g.w(l), g.x, g.y, 0, g.name); err != nil {
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
		r.w.do(func() { s.lt.free(p) })
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
	p, total := eventProfile(t, r, prefill(r), 20)
	t.Logf("prefill 64 x 2, eager with events: %.1f us per step", 1000*total/float64(p.steps))
	for _, op := range p.ops {
		t.Logf("  %-22s %8.1f us/step  %3d ops", op, 1000*p.ms[op]/float64(p.steps), p.count[op])
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
	var e0, e1 event
	r.w.do(func() {
		if e0, err = r.s.rt.newEvent(); err == nil {
			e1, err = r.s.rt.newEvent()
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	defer r.w.do(func() { r.s.rt.destroyEvent(e0); r.s.rt.destroyEvent(e1) })
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
			r.w.do(func() {})
			trip += time.Since(t0)
			wait(idle)
			var ms float64
			r.w.do(func() {
				ms, err = replayOnce(r.s.rt, r.s.graphs[graphKey{bucket: bucketFor(r.s.buckets, B), greedy: true}], e0, e1)
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
func replayOnce(rt *cudaRuntime, g graphExec, e0, e1 event) (float64, error) {
	if err := rt.record(e0); err != nil {
		return 0, err
	}
	if err := rt.replay(g); err != nil {
		return 0, err
	}
	if err := rt.record(e1); err != nil {
		return 0, err
	}
	if err := rt.sync(); err != nil {
		return 0, err
	}
	return rt.elapsed(e0, e1)
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
