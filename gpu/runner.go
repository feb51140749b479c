//go:build cgo

package gpu

import (
	"errors"
	"fmt"
	"time"
)

// Options shape a Runner's KV cache, batch limits and graphs.
type Options struct {
	MaxBatch  int // most sequences in one step (>= 1)
	MaxSeqLen int // longest sequence, prompt plus output; 0 or more than Config.NPositions: NPositions
	// MaxTokens is the most tokens one forward pass runs (activation buffers are sized for it);
	// a step with more runs in chunks of whole sequences. 0: max(MaxSeqLen, 2048).
	MaxTokens      int
	Paged          bool    // block pool of BlockSize positions; else one MaxSeqLen region per batch slot
	BlockSize      int     // paged block size, a power of two; 0: 16
	MemoryFraction float64 // share of the free memory (after weights and activations) the KV pool takes; 0: 0.5
	// Graphs: replay decode steps from CUDA Graphs, one per batch bucket and sampler (greedy or
	// not), and prefill or mixed steps from graphs of their shape once it recurs (multi.go).
	Graphs       bool
	CaptureAhead bool // capture every bucket in Open instead of on first use
	NoCublasLt   bool // every GEMM through cublasGemmEx, none through cuBLASLt (comparisons)
	// SmallGEMMRows: on Hopper, steps of up to this many token rows (at most 64) run the layer
	// GEMMs on small_gemm with programmatic dependent launch (mma.go); larger steps use cuBLAS.
	// 0: smallDefaultRows; < 0: never (comparisons).
	SmallGEMMRows int
	NoPDL         bool // small_gemm steps without programmatic dependent launch (comparisons)
	// NoFold keeps the layer norms and residual adds of small_gemm steps in kernels of their own
	// instead of folding them into the GEMMs (fold.go; comparisons).
	NoFold bool
	// SplitDecodeRows and SplitDecodeMaxRows: on Hopper, decode steps of that many sequences run
	// as two concurrent lanes of half the rows each (lanes.go) when small_gemm covers a lane.
	// SplitDecodeRows <= 0: never (the default: split.go says why); SplitDecodeMaxRows 0: 64.
	SplitDecodeRows, SplitDecodeMaxRows int
	// Record receives each cold-start cost (context, modules, weights, cuBLAS, KV pool, graph
	// captures). It is called on the runner's worker goroutine; it may be nil.
	Record func(what, detail string, took time.Duration)
}

// Step is one step's work in flat arrays. B = len(SeqLens) sequences; the tokens of sequence i
// follow those of sequence i-1 in Tokens.
type Step struct {
	Tokens  []int32 // (sum SeqLens) token ids
	SeqLens []int32 // (B) tokens of each sequence in this step, >= 1
	Start   []int32 // (B) position of each sequence's first token; the cache holds [0, Start)
	// Tables (B, TableWidth()) are the block tables, row-major: entry j of row i is the block
	// holding positions [j*BlockSize, (j+1)*BlockSize) of sequence i. Contiguous KV has one block
	// per batch slot (TableWidth 1, BlockSize MaxSeqLen). Entries past the sequence's end are ignored.
	Tables []int32
	// Held (B, optional): how many leading entries of each row of Tables are blocks the sequence
	// holds. Steps queued ahead (Repeats) write only into held blocks: with Held, also into those
	// past the block of the sequence's position; nil: only into that block.
	Held        []int32
	Temperature []float32 // (B) <= 0: greedy
	TopK        []int32   // (B) 0: off
	TopP        []float32 // (B) 0 or >= 1: off
	Seed        []uint64  // (B) the draw for position p is engine.Uniform(Seed, p)
	// Repeats is the caller's hint that each of the next Repeats steps will be this decode step
	// again: the same sequences one position further, fed the tokens the step before sampled.
	// The runner then queues up to MaxAhead of them on the device (ahead.go) and checks each next
	// step against the one it queued: a step that differs waits for the queue and runs as usual.
	Repeats int
}

// Stats count what the runner has allocated; a steady decode step changes none of them.
type Stats struct {
	DeviceAllocs, HostAllocs int   // cuMemAlloc / cuMemAllocHost calls so far
	DeviceBytes, HostBytes   int64 // live bytes
	Graphs                   int   // instantiated graphs
}

// ErrClosed is returned by a Runner's methods after Close.
var ErrClosed = errors.New("gpu runner is closed")

// ErrBadStep is wrapped by every error about a malformed Step.
var ErrBadStep = errors.New("bad step")

// ErrDoesNotFit is returned when the model, its activations or its KV cache do not fit in memory.
var ErrDoesNotFit = errors.New("does not fit in GPU memory")

// Runner is GPT-2 on one GPU. Its methods may be called from any one goroutine at a time; every
// CUDA call runs on the runner's own OS-thread-locked worker goroutine.
type Runner struct {
	w *worker
	s *state // owned by the worker goroutine: touched only inside w.do
	// Set at Open and read-only afterwards.
	device                          string
	blockSize, numBlocks, tableWide int
}

// state is everything the worker goroutine owns.
type state struct {
	rt      *cudaRuntime
	cfg     Config
	opt     Options
	wts     *devWeights
	act     activations
	meta    metaBufs
	kv      kvPool
	buckets []int                  // graph batch sizes, ascending; the last is MaxBatch
	graphs  map[graphKey]graphExec // decode graphs
	multi   stepGraphs             // graphs of steps with more tokens than sequences (multi.go)
	// The step in flight: set by the caller's goroutine before w.do(stepFn), read on the worker.
	in     *Step
	next   []int32
	logits []float32
	err    error
	stepFn func()
	// pred holds the predicted steps queued on the stream (ahead.go); the worker's.
	pred   predicted
	prof   *opProfile // nil except in profiling tests
	lt     *ltGEMMs   // nil: no cuBLASLt (lt.go)
	small  smallGEMMs // the layer GEMMs' plans on small_gemm (mma.go); small.on false: cuBLAS only
	pdl    bool       // programmatic dependent launch allowed (Hopper, not Options.NoPDL)
	fold   bool       // small_gemm steps fold their norms into the GEMMs (fold.go)
	pdlNow bool       // the step being enqueued launches with PDL: set by forward
	// greedy: every row of the step being enqueued samples greedily, so its sampler is
	// argmax_next alone (head). Set before each step's forward pass and each capture.
	greedy bool
	// advance: the step being enqueued is a decode graph's, whose sampler moves the device
	// metadata on to the step after it, for a predicted step that may follow (ahead.go).
	advance bool
	// embedded: the step being enqueued is a predicted one whose rows the step before's sampler
	// embedded (embedsNext): its forward pass starts at the first layer.
	embedded bool
	// warmLayers and warmHead are the GEMM row classes whose cuBLAS first-call cost has been paid
	// (shapes.go): the layers' GEMMs and the LM head's.
	warmLayers, warmHead map[int]bool
	// logitsHost receives padded logits rows for StepLogits (tests and debugging only).
	logitsHost []float32
}

func (o *Options) defaults(cfg Config) error {
	if o.MaxBatch < 1 {
		return fmt.Errorf("gpu: max batch %d: want >= 1", o.MaxBatch)
	}
	if o.MaxSeqLen <= 0 || o.MaxSeqLen > cfg.NPositions {
		o.MaxSeqLen = cfg.NPositions
	}
	if o.BlockSize <= 0 {
		o.BlockSize = 16
	}
	if o.Paged && o.BlockSize&(o.BlockSize-1) != 0 {
		return fmt.Errorf("gpu: paged block size %d: want a power of two", o.BlockSize)
	}
	if !o.Paged {
		o.BlockSize = o.MaxSeqLen
	}
	if o.MaxTokens <= 0 {
		o.MaxTokens = max(o.MaxSeqLen, 2048)
	}
	o.MaxTokens = max(o.MaxTokens, o.MaxSeqLen, o.MaxBatch)
	if o.MemoryFraction <= 0 {
		o.MemoryFraction = 0.5
	}
	if o.MemoryFraction > 0.95 {
		return fmt.Errorf("gpu: memory fraction %g: want (0, 0.95]", o.MemoryFraction)
	}
	return nil
}

// Open uploads the model and allocates everything a step needs: activations, pinned metadata
// buffers and the KV pool (sized from free memory when paged). It returns an error wrapping
// ErrUnavailable when there is no usable GPU, ErrDoesNotFit when memory is short.
func Open(cfg Config, w *Weights, opt Options) (*Runner, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if err := opt.defaults(cfg); err != nil {
		return nil, err
	}
	st := &state{cfg: cfg, opt: opt, graphs: map[graphKey]graphExec{}, multi: newStepGraphs()}
	st.buckets = buckets(opt.MaxBatch)
	r := &Runner{w: startWorker(), s: st}
	var err error
	r.w.do(func() { err = st.open(w) })
	if err != nil {
		r.w.do(func() { st.close() })
		r.w.stop()
		return nil, err
	}
	st.stepFn = func() {
		if st.err = st.step(st.in, st.next, st.logits); st.err == nil && st.in.Repeats > 0 {
			st.err = st.launchAhead(st.in, st.next, st.in.Repeats)
		}
	}
	r.device = fmt.Sprintf("cuda: %s", st.rt.info.Name)
	r.blockSize, r.numBlocks, r.tableWide = st.kv.bs, st.kv.numBlocks, st.kv.width
	return r, nil
}

func (s *state) record(what, detail string, took time.Duration) {
	if s.opt.Record != nil {
		s.opt.Record(what, detail, took)
	}
}

func (s *state) open(w *Weights) error {
	var costs []timed
	rt, err := openRuntime(&costs)
	for _, c := range costs {
		s.record(c.What, c.Detail, c.Took)
	}
	if err != nil {
		return err
	}
	s.rt = rt
	if rt.ex && s.opt.SmallGEMMRows >= 0 {
		s.small = planLayer(s.cfg.NEmbd, s.cfg.Inner, rt.info.SMs)
	}
	s.pdl = rt.ex && !s.opt.NoPDL
	s.fold = folds(s.cfg.NEmbd, s.small) && !s.opt.NoFold
	if s.small.on {
		if err = s.smallAttrs(); err != nil {
			return err
		}
	}
	t0 := time.Now()
	if s.wts, err = rt.uploadWeights(s.cfg, w, s.small.on, s.fold); err != nil {
		return fitErr(err)
	}
	detail := fmt.Sprintf("%d layers, %d MB", s.cfg.NLayer, s.wts.bytes>>20)
	if s.small.on {
		detail += ", with the layer matrices also packed for small_gemm"
	}
	if s.fold {
		detail += " (the norms folded in)"
	}
	s.record("weight upload", detail, time.Since(t0))
	t0 = time.Now()
	if err = s.allocBuffers(); err != nil {
		return fitErr(err)
	}
	s.record("activation buffers", fmt.Sprintf("%d tokens x %d sequences, %d MB", s.opt.MaxTokens, s.opt.MaxBatch, s.rt.deviceLive>>20-s.wts.bytes>>20-workspaceBytes>>20), time.Since(t0))
	if !s.opt.NoCublasLt {
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
		if err = s.captureAhead(); err != nil {
			return err
		}
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

func (s *state) close() error {
	if s.rt == nil {
		return nil
	}
	var first error
	keep := func(err error) {
		if first == nil {
			first = err
		}
	}
	s.closeAhead(keep)
	s.closeMulti(keep)
	for b, g := range s.graphs {
		if err := s.rt.destroyGraph(g); err != nil && first == nil {
			first = err
		}
		delete(s.graphs, b)
	}
	if s.lt != nil {
		s.lt.close()
		s.lt = nil
	}
	if err := s.rt.close(); err != nil && first == nil {
		first = err
	}
	s.rt = nil
	return first
}

// Close frees every device and pinned allocation, the graphs, the stream and the module, and
// destroys the Runner's context. The Runner must not be used afterwards.
func (r *Runner) Close() error {
	if r.s == nil {
		return nil
	}
	var err error
	r.w.do(func() { err = r.s.close() })
	r.w.stop()
	r.s = nil
	return err
}

// Device names the GPU, e.g. "cuda: NVIDIA H200".
func (r *Runner) Device() string { return r.device }

// Layout returns the KV cache shape: positions per block, blocks in the pool and the width of a
// block table row.
func (r *Runner) Layout() (blockSize, numBlocks, tableWidth int) {
	return r.blockSize, r.numBlocks, r.tableWide
}

// Stats reports the runner's allocations so far.
func (r *Runner) Stats() Stats {
	var st Stats
	if r.s == nil {
		return st
	}
	r.w.do(func() {
		rt := r.s.rt
		st = Stats{rt.deviceAllocs, rt.hostAllocs, rt.deviceLive, rt.hostLive, rt.graphs}
	})
	return st
}

// MemInfo returns the device's free and total memory as the driver sees it now.
func (r *Runner) MemInfo() (free, total int64, err error) {
	if r.s == nil {
		return 0, 0, ErrClosed
	}
	r.w.do(func() { free, total, err = r.s.rt.memInfo() })
	return
}

// Prewarm pays now the one-time costs no step has paid yet, those Options.CaptureAhead pays in
// Open: cuBLAS's first call for every GEMM row class and, with Graphs, the capture of every
// bucket's decode graph (queued predicted steps finish first), and the graph of every prefill or
// mixed step shape met once so far (multi.go). No step after it meets a row class or bucket it
// has not run. The ledger records what it paid. A benchmark calls it between its cold and
// steady runs: which classes a run meets depends on how its arrivals were split into prefill
// steps, so a steady run could otherwise pay for one the cold run did not meet.
func (r *Runner) Prewarm() error {
	s := r.s
	if s == nil {
		return ErrClosed
	}
	var err error
	r.w.do(func() { err = s.prewarm() })
	return err
}

// Step runs one step and writes each sequence's sampled token into next[i].
func (r *Runner) Step(in *Step, next []int32) error { return r.StepLogits(in, next, nil) }

// MaxAhead is the most steps the runner queues past the one asked for (Step.Repeats): a caller
// that gives each sequence room for that many more positions in held blocks (Step.Held) lets them
// go on across block boundaries.
func (r *Runner) MaxAhead() int { return maxAhead }

// StepLogits is Step that also copies each sequence's last-position logits into logits
// (B, V) row-major, for tests and debugging; logits may be nil.
func (r *Runner) StepLogits(in *Step, next []int32, logits []float32) error {
	s := r.s
	if s == nil {
		return ErrClosed
	}
	s.in, s.next, s.logits = in, next, logits
	r.w.do(s.stepFn)
	s.in, s.next, s.logits = nil, nil, nil
	return s.err
}

// buckets are the batch sizes decode graphs are captured for: 1, 2, 4, 8, 16, 24, 32, 48, 64,
// then steps of 32, the last one being maxBatch.
func buckets(maxBatch int) []int {
	var out []int
	for b := 1; b < maxBatch; {
		out = append(out, b)
		switch {
		case b < 16:
			b *= 2
		case b < 32:
			b += 8
		case b < 64:
			b += 16
		default:
			b += 32
		}
	}
	return append(out, maxBatch)
}

func bucketFor(bs []int, n int) int {
	for _, b := range bs {
		if b >= n {
			return b
		}
	}
	return bs[len(bs)-1]
}
