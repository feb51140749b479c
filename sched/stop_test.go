package sched

import (
	"slices"
	"testing"
)

// countStop is a StopCheck that meets its condition at output token at (from 1; 0: never) and
// records every call. The loop's goroutine is the test's: Step runs on it.
type countStop struct {
	at    int
	seen  []int32
	lasts []bool
}

func (c *countStop) Check(tok int32, last bool) bool {
	c.seen = append(c.seen, tok)
	c.lasts = append(c.lasts, last)
	return c.at > 0 && len(c.seen) >= c.at
}

// TestStopCheck: Request.Stop sees every output token once, in order, through preemptions, and
// last on the MaxNewTokens-th only; a request whose check says stop ends at that very token with
// FinishStop, the last allowed token included (stop wins over length), and an EOS that ends a
// request is not passed to it.
func TestStopCheck(t *testing.T) {
	for _, policy := range []Policy{PrefillFirst, DecodeFirst, Mixed} {
		t.Run(policy.String(), func(t *testing.T) {
			o := pagedOptions(12, Config{MaxBatch: 8, PrefillMaxBatch: 8, Policy: policy}) // tight: preemptions
			// The EOS: the 4th output of the request with marker 99, which stops on it.
			eosReq := Request{Tokens: prompt(99, 5), MaxNewTokens: 10}
			ref := reference(eosReq.Tokens, eosReq, -1, nextToken)
			k := 3
			for slices.Contains(ref[:k], ref[k]) {
				k++
			}
			o.EOS = ref[k]
			h := newHarness(t, o)
			checks := map[RequestID]*countStop{}
			for i := range 10 {
				maxNew := 20 + i
				at := []int{5, maxNew, 0, 1, maxNew + 1}[i%5] // early, on the last token, never, first, never
				c := &countStop{at: at}
				id := h.submit(Request{Tokens: prompt(int32(i+1), 5+i%4), MaxNewTokens: maxNew, Stop: c})
				checks[id] = c
			}
			eosReq.StopOnEOS = true
			eosCheck := &countStop{}
			eosReq.Stop = eosCheck
			eosID := h.submit(eosReq)
			h.drain(5000)
			preempted := 0
			for id, c := range checks {
				r, q := h.records[id], h.reqs[id]
				preempted += r.Preemptions
				full := reference(h.prompts[id], Request{MaxNewTokens: q.MaxNewTokens}, -1, nextToken)
				want, reason := full, FinishLength
				if c.at > 0 && c.at <= q.MaxNewTokens {
					want, reason = full[:c.at], FinishStop
				}
				if r.Reason != reason || !slices.Equal(r.Output, want) || !slices.Equal(c.seen, want) {
					t.Errorf("request %d (stop at %d of %d): %s with %v, checked %v; want %s with %v",
						id, c.at, q.MaxNewTokens, r.Reason, r.Output, c.seen, reason, want)
				}
				for i, last := range c.lasts {
					if last != (i+1 == q.MaxNewTokens) {
						t.Errorf("request %d: last %v at output %d of %d", id, last, i+1, q.MaxNewTokens)
					}
				}
			}
			if r := h.records[eosID]; r.Reason != FinishEOS || !slices.Equal(r.Output, ref[:k+1]) || !slices.Equal(eosCheck.seen, ref[:k]) {
				t.Errorf("EOS request: %s with %v, checked %v; want eos with %v, checked %v", r.Reason, r.Output, eosCheck.seen, ref[:k+1], ref[:k])
			}
			if preempted == 0 {
				t.Fatal("no preemption: the test does not cover a recomputed request")
			}
		})
	}
}
