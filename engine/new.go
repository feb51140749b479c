package engine

import (
	"errors"
	"fmt"
	"math"
)

// ErrBadOptions is wrapped by New's errors about Options (unknown device, bad sizes).
var ErrBadOptions = errors.New("bad engine options")

// optionError is a one-line message that still matches a sentinel with errors.Is.
type optionError struct {
	msg  string
	kind error
}

func (e *optionError) Error() string { return e.msg }
func (e *optionError) Unwrap() error { return e.kind }

func badOption(kind error, format string, args ...any) error {
	return &optionError{msg: fmt.Sprintf(format, args...), kind: kind}
}

// pagedBlockSize is the positions per KV block of the paged layout.
const pagedBlockSize = 16

// ProbeGPU describes the GPU a CUDA engine would run on and its driver ("NVIDIA H200 (sm_90,
// driver 12.8)"), or says why there is none usable (ok false). It creates no context.
func ProbeGPU() (desc string, ok bool) {
	ok, desc = probeCUDA()
	return desc, ok
}

// New puts m on a backend chosen by opts.Device:
//   - "cpu": the CPU backend;
//   - "cuda": the GPU backend, or an error saying why there is no usable GPU (it wraps ErrNoCUDA);
//   - "auto" (or ""): the GPU when one is usable, else the CPU, with DeviceNote saying why.
//
// On the CPU the KV pool holds MaxBatch sequences of MaxSeqLen positions: one block of MaxSeqLen
// per batch slot (contiguous), or MaxBatch*ceil(MaxSeqLen/16) blocks of 16 (paged). CUDAGraph is
// ignored on the CPU and DeviceNote says so. The model stays owned by the caller; Engine.Close
// frees the backend only.
func New(m *Model, opts Options) (*Engine, error) {
	if m == nil || m.Weights == nil {
		return nil, badOption(ErrBadOptions, "engine: no model loaded")
	}
	if err := normalize(&opts, m.Config); err != nil {
		return nil, err
	}
	e := &Engine{Model: m, Ledger: &Ledger{}}
	switch opts.Device {
	case "cuda":
		ok, why := probeCUDA()
		if !ok {
			return nil, badOption(ErrNoCUDA, "--device cuda: no usable GPU (%s)", why)
		}
		be, layout, err := newCUDABackend(m, opts, e.Ledger)
		if err != nil {
			return nil, fmt.Errorf("--device cuda: %w", err)
		}
		e.Backend, e.Layout, e.DeviceNote = be, layout, "cuda: requested"
		return e, nil
	case "auto":
		ok, why := probeCUDA()
		if ok {
			be, layout, err := newCUDABackend(m, opts, e.Ledger)
			if err == nil {
				e.Backend, e.Layout, e.DeviceNote = be, layout, "auto: found a usable GPU"
				return e, nil
			}
			why = "the CUDA backend failed to start: " + err.Error()
		}
		e.DeviceNote = "auto: " + why
	default: // "cpu"
		e.DeviceNote = "cpu: requested"
	}
	if opts.CUDAGraph {
		e.DeviceNote += "; CUDA Graph needs a GPU (off on the CPU)"
	}
	// The pool's bytes in float64 first: MaxBatch is the caller's, and the int products (the
	// layout's blocks, the pool's length) could wrap to a small pool the backend indexes past.
	perSeq := opts.MaxSeqLen
	if opts.Paged {
		perSeq = (opts.MaxSeqLen + pagedBlockSize - 1) / pagedBlockSize * pagedBlockSize
	}
	kvBytes := float64(opts.MaxBatch) * float64(perSeq) * float64(m.Config.NLayer) * 2 * float64(m.Config.NEmbd) * 4
	mem := machineMemory()
	if kvBytes > math.MaxInt/2 || mem > 0 && kvBytes > float64(mem) { // allocated whole, before any request
		limit := "more than this process can address"
		if mem > 0 {
			limit = fmt.Sprintf("more than the %s of memory this process may use", gib(mem))
		}
		return nil, badOption(ErrBadOptions, "a KV pool for %d sequences of %d positions needs %.1f GiB on the CPU, %s: lower --max-batch-size or --max-seq-len",
			opts.MaxBatch, opts.MaxSeqLen, kvBytes/(1<<30), limit)
	}
	layout := cpuLayout(opts)
	var be *CPUBackend
	detail := fmt.Sprintf("%s, %d blocks x %d positions, %.1f MiB", layoutName(layout), layout.NumBlocks, layout.BlockSize, kvBytes/(1<<20))
	err := e.Ledger.Time("KV pool allocation", detail, func() error {
		var err error
		be, err = newCPUBackend(m, layout, opts.Threads)
		return err
	})
	if err != nil {
		return nil, err
	}
	e.Backend, e.Layout = be, layout
	return e, nil
}

// normalize checks opts and fills in the defaults (device auto, MaxSeqLen = n_positions).
func normalize(opts *Options, cfg Config) error {
	switch opts.Device {
	case "":
		opts.Device = "auto"
	case "auto", "cpu", "cuda":
	default:
		return badOption(ErrBadOptions, "unknown --device %q (want auto, cpu or cuda)", opts.Device)
	}
	if opts.MaxBatch < 1 {
		return badOption(ErrBadOptions, "max batch size %d: want >= 1", opts.MaxBatch)
	}
	if opts.MaxSeqLen == 0 {
		opts.MaxSeqLen = cfg.NPositions
	}
	if opts.MaxSeqLen < 1 || opts.MaxSeqLen > cfg.NPositions {
		return badOption(ErrBadOptions, "max sequence length %d: want 1..%d (the model's n_positions)", opts.MaxSeqLen, cfg.NPositions)
	}
	if opts.Threads < 0 {
		return badOption(ErrBadOptions, "threads %d: want >= 0 (0: all cores)", opts.Threads)
	}
	return nil
}

// cpuLayout is the KV layout of the CPU backend for normalized opts.
func cpuLayout(opts Options) KVLayout {
	if opts.Paged {
		perSeq := (opts.MaxSeqLen + pagedBlockSize - 1) / pagedBlockSize
		return KVLayout{BlockSize: pagedBlockSize, NumBlocks: opts.MaxBatch * perSeq, Paged: true}
	}
	return KVLayout{BlockSize: opts.MaxSeqLen, NumBlocks: opts.MaxBatch}
}

func layoutName(l KVLayout) string {
	if l.Paged {
		return "paged"
	}
	return "contiguous"
}

// Prewarm pays the backend's one-time costs not paid yet (Prewarmer; nothing to do for the CPU
// backend). The ledger records what it paid.
func (e *Engine) Prewarm() error {
	if w, ok := e.Backend.(Prewarmer); ok {
		return w.Prewarm()
	}
	return nil
}

// Close frees the backend (KV pool, workers, device memory). The model is the caller's to close.
func (e *Engine) Close() error {
	if e == nil || e.Backend == nil {
		return nil
	}
	err := e.Backend.Close()
	e.Backend = nil
	return err
}
