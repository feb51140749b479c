package sched

import (
	"slices"
	"strings"
)

// The checks of TestRealEngineRandom's workloads (engine_random_test.go): after every step, after
// every request, and at the end.

// checkStep checks the loop's books after a step, checks each ended request, and follows the
// streamed text, stopping a request whose text holds its stop string (as a server does).
func (r *realRun) checkStep(out StepOutput) {
	h := r.h
	r.checkBooks(out.Snapshot)
	for _, e := range out.Events {
		switch e.Kind {
		case EventTokens:
			r.text[e.ID] += e.Text
		case EventFinished:
			r.finishedAt[e.ID] = r.step
			r.checkRecord(e.Record)
		}
	}
	for _, e := range out.Events {
		if stop := r.stops[e.ID]; e.Kind == EventTokens && stop != "" && h.records[e.ID] == nil && strings.Contains(r.text[e.ID], stop) {
			r.end(e.ID, FinishStop, false)
		}
	}
	if len(h.records) < len(h.order) && out.Snapshot.Kind == StepIdle && len(out.Events) == 0 {
		h.t.Errorf("step %d did nothing with %d requests waiting and %d running", r.step, out.Snapshot.Waiting, out.Snapshot.Running)
	}
}

// checkBooks checks the KV books against the loop's state: the blocks in use are exactly those
// of the running sequences' tables, every running sequence holds room for its tokens, no waiting
// request holds a sequence, and used, free and cached blocks add up.
func (r *realRun) checkBooks(snap Snapshot) {
	h, l := r.h, &r.h.s.loop
	bm := l.bm
	bs := bm.Layout().BlockSize
	if snap.KVUsed != bm.Used() || bm.Used()+bm.Free() != bm.Total() || bm.Cached() > bm.Free() || (!r.prefix && bm.Cached() != 0) {
		h.t.Errorf("step %d: snapshot %d blocks used; books: %d used, %d free (%d cached) of %d", r.step, snap.KVUsed, bm.Used(), bm.Free(), bm.Cached(), bm.Total())
	}
	held := map[int32]bool{}
	for _, q := range l.running {
		table := bm.Table(q.seq)
		if q.done || q.seq == 0 || !bm.Holds(q.seq) || len(table)*bs < q.computed || q.computed != len(q.tokens)-1 {
			h.t.Errorf("step %d: running request %d: done %v, sequence %d with %d blocks for %d computed of %d tokens",
				r.step, q.id, q.done, q.seq, len(table), q.computed, len(q.tokens))
		}
		for _, b := range table {
			held[b] = true
		}
	}
	if len(held) != bm.Used() {
		h.t.Errorf("step %d: %d blocks in use, %d in the running sequences' tables", r.step, bm.Used(), len(held))
	}
	for i := range l.waiting.len() {
		if q := l.waiting.at(i); q.seq != 0 || q.done {
			h.t.Errorf("step %d: waiting request %d holds sequence %d, done %v", r.step, q.id, q.seq, q.done)
		}
	}
}

// checkRecord checks an ended request: its reason (the first Cancel or Stopped call naming it,
// unless it was made during the call that gave it its last token; else length or EOS as its
// tokens say), its output against its solo run, and its text.
func (r *realRun) checkRecord(rec *Record) {
	h, id := r.h, rec.ID
	req := h.reqs[id]
	natural := rec.Reason == FinishLength || rec.Reason == FinishEOS
	c, called := r.ends[id]
	switch {
	case !called && !natural,
		called && !c.inCall && rec.Reason != c.reason,
		called && c.inCall && rec.Reason != c.reason && !(natural && r.finishedAt[id] == c.step):
		h.t.Errorf("request %d ended %s (%v) at step %d; first end call %+v (called: %v)", id, rec.Reason, rec.Err, r.step, c, called)
	}
	wantReason := FinishLength
	if n := len(rec.Output); req.StopOnEOS && n > 0 && rec.Output[n-1] == r.eos && n > req.MinNewTokens {
		wantReason = FinishEOS
	}
	if natural && rec.Reason != wantReason {
		h.t.Errorf("request %d ended %s, its tokens say %s", id, rec.Reason, wantReason)
	}
	if rec.Err != nil || rec.PromptTokens != len(h.prompts[id]) {
		h.t.Errorf("request %d: error %v, %d prompt tokens of %d", id, rec.Err, rec.PromptTokens, len(h.prompts[id]))
	}
	n, limit := len(rec.Output), len(rec.Output) // ended early: its output so far must be the solo run's
	if natural {
		limit = req.MaxNewTokens
	}
	if want := r.alone(id, limit); limit > 0 && !slices.Equal(rec.Output, want) {
		h.t.Errorf("request %d (%s, %d preemptions, sampling %+v, prompt of %d): output %v, alone %v",
			id, rec.Reason, rec.Preemptions, req.Sampling, len(h.prompts[id]), rec.Output, want)
	}
	shown := rec.Output
	if rec.Reason == FinishEOS {
		shown = shown[:n-1]
	}
	streamed := r.text[id]
	if text := r.tok.Decode(shown); rec.Text != text || !strings.HasPrefix(text, streamed) || natural && streamed != text {
		h.t.Errorf("request %d (%s): record text %q, streamed %q, output's text %q", id, rec.Reason, rec.Text, streamed, text)
	}
}

// checkEnd checks the scheduler after every request has ended: a step does nothing, the pool is
// whole (cached blocks are free and can all be handed out again), and the preemptions the
// records count are those the snapshot counts.
func (r *realRun) checkEnd() {
	h, l := r.h, &r.h.s.loop
	out := h.step()
	snap := out.Snapshot
	if snap.Kind != StepIdle || len(out.Events) != 0 || snap.Running != 0 || snap.Waiting != 0 || len(l.live) != 0 {
		h.t.Fatalf("after the run: %+v, %d events, %d live requests", snap, len(out.Events), len(l.live))
	}
	bm := l.bm
	if bm.Used() != 0 || bm.Free() != bm.Total() {
		h.t.Fatalf("after the run: %d blocks used, %d free of %d", bm.Used(), bm.Free(), bm.Total())
	}
	whole := slices.Repeat([]int32{-1}, bm.Total()*bm.Layout().BlockSize-1) // ids no prompt holds: no hit
	if _, ok := bm.Admit(l.nextSeq+1, whole); !ok || bm.Used() != bm.Total() {
		h.t.Fatalf("after the run: a sequence of the whole pool: admitted %v, %d of %d blocks", ok, bm.Used(), bm.Total())
	}
	bm.Release(l.nextSeq + 1)
	if bm.Used() != 0 || bm.Cached() != 0 || bm.Free() != bm.Total() {
		h.t.Fatalf("after a sequence of the whole pool: %d blocks used, %d free, %d cached", bm.Used(), bm.Free(), bm.Cached())
	}
	var preemptions uint64
	for _, rec := range h.records {
		preemptions += uint64(rec.Preemptions)
	}
	if preemptions != snap.Preemptions {
		h.t.Errorf("the records count %d preemptions, the snapshot %d", preemptions, snap.Preemptions)
	}
}
