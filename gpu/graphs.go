//go:build cgo

package gpu

import (
	"fmt"
	"time"

	"rosetop/gpu/cu"
)

// CUDA graphs of whole steps. A decode step (a token per sequence) runs from its batch bucket's
// graph, captured on first use (or in Open with CaptureAhead): the metadata upload, the forward
// pass and the sampler, which writes the ids straight into pinned host memory, so the host only
// fills the metadata, launches and waits. Padded rows are scratch rows (fill).
//
// A step with more tokens than sequences (a prefill, or a mixed step: new prompts beside the
// running sequences' next tokens) enqueues about a hundred kernels and GEMMs one by one, which
// costs the host about as long as the GPU's work. Its shape (token rows, sequences, sampler)
// fixes every launch, the rest is metadata as in a decode graph; so a shape met a second time is
// captured and replayed from then on. Shapes met once stay eager (a one-off prompt length would
// pay a capture for nothing), and Prewarm captures those too, for a benchmark whose steady runs
// repeat its warmup's shapes. At most maxStepGraphs are kept: the least recently used goes.

// graphKey names a decode step's graph: its batch bucket, its sampler, and for a step queued
// ahead the pinned buffer its sampler writes (ahead.go; 0 for the others).
type graphKey struct {
	bucket, out int
	greedy      bool
}

// decodeGraph pads the step to its bucket and replays (capturing first if needed) its graph.
func (s *state) decodeGraph(in *Step, next []int32, logits []float32, greedy bool) error {
	B := len(in.SeqLens)
	bucket := bucketFor(s.buckets, B)
	s.fill(in, 0, B, 0, bucket)
	g, err := s.graphFor(bucket, greedy)
	if err != nil {
		return err
	}
	if err = s.ctx.Replay(g); err != nil {
		return err
	}
	return s.collect(B, next, logits, in.LogitRows)
}

// graphFor returns the bucket's graph for the sampler, capturing it on first use. Before
// capturing, the same step runs once eagerly so cuBLAS picks and loads its kernels outside the
// capture; both write the same values to the same KV slots, so the repeat is harmless.
func (s *state) graphFor(bucket int, greedy bool) (cu.Graph, error) {
	key := graphKey{bucket: bucket, greedy: greedy}
	if g, ok := s.graphs[key]; ok {
		return g, nil
	}
	if err := s.ensureWarm(bucket, bucket); err != nil { // cuBLAS's first call, outside the capture
		return cu.Graph{}, err
	}
	t0 := time.Now()
	p, err := s.newPlan(bucket, bucket, greedy, graphStep, false)
	if err != nil {
		return cu.Graph{}, err
	}
	prog := s.build(&p)
	if err := s.run(prog); err != nil {
		return cu.Graph{}, err
	}
	if err := s.ctx.Sync(); err != nil {
		return cu.Graph{}, err
	}
	g, err := s.ctx.Capture(func() error { return s.run(prog) })
	if err != nil {
		return cu.Graph{}, fmt.Errorf("gpu: capturing the batch-%d decode graph: %w", bucket, err)
	}
	s.graphs[key] = g
	s.record("graph capture", fmt.Sprintf("batch %d%s", bucket, samplerName(greedy)), time.Since(t0))
	return g, nil
}

// captureAhead captures every bucket's graphs not captured yet, for both samplers (greedy and
// sampling), on scratch rows only (Options.CaptureAhead, Runner.Prewarm).
func (s *state) captureAhead() error {
	for _, b := range s.buckets {
		for _, greedy := range []bool{true, false} {
			if _, ok := s.graphs[graphKey{bucket: b, greedy: greedy}]; ok {
				continue
			}
			for i := 0; i < b; i++ {
				s.padRow(i, i)
			}
			if _, err := s.graphFor(b, greedy); err != nil {
				return err
			}
		}
	}
	return s.ctx.Sync()
}

// samplerName is how the ledger tells a step's graphs apart by sampler.
func samplerName(greedy bool) string {
	if greedy {
		return ""
	}
	return ", sampling"
}

const (
	maxStepGraphs = 32   // multi-token step graphs kept
	maxSeenShapes = 1024 // shapes remembered as met once; forgotten all together past it
)

// stepShape is a step's shape: what its plan and a multi-token step's graph depend on.
type stepShape struct {
	rows, seqs int
	greedy     bool // every row samples greedily
}

// stepGraphs is the runner's cache of multi-token step graphs (newStepGraphs). Owned by the
// worker goroutine.
type stepGraphs struct {
	seen   map[stepShape]bool // met once, eagerly, and not captured
	graphs map[stepShape]*stepGraph
	clock  uint64 // counts replays and captures, for least-recently-used eviction
}

func newStepGraphs() stepGraphs {
	return stepGraphs{seen: map[stepShape]bool{}, graphs: map[stepShape]*stepGraph{}}
}

type stepGraph struct {
	g    cu.Graph
	used uint64 // stepGraphs.clock at its last use
}

// runMulti enqueues a multi-token step of this shape whose metadata fill has written: from its
// graph when it has one or its shape is met a second time, else eagerly.
func (s *state) runMulti(shape stepShape) error {
	if !s.opt.Graphs {
		return s.eager(shape)
	}
	c := &s.multi
	sg, ok := c.graphs[shape]
	if !ok && !c.seen[shape] {
		if len(c.seen) >= maxSeenShapes {
			clear(c.seen)
		}
		c.seen[shape] = true
		return s.eager(shape)
	}
	if !ok {
		var err error
		if sg, err = s.captureMulti(shape); err != nil {
			return err
		}
	}
	c.clock++
	sg.used = c.clock
	return s.ctx.Replay(sg.g)
}

// captureMulti captures the graph of a shape (the metadata upload and the forward pass), making
// room first. The shape has run eagerly before, so cuBLAS has made its first calls for it.
func (s *state) captureMulti(shape stepShape) (*stepGraph, error) {
	c := &s.multi
	delete(c.seen, shape)
	if len(c.graphs) >= maxStepGraphs {
		var old stepShape
		var oldest *stepGraph
		for k, sg := range c.graphs {
			if oldest == nil || sg.used < oldest.used {
				old, oldest = k, sg
			}
		}
		delete(c.graphs, old)
		if err := s.ctx.DestroyGraph(oldest.g); err != nil {
			return nil, err
		}
	}
	t0 := time.Now()
	p, err := s.newPlan(shape.rows, shape.seqs, shape.greedy, eagerStep, false)
	if err != nil {
		return nil, err
	}
	prog := s.build(&p)
	g, err := s.ctx.Capture(func() error { return s.run(prog) })
	if err != nil {
		return nil, fmt.Errorf("gpu: capturing the graph of a step of %d tokens in %d sequences: %w", shape.rows, shape.seqs, err)
	}
	c.clock++
	sg := &stepGraph{g: g, used: c.clock}
	c.graphs[shape] = sg
	s.record("graph capture", fmt.Sprintf("%d tokens of %d sequences (prefill or mixed step)%s", shape.rows, shape.seqs,
		samplerName(shape.greedy)), time.Since(t0))
	return sg, nil
}

// captureSeen captures the multi-token shapes met once (Prewarm), as many as the cache keeps.
func (s *state) captureSeen() error {
	for shape := range s.multi.seen {
		if len(s.multi.graphs) >= maxStepGraphs {
			break
		}
		if _, err := s.captureMulti(shape); err != nil {
			return err
		}
	}
	return nil
}

// closeGraphs frees the decode and multi-token step graphs.
func (s *state) closeGraphs(keep func(error)) {
	for k, g := range s.graphs {
		keep(s.ctx.DestroyGraph(g))
		delete(s.graphs, k)
	}
	for k, sg := range s.multi.graphs {
		keep(s.ctx.DestroyGraph(sg.g))
		delete(s.multi.graphs, k)
	}
}
