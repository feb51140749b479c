package sched

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"

	"rosetop/engine"
)

// Per-token logprobs (Request.Logprobs, Event.Logprobs) through the scheduler on the CPU backend
// and the embedded tiny GPT-2.

// lpRequests are realRequests with logprobs asked by some (0: greedy, 3 alternatives; 1:
// sampled, the most; 3: sampled, none; 5: greedy, 5), not by the others (2 and 4), and text
// pieces every 3 tokens for some. A small pool preempts 3 and 5.
func lpRequests(m *engine.Model) []Request {
	reqs := realRequests(m)
	for i, top := range map[int]int{0: 3, 1: engine.MaxTopLogprobs, 3: 0, 5: 5} {
		reqs[i].Logprobs, reqs[i].TopLogprobs = true, top
	}
	reqs[5].Sampling = engine.SamplingParams{}
	reqs[4].TopLogprobs = 7 // without Logprobs: no logprobs
	for i := range reqs {
		if i%3 != 2 {
			reqs[i].StreamInterval = 3
		}
	}
	return reqs
}

// lpResult is what a run gave each request: its record and its token events' ids and logprobs,
// concatenated.
type lpResult struct {
	rec    *Record
	tokens []int32
	lps    []engine.TokenLogprobs
}

// runLogprobs runs reqs to their end on s and checks every token event: a request that asked
// has one entry per token, naming it; one that did not has nil. Every entry handed out must be
// unchanged at the end (the scheduler never writes it again).
func runLogprobs(t *testing.T, name string, s *Scheduler, reqs []Request) ([]lpResult, Snapshot) {
	t.Helper()
	ids := make([]RequestID, len(reqs))
	asked := map[RequestID]bool{}
	for i, r := range reqs {
		var err error
		if ids[i], err = s.Submit(r); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		asked[ids[i]] = r.Logprobs
	}
	res := map[RequestID]*lpResult{}
	for _, id := range ids {
		res[id] = &lpResult{}
	}
	type kept struct{ live, copy []engine.TokenLogprobs }
	var handed []kept
	for step, done := 0, 0; done < len(reqs); step++ {
		o, err := s.Step()
		if err != nil || step > 2000 {
			t.Fatalf("%s: step %d: %v", name, step, err)
		}
		for _, e := range o.Events {
			r := res[e.ID]
			switch e.Kind {
			case EventFinished:
				r.rec = e.Record
				done++
			case EventTokens:
				r.tokens = append(r.tokens, e.Tokens...)
				if !asked[e.ID] {
					if e.Logprobs != nil {
						t.Fatalf("%s: request %d did not ask for logprobs, its event has %v", name, e.ID, e.Logprobs)
					}
					break
				}
				if len(e.Logprobs) != len(e.Tokens) || cap(e.Logprobs) != len(e.Logprobs) {
					t.Fatalf("%s: request %d: event of %d tokens has %d logprobs (capacity %d)", name, e.ID, len(e.Tokens), len(e.Logprobs), cap(e.Logprobs))
				}
				for k, tok := range e.Tokens {
					if got := e.Logprobs[k].Sampled.Token; got != tok {
						t.Fatalf("%s: request %d: token %d's logprob names token %d", name, e.ID, tok, got)
					}
				}
				c := make([]engine.TokenLogprobs, len(e.Logprobs))
				for k, l := range e.Logprobs {
					c[k] = engine.TokenLogprobs{Sampled: l.Sampled, Top: slices.Clone(l.Top)}
				}
				handed = append(handed, kept{e.Logprobs, c})
				r.lps = append(r.lps, e.Logprobs...)
			}
		}
	}
	for _, h := range handed {
		if !slices.EqualFunc(h.live, h.copy, func(a, b engine.TokenLogprobs) bool {
			return a.Sampled == b.Sampled && slices.Equal(a.Top, b.Top)
		}) {
			t.Fatalf("%s: logprobs handed out as %v were later changed to %v", name, h.copy, h.live)
		}
	}
	out := make([]lpResult, len(reqs))
	for i, id := range ids {
		r := res[id]
		if !slices.Equal(r.tokens, r.rec.Output) {
			t.Fatalf("%s: request %d: events carried %v, the record %v", name, i, r.tokens, r.rec.Output)
		}
		if asked[id] && len(r.lps) != len(r.rec.Output) {
			t.Fatalf("%s: request %d: %d logprobs for %d output tokens", name, i, len(r.lps), len(r.rec.Output))
		}
		out[i] = *r
	}
	return out, s.Snapshot()
}

// lpReference returns, for each output token of a request that asked, FillLogprobs over the
// tiny model's logits at its position, computed by a separate CPU engine over the whole sequence
// at once (Logits of every position): no scheduler, no batching, no decode steps.
func lpReference(t *testing.T, m *engine.Model, r Request, output []int32) []engine.TokenLogprobs {
	t.Helper()
	e, err := engine.New(m, engine.Options{Device: "cpu", MaxBatch: 1, MaxSeqLen: 64, Threads: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	seq := append(slices.Clone(r.Tokens), output...)
	rows, err := e.Backend.(*engine.CPUBackend).Logits(&engine.Batch{Seqs: []engine.SeqStep{{ID: 1, Tokens: seq[:len(seq)-1], Blocks: []int32{0}}}}, true)
	if err != nil {
		t.Fatal(err)
	}
	want := make([]engine.TokenLogprobs, len(output))
	for k, tok := range output {
		engine.FillLogprobs(&want[k], rows[len(r.Tokens)-1+k], tok, r.TopLogprobs)
	}
	return want
}

// lpDiff says how got differs from want beyond tol: the same token and number of alternatives,
// logprobs within tol, and the same alternative ids where want's neighbours are more than tol
// apart (a closer run may come in another order).
func lpDiff(got, want engine.TokenLogprobs, tol float64) error {
	near := func(a, b float32) bool { return math.Abs(float64(a)-float64(b)) <= tol }
	if got.Sampled.Token != want.Sampled.Token || !near(got.Sampled.Logprob, want.Sampled.Logprob) || len(got.Top) != len(want.Top) {
		return fmt.Errorf("%+v, want %+v", got, want)
	}
	for k, w := range want.Top {
		apart := (k == 0 || float64(want.Top[k-1].Logprob-w.Logprob) > tol) && k+1 < len(want.Top) && float64(w.Logprob-want.Top[k+1].Logprob) > tol
		if !near(got.Top[k].Logprob, w.Logprob) || apart && got.Top[k].Token != w.Token {
			return fmt.Errorf("alternative %d is %+v, want %+v", k, got.Top[k], w)
		}
	}
	return nil
}

// TestLogprobsRealEngine: requests that ask for logprobs get one entry per output token, in
// their token events, equal to FillLogprobs over the model's logits at that position (a
// reference engine over the whole sequence); requests that do not ask get none. Paged in each
// policy, contiguous, and a KV pool so small that sequences are preempted and recomputed with
// prefix-cache hits: a recompute reports only the token it samples, never the tokens it
// re-feeds. Text pieces come every 3 tokens for some requests.
func TestLogprobsRealEngine(t *testing.T) {
	m, err := engine.LoadTiny()
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	reqs := lpRequests(m)
	const tol = 1e-5
	var first []lpResult
	for _, c := range []struct {
		name   string
		paged  bool
		blocks int
		prefix bool
		policy Policy
	}{
		{"paged, decode first", true, 0, false, DecodeFirst},
		{"paged, prefill first", true, 0, false, PrefillFirst},
		{"paged, mixed", true, 0, false, Mixed},
		{"tiny pool with prefix cache, mixed", true, 6, true, Mixed},
		{"tiny pool with prefix cache, decode first", true, 6, true, DecodeFirst},
		{"contiguous, mixed", false, 0, false, Mixed},
	} {
		t.Run(c.name, func(t *testing.T) {
			e, err := engine.New(m, engine.Options{Device: "cpu", Paged: c.paged, MaxBatch: 4, MaxSeqLen: 64, Threads: 2})
			if err != nil {
				t.Fatal(err)
			}
			defer e.Close()
			layout := e.Layout
			if c.blocks > 0 {
				layout.NumBlocks = c.blocks
			}
			s, err := New(Options{Backend: e.Backend, Layout: layout, PrefixCache: c.prefix, MaxSeqLen: 64, EOS: m.Tokenizer.EOS(),
				Clock: newFakeClock(), BatchLimit: 4, Config: Config{MaxBatch: 4, PrefillMaxBatch: 2, Policy: c.policy}})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			got, snap := runLogprobs(t, c.name, s, reqs)
			if c.blocks > 0 && !slices.ContainsFunc(got, func(r lpResult) bool { return r.rec.Preemptions > 0 && len(r.lps) > 0 }) {
				t.Fatalf("%d preemptions, none of a request that asked: the test does not cover recomputes", snap.Preemptions)
			}
			for i, r := range reqs {
				if got[i].rec.Reason != FinishLength {
					t.Fatalf("request %d ended %s (%v)", i, got[i].rec.Reason, got[i].rec.Err)
				}
				if !r.Logprobs {
					continue
				}
				want := lpReference(t, m, r, got[i].rec.Output)
				for k := range want {
					if err := lpDiff(got[i].lps[k], want[k], tol); err != nil {
						t.Fatalf("request %d output token %d: %v", i, k, err)
					}
				}
			}
			if first == nil {
				first = got
				return
			}
			for i := range reqs {
				if !slices.Equal(got[i].tokens, first[i].tokens) {
					t.Errorf("request %d: %v, the first run %v", i, got[i].tokens, first[i].tokens)
				}
			}
			t.Logf("%d preemptions", snap.Preemptions)
		})
	}
}

// TestLogprobsAtTheEnd: the token a request ends on carries its logprobs, whether it ends on
// EOS (its event's token is EOS, its text skipped), on its own stop condition, or on length.
func TestLogprobsAtTheEnd(t *testing.T) {
	m, err := engine.LoadTiny()
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	newSched := func(eos int32) *Scheduler {
		e, err := engine.New(m, engine.Options{Device: "cpu", Paged: true, MaxBatch: 4, MaxSeqLen: 64, Threads: 2})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { e.Close() })
		s, err := New(Options{Backend: e.Backend, Layout: e.Layout, MaxSeqLen: 64, EOS: eos,
			Clock: newFakeClock(), BatchLimit: 4, Config: Config{MaxBatch: 4, PrefillMaxBatch: 4}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(s.Close)
		return s
	}
	r := lpRequests(m)[0]
	r.MaxNewTokens = 16
	base, _ := runLogprobs(t, "length", newSched(m.Tokenizer.EOS()), []Request{r})
	out := base[0].rec.Output
	// The first output token not seen before index 3 ends the request as EOS at its first
	// occurrence, and as a stop token too.
	k := 3
	for k < len(out) && slices.Contains(out[:k], out[k]) {
		k++
	}
	if k == len(out) {
		t.Fatalf("output %v repeats itself: no token to end on", out)
	}
	want := lpReference(t, m, r, out)
	rEOS := r
	rEOS.StopOnEOS = true
	rStop := r
	rStop.Stop = stopAt(out[k])
	for _, c := range []struct {
		name   string
		eos    int32
		r      Request
		reason FinishReason
		n      int
	}{
		{"length", m.Tokenizer.EOS(), r, FinishLength, len(out)},
		{"EOS", out[k], rEOS, FinishEOS, k + 1},
		{"stop", m.Tokenizer.EOS(), rStop, FinishStop, k + 1},
	} {
		got, _ := runLogprobs(t, c.name, newSched(c.eos), []Request{c.r})
		g := got[0]
		if g.rec.Reason != c.reason || len(g.rec.Output) != c.n || len(g.lps) != c.n {
			t.Fatalf("%s: ended %s after %d tokens with %d logprobs, want %s after %d", c.name, g.rec.Reason, len(g.rec.Output), len(g.lps), c.reason, c.n)
		}
		for i := range g.lps {
			if err := lpDiff(g.lps[i], want[i], 1e-5); err != nil {
				t.Fatalf("%s: output token %d: %v", c.name, i, err)
			}
		}
	}
}

// stopAt is a StopCheck that ends a request at token tok.
type stopAt int32

func (s stopAt) Check(tok int32, _ bool) bool { return tok == int32(s) }

// TestLogprobsBadRequest: Submit takes TopLogprobs 0..engine.MaxTopLogprobs only.
func TestLogprobsBadRequest(t *testing.T) {
	s, err := New(Options{Backend: noopBackend{}, Layout: engine.KVLayout{BlockSize: 16, NumBlocks: 8, Paged: true},
		MaxSeqLen: 64, Config: Config{MaxBatch: 4, PrefillMaxBatch: 2}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, c := range []struct {
		logprobs bool
		top      int
		ok       bool
	}{{true, -1, false}, {true, engine.MaxTopLogprobs + 1, false}, {false, engine.MaxTopLogprobs + 1, false},
		{true, 0, true}, {true, engine.MaxTopLogprobs, true}, {false, 3, true}} {
		_, err := s.Submit(Request{Tokens: []int32{1, 2}, MaxNewTokens: 2, Logprobs: c.logprobs, TopLogprobs: c.top})
		if c.ok != (err == nil) || err != nil && (!errors.Is(err, ErrBadRequest) || !strings.Contains(err.Error(), "top logprobs")) {
			t.Errorf("Logprobs %v TopLogprobs %d: %v, want accepted: %v", c.logprobs, c.top, err, c.ok)
		}
	}
}

// TestLogprobsBackendFillsNone: a backend that leaves the logprobs of a sequence that asked
// unfilled fails the step, and the requests in it end with FinishError, instead of events
// carrying stale entries.
func TestLogprobsBackendFillsNone(t *testing.T) {
	s, err := New(Options{Backend: noopBackend{}, Layout: engine.KVLayout{BlockSize: 16, NumBlocks: 8, Paged: true},
		MaxSeqLen: 64, Config: Config{MaxBatch: 4, PrefillMaxBatch: 2}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	plain, _ := s.Submit(Request{Tokens: []int32{1, 2}, MaxNewTokens: 4})
	asks, _ := s.Submit(Request{Tokens: []int32{3, 4}, MaxNewTokens: 4, Logprobs: true})
	o, err := s.Step()
	if err == nil || !strings.Contains(err.Error(), "logprobs") {
		t.Fatalf("step: %v, want an error about the logprobs", err)
	}
	ended := map[RequestID]FinishReason{}
	for _, e := range o.Events {
		if e.Kind == EventTokens {
			t.Fatalf("request %d got a token event from a failed step", e.ID)
		}
		ended[e.ID] = e.Record.Reason
	}
	if ended[plain] != FinishError || ended[asks] != FinishError {
		t.Fatalf("ended %v, want both requests with %s", ended, FinishError)
	}
}

// TestLogprobsCUDA runs lpRequests through the scheduler over the CUDA backend (paged, CUDA
// graphs), with the whole pool and with one so small that sequences are preempted: every token
// event of a request that asked carries its logprobs, within 2e-3 of the CPU reference over the
// tokens the GPU produced (fp16 weights and activations), with the scheduler's Repeats hints on
// (the backend drops them for steps that ask). Skips without a GPU (fails with
// ROSETOP_REQUIRE_GPU=1).
func TestLogprobsCUDA(t *testing.T) {
	m, e := tinyCUDAEngine(t)
	reqs := lpRequests(m)
	for _, blocks := range []int{0, 6} {
		layout := e.Layout
		if blocks > 0 {
			layout.NumBlocks = blocks
		}
		s, err := New(Options{Backend: e.Backend, Layout: layout, PrefixCache: blocks > 0, MaxSeqLen: 64, EOS: m.Tokenizer.EOS(),
			Clock: newFakeClock(), BatchLimit: 4, Config: Config{MaxBatch: 4, PrefillMaxBatch: 2}})
		if err != nil {
			t.Fatal(err)
		}
		name := fmt.Sprintf("pool of %d blocks", layout.NumBlocks)
		got, snap := runLogprobs(t, name, s, reqs)
		s.Close()
		for i, r := range reqs {
			if !r.Logprobs {
				continue
			}
			want := lpReference(t, m, r, got[i].rec.Output)
			for k := range want {
				if err := lpDiff(got[i].lps[k], want[k], 2e-3); err != nil {
					t.Errorf("%s: request %d output token %d: %v", name, i, k, err)
				}
			}
		}
		t.Logf("%s: %d preemptions", name, snap.Preemptions)
	}
}
