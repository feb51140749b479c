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
		{"without wg_gemm, Repeats, every block held", []func(*caps){noWG}, true, true},
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
