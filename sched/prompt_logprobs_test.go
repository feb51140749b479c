package sched

import (
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"rosetop/engine"
)

// Prompt logprobs (Request.PromptLogprobs, Event.PromptLogprobs) through the scheduler: on the
// fake backend with a filler that plays the engine's part, and on the CPU and CUDA backends with
// the embedded tiny GPT-2.

// plpSeen collects what token events told of prompt logprobs: each request's Event.PromptLogprobs
// as handed out and a deep copy taken on arrival (the scheduler must never write it again).
type plpSeen struct {
	asked  map[RequestID]bool
	got    map[RequestID][]engine.TokenLogprobs
	copies map[RequestID][]engine.TokenLogprobs
	tokens map[RequestID]int // token events so far
}

func newPLPSeen() *plpSeen {
	return &plpSeen{asked: map[RequestID]bool{}, got: map[RequestID][]engine.TokenLogprobs{},
		copies: map[RequestID][]engine.TokenLogprobs{}, tokens: map[RequestID]int{}}
}

// add checks a step's token events: a request that asked has its prompt logprobs (non-nil, capacity
// its length) on its first token event only; one that did not, never.
func (p *plpSeen) add(t *testing.T, out StepOutput) {
	t.Helper()
	for _, e := range out.Events {
		if e.Kind != EventTokens {
			continue
		}
		p.tokens[e.ID]++
		first := p.tokens[e.ID] == 1
		switch {
		case e.PromptLogprobs == nil && first && p.asked[e.ID]:
			t.Errorf("request %d asked for prompt logprobs: its first token event has none", e.ID)
		case e.PromptLogprobs == nil:
		case !p.asked[e.ID] || !first:
			t.Errorf("request %d (asked: %v): prompt logprobs on its token event %d", e.ID, p.asked[e.ID], p.tokens[e.ID])
		case cap(e.PromptLogprobs) != len(e.PromptLogprobs):
			t.Errorf("request %d: prompt logprobs of length %d, capacity %d", e.ID, len(e.PromptLogprobs), cap(e.PromptLogprobs))
		default:
			p.got[e.ID], p.copies[e.ID] = e.PromptLogprobs, cloneLPs(e.PromptLogprobs)
		}
	}
}

// unchanged checks that every prompt logprobs slice handed out still holds what it held then.
func (p *plpSeen) unchanged(t *testing.T) {
	t.Helper()
	for id, live := range p.got {
		if !slices.EqualFunc(live, p.copies[id], sameLP) {
			t.Errorf("request %d: prompt logprobs handed out as %v were later changed to %v", id, p.copies[id], live)
		}
	}
}

func cloneLPs(es []engine.TokenLogprobs) []engine.TokenLogprobs {
	c := make([]engine.TokenLogprobs, len(es))
	for i, e := range es {
		c[i] = engine.TokenLogprobs{Sampled: e.Sampled, Top: slices.Clone(e.Top), Rank: e.Rank}
	}
	return c
}

func sameLP(a, b engine.TokenLogprobs) bool {
	return a.Sampled == b.Sampled && a.Rank == b.Rank && slices.Equal(a.Top, b.Top)
}

// fakePromptLogprobs is the filler's entry for the last token of seq: values that depend on the
// whole of seq, so that an entry for the wrong token or the wrong prefix shows.
func fakePromptLogprobs(out *engine.TokenLogprobs, seq []int32, top int) {
	v := -float32(nextToken(seq)) / 16
	out.Sampled = engine.Logprob{Token: seq[len(seq)-1], Logprob: v}
	out.Rank = len(seq)
	out.Top = out.Top[:0]
	for k := range top {
		out.Top = append(out.Top, engine.Logprob{Token: int32(k), Logprob: v - float32(k)})
	}
}

// promptFiller plays the engine's part for prompt logprobs in front of a backend: it fills the
// entries a batch asks for with fakePromptLogprobs, reusing their Top memory as an engine does.
// It counts the sequences that asked per prompt and reports batches that break the contract:
// an asking sequence that does not run its whole prompt from position 0, Batch.PromptLogprobs
// set without an asking sequence or missing with one, entries of the wrong length.
type promptFiller struct {
	Backend
	asked map[string]int // fmt.Sprint(Tokens) of each asking sequence -> times asked
	errs  []string
}

func newPromptFiller(b Backend) *promptFiller {
	return &promptFiller{Backend: b, asked: map[string]int{}}
}

func (p *promptFiller) Step(b *engine.Batch, next []int32) error {
	asks := false
	for i, sq := range b.Seqs {
		if !sq.PromptLogprobs {
			continue
		}
		asks = true
		p.asked[fmt.Sprint(sq.Tokens)]++
		if sq.Start != 0 || len(sq.Tokens) < 2 {
			p.errs = append(p.errs, fmt.Sprintf("sequence %d asks for prompt logprobs with %d tokens from position %d", sq.ID, len(sq.Tokens), sq.Start))
		}
		if len(b.PromptLogprobs) != len(b.Seqs) || len(b.PromptLogprobs[i]) != len(sq.Tokens)-1 {
			p.errs = append(p.errs, fmt.Sprintf("sequence %d of %d tokens asks for prompt logprobs: %d sequences' entries", sq.ID, len(sq.Tokens), len(b.PromptLogprobs)))
			continue
		}
		for j := range b.PromptLogprobs[i] {
			fakePromptLogprobs(&b.PromptLogprobs[i][j], sq.Tokens[:j+2], sq.PromptTopLogprobs)
		}
	}
	if !asks && b.PromptLogprobs != nil {
		p.errs = append(p.errs, fmt.Sprintf("a batch of %d sequences, none asking, has prompt logprobs", len(b.Seqs)))
	}
	return p.Backend.Step(b, next)
}

// wantFakePrompt is what promptFiller gives a prompt.
func wantFakePrompt(prompt []int32, top int) []engine.TokenLogprobs {
	want := make([]engine.TokenLogprobs, len(prompt)-1)
	for j := range want {
		fakePromptLogprobs(&want[j], prompt[:j+2], top)
	}
	return want
}

// TestPromptLogprobsFake runs a workload where half the requests ask for prompt logprobs (some of
// one-token prompts, some with alternatives) over the fake backend behind promptFiller, in every
// policy, with and without the prefix cache, with a pool large enough and one so small that
// sequences are preempted: each asker gets exactly its prompt's entries once, on its first token
// event (a one-token prompt: an empty slice), its prompt is run whole on its first prefill and
// asked for once (never on a recompute), batches without an asker carry no prompt logprobs, and
// outputs are the reference's.
func TestPromptLogprobsFake(t *testing.T) {
	type tcase struct {
		name   string
		blocks int
		prefix bool
		policy Policy
	}
	var cases []tcase
	for _, policy := range []Policy{PrefillFirst, DecodeFirst, Mixed} {
		for _, blocks := range []int{512, 14} {
			for _, prefix := range []bool{false, true} {
				name := fmt.Sprintf("%s, %d blocks, prefix cache %v", policyNames[policy], blocks, prefix)
				cases = append(cases, tcase{name, blocks, prefix, policy})
			}
		}
	}
	for ci, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			clock := newFakeClock()
			fake := newFakeBackend(t, clock, 4)
			filler := newPromptFiller(fake)
			o := pagedOptions(c.blocks, Config{MaxBatch: 6, PrefillMaxBatch: 3, Policy: c.policy})
			o.Backend, o.PrefixCache, o.MaxSeqLen = filler, c.prefix, 1024
			h := newHarnessOn(t, o, clock)
			h.be = fake
			seen := newPLPSeen()
			wantAsks := map[string]int{}
			rng := rand.New(rand.NewPCG(11, uint64(ci)))
			for i := range 30 {
				n := 1 + rng.IntN(14)
				if i%12 == 6 {
					n = 1 // an asker's one-token prompt
				}
				p := prompt(int32(i+1), n)
				if i%3 == 1 {
					p = slices.Clone(h.prompts[h.order[i-1]]) // the previous prompt: a prefix-cache hit for one of them
				}
				r := Request{Tokens: p, MaxNewTokens: 1 + rng.IntN(24), PromptLogprobs: i%2 == 0, PromptTopLogprobs: i % 5}
				id := h.submit(r)
				seen.asked[id] = r.PromptLogprobs
				if r.PromptLogprobs && len(p) > 1 {
					wantAsks[fmt.Sprint(p)]++
				}
				if rng.IntN(3) == 0 {
					seen.add(t, h.step())
				}
			}
			for steps := 0; len(h.records) < len(h.order); steps++ {
				if steps > 5000 {
					t.Fatalf("%d of %d requests finished", len(h.records), len(h.order))
				}
				seen.add(t, h.step())
			}
			h.drain(1)
			h.checkOutputs()
			for _, e := range filler.errs {
				t.Error(e)
			}
			if !maps.Equal(filler.asked, wantAsks) {
				t.Errorf("prompts asked for: %v, want each asking request's prompt once: %v", filler.asked, wantAsks)
			}
			seen.unchanged(t)
			preempted, short := 0, 0
			for _, id := range h.order {
				r, rec := h.reqs[id], h.records[id]
				if rec.Reason != FinishLength {
					t.Errorf("request %d ended %s (%v)", id, rec.Reason, rec.Err)
				}
				if !r.PromptLogprobs {
					continue
				}
				if rec.Preemptions > 0 {
					preempted++
				}
				want := wantFakePrompt(r.Tokens, r.PromptTopLogprobs)
				if got := seen.got[id]; got == nil || !slices.EqualFunc(got, want, sameLP) {
					t.Errorf("request %d: prompt logprobs %v, want %v", id, got, want)
				}
				if len(r.Tokens) == 1 {
					short++
				}
			}
			if c.blocks < 100 && preempted == 0 || short == 0 || c.prefix && h.cached == 0 {
				t.Fatalf("not covered: %d askers preempted, %d of one token, %d tokens from the prefix cache", preempted, short, h.cached)
			}
		})
	}
}

// policyNames names the policies in subtest names.
var policyNames = map[Policy]string{PrefillFirst: "prefill first", DecodeFirst: "decode first", Mixed: "mixed"}

// TestPromptLogprobsBadRequest: Submit takes PromptTopLogprobs 0..engine.MaxTopLogprobs only,
// asked for or not.
func TestPromptLogprobsBadRequest(t *testing.T) {
	s, err := New(Options{Backend: noopBackend{}, Layout: engine.KVLayout{BlockSize: 16, NumBlocks: 8, Paged: true},
		MaxSeqLen: 64, Config: Config{MaxBatch: 4, PrefillMaxBatch: 2}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, c := range []struct {
		asks bool
		top  int
		ok   bool
	}{{true, -1, false}, {true, engine.MaxTopLogprobs + 1, false}, {false, engine.MaxTopLogprobs + 1, false}, {false, -1, false},
		{true, 0, true}, {true, engine.MaxTopLogprobs, true}, {false, 3, true}} {
		_, err := s.Submit(Request{Tokens: []int32{1, 2}, MaxNewTokens: 2, PromptLogprobs: c.asks, PromptTopLogprobs: c.top})
		if c.ok != (err == nil) || err != nil && (!errors.Is(err, ErrBadRequest) || !strings.Contains(err.Error(), "prompt top logprobs")) {
			t.Errorf("PromptLogprobs %v PromptTopLogprobs %d: %v, want accepted: %v", c.asks, c.top, err, c.ok)
		}
	}
}

// partFiller is a backend that fills a batch's prompt logprobs but for the last entry of each
// asking sequence, and samples token 1 for everyone.
type partFiller struct{}

func (partFiller) Step(b *engine.Batch, next []int32) error {
	for i, sq := range b.Seqs {
		if sq.PromptLogprobs {
			es := b.PromptLogprobs[i]
			for j := range es[:len(es)-1] {
				fakePromptLogprobs(&es[j], sq.Tokens[:j+2], sq.PromptTopLogprobs)
			}
		}
	}
	return noopBackend{}.Step(b, next)
}

// TestPromptLogprobsBackendFillsNone: a backend that leaves the prompt logprobs of a sequence
// that asked unfilled, wholly or in part, fails the step, and the requests in it end with
// FinishError, instead of events carrying stale entries (as for Logprobs). A request of a
// one-token prompt asks the backend for nothing: it gets its empty prompt logprobs whatever the
// backend does.
func TestPromptLogprobsBackendFillsNone(t *testing.T) {
	for _, c := range []struct {
		name string
		be   Backend
	}{{"fills none", noopBackend{}}, {"fills all but the last", partFiller{}}} {
		t.Run(c.name, func(t *testing.T) {
			s, err := New(Options{Backend: c.be, Layout: engine.KVLayout{BlockSize: 16, NumBlocks: 8, Paged: true},
				MaxSeqLen: 64, Config: Config{MaxBatch: 4, PrefillMaxBatch: 4}})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			plain, _ := s.Submit(Request{Tokens: []int32{1, 2}, MaxNewTokens: 4})
			one, _ := s.Submit(Request{Tokens: []int32{5}, MaxNewTokens: 4, PromptLogprobs: true})
			asks, _ := s.Submit(Request{Tokens: []int32{3, 4, 5}, MaxNewTokens: 4, PromptLogprobs: true, PromptTopLogprobs: 2})
			o, err := s.Step()
			if err == nil || !strings.Contains(err.Error(), "prompt logprobs") {
				t.Fatalf("step: %v, want an error about the prompt logprobs", err)
			}
			ended := map[RequestID]FinishReason{}
			for _, e := range o.Events {
				if e.Kind == EventTokens {
					t.Fatalf("request %d got a token event from a failed step", e.ID)
				}
				ended[e.ID] = e.Record.Reason
			}
			if ended[plain] != FinishError || ended[asks] != FinishError || ended[one] != FinishError {
				t.Fatalf("ended %v, want every request with %s", ended, FinishError)
			}
		})
	}
}

// TestPromptLogprobsOneToken: a one-token prompt has no prompt logprobs to compute: the backend
// (one that fills none) is not asked, and the request's first token event carries an empty,
// non-nil slice, its later ones nil; a request that does not ask gets nil throughout.
func TestPromptLogprobsOneToken(t *testing.T) {
	filler := newPromptFiller(noopBackend{})
	s, err := New(Options{Backend: filler, Layout: engine.KVLayout{BlockSize: 16, NumBlocks: 8, Paged: true},
		MaxSeqLen: 64, Clock: newFakeClock(), Config: Config{MaxBatch: 4, PrefillMaxBatch: 4}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	seen := newPLPSeen()
	one, _ := s.Submit(Request{Tokens: []int32{7}, MaxNewTokens: 3, PromptLogprobs: true, PromptTopLogprobs: 4})
	plain, _ := s.Submit(Request{Tokens: []int32{7}, MaxNewTokens: 3})
	seen.asked[one] = true
	for range 3 {
		o, err := s.Step()
		if err != nil {
			t.Fatal(err)
		}
		seen.add(t, o)
	}
	if got := seen.got[one]; got == nil || len(got) != 0 || seen.tokens[one] != 3 || seen.tokens[plain] != 3 {
		t.Fatalf("one-token prompt: prompt logprobs %v (nil: %v) after %d token events, want empty and not nil", got, got == nil, seen.tokens[one])
	}
	if len(filler.asked) != 0 || len(filler.errs) != 0 {
		t.Fatalf("the backend was asked for prompt logprobs %v (%v)", filler.asked, filler.errs)
	}
}

// TestPromptLogprobsNoCachedPrefix: a request asking for prompt logprobs whose prompt is in the
// prefix cache computes it whole (no cached tokens in its step; its prompt counts whole against
// the prefill token budget, so it waits for a step of its own), gets every entry, and leaves the
// cached prefix to the requests after it.
func TestPromptLogprobsNoCachedPrefix(t *testing.T) {
	clock := newFakeClock()
	fake := newFakeBackend(t, clock, 4)
	filler := newPromptFiller(fake)
	o := pagedOptions(64, Config{MaxBatch: 4, PrefillMaxBatch: 4, PrefillMaxTokens: 10})
	o.Backend, o.PrefixCache, o.MaxSeqLen = filler, true, 1024
	h := newHarnessOn(t, o, clock)
	h.be = fake
	seen := newPLPSeen()
	p := prompt(9, 9) // two full blocks of 4 and one token
	h.submit(Request{Tokens: p, MaxNewTokens: 3})
	h.drain(100)
	h.submit(Request{Tokens: prompt(1, 2), MaxNewTokens: 3})
	asker := h.submit(Request{Tokens: p, MaxNewTokens: 3, PromptLogprobs: true, PromptTopLogprobs: 2})
	seen.asked[asker] = true
	step := func(admitted, run, cached int) {
		t.Helper()
		out := h.step()
		seen.add(t, out)
		if sn := out.Snapshot; sn.Admitted != admitted || sn.PrefillTokens != run || sn.CachedTokens != cached {
			t.Fatalf("admitted %d, %d prompt tokens run, %d cached: want %d, %d, %d", sn.Admitted, sn.PrefillTokens, sn.CachedTokens, admitted, run, cached)
		}
	}
	step(1, 2, 0) // 2 + the asker's 9 exceed the budget of 10
	step(1, 9, 0) // the asker, alone: its whole prompt
	h.submit(Request{Tokens: p, MaxNewTokens: 3})
	step(1, 1, 8) // the prefix is still cached for a request that does not ask
	h.drain(100)
	h.checkOutputs()
	if want := wantFakePrompt(p, 2); !slices.EqualFunc(seen.got[asker], want, sameLP) {
		t.Fatalf("prompt logprobs %v, want %v", seen.got[asker], want)
	}
	if len(filler.errs) > 0 || filler.asked[fmt.Sprint(p)] != 1 {
		t.Fatalf("asked %v: %v", filler.asked, filler.errs)
	}
}

// plpRequests are realRequests with prompt logprobs asked by some: 0 (the hobbit, 3 alternatives,
// output logprobs too), 2 (the hobbit again, admitted once 0's prefix is cached; the most
// alternatives), 3 (none; sampled) and 5 ("Hello", a one-token prompt), not by 1 nor by 4 (the
// hobbit and more: a prefix-cache hit).
func plpRequests(m *engine.Model) []Request {
	reqs := realRequests(m)
	for i, top := range map[int]int{0: 3, 2: engine.MaxTopLogprobs, 3: 0, 5: 2} {
		reqs[i].PromptLogprobs, reqs[i].PromptTopLogprobs = true, top
	}
	reqs[0].Logprobs, reqs[0].TopLogprobs = true, 2
	reqs[4].PromptTopLogprobs = 5 // without PromptLogprobs: none
	return reqs
}

// plpReference is FillLogprobs over the rows of logits of prompt, run alone and whole on a
// separate CPU engine: entry j for prompt token j+1, from the logits at position j.
func plpReference(t *testing.T, m *engine.Model, prompt []int32, top int) []engine.TokenLogprobs {
	t.Helper()
	e, err := engine.New(m, engine.Options{Device: "cpu", MaxBatch: 1, MaxSeqLen: 64, Threads: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	rows, err := e.Backend.(*engine.CPUBackend).Logits(&engine.Batch{Seqs: []engine.SeqStep{{ID: 1, Tokens: prompt, Blocks: []int32{0}}}}, true)
	if err != nil {
		t.Fatal(err)
	}
	want := make([]engine.TokenLogprobs, len(prompt)-1)
	for j := range want {
		engine.FillLogprobs(&want[j], rows[j], prompt[j+1], top)
	}
	return want
}

// plpBackend counts the sequences that ask for prompt logprobs, reports those that do not run
// their whole prompt from position 0, and counts those whose prompt had a prefix in the cache
// (bm: the scheduler's, read on its loop's goroutine during its calls). It forwards MaxAhead, so
// a speculating backend still runs ahead.
type plpBackend struct {
	engine.Backend
	bm      *engine.BlockManager
	asks    int
	skipped int // asking sequences that could have had cached tokens
	errs    []string
}

func (p *plpBackend) Step(b *engine.Batch, next []int32) error {
	for _, sq := range b.Seqs {
		if !sq.PromptLogprobs {
			continue
		}
		p.asks++
		if sq.Start != 0 {
			p.errs = append(p.errs, fmt.Sprintf("sequence %d asks for prompt logprobs from position %d", sq.ID, sq.Start))
		}
		if p.bm.CachedPrefix(sq.Tokens) > 0 {
			p.skipped++
		}
	}
	return p.Backend.Step(b, next)
}

func (p *plpBackend) MaxAhead() int {
	if sp, ok := p.Backend.(speculator); ok {
		return sp.MaxAhead()
	}
	return 0
}

// plpRun is what runPromptLogprobs saw.
type plpRun struct {
	ids    []RequestID
	recs   map[RequestID]*Record
	seen   *plpSeen
	be     *plpBackend
	cached int // prompt tokens the prefix cache served
}

// runPromptLogprobs runs reqs to their end through a scheduler over be (layout cut to blocks when
// > 0), checking every step's prompt logprobs events (plpSeen).
func runPromptLogprobs(t *testing.T, be engine.Backend, layout engine.KVLayout, eos int32, blocks int, prefix bool, policy Policy, reqs []Request) plpRun {
	t.Helper()
	if blocks > 0 {
		layout.NumBlocks = blocks
	}
	pb := &plpBackend{Backend: be}
	s, err := New(Options{Backend: pb, Layout: layout, PrefixCache: prefix, MaxSeqLen: 64, EOS: eos,
		Clock: newFakeClock(), BatchLimit: 4, Config: Config{MaxBatch: 4, PrefillMaxBatch: 2, Policy: policy}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	pb.bm = s.loop.bm
	r := plpRun{recs: map[RequestID]*Record{}, seen: newPLPSeen(), be: pb}
	for _, q := range reqs {
		id, err := s.Submit(q)
		if err != nil {
			t.Fatal(err)
		}
		r.ids = append(r.ids, id)
		r.seen.asked[id] = q.PromptLogprobs
	}
	for step := 0; len(r.recs) < len(reqs); step++ {
		o, err := s.Step()
		if err != nil || step > 2000 {
			t.Fatalf("step %d: %v", step, err)
		}
		r.seen.add(t, o)
		r.cached += o.Snapshot.CachedTokens
		for _, e := range o.Events {
			if e.Kind == EventFinished {
				r.recs[e.ID] = e.Record
			}
		}
	}
	r.seen.unchanged(t)
	for _, e := range pb.errs {
		t.Error(e)
	}
	return r
}

// checkRealPrompt compares each asking request's prompt logprobs with plpReference's within
// tol (and the ranks, when rank is set), and checks that the backend was asked once per asking
// request of more than one prompt token, never for a recompute.
func checkRealPrompt(t *testing.T, m *engine.Model, reqs []Request, r plpRun, tol float64, rank bool) {
	t.Helper()
	asks := 0
	for i, q := range reqs {
		id := r.ids[i]
		if rec := r.recs[id]; rec.Reason != FinishLength {
			t.Fatalf("request %d ended %s (%v)", i, rec.Reason, rec.Err)
		}
		if !q.PromptLogprobs {
			continue
		}
		got := r.seen.got[id]
		if len(q.Tokens) == 1 {
			if got == nil || len(got) != 0 {
				t.Errorf("request %d: one-token prompt: prompt logprobs %v (nil: %v), want empty, not nil", i, got, got == nil)
			}
			continue
		}
		asks++
		want := plpReference(t, m, q.Tokens, q.PromptTopLogprobs)
		if len(got) != len(want) {
			t.Fatalf("request %d: %d prompt logprobs for a prompt of %d tokens", i, len(got), len(q.Tokens))
		}
		for j := range want {
			if err := lpDiff(got[j], want[j], tol); err != nil {
				t.Fatalf("request %d prompt token %d: %v", i, j+1, err)
			}
			if rank && got[j].Rank != want[j].Rank {
				t.Fatalf("request %d prompt token %d: rank %d, want %d", i, j+1, got[j].Rank, want[j].Rank)
			}
		}
	}
	if r.be.asks != asks {
		t.Fatalf("the backend was asked for prompt logprobs %d times, want %d (once per asking request)", r.be.asks, asks)
	}
}

// TestPromptLogprobsRealEngine: requests that ask for prompt logprobs get, on their first token
// event, FillLogprobs over the model's logits at every prompt position (a reference engine over
// the prompt alone), within float32 rounding and with the same ranks; a one-token prompt gets an
// empty slice. With the prefix cache on, an asker whose prompt's prefix is cached still gets
// every entry (it computes the prompt whole, and the backend sees it start at position 0); with a
// pool so small that askers are preempted, the recompute asks for nothing and no second event
// carries them. Paged in each policy and contiguous; outputs equal across all.
func TestPromptLogprobsRealEngine(t *testing.T) {
	m, err := engine.LoadTiny()
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	reqs := plpRequests(m)
	if len(reqs[5].Tokens) != 1 {
		t.Fatalf("request 5's prompt has %d tokens, want 1", len(reqs[5].Tokens))
	}
	var first plpRun
	for _, c := range []struct {
		name   string
		paged  bool
		blocks int
		prefix bool
		policy Policy
	}{
		{"paged, prefill first", true, 0, false, PrefillFirst},
		{"paged with prefix cache, mixed", true, 0, true, Mixed},
		{"paged with prefix cache, decode first", true, 0, true, DecodeFirst},
		{"tiny pool with prefix cache, mixed", true, 6, true, Mixed},
		{"tiny pool with prefix cache, prefill first", true, 6, true, PrefillFirst},
		{"contiguous, mixed", false, 0, false, Mixed},
	} {
		t.Run(c.name, func(t *testing.T) {
			e, err := engine.New(m, engine.Options{Device: "cpu", Paged: c.paged, MaxBatch: 4, MaxSeqLen: 64, Threads: 2})
			if err != nil {
				t.Fatal(err)
			}
			defer e.Close()
			r := runPromptLogprobs(t, e.Backend, e.Layout, m.Tokenizer.EOS(), c.blocks, c.prefix, c.policy, reqs)
			checkRealPrompt(t, m, reqs, r, 1e-5, true)
			preempted := 0
			for i, q := range reqs {
				if q.PromptLogprobs && len(q.Tokens) > 1 && r.recs[r.ids[i]].Preemptions > 0 {
					preempted++
				}
			}
			if c.prefix && (r.be.skipped == 0 || r.cached == 0) || c.blocks > 0 && preempted == 0 {
				t.Fatalf("not covered: %d askers with a cached prefix, %d cached tokens, %d askers preempted", r.be.skipped, r.cached, preempted)
			}
			if first.recs == nil {
				first = r
				return
			}
			for i := range reqs {
				if got, want := r.recs[r.ids[i]].Output, first.recs[first.ids[i]].Output; !slices.Equal(got, want) {
					t.Errorf("request %d: %v, the first run %v", i, got, want)
				}
			}
		})
	}
}

// TestPromptLogprobsCUDA runs plpRequests through the scheduler over the CUDA backend (paged, CUDA
// graphs, steps run ahead), with the whole pool and the prefix cache, and with a pool so small
// that askers are preempted: prompt logprobs within 2e-3 of the CPU reference (fp16 weights and
// activations; ranks not compared: near ties may swap), asked once per request. Skips without a
// GPU (fails with ROSETOP_REQUIRE_GPU=1).
func TestPromptLogprobsCUDA(t *testing.T) {
	m, e := tinyCUDAEngine(t)
	reqs := plpRequests(m)
	for _, blocks := range []int{0, 6} {
		t.Run(fmt.Sprintf("%d blocks", blocks), func(t *testing.T) {
			r := runPromptLogprobs(t, e.Backend, e.Layout, m.Tokenizer.EOS(), blocks, true, Mixed, reqs)
			checkRealPrompt(t, m, reqs, r, 2e-3, false)
			if r.be.skipped == 0 {
				t.Fatal("no asker had a cached prefix: the test does not cover the prefix cache")
			}
		})
	}
}

// TestPromptLogprobsSteadyAllocs: once the requests that asked for prompt logprobs have had them,
// a decode step allocates no more than the same step of requests that never asked, and its batch
// carries no prompt logprobs, sized without allocating.
func TestPromptLogprobsSteadyAllocs(t *testing.T) {
	allocs := func(asks bool) float64 {
		s, err := New(Options{Backend: newPromptFiller(noopBackend{}), Layout: engine.KVLayout{BlockSize: 16, NumBlocks: 64, Paged: true},
			MaxSeqLen: 512, EOS: -1, Config: Config{MaxBatch: 4, PrefillMaxBatch: 4}})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		for i := range 4 {
			if _, err := s.Submit(Request{Tokens: prompt(int32(i+1), 20), MaxNewTokens: 400, PromptLogprobs: asks, PromptTopLogprobs: 5}); err != nil {
				t.Fatal(err)
			}
		}
		for range 2 { // the prefill, then a first decode step
			if _, err := s.Step(); err != nil {
				t.Fatal(err)
			}
		}
		n := testing.AllocsPerRun(100, func() {
			if o, err := s.Step(); err != nil || o.Snapshot.DecodeTokens != 4 {
				t.Fatalf("step: %v, %+v", err, o.Snapshot)
			}
		})
		b := &s.loop.decode // the last decode batch: no sequence asks
		if m := testing.AllocsPerRun(100, func() { s.loop.sizePromptLogprobs(b) }); m != 0 || b.PromptLogprobs != nil {
			t.Fatalf("a batch without an asker: %v allocations sizing its prompt logprobs, %d entries", m, len(b.PromptLogprobs))
		}
		return n
	}
	plain, asked := allocs(false), allocs(true)
	t.Logf("allocations per decode step: %v, %v after prompt logprobs", plain, asked)
	if asked > plain {
		t.Fatalf("a decode step allocates %v times after prompt logprobs, %v without", asked, plain)
	}
}

// TestTrimPromptBufs: the buffers lent for prompt logprobs keep at most promptBufsKeep entries
// between calls, the first ones kept whole.
func TestTrimPromptBufs(t *testing.T) {
	var l loopState
	small, big := promptBufsKeep/4, promptBufsKeep/2
	for k, n := range []int{small, big, small, big, 1} {
		l.promptBuf(k, n)
	}
	l.trimPromptBufs()
	kept := 0
	for _, b := range l.promptBufs {
		kept += cap(b)
	}
	if len(l.promptBufs) != 3 || kept > promptBufsKeep {
		t.Errorf("kept %d buffers of %d entries in all, want the first 3 (at most %d entries)", len(l.promptBufs), kept, promptBufsKeep)
	}
	l.promptBuf(3, 8) // a buffer dropped is made again on demand
	if len(l.promptBufs) != 4 || len(l.promptBufs[3]) != 8 {
		t.Errorf("after a trim, buffer 3 has %d entries of %d buffers", len(l.promptBufs[3]), len(l.promptBufs))
	}
}
