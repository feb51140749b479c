package sched

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"testing"
	"time"
)

// TestCancelProperty cancels random requests (waiting, running, finished, unknown) at random steps
// and checks that each request ends exactly once, cancelled ones as cancelled, and that every
// KV block is back in the pool.
func TestCancelProperty(t *testing.T) {
	for seed := range uint64(4) {
		rng := rand.New(rand.NewPCG(99, seed))
		o := pagedOptions(10+rng.IntN(30), Config{MaxBatch: 1 + rng.IntN(8), PrefillMaxBatch: 1})
		o.PrefixCache = seed%2 == 1
		o.Config.PrefillMaxBatch = 1 + rng.IntN(o.Config.MaxBatch)
		h := newHarness(t, o)
		cancelled := map[RequestID]bool{}
		for step := 0; len(h.records) < 60 || len(h.order) < 60; step++ {
			if len(h.order) < 60 && rng.IntN(2) == 0 {
				h.submit(Request{Tokens: prompt(int32(len(h.order)+1), 1+rng.IntN(12)), MaxNewTokens: 1 + rng.IntN(25)})
			}
			if len(h.order) > 0 && rng.IntN(4) == 0 {
				id := h.order[rng.IntN(len(h.order))]
				if _, done := h.records[id]; !done {
					cancelled[id] = true
				}
				h.s.Cancel(id)
				h.s.Cancel(id + 1000) // unknown: ignored
			}
			h.step()
			if step > 20000 {
				t.Fatalf("seed %d: stuck: %d/%d finished", seed, len(h.records), len(h.order))
			}
		}
		h.drain(10)
		for id := range cancelled {
			if r := h.records[id]; r.Reason != FinishCancelled {
				t.Errorf("seed %d: request %d cancelled while unfinished ended %s", seed, id, r.Reason)
			}
		}
		if len(cancelled) == 0 {
			t.Fatalf("seed %d: nothing was cancelled", seed)
		}
		h.checkOutputs()
	}
}

// TestMassCancelWaiting cancels thousands of waiting requests in one step: the head of the queue
// still tokenizing, prompts queued for the tokenize worker and tokenized ones. Exactly those end,
// in that step, as cancelled; the tokenizing count follows; the others keep their order.
func TestMassCancelWaiting(t *testing.T) {
	tok := &byteTokenizer{gates: map[string]chan struct{}{"stuck": make(chan struct{})}}
	o := pagedOptions(64, Config{MaxBatch: 2, PrefillMaxBatch: 2})
	o.Tokenizer, o.TokenizeWorkers = tok, 1
	h := newHarness(t, o)
	add := func(r Request) RequestID {
		id := must(h.s.Submit(r))
		h.order, h.reqs[id] = append(h.order, id), r
		h.prompts[id] = r.Tokens
		for _, c := range []byte(r.Text) { // byteTokenizer's ids, without its gate
			h.prompts[id] = append(h.prompts[id], int32(c))
		}
		return id
	}
	stuck := add(Request{Text: "stuck", MaxNewTokens: 2}) // holds the only worker and the queue's head
	const n = 3000
	for i := range n {
		r := Request{Tokens: prompt(int32(1+i%90), 3), MaxNewTokens: 2}
		if i%2 == 0 {
			r = Request{Text: fmt.Sprintf("t%d", i), MaxNewTokens: 2}
		}
		add(r)
	}
	if s := h.step().Snapshot; s.Waiting != n+1 || s.Tokenizing != n/2+1 || s.Admitted != 0 {
		t.Fatalf("before the cancels: %+v", s)
	}
	cancelled := map[RequestID]bool{stuck: true}
	h.s.Cancel(stuck)
	for i, id := range h.order[1:] {
		if i%3 != 0 {
			cancelled[id] = true
			h.s.Cancel(id)
		}
	}
	out := h.step()
	kept, keptText := 0, 0
	for i := range n {
		if i%3 == 0 {
			kept++
			if i%2 == 0 {
				keptText++
			}
		}
	}
	if s := out.Snapshot; len(out.Finished) != len(cancelled) || s.Waiting != kept || s.Tokenizing != keptText || s.Admitted != 0 {
		t.Fatalf("after the cancels: %d finished (want %d), %+v; want %d waiting, %d tokenizing", len(out.Finished), len(cancelled), s, kept, keptText)
	}
	for _, id := range out.Finished {
		if !cancelled[id] || h.records[id].Reason != FinishCancelled {
			t.Fatalf("request %d ended %s in the cancel step", id, h.records[id].Reason)
		}
	}
	close(tok.gates["stuck"])
	for len(h.records) < len(h.order) {
		h.step()
		runtime.Gosched() // the worker tokenizes the rest meanwhile
	}
	h.drain(10)
	h.checkOutputs()
	var last time.Duration
	for _, id := range h.order {
		if r := h.records[id]; !cancelled[id] {
			if r.Reason != FinishLength || r.Times.Admitted < last {
				t.Fatalf("request %d: %s, admitted at %v after a later request at %v", id, r.Reason, r.Times.Admitted, last)
			}
			last = r.Times.Admitted
		}
	}
	h.s.Close()
}

// TestCancelIDNotYetGiven: Cancel and Stopped of an id no Submit has returned yet are ignored, as
// unknown ids are; they do not end the request that Submit gives the id to afterwards.
func TestCancelIDNotYetGiven(t *testing.T) {
	h := newHarness(t, pagedOptions(64, Config{MaxBatch: 2, PrefillMaxBatch: 2}))
	h.s.Cancel(0)
	h.s.Cancel(1)
	h.s.Stopped(2)
	for i := range 2 {
		h.submit(Request{Tokens: prompt(int32(i+1), 3), MaxNewTokens: 3})
	}
	h.drain(100)
	for _, id := range h.order {
		if r := h.records[id]; r.Reason != FinishLength {
			t.Errorf("request %d ended %s, want %s", id, r.Reason, FinishLength)
		}
	}
	h.checkOutputs()
}
