package sched

import (
	"runtime"
	"time"

	"rosetop/engine"
)

// Admission and preemption: what the loop takes in at the start of a step, the KV room it keeps
// for the running sequences, and which waiting requests join them.

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
		s.tokenized(t, now)
	}
	clear(l.tokDone)
	for _, c := range l.cancels {
		q := l.live[c.id]
		switch {
		case q == nil: // unknown or finished
		case q.seq != 0:
			s.finish(q, c.reason, nil, now) // releases its blocks
		default:
			s.finishWaiting(q, c.reason, nil, now)
		}
	}
	if l.waitingDone {
		l.waiting.removeDone()
		l.waitingDone = false
	}
	l.dropFinished()
}

// tokenized gives a waiting request its prompt from a tokenize worker, or ends it when the worker
// failed or the prompt does not fit.
func (s *Scheduler) tokenized(t tokResult, now time.Duration) {
	q := t.r
	switch {
	case q.done: // cancelled while tokenizing
	case t.err != nil:
		s.finishWaiting(q, FinishError, t.err, now)
	default:
		s.loop.tokenizing--
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
	s.lookahead()
	return len(l.running)
}

// lookahead gives each running sequence blocks for the positions of the steps a speculating
// backend may run ahead of this one (its MaxAhead, at most the steps the sequence has left), when
// the pool has them free: those steps then go on across block boundaries instead of stopping at
// each. It never preempts; a sequence that finishes returns the blocks with the rest.
func (s *Scheduler) lookahead() {
	l, room := &s.loop, s.maxAhead
	if room == 0 {
		return
	}
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
			run := len(q.tokens) - l.cachedPrefix(q)
			if st.prefillTokens+run > cfg.PrefillMaxTokens {
				return
			}
		}
		seq := l.nextSeq + 1
		cached, ok := l.admitSeq(seq, q)
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

// cachedPrefix is how many leading tokens of q admitSeq would find in the prefix cache now.
func (l *loopState) cachedPrefix(q *request) int {
	if q.promptLogprobs {
		return 0
	}
	return l.bm.CachedPrefix(q.tokens)
}

// admitSeq reserves q's blocks as sequence seq and returns how many leading tokens are cached. A
// request still owed its prompt logprobs takes no cached block: each prompt token's logits come
// from computing it.
func (l *loopState) admitSeq(seq engine.SeqID, q *request) (cached int, ok bool) {
	if q.promptLogprobs {
		return 0, l.bm.AdmitUncached(seq, q.tokens)
	}
	return l.bm.Admit(seq, q.tokens)
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

// popNewest removes and returns the newest running sequence.
func (l *loopState) popNewest() *request {
	n := len(l.running) - 1
	q := l.running[n]
	l.running[n] = nil
	l.running = l.running[:n]
	return q
}

// burstWaits bounds gather: it waits at most this many quiet spells in all.
const burstWaits = 8

// gather waits until no request has been submitted for quiet (at most burstWaits times that in
// all), on the scheduler's clock. takeInbox calls it when requests reach a loop that holds none,
// so that a client submitting a batch back to back (a benchmark's submit interval 0) sees it
// admitted in one step. Without it the loop, woken by the first Submit, would often start a step
// with part of the batch: the rest would be admitted a step later and run a step behind to the
// end. It yields in a loop instead of sleeping, since Go's timers round an idle wait up to whole
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
