//go:build cgo

package gpu

/*
#include <stdlib.h>
#include "lt.h"
*/
import "C"

import (
	"fmt"
	"time"
	"unsafe"
)

// The MLP's first GEMM goes through cuBLASLt when it loads: its epilogue adds the bias, applies
// GELU and writes h in fp16, so no bias_gelu kernel runs (12 graph nodes less a step). The
// teacher-forced checks against transformers (gpu-check.sh) pass with the same worst error as
// with bias_gelu's tanh GELU (GPT-2's gelu_new); the bias is an fp16 copy (devLayer.fcBh).
// Open plans it for every row class (gemmRows); for the decode classes it times the heuristic's
// candidates and keeps the fastest. Measured on the H200 at batch 64: the step's graph 525.5 ->
// 510.5 us. Routing the other three GEMMs through cuBLASLt as well (tuned the same way) changed
// them by under 2 us a step and doubled the start cost, so they stay on cublasGemmEx (the QKV
// GEMM and the LM head again later: -1.2 and +1.4 us a step in two calls,
// TestProfileLayerGEMMs). Without cuBLASLt (or with Options.NoCublasLt) the fc GEMM writes fp32
// and bias_gelu follows.

// ltTuneRows: row classes up to this many are timed (decode steps); longer ones take the
// heuristic's first candidate.
const ltTuneRows = 64

// ltPlan is the fc GEMM at one row class: the C plan and the chosen candidate.
type ltPlan struct {
	p    *C.lt_plan // C memory
	algo int
}

// ltGEMMs holds the cuBLASLt handle and the fc plans by row class; owned by the worker goroutine.
type ltGEMMs struct {
	api   *C.lt_api
	name  string
	plans map[int]*ltPlan
}

// openLt loads cuBLASLt and plans the fc GEMM for every row class, timing the decode classes.
// A library that does not load or plan leaves s.lt nil (cublasGemmEx + bias_gelu) and says why
// in the ledger.
func (s *state) openLt() error {
	t0 := time.Now()
	var errBuf [256]C.char
	api := C.lt_open(&errBuf[0], C.int(len(errBuf)))
	if api == nil {
		s.record("cuBLASLt", "not used: "+C.GoString(&errBuf[0]), time.Since(t0))
		return nil
	}
	lt := &ltGEMMs{api: api, name: C.GoString(&api.name[0]), plans: map[int]*ltPlan{}}
	C_, F := s.cfg.NEmbd, s.cfg.Inner
	tuned := 0
	for _, m := range gemmRowClasses(s.opt.MaxTokens) {
		if s.useSmall(m) {
			continue // small_gemm runs these rows' fc GEMM
		}
		// Column-major h^T(F, m) = fcW^T(F, C) xln^T(C, m): fp16 out, epilogue 36 = GELU_BIAS.
		p, st := lt.newPlan(F, m, C_, 2, 36)
		if st != 0 {
			lt.close()
			s.record("cuBLASLt", fmt.Sprintf("not used: no fc+GELU plan at %d rows: %v", m, s.rt.a.checkBLAS(C.cublasStatus_t(st), "cublasLtMatmulAlgoGetHeuristic")), time.Since(t0))
			return nil
		}
		lt.plans[m] = p
		var err error
		if m <= ltTuneRows && m <= gemmRows(s.opt.MaxBatch) {
			err = s.tuneLt(lt, m, p)
			tuned++
		} else {
			err = s.ltFC(lt, p, 0, m, &s.wts.layers[0]) // its first-call cost here, not in a step
		}
		if err != nil {
			lt.close()
			return err
		}
	}
	if err := s.rt.sync(); err != nil {
		lt.close()
		return err
	}
	s.lt = lt
	s.record("cuBLASLt", fmt.Sprintf("%s, fc+GELU planned for %d row classes, %d timed", lt.name, len(lt.plans), tuned), time.Since(t0))
	return nil
}

// newPlan plans column-major D(m, n) = A(m, k) B(k, n) (+ epilogue: 1 none, 36 bias then GELU)
// with D in dtype (0 fp32, 2 fp16), asking the heuristic for its candidates.
func (lt *ltGEMMs) newPlan(m, n, k, dtype, epilogue int) (*ltPlan, int) {
	p := &ltPlan{p: (*C.lt_plan)(C.calloc(1, C.size_t(unsafe.Sizeof(C.lt_plan{}))))}
	if p.p == nil {
		return nil, 3 // CUBLAS_STATUS_ALLOC_FAILED
	}
	if st := C.lt_plan_new(lt.api, p.p, C.int(m), C.int(n), C.int(k), C.int(dtype), C.int(epilogue), workspaceBytes); st != 0 {
		C.free(unsafe.Pointer(p.p))
		return nil, int(st)
	}
	return p, 0
}

// count is how many candidates the heuristic gave.
func (p *ltPlan) count() int { return int(p.p.count) }

// free frees a plan made by newPlan.
func (lt *ltGEMMs) free(p *ltPlan) {
	C.lt_plan_free(lt.api, p.p)
	C.free(unsafe.Pointer(p.p))
}

// ltRun enqueues candidate c of p: D = A B (+ the epilogue, with bias when it has one).
func (s *state) ltRun(lt *ltGEMMs, p *ltPlan, c int, a, b, d, bias devPtr, what string) error {
	rt := s.rt
	if err := rt.mainOnly("cublasLtMatmul"); err != nil {
		return err
	}
	if rt.skip() {
		return nil
	}
	if st := C.lt_matmul(lt.api, p.p, C.int(c), a, b, d, bias, rt.ws, workspaceBytes, rt.stream); st != 0 {
		return rt.a.checkBLAS(st, fmt.Sprintf("cublasLtMatmul(%s, candidate %d)", what, c))
	}
	return nil
}

// close frees the plans and the handle.
func (lt *ltGEMMs) close() {
	for m, p := range lt.plans {
		lt.free(p)
		delete(lt.plans, m)
	}
	C.lt_close(lt.api)
}

// tuneLt times each candidate of plan p (m rows) back to back behind a spin kernel, the way a
// graph replays them, one call per layer (so the weights come from DRAM as in a step, not from
// L2), and keeps the fastest.
func (s *state) tuneLt(lt *ltGEMMs, m int, p *ltPlan) error {
	rt, n, reps := s.rt, int(p.p.count), s.cfg.NLayer
	ev := make([]event, n+1)
	for i := range ev {
		e, err := rt.newEvent()
		if err != nil {
			return err
		}
		ev[i] = e
		defer rt.destroyEvent(e)
	}
	// Each candidate once first: its first call's host-side cost must not starve the timing.
	failed := make([]bool, n)
	for c := range n {
		failed[c] = s.ltFC(lt, p, c, m, &s.wts.layers[0]) != nil // never chosen
	}
	if err := rt.sync(); err != nil {
		return err
	}
	if err := rt.launch(rt.fn.spin, 1, 1, 1, 0, arg(1_000_000)); err != nil {
		return err
	}
	if err := rt.record(ev[0]); err != nil {
		return err
	}
	for c := range n {
		for r := 0; r < reps && !failed[c]; r++ {
			failed[c] = s.ltFC(lt, p, c, m, &s.wts.layers[r]) != nil
		}
		if err := rt.record(ev[c+1]); err != nil {
			return err
		}
	}
	if err := rt.sync(); err != nil {
		return err
	}
	best, bestMs := -1, 0.0
	for c := range n {
		ms, err := rt.elapsed(ev[c], ev[c+1])
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

// ltFC runs candidate c of plan p: h(m, F) = GELU(xln(m, C) @ L.fcW + L.fcB).
func (s *state) ltFC(lt *ltGEMMs, p *ltPlan, c, m int, L *devLayer) error {
	return s.ltRun(lt, p, c, L.fcW, s.act.xln, s.act.h, L.fcBh, fmt.Sprintf("fc+GELU %dx%d @ %dx%d", m, s.cfg.NEmbd, s.cfg.NEmbd, s.cfg.Inner))
}

// fcGELU enqueues layer L's h = GELU(xln @ fcW + fcB) for a step of m GEMM rows (gemmRows)
// through its tuned plan. Only called when s.lt is set.
func (s *state) fcGELU(m int, L *devLayer) error {
	p := s.lt.plans[m]
	if p == nil {
		return fmt.Errorf("gpu: no cuBLASLt fc plan for %d rows", m)
	}
	return s.ltFC(s.lt, p, p.algo, m, L)
}

// ltChoice describes the fc plan's chosen candidate at m rows (profiling).
func (s *state) ltChoice(m int) string {
	if s.lt == nil {
		return "cuBLASLt off"
	}
	if p := s.lt.plans[m]; p != nil {
		return fmt.Sprintf("fc+GELU through cuBLASLt, candidate %d of %d", p.algo, p.p.count)
	}
	return "no plan"
}
