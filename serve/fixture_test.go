package serve

import (
	"context"
	"fmt"
	"io"
	"slices"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"rosetop/engine"
	"rosetop/sched"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// testEngine is the Engine of these tests: the real scheduler over the CPU engine on the embedded
// tiny model, with a dispatcher that hands each request's events to its stream (what main's
// adapter over a bench.Session does). With paused set, the scheduler loop starts only at release:
// submitted requests stay queued.
type testEngine struct {
	t       testing.TB
	model   *engine.Model
	eng     *engine.Engine
	s       *sched.Scheduler
	m       Model
	metrics *Metrics // fed every step when set

	cancel context.CancelFunc
	wg     sync.WaitGroup // the loop and the dispatcher
	start  chan struct{}  // closed by release: the loop may run

	mu        sync.Mutex // guards the fields below
	cond      *sync.Cond // on mu: a request was submitted, cancelled or finished, or a step ran
	streams   map[sched.RequestID]*testStream
	subs      []*testStream // every request's stream, in submit order (requests)
	submitted int
	finished  int
	last      sched.Snapshot // the latest step's
	cancels   int            // Stream.Cancel calls
	steps     int            // engine steps dispatched
	records   []*sched.Record
	closed    bool
	held      bool // the dispatcher waits: the loop stops within a step
	holdAt    int  // engineOpts.holdAt; read-only
	noStop    bool // engineOpts.ignoreStop; read-only
}

type engineOpts struct {
	maxBatch, maxSeqLen int
	paused              bool
	metrics             *Metrics
	script              func(pos int) int32 // a scripted model instead of the CPU engine: the token at each position
	holdAt              int                 // hold the dispatcher (see hold) once this many steps have run; 0: never
	ignoreStop          bool                // submit requests without their sched.Request.Stop: an engine that does not run it
}

func newTestEngine(t testing.TB, o engineOpts) *testEngine {
	t.Helper()
	model, err := engine.LoadModel(context.Background(), "", engine.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	e, err := engine.New(model, engine.Options{Device: "cpu", Paged: true, MaxBatch: o.maxBatch, MaxSeqLen: o.maxSeqLen})
	if err != nil {
		t.Fatal(err)
	}
	var backend sched.Backend = e.Backend
	if o.script != nil {
		backend = scriptBackend(o.script)
	}
	tok := model.Tokenizer
	s, err := sched.New(sched.Options{Backend: backend, Layout: e.Layout, PrefixCache: true, MaxSeqLen: e.MaxSeqLen(),
		EOS: tok.EOS(), Tokenizer: tok, Config: sched.Config{MaxBatch: o.maxBatch, PrefillMaxBatch: o.maxBatch, Policy: sched.Mixed},
		BatchLimit: o.maxBatch})
	if err != nil {
		t.Fatal(err)
	}
	te := &testEngine{t: t, model: model, eng: e, s: s, metrics: o.metrics, holdAt: o.holdAt, noStop: o.ignoreStop, streams: map[sched.RequestID]*testStream{},
		start: make(chan struct{}),
		m: Model{ID: "tiny-gpt2", MaxSeqLen: o.maxSeqLen, VocabSize: min(tok.VocabSize(), model.Config.VocabSize),
			Tokenizer: tok, EOS: tok.EOS(), Created: time.Unix(1700000000, 0)}}
	te.cond = sync.NewCond(&te.mu)
	if !o.paused {
		close(te.start)
	}
	ctx, cancel := context.WithCancel(context.Background())
	te.cancel = cancel
	out := make(chan sched.StepOutput) // unbuffered: hold stops the loop within a step
	te.wg.Add(2)
	go func() {
		defer te.wg.Done()
		defer close(out)
		select {
		case <-te.start:
		case <-ctx.Done():
			return
		}
		s.Run(ctx, out)
	}()
	go func() {
		defer te.wg.Done()
		for o := range out {
			te.dispatch(&o)
		}
	}()
	t.Cleanup(te.close)
	return te
}

// release starts a paused engine's loop.
func (te *testEngine) release() { close(te.start) }

// hold stops the dispatcher before its next step: the scheduler loop, blocked on its output
// channel, stops within a step. resume lets both go on.
func (te *testEngine) hold() { te.setHeld(true) }

func (te *testEngine) resume() { te.setHeld(false) }

func (te *testEngine) setHeld(h bool) {
	te.mu.Lock()
	te.held = h
	te.cond.Broadcast()
	te.mu.Unlock()
}

func (te *testEngine) close() {
	te.resume()
	te.cancel()
	te.wg.Wait()
	te.mu.Lock()
	te.closed = true
	for _, st := range te.streams {
		st.wake()
	}
	te.mu.Unlock()
	te.s.Close()
	te.eng.Close()
	te.model.Close()
}

// dispatch hands a step's events to their streams.
func (te *testEngine) dispatch(o *sched.StepOutput) {
	if te.metrics != nil {
		te.metrics.ObserveStep(o)
	}
	te.mu.Lock()
	defer te.mu.Unlock()
	for te.held {
		te.cond.Wait()
	}
	te.last = o.Snapshot
	if o.Snapshot.Kind != sched.StepIdle {
		te.steps++
		te.held = te.held || te.steps == te.holdAt
	}
	te.cond.Broadcast()
	for _, e := range o.Events {
		st := te.streams[e.ID]
		if st == nil {
			te.t.Errorf("an event for request %d, which has no stream", e.ID)
			continue
		}
		st.events = append(st.events, e)
		if e.Kind == sched.EventTokens {
			st.admitted = true
			st.seen = append(st.seen, e)
		} else {
			delete(te.streams, e.ID)
			te.finished++
			te.records = append(te.records, e.Record)
			te.cond.Broadcast()
		}
		st.wake()
	}
}

func (te *testEngine) Submit(ctx context.Context, r sched.Request) (Stream, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if te.noStop {
		r.Stop = nil
	}
	te.mu.Lock() // held across Submit: the dispatcher cannot see the id before its stream exists
	defer te.mu.Unlock()
	id, err := te.s.Submit(r)
	if err != nil {
		return nil, err
	}
	st := &testStream{te: te, id: id, req: r, notify: make(chan struct{}, 1)}
	te.streams[id] = st
	te.subs = append(te.subs, st)
	te.submitted++
	te.cond.Broadcast()
	return st, nil
}

func (te *testEngine) Waiting() int {
	te.mu.Lock()
	defer te.mu.Unlock()
	n := 0
	for _, st := range te.streams {
		if !st.admitted {
			n++
		}
	}
	return n
}

func (te *testEngine) Model() Model { return te.m }

// waitIdle waits until every submitted request has finished and returns the snapshot of the step
// that finished the last one and the records so far.
func (te *testEngine) waitIdle() (sched.Snapshot, []*sched.Record) {
	te.mu.Lock()
	defer te.mu.Unlock()
	for te.finished < te.submitted {
		te.cond.Wait()
	}
	return te.last, append([]*sched.Record(nil), te.records...)
}

// submission is a submitted request and the token events dispatched to it so far.
type submission struct {
	req    sched.Request
	events []sched.Event
}

// requests returns the requests submitted so far, in submit order, from the from-th on.
func (te *testEngine) requests(from int) []submission {
	te.mu.Lock()
	defer te.mu.Unlock()
	out := make([]submission, 0, len(te.subs)-from)
	for _, st := range te.subs[from:] {
		out = append(out, submission{req: st.req, events: slices.Clone(st.seen)})
	}
	return out
}

// counts returns the Stream.Cancel calls and the engine steps so far.
func (te *testEngine) counts() (cancels, steps int) {
	te.mu.Lock()
	defer te.mu.Unlock()
	return te.cancels, te.steps
}

// waitFor waits until ok holds (called under te.mu after every submission, step and cancel).
func (te *testEngine) waitFor(ok func() bool) {
	te.mu.Lock()
	defer te.mu.Unlock()
	for !ok() {
		te.cond.Wait()
	}
}

// testStream is one request's events, buffered without bound (a request has at most max tokens).
type testStream struct {
	te       *testEngine
	id       sched.RequestID
	req      sched.Request // as submitted (Stop dropped with ignoreStop)
	seen     []sched.Event // guarded by te.mu: every token event dispatched to it
	notify   chan struct{} // capacity 1: events arrived
	events   []sched.Event // guarded by te.mu
	admitted bool          // guarded by te.mu: a token came
	ended    bool          // guarded by te.mu: the finished event was taken
}

func (st *testStream) wake() {
	select {
	case st.notify <- struct{}{}:
	default:
	}
}

func (st *testStream) ID() sched.RequestID { return st.id }

func (st *testStream) Cancel() {
	st.te.s.Cancel(st.id)
	st.te.mu.Lock()
	st.te.cancels++
	st.te.cond.Broadcast()
	st.te.mu.Unlock()
}

// Stop ends the request as finished on a stop string (sched.Scheduler.Stopped); it counts as a
// cancel in counts.
func (st *testStream) Stop() {
	st.te.s.Stopped(st.id)
	st.te.mu.Lock()
	st.te.cancels++
	st.te.cond.Broadcast()
	st.te.mu.Unlock()
}

func (st *testStream) Next(ctx context.Context) (sched.Event, error) {
	for {
		st.te.mu.Lock()
		switch {
		case len(st.events) > 0:
			e := st.events[0]
			st.events = st.events[1:]
			st.ended = e.Kind == sched.EventFinished
			st.te.mu.Unlock()
			return e, nil
		case st.ended:
			st.te.mu.Unlock()
			return sched.Event{}, io.EOF
		case st.te.closed:
			st.te.mu.Unlock()
			return sched.Event{}, fmt.Errorf("%w: test engine closed", sched.ErrClosed)
		}
		st.te.mu.Unlock()
		select {
		case <-st.notify:
		case <-ctx.Done():
			return sched.Event{}, ctx.Err()
		}
	}
}

// scriptBackend is a model whose next token depends only on its position: for tests of what the
// real scheduler does with tokens the tiny model never samples (EOS).
type scriptBackend func(pos int) int32

func (f scriptBackend) Step(b *engine.Batch, next []int32) error {
	for i, s := range b.Seqs {
		next[i] = f(s.Start + len(s.Tokens))
	}
	return nil
}
