package engine

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
)

// ErrBadPrompt is wrapped by Generate's errors about its arguments.
var ErrBadPrompt = errors.New("bad generation request")

// MaxSeqLen is the longest sequence (prompt + output) one sequence can reach on this engine: the
// model's n_positions, or the KV pool's positions when fewer. (A paged pool holds whole blocks,
// so a sequence alone can grow past Options.MaxSeqLen up to the pool's size.)
func (e *Engine) MaxSeqLen() int {
	return min(e.Model.Config.NPositions, e.Layout.Tokens())
}

// Generate runs one sequence to completion outside any scheduler (for `rosetop generate`): a
// prefill of prompt, then one decode step per new token. It returns the new tokens, calling
// onToken (when not nil) with each as soon as it is sampled.
//
// It stops after maxNew tokens, after the EOS token when stopOnEOS (the EOS is returned, as
// Hugging Face's generate does), or — like Hugging Face capping max_length at n_positions — when
// the sequence fills MaxSeqLen positions, returning fewer than maxNew tokens without an error.
// The sequence uses KV blocks 0..n-1, valid in both layouts: do not call it while a scheduler is
// using the same engine. Cancelling ctx stops it with ctx's error and the tokens so far: between
// steps, and inside a step on a backend that honours Batch.Stop (the CPU's, between layers).
func (e *Engine) Generate(ctx context.Context, prompt []int32, maxNew int, sp SamplingParams, stopOnEOS bool, onToken func(id int32)) ([]int32, error) {
	cfg := e.Model.Config
	switch {
	case len(prompt) == 0:
		return nil, fmt.Errorf("%w: prompt is empty", ErrBadPrompt)
	case len(prompt) > cfg.NPositions:
		return nil, fmt.Errorf("%w: prompt is %d tokens; the model's n_positions is %d", ErrBadPrompt, len(prompt), cfg.NPositions)
	case len(prompt) > e.MaxSeqLen():
		return nil, fmt.Errorf("%w: prompt is %d tokens; the engine holds at most %d positions per sequence", ErrBadPrompt, len(prompt), e.MaxSeqLen())
	case maxNew <= 0:
		return nil, fmt.Errorf("%w: max new tokens is %d, want >= 1", ErrBadPrompt, maxNew)
	}
	limit := e.MaxSeqLen()
	maxNew = min(maxNew, limit-len(prompt))
	blocks := make([]int32, (limit+e.Layout.BlockSize-1)/e.Layout.BlockSize)
	for i := range blocks {
		blocks[i] = int32(i)
	}
	out := make([]int32, 0, maxNew)
	var stop atomic.Bool
	defer context.AfterFunc(ctx, func() { stop.Store(true) })()
	step := Batch{Seqs: []SeqStep{{Tokens: prompt, Start: 0, Blocks: blocks, Sample: sp}}, Stop: &stop}
	next, last := make([]int32, 1), make([]int32, 1)
	for len(out) < maxNew {
		if err := ctx.Err(); err != nil {
			return out, err
		}
		if err := e.Backend.Step(&step, next); errors.Is(err, ErrStopped) {
			return out, ctx.Err()
		} else if err != nil {
			return out, fmt.Errorf("generate step at position %d: %w", step.Seqs[0].Start, err)
		}
		tok := next[0]
		out = append(out, tok)
		if onToken != nil {
			onToken(tok)
		}
		if stopOnEOS && tok == cfg.EOSTokenID {
			break
		}
		s := &step.Seqs[0]
		s.Start += len(s.Tokens)
		last[0] = tok
		s.Tokens = last
	}
	return out, nil
}
