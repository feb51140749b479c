//go:build cgo

package gpu

import (
	"fmt"
	"time"

	"rosetop/gpu/cu"
)

// The MLP's first GEMM of cuBLAS steps goes through cuBLASLt when it loads: its epilogue adds the
// bias, applies GELU and writes h in fp16, so no bias_gelu kernel runs (and the graph has a node
// less a layer). The bias is an fp16 copy (devLayer.fcBh); the GELU is the tanh form, GPT-2's
// gelu_new. Open plans the GEMM for every row class (gemmRows) and, for the decode classes, times
// the heuristic's candidates and keeps the fastest. The other GEMMs stay on cublasGemmEx
// (bench/RESULTS.md has the comparison). Without cuBLASLt the fc GEMM writes fp32 and bias_gelu
// follows.

// ltTuneRows: row classes up to this many are timed (decode steps); longer ones take the
// heuristic's first candidate.
const ltTuneRows = 64

// ltPlan is the fc GEMM at one row class: the plan and the chosen candidate.
type ltPlan struct {
	p    *cu.LtPlan
	algo int
}

// ltGEMMs holds the cuBLASLt handle and the fc plans by row class; owned by the worker goroutine.
type ltGEMMs struct {
	lib   *cu.Lt
	plans map[int]*ltPlan
}

// openLt loads cuBLASLt and plans the fc GEMM for every row class the layers run on cuBLAS,
// timing the decode classes. A library that does not load or plan leaves s.lt nil (cublasGemmEx +
// bias_gelu) and says why in the ledger.
func (s *state) openLt() error {
	t0 := time.Now()
	lib, err := cu.OpenLt()
	if err != nil {
		s.record("cuBLASLt", "not used: "+err.Error(), time.Since(t0))
		return nil
	}
	lt := &ltGEMMs{lib: lib, plans: map[int]*ltPlan{}}
	C, F := s.cfg.NEmbd, s.cfg.Inner
	tuned := 0
	for _, m := range gemmRowClasses(s.opt.MaxTokens) {
		if !s.caps.onCuBLAS(m) {
			continue // small_gemm or wg_gemm runs these rows' fc GEMM
		}
		// Column-major h^T(F, m) = fcW^T(F, C) xln^T(C, m), fp16 out, bias then GELU.
		p, err := s.ctx.NewPlan(lib, F, m, C, true, cu.LtBiasGELU)
		if err != nil {
			lt.close()
			s.record("cuBLASLt", fmt.Sprintf("not used: no fc+GELU plan at %d rows: %v", m, err), time.Since(t0))
			return nil
		}
		lp := &ltPlan{p: p}
		lt.plans[m] = lp
		if m <= ltTuneRows && m <= gemmRows(s.opt.MaxBatch) {
			err = s.tuneLt(lt, m, lp)
			tuned++
		} else {
			err = s.ltFC(lt, lp, 0, m, &s.wts.layers[0]) // its first-call cost here, not in a step
		}
		if err != nil {
			lt.close()
			return err
		}
	}
	if err := s.ctx.Sync(); err != nil {
		lt.close()
		return err
	}
	s.lt = lt
	s.record("cuBLASLt", fmt.Sprintf("%s, fc+GELU planned for %d row classes, %d timed", lib.Name, len(lt.plans), tuned), time.Since(t0))
	return nil
}

// close frees the plans and the handle.
func (lt *ltGEMMs) close() {
	for m, p := range lt.plans {
		lt.lib.FreePlan(p.p)
		delete(lt.plans, m)
	}
	lt.lib.Close()
}

// ltFC enqueues candidate c of plan p: h(m, F) = GELU(xln(m, C) @ L.fcW + L.fcB).
func (s *state) ltFC(lt *ltGEMMs, p *ltPlan, c, m int, L *devLayer) error {
	return s.ctx.LtMatmul(lt.lib, p.p, c, L.fcW, s.act.xln, s.act.h, L.fcBh)
}

// tuneLt times each candidate of plan p (m rows) back to back behind a spin kernel, the way a
// graph replays them, one call per layer (so the weights come from DRAM as in a step, not from
// L2), and keeps the fastest.
func (s *state) tuneLt(lt *ltGEMMs, m int, p *ltPlan) error {
	ctx, n, reps := s.ctx, p.p.Count(), s.cfg.NLayer
	ev := make([]cu.Event, n+1)
	for i := range ev {
		e, err := ctx.NewEvent(true)
		if err != nil {
			return err
		}
		ev[i] = e
		defer ctx.DestroyEvent(e)
	}
	// Each candidate once first: its first call's host-side cost must not starve the timing.
	failed := make([]bool, n)
	for c := range n {
		failed[c] = s.ltFC(lt, p, c, m, &s.wts.layers[0]) != nil // never chosen
	}
	if err := ctx.Sync(); err != nil {
		return err
	}
	var hold program
	hold.spin(1_000_000)
	if err := s.run(&hold); err != nil {
		return err
	}
	if err := ctx.Record(ev[0]); err != nil {
		return err
	}
	for c := range n {
		for r := 0; r < reps && !failed[c]; r++ {
			failed[c] = s.ltFC(lt, p, c, m, &s.wts.layers[r]) != nil
		}
		if err := ctx.Record(ev[c+1]); err != nil {
			return err
		}
	}
	if err := ctx.Sync(); err != nil {
		return err
	}
	best, bestMs := -1, 0.0
	for c := range n {
		ms, err := ctx.Elapsed(ev[c], ev[c+1])
		if err != nil {
			return err
		}
		if !failed[c] && (best < 0 || ms < bestMs) {
			best, bestMs = c, ms
		}
	}
	if best < 0 {
		return fmt.Errorf("gpu: no cuBLASLt candidate ran for the fc GEMM at %d rows", m)
	}
	p.algo = best
	return nil
}
