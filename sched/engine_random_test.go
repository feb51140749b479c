package sched

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"rosetop/engine"
	"rosetop/engine/tokenizer"
)

// TestRealEngineRandom drives the scheduler over the CPU backend and the embedded tiny GPT-2 with
// random workloads, one seed each: a KV pool of a few blocks (admission waits, preemption), the
// prefix cache on or off with prompts that repeat and extend earlier ones, greedy and seeded
// sampling, EOS, stop strings, cancellations between steps and during backend calls, and the
// knobs changed live. After every step the books must balance; every request must end exactly
// once with the reason its calls and tokens give, its output a prefix of what it gives alone
// (all of it when it ran to its end); at the end the pool must be whole again.
//
// ROSETOP_SCHED_SEEDS=N runs seeds 0 to N-1 instead of the first few; -run
// 'TestRealEngineRandom/seed=S$' runs seed S alone.
func TestRealEngineRandom(t *testing.T) {
	seeds := uint64(4)
	if v := os.Getenv("ROSETOP_SCHED_SEEDS"); v != "" {
		seeds = must(strconv.ParseUint(v, 10, 64))
	}
	m, err := engine.LoadTiny()
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	solo := newSoloRuns(t, m)
	var sum tally
	for seed := range seeds {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			sum.add(runRandomReal(t, m, solo, rand.New(rand.NewPCG(seed, 0x5eed))))
		})
	}
	t.Logf("%d seeds: %+v", seeds, sum)
	if seeds >= 4 && (sum.Preemptions == 0 || sum.CachedTokens == 0 || sum.StoppedCalls == 0 ||
		sum.Reasons[FinishLength] == 0 || sum.Reasons[FinishEOS] == 0 || sum.Reasons[FinishCancelled] == 0 || sum.Reasons[FinishStop] == 0) {
		t.Errorf("the workloads missed a path: %+v", sum)
	}
}

// tally is what random workloads went through: without it, a change to the workloads that no
// longer preempts, hits the prefix cache or stops a backend call would pass unnoticed.
type tally struct {
	Preemptions  uint64
	CachedTokens int // prompt tokens the prefix cache served
	StoppedCalls int // backend calls stopped early: every request of the call was ended during it
	Reasons      map[FinishReason]int
}

func (t *tally) add(u tally) {
	t.Preemptions += u.Preemptions
	t.CachedTokens += u.CachedTokens
	t.StoppedCalls += u.StoppedCalls
	if t.Reasons == nil {
		t.Reasons = map[FinishReason]int{}
	}
	for r, n := range u.Reasons {
		t.Reasons[r] += n
	}
}

// FuzzRealEngine is TestRealEngineRandom with the workload's choices read from the input, so
// that the fuzzer explores workloads and shrinks a failing one to its few deciding choices.
func FuzzRealEngine(f *testing.F) {
	f.Add([]byte{}) // every choice 0: a burst of one-token requests, nothing ended early
	m, err := engine.LoadTiny()
	if err != nil {
		f.Fatal(err)
	}
	defer m.Close()
	solo := newSoloRuns(f, m)
	f.Fuzz(func(t *testing.T, choices []byte) {
		runRandomReal(t, m, solo, &byteChooser{choices})
	})
}

// chooser makes the workload's random choices: IntN returns a number in [0, n). *rand.Rand is one.
type chooser interface {
	IntN(n int) int
}

// byteChooser reads choices from bytes, one per choice (two when n > 256), and chooses 0 once
// they run out.
type byteChooser struct{ b []byte }

func (c *byteChooser) IntN(n int) int {
	v := 0
	for range 1 + min(1, (n-1)>>8) {
		if len(c.b) > 0 {
			v = v<<8 | int(c.b[0])
			c.b = c.b[1:]
		}
	}
	return v % n
}

// soloRuns computes what a prompt gives alone, on an engine of its own (engine.Generate), and
// remembers it by prompt and sampling.
type soloRuns struct {
	e    *engine.Engine
	runs map[string][]int32
}

func newSoloRuns(t testing.TB, m *engine.Model) *soloRuns {
	e, err := engine.New(m, engine.Options{Device: "cpu", Paged: true, MaxBatch: 1, MaxSeqLen: 64, Threads: 2})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	return &soloRuns{e: e, runs: map[string][]int32{}}
}

// tokens returns the first n tokens prompt gives alone with sampling sp, EOS or not.
func (o *soloRuns) tokens(t *testing.T, prompt []int32, sp engine.SamplingParams, n int) []int32 {
	t.Helper()
	key := fmt.Sprint(prompt, sp)
	if got := o.runs[key]; len(got) >= n {
		return got[:n]
	}
	out, err := o.e.Generate(context.Background(), prompt, n, sp, false, nil)
	if err != nil || len(out) != n {
		t.Fatalf("solo run of %d tokens: %d tokens, %v", len(prompt), len(out), err)
	}
	o.runs[key] = out
	return out
}

// endCall is the first Cancel or Stopped call naming a request that had not yet ended.
type endCall struct {
	reason FinishReason
	inCall bool // made during a backend call of step, not between two steps
	step   int
}

// realRun is one random workload over a real engine: the harness checks each step's events and
// records; realRun adds the books, the outputs against solo runs, the finish reasons and the text.
type realRun struct {
	h      *harness
	pick   chooser
	solo   *soloRuns
	tok    *tokenizer.Tokenizer
	eos    int32
	prefix bool
	bases  [][]int32 // prompts that later prompts cut, repeat and extend
	total  int       // requests to submit

	step       int                   // steps run so far
	stops      map[RequestID]string  // stop string, when the request has one
	text       map[RequestID]string  // text pieces streamed so far
	ends       map[RequestID]endCall // the first Cancel or Stopped call of each request
	finishedAt map[RequestID]int     // the step that ended each request
}

// runRandomReal runs one random workload to its end on a fresh engine (a zeroed KV pool: no
// stale entry from an earlier run can hide a block read before it is written), and returns what
// it went through.
func runRandomReal(t *testing.T, m *engine.Model, solo *soloRuns, pick chooser) tally {
	e, err := engine.New(m, engine.Options{Device: "cpu", Paged: true, MaxBatch: 8, MaxSeqLen: 64, Threads: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	layout := e.Layout
	layout.NumBlocks = 3 + pick.IntN(6) // a prefix of the backend's pool
	be := &hookBackend{Backend: e.Backend}
	r := &realRun{pick: pick, solo: solo, tok: m.Tokenizer, prefix: pick.IntN(2) == 0, total: 8 + pick.IntN(16),
		stops: map[RequestID]string{}, text: map[RequestID]string{},
		ends: map[RequestID]endCall{}, finishedAt: map[RequestID]int{}}
	for _, s := range []string{
		"In a hole in the ground there lived a hobbit. Not a nasty, dirty, wet hole, filled with the ends of worms and an oozy smell, nor yet a dry, bare, sandy hole",
		"1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20",
	} {
		r.bases = append(r.bases, m.Tokenizer.Encode(s))
	}
	noise := make([]int32, 48)
	for i := range noise {
		noise[i] = int32(pick.IntN(m.Tokenizer.VocabSize()))
	}
	r.bases = append(r.bases, noise)
	var greedy []int32 // EOS: a token greedy runs of the bases give, to end requests often
	for _, b := range r.bases[:2] {
		greedy = append(greedy, solo.tokens(t, b[:20], engine.SamplingParams{}, 16)...)
	}
	r.eos = greedy[pick.IntN(len(greedy))]
	r.h = newHarnessOn(t, Options{Backend: be, Layout: layout, PrefixCache: r.prefix, MaxSeqLen: 64, EOS: r.eos,
		Tokenizer: m.Tokenizer, BatchLimit: 8, Config: r.config()}, newFakeClock())
	if pick.IntN(2) == 0 {
		r.h.s.maxAhead = 1 + pick.IntN(3) // the lookahead a backend queuing steps ahead asks for
	}
	be.hook = r.duringCall
	r.run()
	u := tally{Preemptions: r.h.s.Snapshot().Preemptions, CachedTokens: r.h.cached, Reasons: map[FinishReason]int{}}
	for _, err := range be.errs {
		if errors.Is(err, engine.ErrStopped) {
			u.StoppedCalls++
		}
	}
	for _, rec := range r.h.records {
		u.Reasons[rec.Reason]++
	}
	return u
}

// config returns random knobs.
func (r *realRun) config() Config {
	c := Config{MaxBatch: 1 + r.pick.IntN(8), Policy: Policy(r.pick.IntN(3))}
	c.PrefillMaxBatch = 1 + r.pick.IntN(c.MaxBatch)
	if r.pick.IntN(2) == 0 {
		c.PrefillMaxTokens = 1 + r.pick.IntN(48)
	}
	if r.pick.IntN(4) == 0 {
		c.BurstQuiet = time.Duration(1+r.pick.IntN(5)) * time.Microsecond // on the fake clock: a few readings
	}
	return c
}

// run submits, ends and retunes at random between steps until every request has ended, then
// checks the pool. A choice of 0 submits the next request and does nothing else, so a chooser
// that only gives zeros still brings the run to its end.
func (r *realRun) run() {
	h := r.h
	for len(h.order) < r.total || len(h.records) < len(h.order) {
		for len(h.order) < r.total && r.pick.IntN(3) != 2 {
			r.submit()
		}
		if len(h.order) > 0 && r.pick.IntN(16) == 15 {
			r.endAny(false)
		}
		if r.pick.IntN(12) == 11 {
			r.setConfig()
		}
		out := h.step()
		r.step++
		r.checkStep(out)
		if h.t.Failed() {
			h.t.Fatalf("step %d: %d of %d requests ended; pool %+v, prefix cache %v", r.step, len(h.records), len(h.order), h.s.loop.bm.Layout(), r.prefix)
		}
		if r.step > 5000 {
			h.t.Fatalf("%d of %d requests ended after %d steps", len(h.records), len(h.order), r.step)
		}
	}
	r.checkEnd()
}

// submit queues a random request: a cut of a base prompt, an earlier prompt again, an earlier
// prompt extended by its output so far, or random ids; sometimes as text.
func (r *realRun) submit() {
	h, p := r.h, r.pick
	maxNew := 1 + p.IntN(32)
	room := h.s.seqCap - maxNew // the longest prompt that fits
	var prompt []int32
	switch k := p.IntN(4); {
	case k == 1 && len(h.order) > 0: // again
		prompt = h.prompts[h.order[p.IntN(len(h.order))]]
	case k == 2 && len(h.order) > 0: // extended by the output so far, often cut at a block's end, and a few more tokens
		id := h.order[p.IntN(len(h.order))]
		prompt = slices.Concat(h.prompts[id], h.streamedTokens(id))
		if bs := h.s.loop.bm.Layout().BlockSize; len(prompt) >= bs && p.IntN(2) == 0 {
			prompt = prompt[:len(prompt)/bs*bs] // its last block may hold the token sampled last, not yet run
		}
		prompt = slices.Concat(prompt, r.bases[p.IntN(len(r.bases))][:1+p.IntN(8)])
	case k == 3: // random ids
		prompt = r.bases[2][p.IntN(8):][:1+p.IntN(40)]
	default: // a cut of a base
		b := r.bases[p.IntN(len(r.bases))]
		prompt = b[:1+p.IntN(len(b))]
	}
	if p.IntN(8) == 7 { // as long as fits: with the output, the whole pool or the longest sequence
		prompt = slices.Concat(prompt, slices.Repeat(r.bases[2], room/len(r.bases[2])+1))
	}
	prompt = prompt[:min(len(prompt), room)]
	req := Request{Tokens: prompt, MaxNewTokens: maxNew, StopOnEOS: p.IntN(2) == 0, StreamInterval: 1 + p.IntN(3)}
	if req.StopOnEOS && p.IntN(2) == 0 {
		req.MinNewTokens = p.IntN(maxNew + 1)
	}
	if p.IntN(2) == 0 {
		// Mostly hot and untruncated: the draw then turns on small differences in the logits, so a
		// KV entry that differs from the solo run's shows as a different token. Top-p only after
		// top-k: top-p alone sorts the whole vocabulary, slow under -race.
		req.Sampling = engine.SamplingParams{Temperature: 0.6 + float32(p.IntN(15))/10, Seed: uint64(p.IntN(1000))}
		if p.IntN(3) == 2 {
			req.Sampling.TopK, req.Sampling.TopP = 40, []float32{0, 0.9}[p.IntN(2)]
		}
	}
	if p.IntN(6) == 5 { // as text, tokenized by Submit
		if ids := r.tok.Encode(r.tok.Decode(prompt)); len(ids) > 0 && len(ids) <= room {
			req.Tokens, req.Text, prompt = nil, r.tok.Decode(prompt), ids
		}
	}
	bs := h.s.loop.bm.Layout().BlockSize
	if end := (len(prompt) + maxNew) / bs * bs; end > len(prompt) && p.IntN(3) == 2 {
		// The last token fills a block: that block ends with a token sampled and never run.
		req.MaxNewTokens = end - len(prompt)
		req.MinNewTokens = min(req.MinNewTokens, req.MaxNewTokens)
	}
	id := h.submit(req)
	h.prompts[id] = prompt
	if p.IntN(10) == 9 {
		if text := r.tok.Decode(r.alone(id, req.MaxNewTokens)); text != "" {
			i := p.IntN(len(text))
			r.stops[id] = text[i:min(len(text), i+2+p.IntN(5))]
		}
	}
}

// alone returns what request id gives alone when it may generate at most n tokens: its solo
// run's tokens up to the first EOS that would end it, or n of them.
func (r *realRun) alone(id RequestID, n int) []int32 {
	if n == 0 {
		return nil
	}
	req, prompt := r.h.reqs[id], r.h.prompts[id]
	req.MaxNewTokens = n
	solo := r.solo.tokens(r.h.t, prompt, req.Sampling, n)
	return reference(prompt, req, r.eos, func(seq []int32) int32 { return solo[len(seq)-len(prompt)] })
}

// streamedTokens returns the tokens request id has streamed so far.
func (h *harness) streamedTokens(id RequestID) []int32 {
	if rec := h.records[id]; rec != nil {
		return rec.Output
	}
	if q := h.s.loop.live[id]; q != nil && q.ready {
		return q.tokens[q.prompt:]
	}
	return nil
}

// end calls Cancel or Stopped on id and notes the first such call of a request not yet ended.
func (r *realRun) end(id RequestID, reason FinishReason, inCall bool) {
	_, known := r.h.reqs[id]
	_, done := r.h.records[id]
	if _, again := r.ends[id]; known && !done && !again {
		r.ends[id] = endCall{reason: reason, inCall: inCall, step: r.step + 1}
	}
	if reason == FinishStop {
		r.h.s.Stopped(id)
	} else {
		r.h.s.Cancel(id)
	}
}

// endAny cancels or stops a request picked at random: waiting, running, ended, or unknown.
func (r *realRun) endAny(inCall bool) {
	ids := r.h.order
	id := ids[r.pick.IntN(len(ids))]
	if r.pick.IntN(8) == 0 {
		id = ids[len(ids)-1] + 1 + RequestID(r.pick.IntN(3)) // not submitted (yet)
	}
	r.end(id, []FinishReason{FinishCancelled, FinishStop}[r.pick.IntN(2)], inCall)
}

func (r *realRun) setConfig() {
	if err := r.h.s.SetConfig(r.config()); err != nil {
		r.h.t.Fatal(err)
	}
}

// duringCall is the backend's hook: now and then, while the call runs, it cancels or stops every
// request of the call (the backend then stops early), one of them, or any request, or retunes.
func (r *realRun) duringCall(_ int, b *engine.Batch) {
	if r.pick.IntN(12) != 11 {
		return
	}
	l := &r.h.s.loop // the loop is inside this call, on this goroutine
	reqOf := func(i int) RequestID {
		for _, q := range l.running {
			if q.seq == b.Seqs[i].ID {
				return q.id
			}
		}
		r.h.t.Fatalf("step %d: the backend runs sequence %d, which no running request holds", r.step+1, b.Seqs[i].ID)
		return 0
	}
	reason := []FinishReason{FinishCancelled, FinishStop}[r.pick.IntN(2)]
	switch r.pick.IntN(4) {
	case 0:
		for i := range b.Seqs {
			r.end(reqOf(i), reason, true)
		}
	case 1:
		r.end(reqOf(r.pick.IntN(len(b.Seqs))), reason, true)
	case 2:
		r.endAny(true)
	case 3:
		r.setConfig()
	}
}
