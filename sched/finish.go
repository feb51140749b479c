package sched

import (
	"time"

	"rosetop/engine"
)

// The end of a step: each sampled token recorded and emitted, finished requests released, and the
// snapshot published.

// advance records that q's tokens are now all in the KV cache and that tok was sampled at now
// (with lp, its logprobs when q asked for them); it emits the token event and finishes q on EOS,
// on its own stop condition (Request.Stop) or on length.
func (s *Scheduler) advance(q *request, tok int32, lp *engine.TokenLogprobs, now time.Duration) {
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
	case q.stopOnEOS && tok == s.eos && q.outputs() > q.minNew:
		reason = FinishEOS
	case q.stop != nil && q.stop.Check(tok, q.outputs() >= q.maxNew):
		reason = FinishStop
	case q.outputs() >= q.maxNew:
		reason = FinishLength
	}
	text := q.decode(tok, reason == FinishEOS, reason != "")
	e := l.events.next()
	e.Kind, e.ID, e.Tokens, e.Text, e.At = EventTokens, q.id, q.last(), text, now
	if len(q.times.Tokens) == 1 {
		e.First = q.firstTimes()
	}
	if q.logprobs && lp != nil {
		e.Logprobs = q.keepLogprobs(lp)
	}
	if q.promptLogprobs { // the first prefill's token: its copy is the event's from now on
		e.PromptLogprobs, q.promptLP, q.promptLogprobs = q.promptLP, nil, false
	}
	if reason != "" {
		s.finish(q, reason, nil, now)
	}
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

// finishWaiting ends a request of the waiting queue (it holds no blocks). It stays in the queue,
// done, until takeInbox removes every such request in one pass.
func (s *Scheduler) finishWaiting(q *request, reason FinishReason, err error, now time.Duration) {
	if !q.ready {
		s.loop.tokenizing--
	}
	s.loop.waitingDone = true
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
