//go:build cgo

package gpu

import (
	"fmt"
	"slices"
	"time"

	"rosetop/gpu/cu"
)

// Steps ahead. Between two decode steps the host has work of its own: the caller reads the
// sampled ids, detokenizes, emits events and builds the next batch, and the runner then fills
// the metadata and launches the graph; the GPU idles meanwhile. When the caller knows that the next
// steps decode the same sequences again (Step.Repeats), the runner keeps up to maxAhead of
// them queued on the stream: each is the step before it one position further, fed the ids that
// step sampled, with the same block tables and sampling parameters. It runs as a graph of its
// own, without the metadata upload: the sampler of every decode graph (plain or predicted) moves
// the device metadata on to the step after it, its tokens included (sample.cu advance), so the
// host is never on the path between two steps. A Step that asks for exactly the queued step
// only waits for it; any other batch waits for everything queued and runs as usual.
//
// A predicted step writes each sequence's key and value one or two positions past the step the
// caller asked for, only into blocks the sequences held when the caller asked (Step.Held; the
// block of the step's position when the caller does not say) and never into a full block (the
// only kind a prefix cache shares): the scheduler hands a sequence its next block a few steps
// early when the pool has one, so the steps queued ahead go on across block boundaries (the
// device's tables are refreshed before a step that needs the new entries, refreshTables). A
// batch that differs (a sequence ended or was preempted) overwrites those slots or leaves them
// past the end of what its sequences computed: nothing reads them before a step that is asked
// for writes them.

// maxAhead is the most predicted steps on the stream at once (Runner.MaxAhead).
const maxAhead = 2

// queuedStep is one predicted step on the stream.
type queuedStep struct {
	st  Step // what it runs; st.Tokens is known (fed) once the step before it has been read
	fed bool
	out int // the pinned buffer its sampler writes: 0 meta.next, 1 meta.nextAlt
}

// predicted is the runner's queue of predicted steps. Owned by the worker goroutine, like the
// rest of state.
type predicted struct {
	q       [maxAhead]queuedStep // q[0] runs first
	n       int
	lastOut int                   // the buffer the newest step on the stream (queued or not) wrote
	ev      [2]cu.Event           // recorded after the step writing buffer 0, 1
	graphs  map[graphKey]cu.Graph // the predicted-step graphs, by bucket, sampler and the buffer out they write
	hits    int                   // predicted steps asked for (Stats.Queued)
}

// matches reports whether in is exactly queued step q (whose tokens are known): the same
// tokens, positions and sampling, and the same blocks where its positions are (a table may have
// gained blocks past them since q was queued). Tables rows are width entries of bs positions.
func (q *queuedStep) matches(in *Step, width, bs int) bool {
	p := &q.st
	if !q.fed || !slices.Equal(in.Tokens, p.Tokens) || !slices.Equal(in.SeqLens, p.SeqLens) ||
		!slices.Equal(in.Start, p.Start) || !slices.Equal(in.Temperature, p.Temperature) ||
		!slices.Equal(in.TopK, p.TopK) || !slices.Equal(in.TopP, p.TopP) || !slices.Equal(in.Seed, p.Seed) {
		return false
	}
	for i, st := range in.Start {
		used := int(st+in.SeqLens[i]-1)/bs + 1
		if !slices.Equal(in.Tables[i*width:i*width+used], p.Tables[i*width:i*width+used]) {
			return false
		}
	}
	return true
}

// predict makes q the step after last: in's sequences (last is in or the step queued before q),
// one position further, with in's tables and sampling. fed: q's tokens are known, in's ids in
// next (the step before is in); otherwise they are set when that step is read (takeAhead). Its
// sampler writes pinned buffer out.
func (q *queuedStep) predict(in, last *Step, next []int32, fed bool, out int) {
	st := &q.st
	st.SeqLens = append(st.SeqLens[:0], in.SeqLens...)
	st.Start = st.Start[:0]
	for _, p := range last.Start {
		st.Start = append(st.Start, p+1)
	}
	st.Tables = append(st.Tables[:0], in.Tables...)
	st.Held = append(st.Held[:0], in.Held...)
	st.Temperature = append(st.Temperature[:0], in.Temperature...)
	st.TopK = append(st.TopK[:0], in.TopK...)
	st.TopP = append(st.TopP[:0], in.TopP...)
	st.Seed = append(st.Seed[:0], in.Seed...)
	if q.fed = fed; fed {
		st.Tokens = append(st.Tokens[:0], next[:len(in.SeqLens)]...)
	}
	q.out = out
}

// outBuf is pinned buffer i of the sampled ids.
func (s *state) outBuf(i int) []int32 {
	if i == 0 {
		return s.meta.next
	}
	return s.meta.nextAlt
}

// takeAhead is called before a step runs. When in is the first queued step it waits for that
// step, writes its ids into next and reports true; otherwise it waits for everything queued,
// forgets it, and reports false (the step then runs as usual).
func (s *state) takeAhead(in *Step, next []int32, logits []float32) (bool, error) {
	p := &s.pred
	if p.n == 0 {
		p.lastOut = 0 // the step runs as usual: its sampler writes buffer 0
		return false, nil
	}
	if head := &p.q[0]; logits == nil && head.matches(in, s.kv.width, s.kv.bs) {
		if err := s.ctx.WaitEvent(p.ev[head.out]); err != nil {
			p.n = 0
			return false, err
		}
		B := len(in.SeqLens)
		copy(next[:B], s.outBuf(head.out)[:B])
		p.hits++
		head := p.q[0] // pop, keeping its slices for reuse
		copy(p.q[:], p.q[1:])
		p.q[maxAhead-1] = head
		if p.n--; p.n > 0 {
			p.q[0].st.Tokens = append(p.q[0].st.Tokens[:0], next[:B]...)
			p.q[0].fed = true
		}
		return true, nil
	}
	return false, s.dropAhead()
}

// dropAhead waits for the queued steps and forgets them: the next step runs as usual, its
// sampler writing buffer 0.
func (s *state) dropAhead() error {
	p := &s.pred
	queued := p.n > 0
	p.n, p.lastOut = 0, 0
	if !queued {
		return nil
	}
	return s.ctx.Sync()
}

// launchAhead queues predicted steps after in (whose ids are in next) until steps of them (at
// most maxAhead) are on the stream, when they can be predicted: decode steps on graphs, each
// position within MaxSeqLen and in a block the sequence holds (in.Held; without it, the block of
// in's position).
func (s *state) launchAhead(in *Step, next []int32, steps int) error {
	p := &s.pred
	B, bs := len(in.SeqLens), int32(s.kv.bs)
	if !s.opt.Graphs || len(in.Tokens) != B {
		return nil
	}
	bucket := bucketFor(s.buckets, B)
	for p.n < min(steps, maxAhead) {
		d := int32(p.n + 1) // positions past in's
		for i, st := range in.Start {
			blk := (st + d) / bs
			if int(st+d) >= s.opt.MaxSeqLen || blk != st/bs && (in.Held == nil || blk >= in.Held[i]) {
				return nil
			}
		}
		out := 1 - p.lastOut
		key := graphKey{bucket: bucket, out: out, greedy: greedyStep(in)}
		g, ok := p.graphs[key]
		if !ok {
			if p.n > 0 { // capture only with nothing in flight
				return nil
			}
			var err error
			if g, err = s.capturePredicted(key); err != nil {
				return err
			}
		}
		last := in
		if p.n > 0 {
			last = &p.q[p.n-1].st
		}
		p.q[p.n].predict(in, last, next, p.n == 0, out)
		if err := s.refreshTables(in.Tables); err != nil {
			return err
		}
		if err := s.ctx.Replay(g); err != nil {
			return err
		}
		if err := s.ctx.Record(p.ev[out]); err != nil {
			return err
		}
		p.lastOut = out
		p.n++
	}
	return nil
}

// refreshTables makes the device's block tables of a predicted step's rows those of tables where
// they differ from the last ones uploaded (a table gained blocks the steps move into): the pinned
// host copy, which mirrors the device's, takes them, and tables_refresh copies its table region
// and sets each row's slot again from the new tables, on the stream before the step. Only
// entries no queued step has used change, so a queued step reads the same blocks whether it runs
// before the copy or after, and a copy still queued may read the host rows old or new.
func (s *state) refreshTables(tables []int32) error {
	m := &s.meta
	if !s.opt.Paged || slices.Equal(m.tables[:len(tables)], tables) {
		return nil
	}
	copy(m.tables, tables)
	prog := &s.prog
	prog.reset()
	s.tablesRefresh(prog, len(tables)/s.kv.width)
	return s.run(prog)
}

// capturePredicted captures the predicted-step graph of key (its bucket, sampler and the buffer
// out its sampler writes): the forward pass alone, on the device metadata the step before's
// sampler moved on (sample.cu advance), from its first layer where that sampler also embedded the
// rows (stepPlan.embedded). The bucket's plain graph has run, so cuBLAS has made its first calls.
func (s *state) capturePredicted(key graphKey) (cu.Graph, error) {
	p, ctx := &s.pred, s.ctx
	for i := range p.ev {
		if p.ev[i].IsZero() {
			e, err := ctx.NewEvent(false)
			if err != nil {
				return cu.Graph{}, err
			}
			p.ev[i] = e
		}
	}
	t0 := time.Now()
	plan, err := s.newPlan(key.bucket, key.bucket, key.greedy, predictedStep, key.out == 1)
	if err != nil {
		return cu.Graph{}, err
	}
	prog := s.build(&plan)
	g, err := ctx.Capture(func() error { return s.run(prog) })
	if err != nil {
		return cu.Graph{}, fmt.Errorf("gpu: capturing the batch-%d predicted-step graph: %w", key.bucket, err)
	}
	if p.graphs == nil {
		p.graphs = map[graphKey]cu.Graph{}
	}
	p.graphs[key] = g
	s.record("graph capture", fmt.Sprintf("batch %d, predicted step %d of 2%s", key.bucket, key.out+1, samplerName(key.greedy)), time.Since(t0))
	return g, nil
}

// closeAhead waits for the queued steps and frees the predicted-step graphs and the events.
func (s *state) closeAhead(keep func(error)) {
	p, ctx := &s.pred, s.ctx
	if p.n > 0 {
		keep(ctx.Sync())
		p.n = 0
	}
	for k, g := range p.graphs {
		keep(ctx.DestroyGraph(g))
		delete(p.graphs, k)
	}
	for i := range p.ev {
		keep(ctx.DestroyEvent(p.ev[i]))
		p.ev[i] = cu.Event{}
	}
}
