package remote

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"sync"
	"time"

	"rosetop/bench"
	"rosetop/sched"
)

// ErrClosed is returned by Submit once the server is closing.
var ErrClosed = errors.New("remote: server closed")

// ErrWatchOnly is returned by Submit on a watching server (ProviderOptions.Watch).
var ErrWatchOnly = errors.New("remote: watch mode sends no requests")

// remoteServer is a bench.Server over a remote OpenAI-compatible server: each Submit is one streaming
// request on its own goroutine; Run turns their chunks and results into scheduler step outputs,
// and the scrape loop (started by Run) reads /metrics.
//
// Goroutines: the caller's (Submit, Cancel, SetConfig, ServerMetrics), one per request (do),
// Run's, and the scrape loop's. Requests hand their events to Run through pending and wake.
type remoteServer struct {
	p      *Provider        // read-only
	client *Client          // safe for concurrent use
	clock  bench.Clock      // the session's
	info   bench.ServerInfo // immutable
	watch  metricsSide      // the /metrics side: the server's watcher, or a fleet's
	// jitter spreads a backoff (immutable; equalJitter): requests waiting after the same
	// refusals wake over [d/2, d], not all at once against a server that is shedding load.
	jitter func(d time.Duration) time.Duration

	wake chan struct{}  // capacity 1: pending has events, or a scrape landed
	reqs sync.WaitGroup // request goroutines

	mu       sync.Mutex // guards the fields below
	cfg      sched.Config
	next     sched.RequestID
	calls    map[sched.RequestID]*call
	pending  []sched.Event // events for Run's next step, in arrival order
	finished uint64
	steps    uint64
	closed   bool
	refused  int           // refusals (see refusal) in a row; reset by any other answer
	retryAt  time.Duration // on clock: no request goes before it (a refusal's Retry-After); reset with refused
}

// Backoff after refusals: a session whose server went away or is overloaded waits before each
// next request, doubling from backoffMin to backoffMax, instead of replacing each refused
// request at once (a retry storm against a server that is shedding load).
const (
	backoffMin = 10 * time.Millisecond
	backoffMax = time.Second
)

// backoff is the wait before a request after n refusals in a row, before its jitter.
func backoff(n int) time.Duration {
	if n <= 0 {
		return 0
	}
	return min(backoffMax, backoffMin<<min(n-1, 16))
}

// equalJitter is d's half plus a uniform share of the other half: a wait in [d/2, d].
func equalJitter(d time.Duration) time.Duration {
	if d <= 0 {
		return d
	}
	return d/2 + rand.N(d-d/2+1)
}

// refusal reports whether f says the server is not taking requests now: no connection, a
// connection closed before any answer, or an answer of 429 (too many requests) or 5xx
// (overloaded, failing, or down behind a proxy).
func refusal(f *Failure) bool {
	return f != nil && (f.Reason == ReasonConnect || f.Unanswered ||
		(f.Reason == ReasonStatus && (f.Status == http.StatusTooManyRequests || f.Status >= 500)))
}

// call is one request in flight; its fields are guarded by remoteServer.mu.
type call struct {
	cancel  context.CancelFunc
	max     int  // its max_tokens: no event carries more placeholder ids in all
	started bool // its first chunk arrived
	tokens  int  // tokens its token events have carried
}

// NewServer builds a client of the prepared server on the session's clock.
func (p *Provider) NewServer(ctx context.Context, spec bench.ServerSpec) (bench.Server, error) {
	cfg := p.opts.Client
	cfg.Clock, cfg.Tokenizer = spec.Clock, p.tok
	c, err := New(cfg)
	if err != nil {
		return nil, err
	}
	s := &remoteServer{
		p: p, client: c, clock: spec.Clock, info: p.info(spec), wake: make(chan struct{}, 1), jitter: equalJitter,
		cfg: spec.Sched, calls: map[sched.RequestID]*call{},
	}
	if s.watch, err = p.metricsSide(spec); err != nil {
		c.Close()
		return nil, err
	}
	return s, nil
}

// metricsSide is a watcher of the server's /metrics, or with a fleet one for each server.
func (p *Provider) metricsSide(spec bench.ServerSpec) (metricsSide, error) {
	if p.members == nil {
		return newWatcher(p, spec)
	}
	ws := make([]*watcher, 0, 1+len(p.members))
	for _, m := range append([]*Provider{p}, p.members...) {
		w, err := newWatcher(m, spec)
		if err != nil {
			for _, w := range ws {
				w.close()
			}
			return nil, err
		}
		ws = append(ws, w)
	}
	return newFleet(ws, spec.SLOs), nil
}

func (s *remoteServer) Info() bench.ServerInfo { return s.info }

// Submit starts r as one streaming request and returns at once.
func (s *remoteServer) Submit(r sched.Request) (sched.RequestID, error) {
	if s.p.opts.Watch {
		return 0, ErrWatchOnly
	}
	req := s.request(r)
	ctx, cancel := context.WithCancel(context.Background())
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		cancel()
		return 0, ErrClosed
	}
	s.next++
	id := s.next
	s.calls[id] = &call{cancel: cancel, max: req.MaxTokens}
	s.reqs.Add(1)
	s.mu.Unlock()
	go s.do(ctx, id, req, r)
	return id, nil
}

// request maps a scheduler request onto the API: greedy unless sampling was asked for, and
// --no-stop-on-eos as vLLM's and SGLang's ignore_eos with min_tokens.
func (s *remoteServer) request(r sched.Request) Request {
	sp := r.Sampling
	req := Request{
		API: s.p.opts.API, Model: s.p.model, Prompt: r.Text, PromptIDs: r.Tokens, MaxTokens: r.MaxNewTokens,
		Temperature: float64(sp.Temperature), TopK: sp.TopK,
	}
	if sp.TopP > 0 && sp.TopP < 1 {
		req.TopP = float64(sp.TopP)
	}
	if !r.StopOnEOS {
		req.IgnoreEOS, req.MinTokens = true, r.MaxNewTokens
	}
	if sp.Temperature > 0 {
		seed := int64(sp.Seed >> 1) // a JSON integer every server reads
		req.Seed = &seed
	}
	return req
}

// do runs one request to its end and hands over its record.
func (s *remoteServer) do(ctx context.Context, id sched.RequestID, req Request, r sched.Request) {
	defer s.reqs.Done()
	// After refusals, wait the backoff, and at least until the Retry-After the server asked
	// for, looked at again after each wait (a refusal answered meanwhile may have moved it on);
	// a cancelled request stops waiting and fails as cancelled without being sent.
	s.mu.Lock()
	wait := max(s.jitter(backoff(s.refused)), s.retryAt-s.clock.Now())
	s.mu.Unlock()
	for wait > 0 && s.clock.Sleep(ctx, wait) == nil {
		s.mu.Lock()
		wait = s.retryAt - s.clock.Now()
		s.mu.Unlock()
	}
	res, err := s.client.Do(ctx, req, func(c Chunk) { s.chunk(id, c) })
	rec := s.record(id, req, r, &res, err)
	s.mu.Lock()
	switch {
	case refusal(res.Failure):
		s.refused++
		if d := res.Failure.RetryAfter; d > 0 {
			s.retryAt = max(s.retryAt, s.clock.Now()+d)
		}
	case res.Status != 0:
		s.refused, s.retryAt = 0, 0
	}
	c := s.calls[id]
	delete(s.calls, id)
	if n := len(rec.Output); rec.Reason != sched.FinishError && rec.Reason != sched.FinishCancelled && c.tokens < n {
		// Chunks whose count the server did not say went as one token each: the events carry
		// the rest, so that they add up to the record's count.
		s.pending = append(s.pending, sched.Event{Kind: sched.EventTokens, ID: id, Tokens: make([]int32, n-c.tokens), At: res.Last})
	}
	s.pending = append(s.pending, sched.Event{Kind: sched.EventFinished, ID: id, Record: rec})
	s.finished++
	s.mu.Unlock()
	s.poke()
}

// chunk hands one chunk to Run as a token event: as many placeholder ids as the chunk carried
// tokens (one when the server did not say and it has text), the first with its request's
// times up to its first chunk.
func (s *remoteServer) chunk(id sched.RequestID, c Chunk) {
	n := c.Tokens
	if n < 0 {
		n = 0
		if c.Text != "" {
			n = 1
		}
	}
	s.mu.Lock()
	cl := s.calls[id]
	n = min(n, max(0, cl.max-cl.tokens)) // a count past max_tokens fails the record (see record)
	ev := sched.Event{Kind: sched.EventTokens, ID: id, Tokens: make([]int32, n), Text: c.Text, At: c.At}
	if !cl.started {
		cl.started = true
		ev.First = &sched.Times{SubmitStart: c.Start, FirstToken: c.At, Tokens: []time.Duration{c.At}}
	}
	cl.tokens += n
	s.pending = append(s.pending, ev)
	s.mu.Unlock()
	s.poke()
}

// record is a finished request's record: vLLM bench serve's points (the POST, the first and
// last chunks with choices) as its submit, first-token and finish times, one token time per
// chunk; the server's inner times (tokenized, admitted) are unknown to a client and left zero.
func (s *remoteServer) record(id sched.RequestID, req Request, r sched.Request, res *Result, err error) *sched.Record {
	rec := &sched.Record{ID: id, Text: res.Text, PromptTokens: res.PromptTokens}
	switch {
	case err == nil && res.Finish == "length":
		rec.Reason = sched.FinishLength
	case err == nil:
		rec.Reason = sched.FinishEOS // "stop", "eos_token", "stop_sequence": the model ended it
	case res.Failure != nil && res.Failure.Reason == ReasonCanceled:
		rec.Reason = sched.FinishCancelled
	default:
		rec.Reason, rec.Err = sched.FinishError, err
	}
	if rec.PromptTokens < 0 {
		rec.PromptTokens = len(r.Tokens)
		if r.Tokens == nil {
			rec.PromptTokens = len(s.p.tok.Encode(req.Prompt))
		}
	}
	n, source := res.OutputTokens, res.Tokens.String()
	if n < 0 {
		n = len(res.Chunks)
	}
	t := sched.Times{SubmitStart: res.Start, FirstToken: res.First, Finished: res.Last, Tokens: make([]time.Duration, len(res.Chunks))}
	counts, said := make([]int, len(res.Chunks)), 0
	for i, c := range res.Chunks {
		t.Tokens[i], counts[i] = c.At, c.Tokens
		said += min(max(c.Tokens, 0), req.MaxTokens+1) // enough to tell an overflow, never wraps
	}
	// The server's own counts (usage, chunks) cannot pass max_tokens; a tokenizer's count of
	// the text may (another model's tokenizer), and the text's length bounds it.
	if stated := max(said, n); res.Tokens != TokensTokenizer && stated > req.MaxTokens {
		if err == nil {
			rec.Reason, rec.Err = sched.FinishError, &Failure{Reason: ReasonOverflow,
				Detail: fmt.Sprintf("the server counted %d completion tokens for max_tokens %d", stated, req.MaxTokens)}
		}
		n = min(n, req.MaxTokens)
	}
	rec.Output = make([]int32, n)
	if err != nil {
		t.Finished = res.End
	}
	if t.SubmitStart == 0 { // never sent (a request the client refused)
		t.SubmitStart, t.Finished = s.clock.Now(), s.clock.Now()
	}
	rec.Times, rec.Stream = t, &sched.StreamRecord{ChunkTokens: counts, TokenSource: source}
	return rec
}

// Cancel ends request id: its connection closes, which frees its KV cache on the server. Its
// record (reason cancelled) still follows.
func (s *remoteServer) Cancel(id sched.RequestID) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if c, ok := s.calls[id]; ok {
		c.cancel()
	}
}

// SetConfig keeps the knobs the session shows; the remote server's own scheduler is not ours
// to tune.
func (s *remoteServer) SetConfig(c sched.Config) error {
	if err := c.Validate(s.info.MaxBatch); err != nil {
		return err
	}
	s.mu.Lock()
	s.cfg = c
	s.mu.Unlock()
	return nil
}

func (s *remoteServer) Config() sched.Config {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cfg
}

// Run sends a step output whenever requests have delivered events or a scrape has landed: all
// events since the last step, and the queue as the server's metrics tell it (else as the
// client sees it: waiting for a first chunk, streaming).
func (s *remoteServer) Run(ctx context.Context, out chan<- sched.StepOutput) error {
	var scraping sync.WaitGroup
	scraping.Add(1)
	go func() {
		defer scraping.Done()
		s.watch.loop(ctx, s.poke)
	}()
	defer scraping.Wait()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-s.wake:
		}
		so, serverQueue := s.step()
		if s.p.opts.Watch && !serverQueue {
			continue // no client-side counts to show: the queue chart holds rather than drop to 0
		}
		select {
		case out <- so:
		case <-ctx.Done():
			return nil
		}
	}
}

// step takes the pending events into one step output; serverQueue says whether its queue is
// the server's (else the client's).
func (s *remoteServer) step() (so sched.StepOutput, serverQueue bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.steps++
	so = sched.StepOutput{Events: s.pending}
	s.pending = nil
	// Config stays zero: the server's scheduler ran with knobs of its own.
	snap := sched.Snapshot{Step: s.steps, At: s.clock.Now(), Kind: sched.StepDecode, Finished: s.finished}
	for _, c := range s.calls {
		if c.started {
			snap.Running++
		} else {
			snap.Waiting++
		}
	}
	for _, e := range so.Events {
		if e.Kind == sched.EventFinished {
			so.Finished = append(so.Finished, e.ID)
		}
		if e.First != nil {
			snap.Admitted++ // the client's count: fill replaces it where the server counts
		}
	}
	serverQueue = s.watch.fill(&snap)
	so.Snapshot = snap
	return so, serverQueue
}

func (s *remoteServer) poke() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// ServerMetrics is the server's own view of itself over the rolling window.
func (s *remoteServer) ServerMetrics() *bench.ServerMetrics { return s.watch.latest() }

// ServerRestarts are the restarts the scrapes saw of the server, or of each of a fleet's.
func (s *remoteServer) ServerRestarts() []bench.ServerRestarts { return s.watch.serverRestarts() }

// Ledger has no entries: a remote server's one-time costs are its own.
func (s *remoteServer) Ledger(from int) []bench.LedgerEntry { return nil }

// Close cancels the requests in flight, waits for their goroutines and drops the connections.
func (s *remoteServer) Close() error {
	s.mu.Lock()
	s.closed = true
	for _, c := range s.calls {
		c.cancel()
	}
	s.mu.Unlock()
	s.reqs.Wait()
	s.client.Close()
	s.watch.close()
	return nil
}
