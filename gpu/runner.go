//go:build cgo

package gpu

import (
	"errors"
	"fmt"
	"time"

	"rosetop/gpu/cu"
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
	// not), and prefill or mixed steps from graphs of their shape once it recurs (graphs.go).
	Graphs       bool
	CaptureAhead bool // capture every bucket in Open instead of on first use
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
	// LogitRows (B, optional) are, for StepLogits, the sequences whose logits are copied; the
	// others' rows of logits are left as they were. nil: every sequence's.
	LogitRows []bool
	// TokenRows (optional, StepTokenLogits only) are indices into Tokens, strictly ascending, of
	// rows whose logits are wanted besides each sequence's last (which they never name): a step
	// with them is a prefill or mixed step, never a decode step.
	TokenRows []int32
}

// Stats count what the runner has allocated, which a steady decode step leaves as they are, and
// the queued steps it has used.
type Stats struct {
	cu.Stats
	Queued int // steps asked for that were already queued ahead (Step.Repeats)
}

// ErrUnavailable is matched (errors.Is) by every reason the GPU cannot be used at all: no
// driver, no device, an init failure, a device too old.
var ErrUnavailable = cu.ErrUnavailable

// Error is a failed CUDA driver or cuBLAS call.
type Error = cu.Error

// ErrClosed is returned by a Runner's methods after Close.
var ErrClosed = errors.New("gpu runner is closed")

// ErrBadStep is wrapped by every error about a malformed Step.
var ErrBadStep = errors.New("bad step")

// ErrDoesNotFit is returned when the model, its activations or its KV cache do not fit in memory.
var ErrDoesNotFit = errors.New("does not fit in GPU memory")

// Runner is GPT-2 on one GPU. Its methods may be called from any one goroutine at a time; every
// CUDA call runs on the runner's own OS-thread-locked worker goroutine.
type Runner struct {
	w *cu.Worker
	s *state // owned by the worker goroutine: touched only inside w.Do
	// Set at Open and read-only afterwards.
	device                          string
	blockSize, numBlocks, tableWide int
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
func Open(cfg Config, w *Weights, opt Options) (*Runner, error) { return openWith(cfg, w, opt, nil) }

// openWith is Open with narrow, when not nil, given the device's caps to narrow before they are
// used (tests: cuBLAS on Hopper, norms not folded, no PDL, no cuBLASLt).
func openWith(cfg Config, w *Weights, opt Options, narrow func(*caps)) (*Runner, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if err := opt.defaults(cfg); err != nil {
		return nil, err
	}
	st := &state{cfg: cfg, opt: opt, graphs: map[graphKey]cu.Graph{}, multi: newStepGraphs(), buckets: buckets(opt.MaxBatch)}
	r := &Runner{w: cu.StartWorker(), s: st}
	var err error
	r.w.Do(func() { err = st.open(w, narrow) })
	if err != nil {
		r.w.Do(func() { st.close() })
		r.w.Stop()
		return nil, err
	}
	c := &st.call
	c.run = func() {
		if c.err = st.step(c.in, c.next, c.logits, c.rowLogits); c.err == nil && c.in.Repeats > 0 {
			c.err = st.launchAhead(c.in, c.next, c.in.Repeats)
		}
	}
	r.device = fmt.Sprintf("cuda: %s", st.ctx.Info().Name)
	if st.caps.wg.on {
		r.device += " (sm_90a GEMMs)" // the header names the path: wg_gemm loaded and used
	}
	r.blockSize, r.numBlocks, r.tableWide = st.kv.bs, st.kv.numBlocks, st.kv.width
	return r, nil
}

// Close frees every device and pinned allocation, the graphs, the stream and the module, and
// destroys the Runner's context. The Runner must not be used afterwards.
func (r *Runner) Close() error {
	if r.s == nil {
		return nil
	}
	var err error
	r.w.Do(func() { err = r.s.close() })
	r.w.Stop()
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
	r.w.Do(func() { st = Stats{Stats: r.s.ctx.Stats(), Queued: r.s.pred.hits} })
	return st
}

// MemInfo returns the device's free and total memory as the driver sees it now.
func (r *Runner) MemInfo() (free, total int64, err error) {
	if r.s == nil {
		return 0, 0, ErrClosed
	}
	r.w.Do(func() { free, total, err = r.s.ctx.MemInfo() })
	return
}

// Prewarm pays now the one-time costs no step has paid yet, those Options.CaptureAhead pays in
// Open: cuBLAS's first call for every GEMM row class and, with Graphs, the capture of every
// bucket's decode graph (queued predicted steps finish first), and the graph of every prefill or
// mixed step shape met once so far (graphs.go). No step after it meets a row class or bucket it
// has not run. The ledger records what it paid. A benchmark calls it between its cold and
// steady runs: which classes a run meets depends on how its arrivals were split into prefill
// steps, so a steady run could otherwise pay for one the cold run did not meet.
func (r *Runner) Prewarm() error {
	s := r.s
	if s == nil {
		return ErrClosed
	}
	var err error
	r.w.Do(func() { err = s.prewarm() })
	return err
}

// Step runs one step and writes each sequence's sampled token into next[i].
func (r *Runner) Step(in *Step, next []int32) error { return r.StepLogits(in, next, nil) }

// MaxAhead is the most steps the runner queues past the one asked for (Step.Repeats): a caller
// that gives each sequence room for that many more positions in held blocks (Step.Held) lets them
// go on across block boundaries.
func (r *Runner) MaxAhead() int { return maxAhead }

// StepLogits is Step that also copies each sequence's last-position logits into logits
// (B, V) row-major (those of in.LogitRows, when set); logits may be nil.
func (r *Runner) StepLogits(in *Step, next []int32, logits []float32) error {
	s := r.s
	if s == nil {
		return ErrClosed
	}
	c := &s.call
	c.in, c.next, c.logits = in, next, logits
	r.w.Do(c.run)
	c.in, c.next, c.logits = nil, nil, nil
	return c.err
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

// Probe reports whether a CUDA driver and a device rosetop's kernels run on can be used, and
// describes the device, or why not (an error matching ErrUnavailable). It loads only the driver
// and creates no context.
func Probe() (string, error) {
	info, err := cu.Probe()
	if err != nil {
		return "", err
	}
	if info.CC < 80 {
		return "", fmt.Errorf("%w: %s has compute capability %d.%d; rosetop's kernels need 8.0 (Ampere) or newer",
			ErrUnavailable, info.Name, info.CC/10, info.CC%10)
	}
	return fmt.Sprintf("%s (sm_%d, driver %d.%d)", info.Name, info.CC, info.Driver/1000, info.Driver%1000/10), nil
}
