//go:build cgo

package gpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"unsafe"

	"rosetop/gpu/cu"
)

// The workbench: runners narrowed to one path for comparisons (openWith and the narrowings
// below), programs run on a runner's worker, op by op with a CUDA event after each or as a graph
// of chosen ops, for the profile tests and the tests of single kernels.

// Narrowings of a runner's caps (openWith).
func cublasOnly(c *caps) { c.small.on, c.wg.on = false, false }             // the layer GEMMs on cuBLAS, also on Hopper
func noFold(c *caps)     { c.fold = false }                                 // small_gemm steps with norms of their own
func noPDL(c *caps)      { c.pdl = false }                                  // no programmatic dependent launch
func noLt(c *caps)       { c.lt = false }                                   // every GEMM through cublasGemmEx
func smallTo64(c *caps)  { c.smallRows = smallMaxRows }                     // small_gemm for every decode step it can run
func noWG(c *caps)       { c.wg.on, c.smallRows = false, smallDefaultRows } // the path where sm_90a does not load
func wgOnly(c *caps)     { c.small.on, c.fold = false, false }              // wg_gemm for every step of up to 64 rows (the default)

// narrowing applies fs in turn.
func narrowing(fs ...func(*caps)) func(*caps) {
	return func(c *caps) {
		for _, f := range fs {
			f(c)
		}
	}
}

// openNarrow opens a runner with its caps narrowed by fs, failing t on an error.
func openNarrow(t testing.TB, cfg Config, w *Weights, opt Options, fs ...func(*caps)) *Runner {
	t.Helper()
	r, err := openWith(cfg, w, opt, narrowing(fs...))
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// onWorker runs f with r's state on r's worker goroutine and returns its error.
func onWorker(r *Runner, f func(s *state) error) error {
	var err error
	r.w.Do(func() { err = f(r.s) })
	return err
}

// runOps builds a program with build on r's worker, enqueues it and waits for it.
func runOps(r *Runner, build func(s *state, p *program)) error {
	return onWorker(r, func(s *state) error {
		var p program
		build(s, &p)
		if err := s.run(&p); err != nil {
			return err
		}
		return s.ctx.Sync()
	})
}

// stepProgram writes st's metadata (st must fit in one pass) and returns the program of the step
// run eagerly: the metadata upload and the forward pass.
func stepProgram(t testing.TB, r *Runner, st *Step) *program {
	t.Helper()
	var prog program
	err := onWorker(r, func(s *state) error {
		if err := s.check(st, make([]int32, len(st.SeqLens)), nil); err != nil {
			return err
		}
		n := s.fill(st, 0, len(st.SeqLens), 0, 0)
		p, err := s.newPlan(n, len(st.SeqLens), greedyStep(st), eagerStep, false)
		if err != nil {
			return err
		}
		if p.upload {
			s.metaCopy(&prog)
		}
		s.forward(&p, &prog)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return &prog
}

// only returns the program of p's ops of kind name (the arguments shared).
func only(p *program, name string) *program {
	q := &program{args: p.args}
	for _, o := range p.ops {
		if o.name == name {
			q.ops = append(q.ops, o)
		}
	}
	return q
}

// opProfile is the GPU time of each op kind of a program, summed over its runs.
type opProfile struct {
	kinds []string // first-seen order
	ms    map[string]float64
	count map[string]int // ops of each kind in the program
	runs  int
}

// total is the GPU time of all ops of all runs, in milliseconds.
func (p *opProfile) total() float64 {
	var t float64
	for _, k := range p.kinds {
		t += p.ms[k]
	}
	return t
}

// profileOps runs prog runs times on r, each behind a spin kernel (so the ops run back to back,
// as in a graph replay, not at the host's launch pace) with a timing event after every op; each
// event adds a little GPU time, so the times rank the kinds more than they add up to a step.
func profileOps(t testing.TB, r *Runner, prog *program, runs int) *opProfile {
	t.Helper()
	p := &opProfile{ms: map[string]float64{}, count: map[string]int{}, runs: runs}
	for _, o := range prog.ops {
		if p.count[o.name] == 0 {
			p.kinds = append(p.kinds, o.name)
		}
		p.count[o.name]++
	}
	err := onWorker(r, func(s *state) error {
		ev := make([]cu.Event, len(prog.ops)+1)
		defer func() {
			for _, e := range ev {
				s.ctx.DestroyEvent(e)
			}
		}()
		for i := range ev {
			var err error
			if ev[i], err = s.ctx.NewEvent(true); err != nil {
				return err
			}
		}
		var hold program
		hold.spin(profileSpinNs)
		for range runs {
			if err := s.run(&hold); err != nil {
				return err
			}
			if err := s.ctx.Record(ev[0]); err != nil {
				return err
			}
			for i := range prog.ops {
				if err := s.enqueue(&prog.ops[i], prog.args); err != nil {
					return err
				}
				if err := s.ctx.Record(ev[i+1]); err != nil {
					return err
				}
			}
			if err := s.ctx.Sync(); err != nil {
				return err
			}
			for i, o := range prog.ops {
				ms, err := s.ctx.Elapsed(ev[i], ev[i+1])
				if err != nil {
					return err
				}
				p.ms[o.name] += ms
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// profileSpinNs holds the stream long enough for the host to enqueue a step's ops (~1 ms).
const profileSpinNs = 5_000_000

// timeGraph captures body once and returns the GPU time of one replay in us (reps back to back).
func timeGraph(r *Runner, reps int, body func() error) (float64, error) {
	var us float64
	err := onWorker(r, func(s *state) error {
		// Once eagerly first: cuBLAS loads its kernels outside the capture.
		if err := body(); err != nil {
			return err
		}
		if err := s.ctx.Sync(); err != nil {
			return err
		}
		g, err := s.ctx.Capture(body)
		if err != nil {
			return err
		}
		defer s.ctx.DestroyGraph(g)
		ms, err := replayMs(s, g, reps)
		us = 1000 * ms / float64(reps)
		return err
	})
	return us, err
}

// timeProgram is timeGraph of a program.
func timeProgram(r *Runner, reps int, prog *program) (float64, error) {
	return timeGraph(r, reps, func() error { return r.s.run(prog) })
}

// replayMs replays g reps times back to back behind a spin kernel (so the host's enqueueing is
// hidden) and returns the GPU time of all of them, in milliseconds, from CUDA events. It runs on
// the worker.
func replayMs(s *state, g cu.Graph, reps int) (float64, error) {
	ctx := s.ctx
	e0, err := ctx.NewEvent(true)
	if err != nil {
		return 0, err
	}
	defer ctx.DestroyEvent(e0)
	e1, err := ctx.NewEvent(true)
	if err != nil {
		return 0, err
	}
	defer ctx.DestroyEvent(e1)
	var hold program
	hold.spin(profileSpinNs)
	if err := s.run(&hold); err != nil {
		return 0, err
	}
	if err := ctx.Record(e0); err != nil {
		return 0, err
	}
	for range reps {
		if err = ctx.Replay(g); err != nil {
			return 0, err
		}
	}
	if err := ctx.Record(e1); err != nil {
		return 0, err
	}
	if err = ctx.Sync(); err != nil {
		return 0, err
	}
	return ctx.Elapsed(e0, e1)
}

// ltChoice describes the fc plan's chosen candidate at m rows.
func ltChoice(s *state, m int) string {
	if s.lt == nil {
		return "cuBLASLt off"
	}
	if p := s.lt.plans[m]; p != nil {
		return fmt.Sprintf("fc+GELU through cuBLASLt, candidate %d of %d", p.algo, p.p.Count())
	}
	return "no plan"
}

// againstCuBLAS is a GEMM kernel's test run on r's worker: x (m rows of in halves) uploaded, ref
// = x W by cublasGemmEx (fp32, m x out), dst poisoned with NaN over its first bytes, then the
// kernel's program from build, then those bytes of dst downloaded into got.
type againstCuBLAS struct {
	x, w, dst  cu.Ptr
	input      []uint16
	m, in, out int
	bytes      int64
	ref        []float32
	got        unsafe.Pointer
	build      func(p *program)
	nan        []float32 // at least bytes/4 NaNs (ref goes through act.y, which dst may be)
}

func (a *againstCuBLAS) run(r *Runner) error {
	return onWorker(r, func(s *state) error {
		ctx := s.ctx
		if err := ctx.Upload(a.x, unsafe.Pointer(&a.input[0]), int64(a.m*a.in*2)); err != nil {
			return err
		}
		if err := ctx.GEMM(s.act.y, a.x, a.w, a.m, a.in, a.out, true, false); err != nil {
			return err
		}
		if err := ctx.Download(unsafe.Pointer(&a.ref[0]), s.act.y, int64(a.m*a.out*4)); err != nil {
			return err
		}
		if err := ctx.Upload(a.dst, unsafe.Pointer(&a.nan[0]), a.bytes); err != nil {
			return err
		}
		var p program
		a.build(&p)
		if err := s.run(&p); err != nil {
			return err
		}
		if err := ctx.Download(a.got, a.dst, a.bytes); err != nil {
			return err
		}
		return ctx.Sync()
	})
}

// gemmInputs are seeded random fp16 inputs of rows x width, and NaNs to poison an output of that
// many floats and a row more.
func gemmInputs(seed uint64, rows, width int) (input []uint16, nan []float32) {
	rng := rand.New(rand.NewPCG(seed, seed))
	input = make([]uint16, rows*width)
	for i := range input {
		input[i] = halfBits(float32(rng.NormFloat64()))
	}
	nan = make([]float32, (rows+1)*width)
	for i := range nan {
		nan[i] = float32(math.NaN())
	}
	return input, nan
}

// relErrWritten is the relative error of got(i) against want(i) over n values, and the first i
// whose got is NaN (not written), or -1.
func relErrWritten(n int, got, want func(i int) float64) (float64, int) {
	var num, den float64
	for i := range n {
		v, w := got(i), want(i)
		if math.IsNaN(v) {
			return 0, i
		}
		num += (v - w) * (v - w)
		den += w * w
	}
	return math.Sqrt(num / den), -1
}

// checkRelErr fails t when rel is over tol, else logs it.
func checkRelErr(t *testing.T, what string, rel, tol float64) {
	t.Helper()
	if rel > tol {
		t.Errorf("%s: relative error %.2e against cuBLAS, want <= %.0e", what, rel, tol)
	} else {
		t.Logf("%s: relative error %.2e", what, rel)
	}
}
