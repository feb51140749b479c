//go:build cgo

package gpu

import (
	"fmt"
	"time"
)

// Graphs of multi-token steps. A step with more tokens than sequences (a prefill, or a mixed
// step: new prompts beside the running sequences' next tokens) enqueues ~90 kernels and cuBLAS
// calls one by one; the host's launches take as long as the GPU's work or longer (a decode-heavy
// job's first step, 64 prompts of 2 tokens: 0.67-0.98 ms eagerly against ~0.43 ms for a decode
// step's graph). Its shape (token rows, sequences, sampler) fixes every launch: the rest is
// metadata the graph's first kernel copies in, as in a decode graph. So a shape met a second time
// is captured and replayed from then on; shapes met once stay eager (a one-off prompt length
// would pay a capture for nothing), and Prewarm captures those too, for a benchmark whose steady
// runs repeat its warmup's shapes. At most maxStepGraphs are kept: the least recently used goes.

const (
	maxStepGraphs = 32   // multi-token step graphs kept
	maxSeenShapes = 1024 // shapes remembered as met once; forgotten all together past it
)

// stepShape names a multi-token step's graph.
type stepShape struct {
	rows, seqs int
	greedy     bool // the sampler (state.greedy)
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
	g    graphExec
	used uint64 // stepGraphs.clock at its last use
}

// runMulti enqueues a multi-token step of n token rows of nb sequences whose metadata fill has
// written: from its graph when it has one or its shape is met a second time, else eagerly.
func (s *state) runMulti(n, nb int) error {
	if !s.opt.Graphs || s.prof != nil || s.splitRows(n, nb) > 0 {
		return s.eager(n, nb)
	}
	c := &s.multi
	key := stepShape{rows: n, seqs: nb, greedy: s.greedy}
	sg, ok := c.graphs[key]
	if !ok && !c.seen[key] {
		if len(c.seen) >= maxSeenShapes {
			clear(c.seen)
		}
		c.seen[key] = true
		return s.eager(n, nb)
	}
	if !ok {
		var err error
		if sg, err = s.captureMulti(key); err != nil {
			return err
		}
	}
	c.clock++
	sg.used = c.clock
	return s.rt.replay(sg.g)
}

// eager enqueues the metadata upload and the forward pass of n rows, nb sequences.
func (s *state) eager(n, nb int) error {
	if err := s.upload(); err != nil {
		return err
	}
	return s.forward(n, nb)
}

// captureMulti captures the graph of shape key (the metadata upload and the forward pass), making
// room first. The shape has run eagerly before, so cuBLAS has made its first calls for it.
func (s *state) captureMulti(key stepShape) (*stepGraph, error) {
	c := &s.multi
	delete(c.seen, key)
	if len(c.graphs) >= maxStepGraphs {
		var old stepShape
		var oldest *stepGraph
		for k, sg := range c.graphs {
			if oldest == nil || sg.used < oldest.used {
				old, oldest = k, sg
			}
		}
		delete(c.graphs, old)
		if err := s.rt.destroyGraph(oldest.g); err != nil {
			return nil, err
		}
	}
	t0 := time.Now()
	keep := s.greedy
	s.greedy = key.greedy
	g, err := s.rt.capture(func() error { return s.eager(key.rows, key.seqs) })
	s.greedy = keep
	if err != nil {
		return nil, fmt.Errorf("gpu: capturing the graph of a step of %d tokens in %d sequences: %w", key.rows, key.seqs, err)
	}
	c.clock++
	sg := &stepGraph{g: g, used: c.clock}
	c.graphs[key] = sg
	s.record("graph capture", fmt.Sprintf("%d tokens of %d sequences (prefill or mixed step)%s", key.rows, key.seqs, samplerName(key.greedy)), time.Since(t0))
	return sg, nil
}

// captureSeen captures the multi-token shapes met once (Prewarm), as many as the cache keeps.
func (s *state) captureSeen() error {
	for key := range s.multi.seen {
		if len(s.multi.graphs) >= maxStepGraphs {
			break
		}
		if _, err := s.captureMulti(key); err != nil {
			return err
		}
	}
	return nil
}

// closeMulti frees the multi-token step graphs.
func (s *state) closeMulti(keep func(error)) {
	for k, sg := range s.multi.graphs {
		keep(s.rt.destroyGraph(sg.g))
		delete(s.multi.graphs, k)
	}
}
