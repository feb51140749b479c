package sched

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"rosetop/engine"
)

// fakeClock is a monotonic test clock: every reading ticks it by one microsecond (so every stamp
// is distinct and orderings are strict) unless it is still, and the fake backend advances it by
// each step's cost.
type fakeClock struct {
	ns    atomic.Int64
	still atomic.Bool // readings do not tick: only Advance moves it
}

func newFakeClock() *fakeClock {
	c := &fakeClock{}
	c.ns.Store(int64(time.Second))
	return c
}

func (c *fakeClock) Now() time.Duration {
	if c.still.Load() {
		return time.Duration(c.ns.Load())
	}
	return time.Duration(c.ns.Add(int64(time.Microsecond)))
}

func (c *fakeClock) Advance(d time.Duration) { c.ns.Add(int64(d)) }

// nextToken is the fake model: a deterministic function of the whole sequence so far, landing in
// printable ASCII so that the fake tokenizer's text is readable.
func nextToken(seq []int32) int32 {
	h := uint32(2166136261)
	for _, t := range seq {
		h = (h ^ uint32(t)) * 16777619
	}
	return int32(32 + h%95)
}

// reference is what request r must produce: the model run without any scheduler.
func reference(prompt []int32, r Request, eos int32, model func([]int32) int32) []int32 {
	seq := slices.Clone(prompt)
	var out []int32
	for len(out) < r.MaxNewTokens {
		t := model(seq)
		out = append(out, t)
		seq = append(seq, t)
		if r.StopOnEOS && t == eos && len(out) > r.MinNewTokens {
			break
		}
	}
	return out
}

var errFake = errors.New("fake engine failure")

// fakeBackend simulates the engine over a simulated KV pool: it writes each sequence's tokens into
// the blocks its table names and reads the prefix [0, Start) back from them, so a wrong block
// table, a bad prefix hit or a block shared while being written shows up as a wrong token. It
// checks every batch it gets and advances the fake clock by a cost per call and per token.
type fakeBackend struct {
	t     testing.TB
	clock *fakeClock
	bs    int
	model func([]int32) int32 // nil: nextToken
	fail  func(call int) bool // nil: never fails

	kv       map[int32][]int32     // block -> token at each offset, -1 when unwritten
	known    map[engine.SeqID]bool // sequences seen in a prefill
	calls    int                   // Step calls
	kinds    []StepKind            // per call: StepPrefill, StepDecode, or StepMixed (both, one call: Mixed)
	sizes    []int                 // batch size per call
	prefills []int                 // prefilled sequences per call
	admits   []int32               // first token (the request marker) of each prefilled sequence, in order
	lastLen  map[engine.SeqID]int  // positions each sequence has written
	errs     []string              // problems found, reported by the harness
}

func newFakeBackend(t testing.TB, clock *fakeClock, bs int) *fakeBackend {
	return &fakeBackend{t: t, clock: clock, bs: bs, kv: map[int32][]int32{},
		known: map[engine.SeqID]bool{}, lastLen: map[engine.SeqID]int{}}
}

func (f *fakeBackend) errorf(format string, args ...any) {
	f.errs = append(f.errs, fmt.Sprintf("call %d: ", f.calls)+fmt.Sprintf(format, args...))
}

func (f *fakeBackend) block(b int32) []int32 {
	blk, ok := f.kv[b]
	if !ok {
		blk = slices.Repeat([]int32{-1}, f.bs)
		f.kv[b] = blk
	}
	return blk
}

func (f *fakeBackend) Step(b *engine.Batch, next []int32) error {
	f.calls++
	if len(next) != len(b.Seqs) || len(b.Seqs) == 0 {
		f.errorf("batch of %d sequences, next of %d", len(b.Seqs), len(next))
		return nil
	}
	prefills := 0
	for i, sq := range b.Seqs {
		if !f.known[sq.ID] {
			prefills++
		} else if prefills > 0 {
			f.errorf("decode sequence %d (seq %d) after a prefill sequence: want the decode rows first", i, sq.ID)
		}
	}
	kind := StepMixed
	switch prefills {
	case 0:
		kind = StepDecode
	case len(b.Seqs):
		kind = StepPrefill
	}
	f.kinds = append(f.kinds, kind)
	f.sizes = append(f.sizes, len(b.Seqs))
	f.prefills = append(f.prefills, prefills)
	if f.fail != nil && f.fail(f.calls) {
		return errFake
	}
	model := f.model
	if model == nil {
		model = nextToken
	}
	for i, sq := range b.Seqs {
		prefill := !f.known[sq.ID]
		if !prefill && (len(sq.Tokens) != 1 || sq.Start != f.lastLen[sq.ID]) {
			f.errorf("decode of seq %d: %d tokens at %d, want 1 at %d", sq.ID, len(sq.Tokens), sq.Start, f.lastLen[sq.ID])
		}
		end := sq.Start + len(sq.Tokens)
		if len(sq.Tokens) == 0 || len(sq.Blocks)*f.bs < end {
			f.errorf("seq %d: %d tokens at %d with %d blocks", sq.ID, len(sq.Tokens), sq.Start, len(sq.Blocks))
			continue
		}
		seq := make([]int32, 0, end)
		for p := range sq.Start {
			v := f.block(sq.Blocks[p/f.bs])[p%f.bs]
			if v < 0 {
				f.errorf("seq %d reads unwritten position %d", sq.ID, p)
			}
			seq = append(seq, v)
		}
		for j, tok := range sq.Tokens {
			p := sq.Start + j
			f.block(sq.Blocks[p/f.bs])[p%f.bs] = tok
			seq = append(seq, tok)
		}
		f.known[sq.ID] = true
		f.lastLen[sq.ID] = end
		if prefill {
			f.admits = append(f.admits, seq[0])
		}
		next[i] = model(seq)
	}
	f.clock.Advance(time.Millisecond + time.Duration(b.Tokens())*10*time.Microsecond)
	return nil
}

// noopBackend samples token 1 for everyone, at no cost: the scheduler's own overhead.
type noopBackend struct{}

func (noopBackend) Step(b *engine.Batch, next []int32) error {
	for i := range next {
		next[i] = 1
	}
	return nil
}

// byteTokenizer is a fake tokenizer: one token per byte, token id = byte value. A text listed in
// gates blocks Encode until its gate is closed, to control tokenize workers.
type byteTokenizer struct {
	mu    sync.Mutex
	gates map[string]chan struct{}
}

func (z *byteTokenizer) Encode(text string) []int32 {
	z.mu.Lock()
	g := z.gates[text]
	z.mu.Unlock()
	if g != nil {
		<-g
	}
	ids := make([]int32, len(text))
	for i := range len(text) {
		ids[i] = int32(text[i])
	}
	return ids
}

func (z *byteTokenizer) TokenBytes(id int32) []byte {
	if id < 0 || id > 255 {
		return nil
	}
	return []byte{byte(id)}
}

// harness drives a scheduler step by step and checks, after every step, the invariants that must
// hold whatever the workload.
type harness struct {
	t       *testing.T
	s       *Scheduler
	be      *fakeBackend
	clock   *fakeClock
	prompts map[RequestID][]int32
	reqs    map[RequestID]Request
	records map[RequestID]*Record
	order   []RequestID // submission order
	calls   int         // backend calls checked so far
	cached  int         // prompt tokens served by the prefix cache, over all steps
	// streamed is each request's token times as its token events told them (Event.At); first
	// is the Event.First of its first token event. Both are checked against the record.
	streamed map[RequestID][]time.Duration
	first    map[RequestID]Times
}

func newHarness(t *testing.T, o Options) *harness {
	t.Helper()
	clock := newFakeClock()
	be := newFakeBackend(t, clock, o.Layout.BlockSize)
	o.Backend = be
	if o.MaxSeqLen == 0 {
		o.MaxSeqLen = 1024
	}
	h := newHarnessOn(t, o, clock)
	h.be = be
	return h
}

// newHarnessOn is a harness over o.Backend (a real engine): it checks the events and records of
// every step, and nothing of the backend calls, which only the fake backend reports.
func newHarnessOn(t *testing.T, o Options, clock *fakeClock) *harness {
	t.Helper()
	o.Clock = clock
	s, err := New(o)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(s.Close)
	return &harness{t: t, s: s, clock: clock, prompts: map[RequestID][]int32{},
		reqs: map[RequestID]Request{}, records: map[RequestID]*Record{},
		streamed: map[RequestID][]time.Duration{}, first: map[RequestID]Times{}}
}

// prompt returns a prompt of n tokens whose first token is marker (an admission-order tag).
func prompt(marker int32, n int) []int32 {
	p := make([]int32, n)
	p[0] = marker
	for i := 1; i < n; i++ {
		p[i] = int32(100 + (int(marker)*7+i)%50)
	}
	return p
}

func (h *harness) submit(r Request) RequestID {
	h.t.Helper()
	id, err := h.s.Submit(r)
	if err != nil {
		h.t.Fatalf("Submit: %v", err)
	}
	h.prompts[id] = slices.Clone(r.Tokens)
	h.reqs[id] = r
	h.order = append(h.order, id)
	return id
}

// step runs one step and checks it.
func (h *harness) step() StepOutput {
	h.t.Helper()
	out, err := h.s.Step()
	if err != nil {
		h.t.Fatalf("Step: %v", err)
	}
	h.check(out)
	return out
}

func (h *harness) check(out StepOutput) {
	h.t.Helper()
	snap := out.Snapshot
	if h.be != nil {
		h.checkCalls(snap)
	}
	h.cached += snap.CachedTokens
	h.checkEvents(out)
}

// checkCalls asserts the fake backend's calls since the last check kept the step's limits and
// policy, and reports the problems the backend found in them.
func (h *harness) checkCalls(snap Snapshot) {
	h.t.Helper()
	for _, e := range h.be.errs {
		h.t.Error(e)
	}
	h.be.errs = nil
	cfg := snap.Config
	for i := h.calls; i < h.be.calls; i++ {
		if h.be.sizes[i] > cfg.MaxBatch || h.be.prefills[i] > cfg.PrefillMaxBatch {
			h.t.Errorf("step %d: %v batch of %d sequences, %d of them prefilled; limits %d and %d",
				snap.Step, h.be.kinds[i], h.be.sizes[i], h.be.prefills[i], cfg.MaxBatch, cfg.PrefillMaxBatch)
		}
		if (h.be.kinds[i] == StepMixed) != (cfg.Policy == Mixed && snap.Kind == StepMixed) {
			h.t.Errorf("step %d (%v, policy %v): a call of kind %v", snap.Step, snap.Kind, cfg.Policy, h.be.kinds[i])
		}
	}
	if snap.Kind == StepMixed && cfg.Policy == Mixed &&
		(h.be.calls-h.calls != 1 || snap.StepTime != snap.PrefillTime || snap.StepTime != snap.DecodeTime) {
		h.t.Errorf("step %d: a mixed step of %d calls, times %v (prefill %v, decode %v), want one call's in each",
			snap.Step, h.be.calls-h.calls, snap.StepTime, snap.PrefillTime, snap.DecodeTime)
	}
	h.calls = h.be.calls
}

// checkEvents asserts the step's limits, and events that tell each request's tokens, times and
// end exactly once.
func (h *harness) checkEvents(out StepOutput) {
	h.t.Helper()
	snap, cfg := out.Snapshot, out.Snapshot.Config
	if snap.Running > cfg.MaxBatch || snap.Admitted > cfg.PrefillMaxBatch || snap.KVUsed > snap.KVTotal {
		h.t.Errorf("step %d: running %d (max %d), admitted %d (max %d), KV %d/%d",
			snap.Step, snap.Running, cfg.MaxBatch, snap.Admitted, cfg.PrefillMaxBatch, snap.KVUsed, snap.KVTotal)
	}
	if cfg.PrefillMaxTokens > 0 && snap.Admitted > 1 && snap.PrefillTokens > cfg.PrefillMaxTokens {
		h.t.Errorf("step %d: %d prompt tokens run for %d admissions, over the budget of %d", snap.Step, snap.PrefillTokens, snap.Admitted, cfg.PrefillMaxTokens)
	}
	if snap.Running == 0 && snap.KVUsed != 0 {
		h.t.Errorf("step %d: nothing running but %d KV blocks in use", snap.Step, snap.KVUsed)
	}
	var ended []RequestID
	for _, e := range out.Events {
		if _, done := h.records[e.ID]; done {
			h.t.Errorf("step %d: event %v for request %d after its finished event", snap.Step, e.Kind, e.ID)
		}
		switch e.Kind {
		case EventTokens:
			h.checkTokenEvent(snap, e)
		case EventFinished:
			if e.Record == nil || e.Record.ID != e.ID {
				h.t.Fatalf("step %d: finished event without its record: %+v", snap.Step, e)
			}
			h.records[e.ID] = e.Record
			ended = append(ended, e.ID)
			h.checkTimes(e.Record)
			h.checkStreamedTimes(e.Record)
		}
	}
	if !slices.Equal(ended, out.Finished) {
		h.t.Errorf("step %d: Finished %v, finished events %v", snap.Step, out.Finished, ended)
	}
}

// checkTokenEvent asserts a token event carries one token sampled within the step, and
// Event.First exactly on a request's first token.
func (h *harness) checkTokenEvent(snap Snapshot, e Event) {
	h.t.Helper()
	prev := h.streamed[e.ID]
	if len(e.Tokens) != 1 || e.At <= 0 || e.At > snap.At || (len(prev) > 0 && e.At <= prev[len(prev)-1]) {
		h.t.Errorf("step %d: request %d: %d tokens at %v (snapshot at %v, previous token at %v)", snap.Step, e.ID, len(e.Tokens), e.At, snap.At, prev)
	}
	switch {
	case len(prev) == 0 && e.First == nil:
		h.t.Errorf("step %d: request %d: first token event without First", snap.Step, e.ID)
	case len(prev) == 0:
		f := *e.First
		if f.FirstToken != e.At || len(f.Tokens) != 1 || f.Tokens[0] != e.At || cap(f.Tokens) != 1 || f.Finished != 0 {
			h.t.Errorf("step %d: request %d: First %+v for a token at %v", snap.Step, e.ID, f, e.At)
		}
		h.first[e.ID] = f // a copy: a later change by the scheduler would show at the record check
	case e.First != nil:
		h.t.Errorf("step %d: request %d: First on token %d", snap.Step, e.ID, len(prev)+1)
	}
	h.streamed[e.ID] = append(prev, e.At)
}

// checkStreamedTimes asserts the token events told the record's timestamps exactly: every token
// time, and the early First stamps.
func (h *harness) checkStreamedTimes(r *Record) {
	h.t.Helper()
	tm := r.Times
	if !slices.Equal(h.streamed[r.ID], tm.Tokens) {
		h.t.Errorf("request %d: token events at %v, record token times %v", r.ID, h.streamed[r.ID], tm.Tokens)
	}
	f, ok := h.first[r.ID]
	if !ok {
		return // no token was ever sampled
	}
	if f.SubmitStart != tm.SubmitStart || f.SubmitEnd != tm.SubmitEnd || f.Tokenized != tm.Tokenized ||
		f.Admitted != tm.Admitted || f.FirstToken != tm.FirstToken || f.Tokens[0] != tm.Tokens[0] {
		h.t.Errorf("request %d: First %+v differs from the record's %+v", r.ID, f, tm)
	}
}

// checkTimes asserts the record's timestamps are ordered (so each part of the TTFT is >= 0): the
// stamps of the stages a request reached are set and follow each other up to Finished, those of
// stages it never reached (it was cancelled first) are zero, and there is one token time per
// output token, the last at Finished when a token ended the request (length or EOS).
func (h *harness) checkTimes(r *Record) {
	h.t.Helper()
	tm := r.Times
	stages := []time.Duration{tm.SubmitStart, tm.SubmitEnd, tm.Tokenized, tm.Admitted, tm.FirstToken}
	reached := len(stages)
	if i := slices.Index(stages, 0); i >= 0 {
		reached = i
	}
	natural := r.Reason == FinishLength || r.Reason == FinishEOS
	order := append(slices.Clone(stages[:reached]), tm.Finished)
	if reached < 2 || slices.ContainsFunc(stages[reached:], func(d time.Duration) bool { return d != 0 }) ||
		!slices.IsSorted(order) || (natural && reached < len(stages)) {
		h.t.Errorf("request %d (%s): SubmitStart<=SubmitEnd<=Tokenized<=Admitted<=FirstToken<=Finished, as far as it got, fails: %v, finished %v",
			r.ID, r.Reason, stages, tm.Finished)
	}
	n := len(tm.Tokens)
	if n != len(r.Output) || (n > 0) != (tm.FirstToken != 0) || (n > 0 && (tm.Tokens[0] != tm.FirstToken ||
		!slices.IsSorted(tm.Tokens) || tm.Tokens[n-1] > tm.Finished || natural && tm.Tokens[n-1] != tm.Finished)) {
		h.t.Errorf("request %d (%s): %d token times for %d tokens, first %v, tokens %v, finished %v",
			r.ID, r.Reason, n, len(r.Output), tm.FirstToken, tm.Tokens, tm.Finished)
	}
}

// drain steps until every submitted request has finished, then checks that the pool is empty.
func (h *harness) drain(maxSteps int) {
	h.t.Helper()
	for steps := 0; steps < maxSteps && len(h.records) != len(h.order); {
		out := h.step()
		if out.Snapshot.Kind == StepIdle && len(out.Events) == 0 && out.Snapshot.Tokenizing > 0 {
			// Every waiting prompt is still with a tokenize worker: wait for one to hand it back
			// (the worker pokes wake, as Run waits), rather than spend the step budget on a race.
			<-h.s.wake
			continue
		}
		steps++
	}
	if len(h.records) != len(h.order) {
		h.t.Fatalf("%d of %d requests finished after %d steps", len(h.records), len(h.order), maxSteps)
	}
	out := h.step() // one more: nothing left, nothing runs
	snap := out.Snapshot
	if snap.Kind != StepIdle || len(out.Events) != 0 || snap.Running != 0 || snap.Waiting != 0 || snap.KVUsed != 0 {
		h.t.Fatalf("after the run: %+v, %d events", snap, len(out.Events))
	}
	if n := h.s.loop.bm.Used(); n != 0 {
		h.t.Fatalf("%d KV blocks still in use", n)
	}
}

// checkOutputs compares every length-finished request's output with the reference model.
func (h *harness) checkOutputs() {
	h.t.Helper()
	for _, id := range h.order {
		r, q := h.records[id], h.reqs[id]
		if r.Reason != FinishLength && r.Reason != FinishEOS {
			continue
		}
		want := reference(h.prompts[id], q, h.s.eos, h.model())
		if !slices.Equal(r.Output, want) {
			h.t.Errorf("request %d (%d preemptions): output %v, want %v", id, r.Preemptions, r.Output, want)
		}
	}
}

func (h *harness) model() func([]int32) int32 {
	if h.be.model != nil {
		return h.be.model
	}
	return nextToken
}
