//go:build cgo

package engine

import (
	"errors"
	"fmt"
	"runtime"
	"time"

	"rosetop/gpu"
)

// The CUDA backend: package gpu runs the model; this file adapts Model, Options, Batch and the
// Ledger to gpu's flat API.

// probeCUDA reports whether a CUDA driver and device can be used, and if not, why.
func probeCUDA() (ok bool, why string) {
	desc, err := gpu.Probe()
	if err != nil {
		return false, err.Error()
	}
	return true, desc
}

// cudaBackend is a gpu.Runner behind the Backend interface. Its methods are called from one
// goroutine at a time (Backend's contract); the runner keeps its own OS-thread-locked goroutine.
type cudaBackend struct {
	r        *gpu.Runner
	width    int      // block table row width
	vocab    int      // V: the width of a row of logits
	maxBatch int      // most sequences in one step (the runner's MaxBatch)
	step     gpu.Step // reused every step: no allocation in the steady state
	// logits receives the (B, V) last-position logits of a step where a sequence asks for
	// logprobs; grown to the largest such step, at most maxBatch rows.
	logits []float32
	// k and lpScratch fill the logprobs from logits: a scratch a worker (GOMAXPROCS at the
	// first step that asks), used only during run.
	k         kernels
	lpScratch []SampleScratch
	rows      []bool // step.LogitRows' memory: which rows' logits a logprobs step downloads
	// layout and positions (the most a sequence may run) check a batch with prompt logprobs
	// up front, naming a bad sequence (cuda_prompt.go).
	layout    KVLayout
	positions int
	prompt    cudaPrompt
}

// newCUDABackend builds the GPU backend for m; the KV layout is sized from free GPU memory
// (paged) or is one MaxSeqLen region per batch slot (contiguous).
func newCUDABackend(m *Model, opts Options, ledger *Ledger) (Backend, KVLayout, error) {
	if m == nil || m.Weights == nil {
		return nil, KVLayout{}, errors.New("cuda backend: no model weights")
	}
	cfg := m.Config
	if err := checkShapes(cfg, m.Weights); err != nil {
		return nil, KVLayout{}, fmt.Errorf("cuda backend: %w", err)
	}
	g := gpu.Options{
		MaxBatch:       opts.MaxBatch,
		MaxSeqLen:      opts.MaxSeqLen,
		Paged:          opts.Paged,
		BlockSize:      pagedBlockSize,
		MemoryFraction: opts.GPUMemoryFraction,
		Graphs:         opts.CUDAGraph,
		CaptureAhead:   opts.CaptureAhead,
		Record: func(what, detail string, took time.Duration) {
			ledger.Add(LedgerEntry{What: what, Detail: detail, Took: took})
		},
	}
	if opts.Paged {
		// A paged sequence may grow to the model's n_positions (Engine.MaxSeqLen): size the
		// block tables and the attention scratch for that.
		g.MaxSeqLen = cfg.NPositions
	}
	r, err := gpu.Open(gpuConfig(cfg), gpuWeights(m.Weights), g)
	if err != nil {
		return nil, KVLayout{}, fmt.Errorf("cuda backend: %w", err)
	}
	bs, nb, width := r.Layout()
	layout := KVLayout{BlockSize: bs, NumBlocks: nb, Paged: opts.Paged}
	c := &cudaBackend{r: r, width: width, vocab: cfg.VocabSize, maxBatch: opts.MaxBatch, k: pickKernels(),
		layout: layout, positions: min(cfg.NPositions, bs*width)}
	return c, layout, nil
}

func gpuConfig(c Config) gpu.Config {
	return gpu.Config{NLayer: c.NLayer, NHead: c.NHead, NEmbd: c.NEmbd, NPositions: c.NPositions,
		VocabSize: c.VocabSize, Inner: innerDim(c), Eps: c.LayerNormEps}
}

// gpuWeights shares the slices (no copy): the runner converts them while uploading.
func gpuWeights(w *Weights) *gpu.Weights {
	g := &gpu.Weights{WTE: w.WTE, WPE: w.WPE, LNFW: w.LNFW, LNFB: w.LNFB, Layers: make([]gpu.Layer, len(w.Layers))}
	for i, l := range w.Layers {
		g.Layers[i] = gpu.Layer(l) // the same fields in the same order
	}
	return g
}

// Step flattens b into the reused gpu.Step and runs it; the runner queues the steps b.Repeats
// announces (gpu.Step.Repeats). A step where a sequence asks for logprobs runs through
// StepLogits (StepTokenLogits when one asks for prompt logprobs: the logits of its other tokens'
// rows too, cuda_prompt.go), queues nothing ahead, and fills them from the downloaded logits.
func (c *cudaBackend) Step(b *Batch, next []int32) error {
	return c.run(b, next, nil)
}

// MaxAhead is the most steps the runner queues ahead of the one asked for (gpu.Runner.MaxAhead).
func (c *cudaBackend) MaxAhead() int { return c.r.MaxAhead() }

// Prewarm implements Prewarmer with gpu.Runner.Prewarm.
func (c *cudaBackend) Prewarm() error { return c.r.Prewarm() }

// stepLogits is Step that also returns each sequence's last-position logits (tests).
func (c *cudaBackend) stepLogits(b *Batch, next []int32, logits []float32) error {
	return c.run(b, next, logits)
}

// run runs b, copying its last-position logits into logits when that is not nil, or into
// c.logits when a sequence asks for logprobs; without either it asks the runner for no logits.
// Prompt logprobs come from the same step (runPrompt).
func (c *cudaBackend) run(b *Batch, next []int32, logits []float32) error {
	lp, plp, err := b.asks()
	if err != nil {
		return err
	}
	if plp {
		return c.runPrompt(b, next, logits, lp)
	}
	return c.runBatch(b, next, logits, lp, false)
}

// runBatch runs b; lp: a sequence asks for the sampled token's logprobs; prompt: for prompt
// logprobs too, which the step's chunks of token rows fill (runPrompt has readied c.prompt).
func (c *cudaBackend) runBatch(b *Batch, next []int32, logits []float32, lp, prompt bool) error {
	B, V := len(b.Seqs), c.vocab
	own := lp && logits == nil // logits for the logprobs alone: only the rows that ask are downloaded
	if own {
		if B < 1 || B > c.maxBatch {
			return fmt.Errorf("%w: %d sequences, want 1..%d", ErrBadBatch, B, c.maxBatch)
		}
		if len(c.logits) < B*V {
			c.logits = make([]float32, B*V)
		}
		logits = c.logits[:B*V]
	}
	if err := c.runStep(b, next, logits, lp, own, prompt); err != nil {
		return err
	}
	if lp {
		fillBatchLogprobs(b, logits, next, V, &c.k, c.scratch())
	}
	return nil
}

// scratch is the per-worker scratch of the logprobs fills, made at the first step that asks.
func (c *cudaBackend) scratch() []SampleScratch {
	if c.lpScratch == nil {
		c.lpScratch = make([]SampleScratch, runtime.GOMAXPROCS(0))
	}
	return c.lpScratch
}

// runStep flattens b into c.step and runs it on the runner; logits nil asks for none, rows: only
// the rows of sequences that ask for logprobs; prompt: with the token rows of prompt logprobs
// (StepTokenLogits). With logprobs asked nothing is queued ahead: a queued step writes no
// logits, so the next step, which asks for them again, could not use it (gpu takeAhead).
func (c *cudaBackend) runStep(b *Batch, next []int32, logits []float32, logprobs, rows, prompt bool) error {
	s := &c.step
	s.LogitRows = nil
	if rows {
		c.rows = c.rows[:0]
		for i := range b.Seqs {
			c.rows = append(c.rows, b.Seqs[i].Logprobs)
		}
		s.LogitRows = c.rows
	}
	resetStep(s)
	for i := range b.Seqs {
		q := &b.Seqs[i]
		c.appendSeq(s, q.Tokens, q.Start, q.Blocks, q.Sample)
	}
	s.Repeats = b.Repeats
	if logprobs {
		s.Repeats = 0
	}
	var err error
	if prompt {
		s.TokenRows = c.prompt.tokenRows(b, s.TokenRows)
		err = c.r.StepTokenLogits(s, next, logits, c.prompt.onRows)
	} else {
		err = c.r.StepLogits(s, next, logits)
	}
	if errors.Is(err, gpu.ErrBadStep) {
		return fmt.Errorf("%w: %w", ErrBadBatch, err)
	}
	return err
}

// resetStep empties s's per-sequence slices, keeping their memory.
func resetStep(s *gpu.Step) {
	s.Tokens, s.SeqLens, s.Start, s.Tables, s.Held = s.Tokens[:0], s.SeqLens[:0], s.Start[:0], s.Tables[:0], s.Held[:0]
	s.Temperature, s.TopK, s.TopP, s.Seed = s.Temperature[:0], s.TopK[:0], s.TopP[:0], s.Seed[:0]
	s.TokenRows = s.TokenRows[:0]
}

// appendSeq appends to s a sequence running tokens from position start with the block table
// blocks and sampling sp.
func (c *cudaBackend) appendSeq(s *gpu.Step, tokens []int32, start int, blocks []int32, sp SamplingParams) {
	s.Tokens = append(s.Tokens, tokens...)
	s.SeqLens = append(s.SeqLens, int32(len(tokens)))
	s.Start = append(s.Start, int32(start))
	n := min(len(blocks), c.width)
	s.Tables = append(s.Tables, blocks[:n]...)
	s.Held = append(s.Held, int32(n))
	for j := n; j < c.width; j++ {
		s.Tables = append(s.Tables, 0) // past the sequence's end: never read
	}
	s.Temperature = append(s.Temperature, sp.Temperature)
	s.TopK = append(s.TopK, int32(sp.TopK))
	s.TopP = append(s.TopP, sp.TopP)
	s.Seed = append(s.Seed, sp.Seed)
}

// Device describes the GPU, e.g. "cuda: NVIDIA H200".
func (c *cudaBackend) Device() string { return c.r.Device() }

// Close frees the KV pool, the graphs and every device allocation, and stops the prompt
// logprobs' workers.
func (c *cudaBackend) Close() error {
	c.prompt.close()
	return c.r.Close()
}
