//go:build cgo

package gpu

import "slices"

// Steps ahead. Between two decode steps the host has work of its own: the caller reads the
// sampled ids, detokenizes, emits events and builds the next batch (about 20 us a step in
// rosetop's scheduler on the GPU machine, bench/RESULTS.md), and the GPU idles meanwhile. When
// the caller knows that the next step decodes the same sequences again (StepAhead), the runner
// starts that step itself as soon as this one is done: the same sequences one position further,
// their tokens the ids just sampled, the same block tables and sampling parameters. The next
// Step that asks for exactly that batch then only waits for it; any other batch waits for it to
// finish and runs as usual.
//
// A predicted step writes each sequence's key and value at position Start+1, only when that
// position is in the block that holds Start (so it writes only into blocks the sequences held
// when the caller asked, and never into a full block, which is the only kind a prefix cache
// shares). A batch that differs (a sequence ended or was preempted) overwrites those slots or
// leaves them past the end of what its sequences computed: nothing reads them before a step that
// is asked for writes them.

// predicted is the predicted step in flight. Owned by the worker goroutine, like the rest of state.
type predicted struct {
	on   bool // launched and not yet synchronized
	pred Step // what it runs (slices reused from step to step)
	hits int  // predicted steps that were asked for (tests)
}

// matches reports whether in is exactly the predicted step.
func (a *predicted) matches(in *Step) bool {
	p := &a.pred
	return slices.Equal(in.Tokens, p.Tokens) && slices.Equal(in.SeqLens, p.SeqLens) &&
		slices.Equal(in.Start, p.Start) && slices.Equal(in.Tables, p.Tables) &&
		slices.Equal(in.Temperature, p.Temperature) && slices.Equal(in.TopK, p.TopK) &&
		slices.Equal(in.TopP, p.TopP) && slices.Equal(in.Seed, p.Seed)
}

// takeAhead is called before a step runs: it waits for a predicted step in flight and reports
// whether it was in (then next holds its ids). Either way no work is in flight afterwards.
func (s *state) takeAhead(in *Step, next []int32, logits []float32) (bool, error) {
	if !s.pred.on {
		return false, nil
	}
	s.pred.on = false
	if err := s.rt.sync(); err != nil {
		return false, err
	}
	if logits != nil || !s.pred.matches(in) {
		return false, nil
	}
	B := len(in.SeqLens)
	copy(next[:B], s.meta.next[:B])
	s.pred.hits++
	return true, nil
}

// launchAhead starts the step that follows in (whose sampled ids are in next) when it can be
// predicted: a decode step on graphs whose every next position is in the block of its current
// one and within MaxSeqLen. It does not wait for it.
func (s *state) launchAhead(in *Step, next []int32) error {
	B, bs := len(in.SeqLens), int32(s.kv.bs)
	if !s.opt.Graphs || len(in.Tokens) != B || s.prof != nil {
		return nil
	}
	for _, st := range in.Start {
		if (st+1)/bs != st/bs || int(st)+2 > s.opt.MaxSeqLen {
			return nil
		}
	}
	g, ok := s.graphs[bucketFor(s.buckets, B)]
	if !ok {
		return nil
	}
	p := &s.pred.pred
	p.Tokens = append(p.Tokens[:0], next[:B]...)
	p.SeqLens = append(p.SeqLens[:0], in.SeqLens...)
	p.Start = p.Start[:0]
	for _, st := range in.Start {
		p.Start = append(p.Start, st+1)
	}
	p.Tables = append(p.Tables[:0], in.Tables...)
	p.Temperature = append(p.Temperature[:0], in.Temperature...)
	p.TopK = append(p.TopK[:0], in.TopK...)
	p.TopP = append(p.TopP[:0], in.TopP...)
	p.Seed = append(p.Seed[:0], in.Seed...)
	s.fill(p, 0, B, 0, bucketFor(s.buckets, B))
	if err := s.rt.replay(g); err != nil {
		return err
	}
	s.pred.on = true
	return nil
}
