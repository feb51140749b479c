//go:build cgo

package gpu

import (
	"errors"
	"fmt"
	"time"

	"rosetop/gpu/cu"
)

// state is everything the worker goroutine owns.
type state struct {
	ctx     *cu.Context
	k       [numKernels]cu.Kernel // by kernelID
	cfg     Config
	opt     Options
	caps    caps
	wts     *devWeights
	act     activations
	meta    metaBufs
	kv      kvPool
	lt      *ltGEMMs // nil: no cuBLASLt (lt.go)
	buckets []int    // decode graph batch sizes, ascending; the last is MaxBatch
	graphs  map[graphKey]cu.Graph
	multi   stepGraphs // graphs of steps with more tokens than sequences (graphs.go)
	pred    predicted  // the steps queued ahead (ahead.go)
	// prog is the program being built and run: a step's, a capture's, a warm-up's. It lives
	// from one build to the next, so that building allocates nothing once it has grown.
	prog program
	// warmLayers and warmHead are the GEMM row classes whose cuBLAS first-call cost has been paid
	// (shapes.go): the layers' GEMMs and the LM head's.
	warmLayers, warmHead map[int]bool
	// logitsHost receives padded logits rows for StepLogits: pinned memory (a download at the
	// link's rate), grown to the largest step that asked, freed with the context.
	logitsHost []float32
	rows       tokenRowBufs // StepTokenLogits's chunks (rows.go)
	call       stepCall
}

// stepCall is the step in flight: the caller's goroutine sets in, next, logits and rowLogits
// before w.Do(run) and reads err after it; run executes on the worker.
type stepCall struct {
	in        *Step
	next      []int32
	logits    []float32
	rowLogits func(rows []int32, logits []float32) error // StepTokenLogits's callback; nil otherwise
	err       error
	run       func()
}

func (s *state) record(what, detail string, took time.Duration) {
	if s.opt.Record != nil {
		s.opt.Record(what, detail, took)
	}
}

// open creates the context, loads the kernels and cuBLAS, decides the caps (narrowed by narrow
// when not nil), uploads the weights and allocates the buffers, the KV pool and, with
// CaptureAhead, the graphs. Each cost goes to the ledger.
func (s *state) open(w *Weights, narrow func(*caps)) error {
	ctx, took, err := cu.Open()
	if err != nil {
		return err
	}
	s.ctx = ctx
	s.record("CUDA context", ctx.Info().Name, took)
	t0 := time.Now()
	var ld loaded
	if s.k, ld, err = loadKernels(ctx); err != nil {
		return err
	}
	detail := fmt.Sprintf("%d kernels from %s; sm_90a module loaded", numKernels, ld.from)
	if ld.wg != nil {
		detail = fmt.Sprintf("%d kernels from %s; sm_90a module not loaded: %v", int(numKernels-numWGKernels), ld.from, ld.wg)
	}
	s.record("kernel module load", detail, time.Since(t0))
	t0 = time.Now()
	blas, err := ctx.OpenBLAS()
	if err != nil {
		return err
	}
	s.record("cuBLAS init", blas, time.Since(t0))
	if err = s.decideCaps(narrow, ld.wg == nil); err != nil {
		return err
	}
	s.record("decode GEMMs", s.caps.gemmPath(), 0)
	if err = s.upload(w); err != nil {
		return err
	}
	t0 = time.Now()
	if err = s.allocBuffers(); err != nil {
		return fitErr(err)
	}
	if s.caps.wg.on {
		if err = s.setXMaps(); err != nil {
			return err
		}
	}
	s.record("activation buffers", fmt.Sprintf("%d tokens x %d sequences, %d MB", s.opt.MaxTokens, s.opt.MaxBatch,
		ctx.Stats().DeviceBytes>>20-s.wts.bytes>>20-cu.WorkspaceBytes>>20), time.Since(t0))
	if s.caps.lt {
		if err = s.openLt(); err != nil {
			return err
		}
	}
	s.warmLayers, s.warmHead = map[int]bool{}, map[int]bool{}
	if s.opt.CaptureAhead {
		if err = s.warmGEMMs(); err != nil {
			return err
		}
	}
	t0 = time.Now()
	if err = s.allocKV(); err != nil {
		return err
	}
	kind := "contiguous"
	if s.opt.Paged {
		kind = "paged"
	}
	s.record("KV pool allocation", fmt.Sprintf("%s, %d blocks x %d positions, %d MB", kind, s.kv.numBlocks, s.kv.bs, s.kv.bytes>>20), time.Since(t0))
	if s.opt.Graphs && s.opt.CaptureAhead {
		return s.captureAhead()
	}
	return nil
}

// decideCaps sets s.caps from the device: on Hopper (compute capability 9.x, a driver with
// cuLaunchKernelEx) wg_gemm for steps of up to wgMaxRows rows where its module loaded (wgLoaded)
// and the model fits it, else small_gemm for steps of up to smallDefaultRows rows; both with PDL
// and the norms folded in where the width allows; cuBLASLt everywhere. narrow, when not nil,
// then narrows them.
func (s *state) decideCaps(narrow func(*caps), wgLoaded bool) error {
	info, c := s.ctx.Info(), &s.caps
	hopper := info.CC/10 == 9 && s.ctx.HasLaunchEx()
	if hopper {
		c.small = planLayer(s.cfg.NEmbd, s.cfg.Inner, info.SMs)
	}
	if hopper && wgLoaded {
		c.wg = planWGLayer(s.cfg.NEmbd, s.cfg.Inner)
	}
	c.smallRows, c.wgRows, c.pdl, c.lt = smallDefaultRows, wgMaxRows, hopper, true
	if c.wg.on {
		c.smallRows = 0 // wg_gemm is faster at every row count (bench/RESULTS.md)
		c.head = headFits(s.cfg.NEmbd)
	}
	c.fold = folds(s.cfg.NEmbd, c.small)
	if narrow != nil {
		narrow(c)
	}
	if c.wg.on {
		ok, err := s.wgAttrs(c.wg, s.cfg.NEmbd, s.cfg.Inner)
		if err != nil {
			return err
		}
		if c.wg.on = ok; !ok && c.smallRows == 0 {
			c.smallRows = smallDefaultRows // this device cannot hold wg_gemm's plans: small_gemm's steps again
		}
	}
	if c.head = c.head && c.wg.on && headShared(s.cfg.NEmbd) <= info.MaxSharedOptin; c.head {
		c.headGrid = headBlocks(info.SMs, s.cfg.VocabSize)
		for _, k := range []kernelID{kLMHead, kLMHead + 1} {
			if err := s.ctx.SetMaxShared(s.k[k], headShared(s.cfg.NEmbd)); err != nil {
				return err
			}
		}
	}
	c.small.on = c.small.on && c.smallRows > 0 // unused: no packed copies, no attributes
	if c.small.on {
		ok, err := s.smallAttrs(c.small)
		if err != nil {
			return err
		}
		c.small.on = ok // a plan this device cannot hold: cuBLAS for everything
	}
	c.fold = c.fold && c.small.on
	return nil
}

// upload uploads the weights: with small_gemm or wg_gemm also their packed copies of the layer
// matrices, and with folded norms the norms folded into them.
func (s *state) upload(w *Weights) error {
	t0 := time.Now()
	var err error
	c := &s.caps
	if s.wts, err = uploadWeights(s.ctx, s.cfg, w, packing{mma: c.small.on, fold: c.fold, wg: c.wg.on, head: c.head}); err != nil {
		return fitErr(err)
	}
	detail := fmt.Sprintf("%d layers, %d MB", s.cfg.NLayer, s.wts.bytes>>20)
	switch {
	case c.small.on && c.wg.on:
		detail += ", with the layer matrices also packed for small_gemm and wg_gemm"
	case c.small.on:
		detail += ", with the layer matrices also packed for small_gemm"
	case c.wg.on:
		detail += ", with the layer matrices also packed for wg_gemm"
	}
	if c.fold || c.wg.on {
		detail += " (the norms folded in)" // small_gemm's copies when c.fold; wg_gemm's always
	}
	head := 0 // bytes of the LM head packed on the GPU, not uploaded
	if c.head {
		head = headTiles(s.cfg.VocabSize) * headTile * s.cfg.NEmbd * 2
		detail += fmt.Sprintf(", %d MB of them the LM head packed on the GPU next", head>>20)
	}
	s.record("weight upload", detail, time.Since(t0))
	if c.head {
		t0 = time.Now()
		if err = s.packHead(); err != nil {
			return err
		}
		s.record("LM head packing", fmt.Sprintf("ln_f folded into wte for lm_head_argmax, %d MB", head>>20), time.Since(t0))
	}
	return nil
}

// fitErr marks out-of-memory failures with ErrDoesNotFit.
func fitErr(err error) error {
	var ce *Error
	if errors.As(err, &ce) && ce.Name == "CUDA_ERROR_OUT_OF_MEMORY" {
		return fmt.Errorf("%w: %w", ErrDoesNotFit, err)
	}
	return err
}

// close waits for the stream and frees the graphs, the events, cuBLASLt and the context.
func (s *state) close() error {
	if s.ctx == nil {
		return nil
	}
	var first error
	keep := func(err error) {
		if first == nil {
			first = err
		}
	}
	s.closeAhead(keep)
	s.closeGraphs(keep)
	s.closeTokenRows(keep)
	if s.lt != nil {
		s.lt.close()
		s.lt = nil
	}
	keep(s.ctx.Close())
	s.ctx, s.logitsHost = nil, nil
	return first
}
