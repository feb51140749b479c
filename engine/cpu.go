package engine

import (
	"errors"
	"fmt"
	"math"
	"runtime"
)

// ErrBadBatch is wrapped by every error a backend returns for a malformed Batch.
var ErrBadBatch = errors.New("bad batch")

// CPUBackend runs GPT-2 in float32 on the CPU over a fixed pool of worker goroutines. It is the
// reference every other backend is tested against.
//
// Its methods are called from one goroutine at a time (Backend's contract); the worker pool's
// goroutines only touch the buffers of the job they were handed, between its start and its end.
type CPUBackend struct {
	cfg    Config
	w      *Weights
	layout KVLayout
	pool   *workerPool

	// kv is the KV pool: (NumBlocks, L, 2, BlockSize, C); [.., 0, ..] keys, [.., 1, ..] values.
	// Position p of a sequence lives in block Blocks[p/BlockSize] at offset p%BlockSize.
	kv []float32

	// packed holds each layer's Conv1D weights in panels (packMat), read by the matmuls instead
	// of the model's [in, out] slices, and head the LM head, wte transposed (C, V), in panels;
	// both written once by newCPUBackend.
	packed []packedLayer
	head   packedMat

	// stepBytes bounds the scratch of one forward pass (stepScratchBytes; tests lower it): Step
	// runs a batch that needs more as several passes over consecutive runs of its sequences.
	stepBytes int
	part      Batch // one such run of a batch's sequences (Seqs and Stop only), reused

	// Per-token scratch, grown when a pass has more tokens than any before (n = tokens of the pass).
	capTok int
	x      []float32 // (n, C) residual stream
	xn     []float32 // (n, C) layer-norm output
	qkv    []float32 // (n, 3C)
	att    []float32 // (n, C) attention output, heads side by side
	fc     []float32 // (n, 4C) MLP hidden
	tokSeq []int32   // (n) index in the batch of the sequence each token belongs to
	tokPos []int32   // (n) position of each token

	// Per-row scratch for the LM head (rows = sequences, or tokens when all logits are asked for,
	// or sequences then the prompt rows of those that ask for prompt logprobs).
	capRow   int
	capLogit int       // rows c.logits holds
	rows     int       // rows of xf this step
	heads    int       // rows of logits the pass computes: rows, or the sequences' with prompt rows
	rowTok   []int32   // (rows) token index of each row
	xf       []float32 // (rows, C) final layer-norm output
	logits   []float32 // (capLogit, V): the pass's heads rows, then a chunk of prompt rows

	scores  [][]float32     // per worker (n_positions) attention weights
	samples []SampleScratch // per worker

	k      kernels // AVX2/FMA or Go inner loops, chosen once
	mm     matmulJob
	attn   attnJob
	ln     normJob
	samp   sampleJob
	prompt promptJob
}

// newCPUBackend builds a CPU backend for m with a KV pool of the given layout and threads
// workers (0: GOMAXPROCS, i.e. every core this process may use).
func newCPUBackend(m *Model, layout KVLayout, threads int) (*CPUBackend, error) {
	if m == nil || m.Weights == nil {
		return nil, errors.New("cpu backend: no model weights")
	}
	cfg := m.Config
	if err := checkShapes(cfg, m.Weights); err != nil {
		return nil, fmt.Errorf("cpu backend: %w", err)
	}
	if layout.BlockSize < 1 || layout.NumBlocks < 1 {
		return nil, fmt.Errorf("cpu backend: KV layout %d blocks of %d positions (want >= 1 of each)", layout.NumBlocks, layout.BlockSize)
	}
	if threads <= 0 {
		threads = runtime.GOMAXPROCS(0)
	}
	kvLen := int64(layout.NumBlocks) * int64(layout.BlockSize) * int64(cfg.NLayer) * 2 * int64(cfg.NEmbd)
	if kvLen > math.MaxInt/4 {
		return nil, fmt.Errorf("cpu backend: KV pool of %d floats is too large", kvLen)
	}
	c := &CPUBackend{
		cfg:       cfg,
		w:         m.Weights,
		layout:    layout,
		kv:        make([]float32, kvLen),
		pool:      newWorkerPool(threads),
		scores:    make([][]float32, threads),
		samples:   make([]SampleScratch, threads),
		k:         pickKernels(),
		stepBytes: stepScratchBytes,
	}
	for i := range c.scores {
		c.scores[i] = make([]float32, cfg.NPositions)
	}
	c.mm.tiles = make([][]float32, threads)
	for i := range c.mm.tiles {
		c.mm.tiles[i] = make([]float32, matRows*panelW)
	}
	c.packed, c.head = packWeights(cfg, m.Weights, c.pool)
	c.mm.k = &c.k
	c.attn.c, c.ln.c, c.samp.c, c.prompt.c = c, c, c, c
	return c, nil
}

// packedLayer is one layer's Conv1D weights in panels.
type packedLayer struct {
	attn     packedMat // (C, 3C)
	attnProj packedMat // (C, C)
	fc       packedMat // (C, inner)
	fcProj   packedMat // (inner, C)
}

// packJob packs one matrix per item: item 4l+i is matrix i of layer l, the last item wte.
type packJob struct {
	cfg  Config
	w    *Weights
	out  []packedLayer
	head packedMat
}

func (j *packJob) do(_, lo, hi int) {
	C, inner := j.cfg.NEmbd, innerDim(j.cfg)
	for it := lo; it < hi; it++ {
		if it == 4*len(j.out) {
			j.head = packMatT(j.w.WTE, j.cfg.VocabSize, C)
			continue
		}
		lw, pl := &j.w.Layers[it/4], &j.out[it/4]
		switch it % 4 {
		case 0:
			pl.attn = packMat(lw.AttnW, C, 3*C)
		case 1:
			pl.attnProj = packMat(lw.AttnProjW, C, C)
		case 2:
			pl.fc = packMat(lw.FCW, C, inner)
		case 3:
			pl.fcProj = packMat(lw.FCProjW, inner, C)
		}
	}
}

// packWeights packs every layer's Conv1D weights and the LM head on the pool's workers.
func packWeights(cfg Config, w *Weights, pool *workerPool) ([]packedLayer, packedMat) {
	j := &packJob{cfg: cfg, w: w, out: make([]packedLayer, len(w.Layers))}
	pool.run(j, 4*len(w.Layers)+1, 1)
	return j.out, j.head
}

// checkShapes verifies that every weight has the length the config implies, so the forward pass
// can slice without checks.
func checkShapes(cfg Config, w *Weights) error {
	C, V, T, L := cfg.NEmbd, cfg.VocabSize, cfg.NPositions, cfg.NLayer
	if C < 1 || V < 1 || T < 1 || L < 1 || cfg.NHead < 1 || C%cfg.NHead != 0 {
		return fmt.Errorf("config n_embd=%d n_head=%d n_layer=%d vocab=%d n_positions=%d is not a GPT-2 shape", C, cfg.NHead, L, V, T)
	}
	inner := innerDim(cfg)
	want := func(name string, got []float32, n int) error {
		if len(got) != n {
			return fmt.Errorf("weight %s has %d values, want %d", name, len(got), n)
		}
		return nil
	}
	errs := []error{want("wte", w.WTE, V*C), want("wpe", w.WPE, T*C), want("ln_f.weight", w.LNFW, C), want("ln_f.bias", w.LNFB, C)}
	if len(w.Layers) != L {
		errs = append(errs, fmt.Errorf("weights have %d layers, config %d", len(w.Layers), L))
	}
	for i := range w.Layers {
		l := &w.Layers[i]
		p := fmt.Sprintf("h.%d.", i)
		errs = append(errs, want(p+"ln_1.weight", l.LN1W, C), want(p+"ln_1.bias", l.LN1B, C),
			want(p+"attn.c_attn.weight", l.AttnW, C*3*C), want(p+"attn.c_attn.bias", l.AttnB, 3*C),
			want(p+"attn.c_proj.weight", l.AttnProjW, C*C), want(p+"attn.c_proj.bias", l.AttnProjB, C),
			want(p+"ln_2.weight", l.LN2W, C), want(p+"ln_2.bias", l.LN2B, C),
			want(p+"mlp.c_fc.weight", l.FCW, C*inner), want(p+"mlp.c_fc.bias", l.FCB, inner),
			want(p+"mlp.c_proj.weight", l.FCProjW, inner*C), want(p+"mlp.c_proj.bias", l.FCProjB, C))
	}
	for _, e := range errs {
		if e != nil {
			return e // the first is enough to name the problem
		}
	}
	return nil
}

func innerDim(cfg Config) int {
	if cfg.InnerDim > 0 {
		return cfg.InnerDim
	}
	return 4 * cfg.NEmbd
}

// Device implements Backend.
func (c *CPUBackend) Device() string {
	return fmt.Sprintf("cpu (%d threads, %s)", c.pool.threads, c.k.name)
}

// Layout returns the KV layout the backend's pool was allocated for.
func (c *CPUBackend) Layout() KVLayout { return c.layout }

// Close implements Backend: it stops the workers and drops the KV pool.
func (c *CPUBackend) Close() error {
	if c.pool != nil {
		c.pool.close()
		c.pool = nil
	}
	c.kv, c.packed, c.head = nil, nil, packedMat{}
	return nil
}

// stepScratchBytes is the most scratch memory one forward pass of Step may use, unless a single
// sequence needs more. Without a bound the scratch would follow the largest batch ever run: a
// prefill of the whole KV pool needs 5/n_layer times the pool itself on top of it.
const stepScratchBytes = 256 << 20

// Step implements Backend. A batch whose scratch would exceed c.stepBytes runs as several forward
// passes, each over as many consecutive sequences as fit (at least one); a sequence computes the
// same bits in any batch (cpu_kernels.go), so the tokens do not depend on the split. A set
// b.Stop returns ErrStopped at the next layer's start or middle. A sequence that asks for
// logprobs gets them from the row of logits it samples from (FillLogprobs); one that asks for
// prompt logprobs, from the rows of its other tokens, which its pass computes too.
func (c *CPUBackend) Step(b *Batch, next []int32) error {
	if len(next) < len(b.Seqs) {
		return fmt.Errorf("%w: next has room for %d tokens, the batch has %d sequences", ErrBadBatch, len(next), len(b.Seqs))
	}
	lp, plp, err := b.asks()
	if err != nil {
		return err
	}
	set := lastRows
	if plp {
		set = promptRows
	}
	end := c.passEnd(b.Seqs, 0)
	if end < len(b.Seqs) {
		// Checked whole first: a bad sequence fails the step before any pass writes KV entries.
		for i := range b.Seqs {
			if err := c.checkSeq(i, &b.Seqs[i]); err != nil {
				return err
			}
		}
	}
	for lo := 0; ; lo, end = end, c.passEnd(b.Seqs, end) {
		part := b
		if end-lo < len(b.Seqs) {
			part = &c.part
			part.Seqs, part.Stop = b.Seqs[lo:end], b.Stop
		}
		err := c.forward(part, set)
		if err == nil {
			c.samp.b, c.samp.next = part, next[lo:end]
			if lp {
				c.samp.lp = b.Logprobs[lo:end]
			}
			c.pool.run(&c.samp, end-lo, 1)
			c.samp.b, c.samp.next, c.samp.lp = nil, nil, nil
			if c.rows > end-lo {
				err = c.fillPrompt(part, b.PromptLogprobs[lo:end])
			}
		}
		c.part.Seqs, c.part.Stop = nil, nil // the caller's are not kept
		if err != nil || end == len(b.Seqs) {
			return err
		}
	}
}

// passEnd returns the end of the forward pass that starts at seqs[lo]: the most sequences from
// there whose scratch (see grow) fits c.stepBytes, and at least one. A sequence has a row of
// logits; one that asks for prompt logprobs also a norm row per other token, and the pass a
// chunk of promptChunk rows of logits for them (fillPrompt).
func (c *CPUBackend) passEnd(seqs []SeqStep, lo int) int {
	perTok := 4 * (6*c.cfg.NEmbd + innerDim(c.cfg) + 2)
	perRow := 4 * (c.cfg.NEmbd + c.cfg.VocabSize + 1)
	perPrompt := 4 * (c.cfg.NEmbd + 1) // a prompt row's norm output; its logits are a chunk's
	used, end, asks := 0, lo, false
	for end < len(seqs) {
		s := &seqs[end]
		used += len(s.Tokens)*perTok + perRow
		if s.PromptLogprobs && len(s.Tokens) > 1 {
			used += (len(s.Tokens) - 1) * perPrompt
			if !asks {
				asks, used = true, used+promptChunk*4*c.cfg.VocabSize
			}
		}
		if used > c.stepBytes && end > lo {
			break
		}
		end++
	}
	return end
}

// promptChunk is how many prompt rows' logits a pass holds at once: a long prompt's are computed
// and filled chunk by chunk, so that they never take more than promptChunk rows of V floats.
const promptChunk = 64

// fillPrompt fills out[i][j] (out parallel to part.Seqs) for every row of the pass past its
// sequences' last tokens (promptRows): the LM head over promptChunk rows at a time into the
// logits past the sequences' rows, then a row per item over the pool (a few passes over V). A
// set Stop ends it between chunks with ErrStopped.
func (c *CPUBackend) fillPrompt(part *Batch, out [][]TokenLogprobs) error {
	B, C, V := len(part.Seqs), c.cfg.NEmbd, c.cfg.VocabSize
	j := &c.prompt
	j.b, j.out = part, out
	defer func() { j.b, j.out = nil, nil }()
	for lo := B; lo < c.rows; lo += promptChunk {
		if part.stopped() {
			return ErrStopped
		}
		n := min(promptChunk, c.rows-lo)
		c.matmul(c.logits[B*V:(B+n)*V], c.xf[lo*C:(lo+n)*C], &c.head, nil, n, epiStore)
		j.first = lo
		c.pool.run(j, n, 1)
	}
	return nil
}

// Logits runs b like Step (writing its KV entries) but returns logits instead of sampling: of
// every token of every sequence in batch order when all is set, else of each sequence's last
// token. The slices are fresh copies (for tests and tools; Step allocates nothing).
func (c *CPUBackend) Logits(b *Batch, all bool) ([][]float32, error) {
	set := lastRows
	if all {
		set = allRows
	}
	if err := c.forward(b, set); err != nil {
		return nil, err
	}
	V := c.cfg.VocabSize
	out := make([][]float32, c.rows)
	for r := range out {
		out[r] = append([]float32(nil), c.logits[r*V:(r+1)*V]...)
	}
	return out, nil
}
