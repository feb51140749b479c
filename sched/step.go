package sched

import (
	"fmt"
	"runtime"
	"time"

	"rosetop/engine"
)

// loopState is everything the loop owns (Scheduler.loopMu): the KV books, the queues, and per-step
// scratch reused from step to step.
type loopState struct {
	bm      *engine.BlockManager
	waiting deque                  // not holding KV: FIFO by submission, preempted ones in front
	running []*request             // holding KV, in admission order: the last is the newest
	live    map[RequestID]*request // every request taken from the inbox and not finished
	nextSeq engine.SeqID           // last SeqID handed out
	// tokenizing counts waiting requests whose prompt is still with a tokenize worker.
	tokenizing int

	steps, preemptions, finished uint64 // totals for the snapshot

	// Per-step scratch.
	inbox     []*request
	cancels   []RequestID
	tokDone   []tokResult
	pre       []*request   // this step's prefill batch, parallel to prefill.Seqs
	prefill   engine.Batch // handed to the backend; its slices are reused every step
	decode    engine.Batch
	next      []int32
	events    arena[Event]     // this step's events; StepOutput.Events
	ended     arena[RequestID] // this step's finished ids; StepOutput.Finished
	preempted bool             // a sequence was preempted this step: admit nothing (it would thrash)
}

func (l *loopState) init(bm *engine.BlockManager, outputBuffer int) {
	if outputBuffer == 0 {
		outputBuffer = 4096
	}
	l.bm = bm
	l.live = make(map[RequestID]*request)
	l.events.chunk = outputBuffer
	l.ended.chunk = outputBuffer
}

// stepStats is what one step did, for its snapshot.
type stepStats struct {
	admitted, prefillTokens, decodeTokens, cached int
	prefillTime, decodeTime                       time.Duration
	prefillRan, decodeRan                         bool
	mixed                                         bool // one call ran both (Mixed): the times are that call's
}

// Step runs one scheduling step synchronously: take submissions (gathering a burst first when
// the loop held no request, Config.BurstQuiet), tokenize results and cancellations; keep the
// running set within MaxBatch; reserve one more KV position for every running sequence
// (preempting the newest when the pool is dry); admit waiting requests FIFO into a prefill
// batch; run the prefill and decode batches as two backend calls in Policy order, or as one
// (Mixed); publish the snapshot.
//
// Ownership: StepOutput and everything it references (Events, each Event's Tokens and Record,
// Finished) are never written again by the scheduler; the consumer may keep them and must not
// modify them. Step and Run must not be called concurrently (a second caller waits).
//
// A backend error finishes every sequence holding KV with FinishError and is returned (wrapped);
// waiting requests stay queued.
func (s *Scheduler) Step() (StepOutput, error) {
	s.loopMu.Lock()
	defer s.loopMu.Unlock()
	l := &s.loop
	cfg := *s.cfg.Load()
	clear(l.pre) // last step's requests: do not keep finished ones alive
	l.pre, l.preempted = l.pre[:0], false

	s.takeInbox(cfg.BurstQuiet)
	for len(l.running) > cfg.MaxBatch { // MaxBatch was lowered: the newest go back to waiting
		s.preempt(l.popNewest())
	}
	nDecode := s.reserveDecode()
	var st stepStats
	if !l.preempted {
		s.admit(cfg, &st)
	}
	var err error
	switch {
	case cfg.Policy == Mixed && nDecode > 0 && len(l.pre) > 0:
		err = s.runMixed(nDecode, &st)
	case cfg.Policy == DecodeFirst:
		if err = s.runDecode(cfg, nDecode, &st); err == nil {
			err = s.runPrefill(&st)
		}
	default: // PrefillFirst, or a Mixed step with one kind of work
		if err = s.runPrefill(&st); err == nil {
			err = s.runDecode(cfg, nDecode, &st)
		}
	}
	if err != nil {
		s.failRunning(err)
		err = fmt.Errorf("sched: engine step: %w", err)
	}
	l.dropFinished()
	snap := s.publish(cfg, &st)
	return StepOutput{Snapshot: *snap, Events: l.events.take(), Finished: l.ended.take()}, err
}

// takeInbox moves submissions, tokenize results and cancellations into the loop's state. When
// the loop holds no request and submissions are waiting, it first gathers them for up to quiet
// (gather).
func (s *Scheduler) takeInbox(quiet time.Duration) {
	l := &s.loop
	s.mu.Lock()
	if quiet > 0 && len(s.inbox) > 0 && len(l.running) == 0 && l.waiting.len() == 0 {
		s.mu.Unlock()
		s.gather(quiet)
		s.mu.Lock()
	}
	l.inbox, s.inbox = s.inbox, l.inbox[:0]
	l.tokDone, s.tokDone = s.tokDone, l.tokDone[:0]
	l.cancels, s.cancels = s.cancels, l.cancels[:0]
	s.mu.Unlock()
	now := s.clock.Now() // after the lock: later than every timestamp taken so far

	for _, q := range l.inbox {
		if !q.ready {
			l.tokenizing++
		}
		q.stream = s.newStream()
		l.live[q.id] = q
		l.waiting.pushBack(q)
	}
	clear(l.inbox)
	for _, t := range l.tokDone {
		q := t.r
		switch {
		case q.done: // cancelled while tokenizing
		case t.err != nil:
			s.finishWaiting(q, FinishError, t.err, now)
		default:
			l.tokenizing--
			q.setPrompt(t.ids)
			q.times.Tokenized = t.at
			if err := s.checkPrompt(q); err != nil {
				reason := FinishTooLong
				if q.prompt == 0 {
					reason = FinishError
				}
				s.finishWaiting(q, reason, err, now)
			}
		}
	}
	clear(l.tokDone)
	for _, id := range l.cancels {
		q := l.live[id]
		switch {
		case q == nil: // unknown or finished
		case q.seq != 0:
			s.finish(q, FinishCancelled, nil, now) // releases its blocks
		default:
			s.finishWaiting(q, FinishCancelled, nil, now)
		}
	}
	l.dropFinished()
}

// reserveDecode makes room for one more position in every running sequence, preempting the newest
// until everyone left fits. It returns how many sequences decode this step: running[:n].
func (s *Scheduler) reserveDecode() int {
	l := &s.loop
	for i := 0; i < len(l.running); {
		q := l.running[i]
		if blocks, ok := l.bm.GrowTable(q.seq, len(q.tokens)); ok {
			q.blocks = blocks
			i++
			continue
		}
		s.preempt(l.popNewest()) // possibly q itself, which ends the loop
	}
	s.aheadRoom()
	return len(l.running)
}

// aheadRoom gives each running sequence blocks for the positions of the steps a backend may
// queue after this one (engine.AheadStepper.AheadRoom, at most the steps it has left), when the
// pool has them free: the queued steps then go on across block boundaries instead of stopping
// at each. It never preempts; a sequence that finishes returns the block with the rest.
func (s *Scheduler) aheadRoom() {
	a, ok := s.backend.(engine.AheadStepper)
	if !ok {
		return
	}
	l, room := &s.loop, a.AheadRoom()
	for _, q := range l.running {
		left := min(room, q.maxNew-q.outputs()-1)
		if left <= 0 {
			continue
		}
		if blocks, ok := l.bm.GrowTable(q.seq, len(q.tokens)+left); ok {
			q.blocks = blocks
		}
	}
}

// admit moves waiting requests, front first, into this step's prefill batch while the batch, the
// running set, the prefill token budget and the KV pool allow. The first request that does not
// fit stops admission: FIFO, no overtaking. The token budget counts tokens to compute (a prefix
// cache hit is free) and never stops the first admission of a step.
func (s *Scheduler) admit(cfg Config, st *stepStats) {
	l := &s.loop
	for len(l.pre) < cfg.PrefillMaxBatch && len(l.running) < cfg.MaxBatch {
		q := l.waiting.front()
		if q == nil || !q.ready {
			return // a prompt still tokenizing holds the line: FIFO by submission
		}
		if cfg.PrefillMaxTokens > 0 && len(l.pre) > 0 {
			run := len(q.tokens) - l.bm.CachedPrefix(q.tokens)
			if st.prefillTokens+run > cfg.PrefillMaxTokens {
				return
			}
		}
		seq := l.nextSeq + 1
		cached, ok := l.bm.Admit(seq, q.tokens)
		if !ok {
			return // out of KV blocks: wait for running sequences to finish
		}
		l.nextSeq = seq
		l.waiting.popFront()
		q.seq, q.computed = seq, cached
		l.running = append(l.running, q)
		l.pre = append(l.pre, q)
		st.admitted++
		st.prefillTokens += len(q.tokens) - cached
		st.cached += cached
	}
}

// runPrefill runs this step's prefill batch: each admitted request's uncached tokens (its prompt,
// or after a preemption its prompt and output so far).
func (s *Scheduler) runPrefill(st *stepStats) error {
	l := &s.loop
	if len(l.pre) == 0 {
		return nil
	}
	b := &l.prefill
	b.Seqs = b.Seqs[:0]
	s.addPrefill(b)
	next := l.nextBuf(len(b.Seqs))
	st.prefillRan = true
	start := s.markAdmitted()
	if err := s.backend.Step(b, next); err != nil {
		return err
	}
	end := s.clock.Now()
	st.prefillTime = end - start
	for i, q := range l.pre {
		s.advance(q, next[i], end)
	}
	return nil
}

// addPrefill appends the prefill batch's sequences to b.
func (s *Scheduler) addPrefill(b *engine.Batch) {
	l := &s.loop
	for _, q := range l.pre {
		n := len(q.tokens)
		b.Seqs = append(b.Seqs, engine.SeqStep{
			ID: q.seq, Tokens: q.tokens[q.computed:n:n], Start: q.computed, Blocks: l.bm.Table(q.seq), Sample: q.sampling,
		})
	}
}

// markAdmitted stamps Times.Admitted of the prefill batch's requests prefilled for the first
// time with now, just before the batch starts, and returns now.
func (s *Scheduler) markAdmitted() time.Duration {
	now := s.clock.Now()
	for _, q := range s.loop.pre {
		if !q.admitted {
			q.admitted, q.times.Admitted = true, now
		}
	}
	return now
}

// runDecode runs the decode batch: the last token of each of running[:n].
func (s *Scheduler) runDecode(cfg Config, n int, st *stepStats) error {
	l := &s.loop
	if n == 0 {
		return nil
	}
	b := &l.decode
	b.Seqs = b.Seqs[:0]
	s.addDecode(b, n)
	next := l.nextBuf(n)
	st.decodeRan = true
	start := s.clock.Now()
	var err error
	a, ahead := s.backend.(engine.AheadStepper)
	steps := 0
	if ahead {
		steps = s.decodesAgain(cfg, n)
	}
	if steps > 0 {
		err = a.StepAhead(b, next, steps)
	} else {
		err = s.backend.Step(b, next)
	}
	if err != nil {
		return err
	}
	end := s.clock.Now()
	st.decodeTime, st.decodeTokens = end-start, n
	for i, q := range l.running[:n] {
		s.advance(q, next[i], end)
	}
	return nil
}

// addDecode appends the decode batch's sequences, running[:n], to b.
func (s *Scheduler) addDecode(b *engine.Batch, n int) {
	for _, q := range s.loop.running[:n] {
		k := len(q.tokens)
		b.Seqs = append(b.Seqs, engine.SeqStep{
			ID: q.seq, Tokens: q.tokens[k-1 : k : k], Start: k - 1, Blocks: q.blocks, Sample: q.sampling,
		})
	}
}

// runMixed runs the decode batch (running[:n]) and the prefill batch as one backend call
// (Mixed): the decode rows first, then the new prompts; every token arrives at the call's end.
func (s *Scheduler) runMixed(n int, st *stepStats) error {
	l := &s.loop
	b := &l.decode
	b.Seqs = b.Seqs[:0]
	s.addDecode(b, n)
	s.addPrefill(b)
	next := l.nextBuf(len(b.Seqs))
	st.prefillRan, st.decodeRan, st.mixed = true, true, true
	start := s.markAdmitted()
	if err := s.backend.Step(b, next); err != nil {
		return err
	}
	end := s.clock.Now()
	st.prefillTime, st.decodeTime, st.decodeTokens = end-start, end-start, n
	for i, q := range l.running[:n] {
		s.advance(q, next[i], end)
	}
	for i, q := range l.pre {
		s.advance(q, next[n+i], end)
	}
	return nil
}

// decodesAgain returns how many of the following steps will decode exactly running[:n] again,
// one position further each time, and nothing else (engine.AheadStepper): none when a prefill
// ran this step or the running set is not full (the next step could admit someone; a full set
// admits nobody, a new submission waits for a slot anyway), else as many as the sequence closest
// to its length limit has tokens left after this step's. An EOS, a cancellation, a preemption or
// a new config can still make it wrong; the backend then runs the next step after the ones it
// queued, correctly.
func (s *Scheduler) decodesAgain(cfg Config, n int) int {
	l := &s.loop
	if len(l.pre) > 0 || n != len(l.running) || n < cfg.MaxBatch {
		return 0
	}
	steps := -1
	for _, q := range l.running[:n] {
		if left := q.maxNew - q.outputs() - 1; steps < 0 || left < steps {
			steps = left
		}
	}
	return max(steps, 0)
}

// advance records that q's tokens are now all in the KV cache and that tok was sampled at now;
// it emits the token event and finishes q on EOS or length.
func (s *Scheduler) advance(q *request, tok int32, now time.Duration) {
	l := &s.loop
	q.computed = len(q.tokens)
	l.bm.Computed(q.seq, q.tokens, q.computed)
	q.tokens = append(q.tokens, tok)
	q.times.Tokens = append(q.times.Tokens, now)
	if len(q.times.Tokens) == 1 {
		q.times.FirstToken = now
	}
	var reason FinishReason
	switch {
	case q.stopOnEOS && tok == s.eos:
		reason = FinishEOS
	case q.outputs() >= q.maxNew:
		reason = FinishLength
	}
	text := q.decode(tok, reason == FinishEOS, reason != "")
	e := l.events.next()
	e.Kind, e.ID, e.Tokens, e.Text, e.At = EventTokens, q.id, q.last(), text, now
	if len(q.times.Tokens) == 1 {
		e.First = q.firstTimes()
	}
	if reason != "" {
		s.finish(q, reason, nil, now)
	}
}

// preempt releases q's blocks and puts it at the front of the waiting queue; it will be prefilled
// again over its prompt and output so far, and sample exactly the tokens it would have.
func (s *Scheduler) preempt(q *request) {
	l := &s.loop
	l.bm.Release(q.seq)
	q.seq, q.computed, q.blocks = 0, 0, nil
	q.preemptions++
	l.preemptions++
	l.preempted = true
	l.waiting.pushFront(q)
}

// finish ends q, releasing its blocks, and emits its record. A running q leaves l.running at the
// next dropFinished.
func (s *Scheduler) finish(q *request, reason FinishReason, err error, now time.Duration) {
	l := &s.loop
	q.done = true
	if q.seq != 0 {
		l.bm.Release(q.seq)
		q.seq, q.blocks = 0, nil
	}
	delete(l.live, q.id)
	q.times.Finished = now
	e := l.events.next()
	e.Kind, e.ID, e.Record = EventFinished, q.id, q.record(reason, err)
	*l.ended.next() = q.id
	l.finished++
}

// finishWaiting ends a request that holds no blocks.
func (s *Scheduler) finishWaiting(q *request, reason FinishReason, err error, now time.Duration) {
	if s.loop.waiting.remove(q) && !q.ready {
		s.loop.tokenizing--
	}
	s.finish(q, reason, err, now)
}

// failRunning ends every sequence holding KV after a backend error.
func (s *Scheduler) failRunning(err error) {
	now := s.clock.Now()
	for _, q := range s.loop.running {
		if !q.done {
			s.finish(q, FinishError, err, now)
		}
	}
}

// publish stores this step's snapshot.
func (s *Scheduler) publish(cfg Config, st *stepStats) *Snapshot {
	l := &s.loop
	kind := StepIdle
	switch {
	case st.prefillRan && st.decodeRan:
		kind = StepMixed
	case st.prefillRan:
		kind = StepPrefill
	case st.decodeRan:
		kind = StepDecode
	}
	if kind != StepIdle {
		l.steps++
	}
	stepTime := st.prefillTime + st.decodeTime
	if st.mixed {
		stepTime = st.prefillTime
	}
	snap := &Snapshot{
		Step:          l.steps,
		At:            s.clock.Now(),
		Kind:          kind,
		Waiting:       l.waiting.len(),
		Tokenizing:    l.tokenizing,
		Running:       len(l.running),
		Admitted:      st.admitted,
		PrefillTokens: st.prefillTokens,
		DecodeTokens:  st.decodeTokens,
		StepTime:      stepTime,
		PrefillTime:   st.prefillTime,
		DecodeTime:    st.decodeTime,
		CachedTokens:  st.cached,
		KVUsed:        l.bm.Used(),
		KVTotal:       l.bm.Total(),
		Preemptions:   l.preemptions,
		Finished:      l.finished,
		Config:        cfg,
	}
	s.snap.Store(snap)
	return snap
}

// popNewest removes and returns the newest running sequence.
func (l *loopState) popNewest() *request {
	n := len(l.running) - 1
	q := l.running[n]
	l.running[n] = nil
	l.running = l.running[:n]
	return q
}

// dropFinished removes finished requests from the running set, keeping admission order.
func (l *loopState) dropFinished() {
	k := 0
	for _, q := range l.running {
		if !q.done {
			l.running[k] = q
			k++
		}
	}
	clear(l.running[k:])
	l.running = l.running[:k]
}

// nextBuf returns a reused buffer for n sampled tokens.
func (l *loopState) nextBuf(n int) []int32 {
	if cap(l.next) < n {
		l.next = make([]int32, n)
	}
	return l.next[:n]
}

// burstWaits bounds gather: it waits at most this many quiet spells in all.
const burstWaits = 8

// gather waits until no request has been submitted for quiet (at most burstWaits times that in
// all), on the scheduler's clock. takeInbox calls it when requests reach a loop that holds none,
// so that a client submitting a batch back to back (a benchmark's submit interval 0) sees it
// admitted in one step. Without it the loop, woken by the first Submit, would often start a step
// with part of the batch: the rest would be admitted a step later and run a step behind to the
// end (on the H200, decode-heavy then measured about 1% fewer tokens/s, in two runs of three).
// It yields in a loop instead of sleeping, since Go's timers round an idle wait up to whole
// milliseconds. The cost: that much more time to first token for a request reaching an idle
// scheduler alone. The wait is measured on the scheduler's clock, so a test clock that stands
// still holds it until the test moves the clock on.
func (s *Scheduler) gather(quiet time.Duration) {
	n := s.arrived.Load()
	start := s.clock.Now()
	last := start
	for {
		runtime.Gosched()
		now := s.clock.Now()
		if m := s.arrived.Load(); m != n {
			n, last = m, now
		}
		if now-last >= quiet || now-start >= burstWaits*quiet {
			return
		}
	}
}
