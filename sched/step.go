package sched

import (
	"errors"
	"fmt"
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
	// waitingDone: a waiting request has finished (finishWaiting) and is still in waiting.
	waitingDone bool

	steps, preemptions, finished uint64 // totals for the snapshot

	// Per-step scratch.
	inbox     []*request
	cancels   []ending
	tokDone   []tokResult
	pre       []*request   // this step's prefill batch, parallel to prefill.Seqs
	prefill   engine.Batch // handed to the backend; its slices are reused every step
	decode    engine.Batch
	next      []int32
	logprobs  []engine.TokenLogprobs // a call's Batch.Logprobs when one of its sequences asks; entries' Top reused
	events    arena[Event]           // this step's events; StepOutput.Events
	ended     arena[RequestID]       // this step's finished ids; StepOutput.Finished
	preempted bool                   // a sequence was preempted this step: admit nothing (it would thrash)

	// promptBufs[k] is the buffer of prompt logprobs lent to the backend for a call's k-th asking
	// sequence (entries' Top reused); promptLPs is a call's Batch.PromptLogprobs.
	promptBufs [][]engine.TokenLogprobs
	promptLPs  [][]engine.TokenLogprobs
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
// Ownership: StepOutput and everything it references (Events, each Event's Tokens, Logprobs,
// PromptLogprobs and Record, Finished) are never written again by the scheduler; the consumer may
// keep them and must not modify them. Step and Run must not be called concurrently (a second
// caller waits).
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

// runPrefill runs this step's prefill batch: each admitted request's uncached tokens (its prompt,
// or after a preemption its prompt and output so far).
func (s *Scheduler) runPrefill(st *stepStats) error {
	l := &s.loop
	if len(l.pre) == 0 {
		return nil
	}
	b := &l.prefill
	b.Seqs, b.Repeats = b.Seqs[:0], 0
	s.addPrefill(b)
	next := l.nextBuf(len(b.Seqs))
	st.prefillRan = true
	start := s.markAdmitted()
	ran, err := s.call(b, next, l.pre)
	end := s.clock.Now()
	st.prefillTime = end - start
	if !ran {
		return err
	}
	l.keepPromptLogprobs(b, 0)
	for i, q := range l.pre {
		s.advance(q, next[i], logprobsOf(b, i), end)
	}
	return nil
}

// addPrefill appends the prefill batch's sequences to b. A request owed its prompt logprobs runs
// its whole prompt (admitSeq took no cached block) and asks for them, unless it has one token.
func (s *Scheduler) addPrefill(b *engine.Batch) {
	l := &s.loop
	for _, q := range l.pre {
		n := len(q.tokens)
		b.Seqs = append(b.Seqs, engine.SeqStep{
			ID: q.seq, Tokens: q.tokens[q.computed:n:n], Start: q.computed, Blocks: l.bm.Table(q.seq), Sample: q.sampling,
			Logprobs: q.logprobs, TopLogprobs: q.topLogprobs,
			PromptLogprobs: q.promptLogprobs && n > 1, PromptTopLogprobs: q.promptTop,
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
	b.Repeats = s.repeats(cfg, n)
	ran, err := s.call(b, next, l.running[:n])
	end := s.clock.Now()
	st.decodeTime = end - start
	if !ran {
		return err
	}
	st.decodeTokens = n
	for i, q := range l.running[:n] {
		s.advance(q, next[i], logprobsOf(b, i), end)
	}
	return nil
}

// addDecode appends the decode batch's sequences, running[:n], to b.
func (s *Scheduler) addDecode(b *engine.Batch, n int) {
	for _, q := range s.loop.running[:n] {
		k := len(q.tokens)
		b.Seqs = append(b.Seqs, engine.SeqStep{
			ID: q.seq, Tokens: q.tokens[k-1 : k : k], Start: k - 1, Blocks: q.blocks, Sample: q.sampling,
			Logprobs: q.logprobs, TopLogprobs: q.topLogprobs,
		})
	}
}

// runMixed runs the decode batch (running[:n]) and the prefill batch as one backend call
// (Mixed): the decode rows first, then the new prompts; every token arrives at the call's end.
func (s *Scheduler) runMixed(n int, st *stepStats) error {
	l := &s.loop
	b := &l.decode
	b.Seqs, b.Repeats = b.Seqs[:0], 0
	s.addDecode(b, n)
	s.addPrefill(b)
	next := l.nextBuf(len(b.Seqs))
	st.prefillRan, st.decodeRan, st.mixed = true, true, true
	start := s.markAdmitted()
	ran, err := s.call(b, next, l.running[:n], l.pre)
	end := s.clock.Now()
	st.prefillTime, st.decodeTime = end-start, end-start
	if !ran {
		return err
	}
	st.decodeTokens = n
	l.keepPromptLogprobs(b, n)
	for i, q := range l.running[:n] {
		s.advance(q, next[i], logprobsOf(b, i), end)
	}
	for i, q := range l.pre {
		s.advance(q, next[n+i], logprobsOf(b, n+i), end)
	}
	return nil
}

// call runs b on the backend; groups are its requests in b's order. It reports whether the call
// ran: not when it failed (the error), nor when every request was cancelled during it and the
// backend stopped early (engine.ErrStopped): their KV entries are then partly written, so they
// finish here, as cancelled, before any later step could read them.
func (s *Scheduler) call(b *engine.Batch, next []int32, groups ...[]*request) (bool, error) {
	s.mu.Lock()
	s.inCall = s.inCall[:0]
	for _, g := range groups {
		for _, q := range g {
			s.inCall = append(s.inCall, q.id)
		}
	}
	s.stop.Store(false)
	for _, c := range s.cancels { // cancelled after this step took its cancellations
		s.uncall(c.id)
	}
	s.mu.Unlock()
	s.loop.sizeLogprobs(b)
	s.loop.sizePromptLogprobs(b)
	b.Stop = &s.stop
	err := s.backend.Step(b, next)
	b.Stop = nil
	if err == nil && b.Logprobs != nil {
		err = checkLogprobs(b, next)
	}
	if err == nil && b.PromptLogprobs != nil {
		err = checkPromptLogprobs(b)
	}
	s.mu.Lock()
	s.inCall = s.inCall[:0]
	s.mu.Unlock()
	if errors.Is(err, engine.ErrStopped) { // every request of the call was named by Cancel or Stopped
		now := s.clock.Now()
		s.mu.Lock()
		for _, g := range groups {
			for _, q := range g {
				s.finish(q, s.endReason(q.id), nil, now)
			}
		}
		s.mu.Unlock()
		return false, nil
	}
	return err == nil, err
}

// sizeLogprobs gives b an entry per sequence in l.logprobs when one of them asks for logprobs
// (nil otherwise), marking the entries of those that ask as not filled (token -1).
func (l *loopState) sizeLogprobs(b *engine.Batch) {
	b.Logprobs = nil
	for i := range b.Seqs {
		if b.Seqs[i].Logprobs {
			if len(l.logprobs) < len(b.Seqs) {
				l.logprobs = append(l.logprobs, make([]engine.TokenLogprobs, len(b.Seqs)-len(l.logprobs))...)
			}
			b.Logprobs = l.logprobs[:len(b.Seqs)]
			break
		}
	}
	if b.Logprobs == nil {
		return
	}
	for i := range b.Seqs {
		if b.Seqs[i].Logprobs {
			b.Logprobs[i].Sampled = engine.Logprob{Token: -1}
		}
	}
}

// checkLogprobs reports a backend that did not fill the logprobs of a sequence that asked: its
// entry must name the token the sequence sampled.
func checkLogprobs(b *engine.Batch, next []int32) error {
	for i := range b.Seqs {
		if b.Seqs[i].Logprobs && b.Logprobs[i].Sampled.Token != next[i] {
			return fmt.Errorf("the backend reported logprobs of token %d for sequence %d, which sampled %d", b.Logprobs[i].Sampled.Token, i, next[i])
		}
	}
	return nil
}

// logprobsOf is the entry of b's sequence i when it asked for logprobs, else nil.
func logprobsOf(b *engine.Batch, i int) *engine.TokenLogprobs {
	if b.Logprobs == nil || !b.Seqs[i].Logprobs {
		return nil
	}
	return &b.Logprobs[i]
}

// repeats is the decode batch's hint (engine.Batch.Repeats): how many of the following steps
// will decode exactly running[:n] again, one position further each time, and nothing else. None
// when a prefill ran this step or the running set is not full (the next step could admit
// someone; a full set admits nobody, a new submission waits for a slot anyway), else as many as
// the sequence closest to its length limit has tokens left after this step's. An EOS, a
// cancellation, a preemption or a new config can still make it wrong: a hint, which the backend
// checks against the batch it is then given.
func (s *Scheduler) repeats(cfg Config, n int) int {
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

// nextBuf returns a reused buffer for n sampled tokens.
func (l *loopState) nextBuf(n int) []int32 {
	if cap(l.next) < n {
		l.next = make([]int32, n)
	}
	return l.next[:n]
}
