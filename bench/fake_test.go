package bench

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"rosetop/engine/tokenizer"
	"rosetop/sched"
)

// fakeClock is a Clock that only moves when told: Sleep advances it at once.
type fakeClock struct {
	mu  sync.Mutex
	now time.Duration // guarded by mu
}

func newFakeClock(start time.Duration) *fakeClock { return &fakeClock{now: start} }

// fakeTime is what a fakeServer needs of the session's clock: a fakeClock, or a clock built on one.
type fakeTime interface {
	Now() time.Duration
	advance(d time.Duration)
}

func (c *fakeClock) Now() time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	c.now += d
	c.mu.Unlock()
}

func (c *fakeClock) Sleep(ctx context.Context, d time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if d > 0 {
		c.advance(d)
	}
	return nil
}

// fakeProvider builds fakeServers: a deterministic engine+scheduler stand-in whose timestamps
// depend only on the submit times (stamped from the fake clock by the submitter goroutine), so
// reports are reproducible to the last digit whatever the goroutine interleaving.
type fakeProvider struct {
	tok         *tokenizer.Tokenizer
	device      string
	hold        int                       // > 0: finish only the first hold requests; the rest wait for Cancel
	held        chan struct{}             // a token each time a request is held (tokens past its buffer dropped)
	addCost     func(k int) time.Duration // add_request cost of the k-th request; nil: default
	onSubmit    func(k int)               // called after the k-th request (of every server) was queued; nil: none
	prewarmErr  error                     // what the servers' Prewarm returns
	prewarmPays bool                      // each Prewarm adds a "cuBLAS warm-up" to its server's ledger
	runPanic    any                       // what the servers' Run panics with (nil: none)
	captures    bool                      // each request adds a "graph capture" to its server's ledger
	fails       func(k int) bool          // the k-th request (of every server) fails with HTTP 429 before its first token; nil: none
	failure     error                     // what those requests fail with instead of HTTP 429 (a plain error: the engine's); nil: HTTP 429
	// remote, when set, makes the servers stand for a remote server's: records without the
	// server's inner times, tokens in chunks of two, every fifth request failing with HTTP 429.
	remote  *RemoteInfo
	mu      sync.Mutex
	built   []EngineOptions // guarded by mu
	servers []*fakeServer   // guarded by mu
}

func newFakeProvider() *fakeProvider {
	return &fakeProvider{device: "cpu", held: make(chan struct{}, 64)}
}

func (p *fakeProvider) Prepare(ctx context.Context, progress io.Writer) error {
	tok, err := tokenizer.GPT2()
	p.tok = tok
	return err
}
func (p *fakeProvider) Model() ModelInfo {
	return ModelInfo{Codec: p.tok, Vocab: p.tok.VocabSize(), MaxPositions: 1024, EOS: p.tok.EOS()}
}
func (p *fakeProvider) Ledger() []LedgerEntry {
	return []LedgerEntry{{What: "model load", Detail: "fake"}}
}
func (p *fakeProvider) Close() error { return nil }

func (p *fakeProvider) NewServer(ctx context.Context, spec ServerSpec) (Server, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	eo := spec.Engine
	p.built = append(p.built, eo)
	s := &fakeServer{
		p: p, clock: spec.Clock.(fakeTime), cfg: spec.Sched, queue: make(chan fakeReq, 1<<14),
		cancels: make(chan sched.RequestID, 1<<14),
		info: ServerInfo{Model: "fake-gpt2", Device: p.device, DeviceDetail: p.device + " (fake)", Paged: eo.Paged,
			CUDAGraph: eo.CUDAGraph && p.device == "cuda", MaxBatch: spec.MaxBatch, KVTotal: 128},
	}
	if p.remote != nil {
		s.info = ServerInfo{Model: "fake-gpt2", Device: "remote", DeviceDetail: p.remote.Kind + " at " + p.remote.Endpoint,
			MaxBatch: spec.MaxBatch, Remote: p.remote}
	}
	p.servers = append(p.servers, s)
	return s, nil
}

type fakeReq struct {
	id    sched.RequestID
	k     int // submission number on this server
	req   sched.Request
	start time.Duration
	end   time.Duration
}

type fakeServer struct {
	p       *fakeProvider
	clock   fakeTime
	info    ServerInfo
	queue   chan fakeReq         // Submit -> Run
	cancels chan sched.RequestID // Cancel -> Run
	mu      sync.Mutex
	cfg     sched.Config // guarded by mu
	next    int          // guarded by mu: submissions so far
	closed  bool         // guarded by mu
	// prewarms holds, for each Prewarm call, the requests submitted before it. Guarded by mu.
	prewarms []int
	warmups  int // ledger entries the Prewarm calls added; guarded by mu
}

// Prewarm records when the session called it and fails with the provider's prewarmErr.
func (s *fakeServer) Prewarm() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.prewarms = append(s.prewarms, s.next)
	if s.p.prewarmPays {
		s.warmups++
	}
	return s.p.prewarmErr
}

func (s *fakeServer) Info() ServerInfo { return s.info }

func (s *fakeServer) Submit(r sched.Request) (sched.RequestID, error) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return 0, errors.New("fake server closed")
	}
	k := s.next
	s.next++
	s.mu.Unlock()
	start := s.clock.Now()
	cost := time.Duration(20+7*(k%5)) * time.Microsecond
	if s.p.addCost != nil {
		cost = s.p.addCost(k)
	}
	s.clock.advance(cost)
	fr := fakeReq{id: sched.RequestID(k + 1), k: k, req: r, start: start, end: s.clock.Now()}
	s.queue <- fr
	if s.p.onSubmit != nil {
		s.p.onSubmit(k)
	}
	return fr.id, nil
}

func (s *fakeServer) Cancel(id sched.RequestID) { s.cancels <- id }

func (s *fakeServer) SetConfig(c sched.Config) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := c.Validate(s.info.MaxBatch); err != nil {
		return err
	}
	s.cfg = c
	return nil
}

func (s *fakeServer) Config() sched.Config {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cfg
}

func (s *fakeServer) Ledger(from int) []LedgerEntry {
	all := []LedgerEntry{{What: "KV pool allocation", Detail: "fake", Took: time.Millisecond}}
	s.mu.Lock()
	if s.p.captures {
		for k := range s.next {
			all = append(all, LedgerEntry{What: "graph capture", Detail: fmt.Sprintf("shape %d", k), Took: time.Millisecond})
		}
	}
	for range s.warmups {
		all = append(all, LedgerEntry{What: "cuBLAS warm-up", Detail: "prewarm", Took: time.Millisecond})
	}
	s.mu.Unlock()
	if from >= len(all) {
		return nil
	}
	return all[from:]
}

func (s *fakeServer) Close() error {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	return nil
}

// record computes a request's timeline from its submit times alone.
func (s *fakeServer) record(fr fakeReq) *sched.Record {
	k := fr.k
	ms := func(x float64) time.Duration { return time.Duration(x * float64(time.Millisecond)) }
	n := fr.req.MaxNewTokens
	prompt := len(fr.req.Tokens)
	if fr.req.Tokens == nil {
		prompt = len(s.p.tok.Encode(fr.req.Text))
	}
	t := sched.Times{SubmitStart: fr.start, SubmitEnd: fr.end, Tokenized: fr.end}
	t.Admitted = t.Tokenized + ms(1.5*float64(k%4))
	t.FirstToken = t.Admitted + ms(2+0.25*float64(k%3))
	t.Tokens = []time.Duration{t.FirstToken}
	for j := 1; j < n; j++ {
		t.Tokens = append(t.Tokens, t.Tokens[j-1]+ms(1+0.1*float64((k+j)%7)))
	}
	t.Finished = t.Tokens[n-1]
	rec := &sched.Record{ID: fr.id, PromptTokens: prompt, Output: make([]int32, n), Reason: sched.FinishLength, Times: t}
	if s.p.remote != nil {
		remoteRecord(rec, k)
	}
	if s.p.fails != nil && s.p.fails(k) { // refused before its first token
		rec.Reason, rec.Err, rec.Output = sched.FinishError, cmp.Or(s.p.failure, error(fakeFailure("http 429"))), nil
		rec.Times.Tokens, rec.Times.FirstToken = nil, 0
		if rec.Stream != nil {
			rec.Stream.ChunkTokens = nil
		}
	}
	return rec
}

// fakeFailure is a remote request's failure as remote.Failure names itself.
type fakeFailure string

func (f fakeFailure) Error() string   { return "remote: " + string(f) + ": Too many requests" }
func (f fakeFailure) Brief() string   { return string(f) }
func (f fakeFailure) Explain() string { return string(f) + ": Too many requests" }

// remoteRecord turns the k-th request's record into a remote server's: no submit end,
// tokenization or admission times, one time per chunk of two tokens, and every fifth failing.
func remoteRecord(rec *sched.Record, k int) {
	t := &rec.Times
	t.SubmitEnd, t.Tokenized, t.Admitted = 0, 0, 0
	var chunks []time.Duration
	var counts []int
	for i := 0; i < len(t.Tokens); i += 2 {
		n := min(2, len(t.Tokens)-i)
		chunks, counts = append(chunks, t.Tokens[i+n-1]), append(counts, n)
	}
	t.Tokens, t.FirstToken = chunks, chunks[0]
	rec.Stream = &sched.StreamRecord{ChunkTokens: counts, TokenSource: "usage"}
	if k%5 == 4 {
		rec.Reason, rec.Err, rec.Output, rec.Stream.TokenSource = sched.FinishError, fakeFailure("http 429"), nil, "unknown"
	}
}

func (s *fakeServer) Run(ctx context.Context, out chan<- sched.StepOutput) error {
	if s.p.runPanic != nil {
		panic(s.p.runPanic)
	}
	held := map[sched.RequestID]fakeReq{}
	var step uint64
	// emit sends a request's life as the scheduler would: a step per token (the first carrying
	// First), the last one with the finished event.
	emit := func(rec *sched.Record, admitted int) bool {
		events := streamEvents(rec)
		for i := range max(1, len(rec.Times.Tokens)) {
			step++
			so := sched.StepOutput{Snapshot: sched.Snapshot{Step: step, At: rec.Times.Finished, Kind: sched.StepDecode,
				Waiting: len(held), Running: 1, KVUsed: 3, KVTotal: 128, Config: s.Config()}}
			if i < len(rec.Times.Tokens) {
				so.Snapshot.At, so.Events = rec.Times.Tokens[i], events[i:i+1:i+1]
			}
			if i == 0 {
				so.Snapshot.Admitted = admitted
			}
			if last := i == len(rec.Times.Tokens)-1 || len(rec.Times.Tokens) == 0; last {
				so.Events, so.Finished = append(so.Events, events[len(events)-1]), []sched.RequestID{rec.ID}
			}
			select {
			case out <- so:
			case <-ctx.Done():
				return false
			}
		}
		return true
	}
	early := map[sched.RequestID]bool{} // cancelled before the loop took them from the queue
	for {
		select {
		case <-ctx.Done():
			return nil
		case fr := <-s.queue:
			if s.p.hold > 0 && fr.k >= s.p.hold {
				held[fr.id] = fr
				select {
				case s.p.held <- struct{}{}:
				default:
				}
				if early[fr.id] {
					delete(early, fr.id)
					s.cancels <- fr.id
				}
				continue
			}
			if !emit(s.record(fr), 1) {
				return nil
			}
		case id := <-s.cancels:
			fr, ok := held[id]
			if !ok {
				early[id] = true
				continue
			}
			delete(held, id)
			now := s.clock.Now()
			rec := &sched.Record{ID: id, Reason: sched.FinishCancelled,
				Times: sched.Times{SubmitStart: fr.start, SubmitEnd: fr.end, Tokenized: fr.end, Finished: now}}
			if !emit(rec, 0) {
				return nil
			}
		}
	}
}
