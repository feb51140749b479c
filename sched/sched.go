// Package sched is rosetop's continuous-batching scheduler. Clients submit requests from any
// goroutine; one goroutine (Run's, or a test calling Step) owns the loop: it drains submissions and
// cancellations, reserves KV room for the running sequences (preempting the newest when the pool
// runs dry), admits waiting requests FIFO into a prefill batch, runs the prefill and the decode
// batch as separate backend calls, and reports what happened as events, just-finished ids and an
// immutable snapshot.
//
// Sequence ids: every admission gets a fresh engine.SeqID (a request re-admitted after preemption
// gets a new one), so a backend never sees one id with two different histories.
package sched

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"rosetop/engine"
	"rosetop/engine/tokenizer"
)

// Backend runs one batch: see engine.Backend.Step, which satisfies it. Calls come from the loop's
// goroutine, one at a time; the backend must not keep b, its slices, or next after returning.
type Backend interface {
	Step(b *engine.Batch, next []int32) error
}

// speculator is a Backend that may run the steps a Batch.Repeats hint announces before it is
// asked for them (the CUDA backend), writing their keys and values only into blocks the
// sequences' tables hold. MaxAhead is the most steps it runs ahead: the loop gives each running
// sequence blocks for that many more positions when the pool has them free (admit.go lookahead),
// so those steps can cross block boundaries.
type speculator interface {
	MaxAhead() int
}

// Tokenizer turns prompt text into ids and ids into bytes for streamed text; *tokenizer.Tokenizer
// is one. Encode is called from Submit's callers and the tokenize workers at the same time, so it
// must be safe for concurrent use.
type Tokenizer interface {
	Encode(text string) []int32
	TokenBytes(id int32) []byte
}

// Clock is a monotonic clock: time since some fixed epoch. It is read from every goroutine.
type Clock interface {
	Now() time.Duration
}

// Options configure a Scheduler.
type Options struct {
	Backend     Backend
	Layout      engine.KVLayout // the backend's KV pool
	PrefixCache bool            // reuse computed prompt-prefix blocks (paged layouts only)
	MaxSeqLen   int             // longest sequence: prompt + MaxNewTokens
	EOS         int32           // end-of-text token id, for Request.StopOnEOS
	Vocab       int             // prompt token ids are below it (the backend's vocabulary); 0: unchecked
	Tokenizer   Tokenizer       // nil: only pretokenized requests, and no text in events
	// TokenizeWorkers tokenizes text prompts on this many goroutines; 0 tokenizes inside Submit.
	TokenizeWorkers int
	Clock           Clock  // nil: a real monotonic clock started by New
	Config          Config // the initial knobs
	// OutputBuffer is how many events the scheduler carves out of one allocation before making
	// the next (see StepOutput ownership on Step); 0: 4096; at most maxOutputBuffer.
	OutputBuffer int
	// BatchLimit is the most sequences the backend takes in one step (engine.Options.MaxBatch);
	// Config.MaxBatch may not exceed it. 0: no limit.
	BatchLimit int
}

// Scheduler is a continuous-batching scheduler. Submit, Cancel, SetConfig, Config, Snapshot and
// Close may be called from any goroutine; Step and Run drive the loop (one at a time).
type Scheduler struct {
	// Set by New, read-only afterwards.
	backend    Backend
	tok        Tokenizer // nil: pretokenized requests only
	clock      Clock
	eos        int32
	vocab      int // 0: prompt ids not checked against a vocabulary
	maxSeqLen  int
	seqCap     int // longest sequence the KV pool can hold on its own: min(MaxSeqLen, pool capacity)
	batchLimit int
	workers    int
	maxAhead   int // the backend's speculator.MaxAhead; 0 when it does not speculate

	cfg  atomic.Pointer[Config]   // the knobs: stored by SetConfig, loaded by the loop at each step
	snap atomic.Pointer[Snapshot] // the latest snapshot: stored by the loop, loaded by Snapshot
	wake chan struct{}            // capacity 1: a token means "something changed, step again"
	// arrived counts the requests Submit has queued: Submit adds, the loop reads (step.go gather).
	arrived atomic.Uint64

	mu      sync.Mutex  // guards the fields up to workerWG
	tokCond *sync.Cond  // on mu: tokq has work or closed is set
	inbox   []*request  // submitted, not yet taken by the loop; submission order
	cancels []ending    // Cancel and Stopped calls not yet taken by the loop
	tokq    []*request  // text prompts waiting for a tokenize worker; submission order
	tokDone []tokResult // tokenize results not yet taken by the loop
	nextID  RequestID   // last RequestID handed out
	closed  bool        // Close was called
	// inCall holds the requests of the backend call in progress that no Cancel has named since
	// the call's step took its cancellations; when Cancel removes the last, it sets stop.
	inCall []RequestID
	// stop is the call in progress's engine.Batch.Stop: set under mu by Cancel, reset by the
	// loop before each call, read by the backend.
	stop atomic.Bool

	workerWG sync.WaitGroup // tokenize workers

	loopMu sync.Mutex // held by Step: everything in loop belongs to its holder
	loop   loopState
}

// tokResult is a tokenize worker's work, handed to the loop.
type tokResult struct {
	r   *request
	ids []int32
	at  time.Duration // clock when the ids were ready
	err error
}

// wallClock is the real clock: time since New.
type wallClock struct{ start time.Time }

func (c wallClock) Now() time.Duration { return time.Since(c.start) }

// New validates o and returns a Scheduler; with TokenizeWorkers > 0 it starts the workers, which
// Close stops.
func New(o Options) (*Scheduler, error) {
	if err := o.validate(); err != nil {
		return nil, err
	}
	s := &Scheduler{
		backend:    o.Backend,
		tok:        o.Tokenizer,
		clock:      o.Clock,
		eos:        o.EOS,
		vocab:      o.Vocab,
		maxSeqLen:  o.MaxSeqLen,
		batchLimit: o.BatchLimit,
		workers:    o.TokenizeWorkers,
		wake:       make(chan struct{}, 1),
	}
	if sp, ok := o.Backend.(speculator); ok {
		s.maxAhead = sp.MaxAhead()
	}
	if s.clock == nil {
		s.clock = wallClock{start: time.Now()}
	}
	s.tokCond = sync.NewCond(&s.mu)
	capacity := o.Layout.BlockSize // contiguous: one block per sequence
	if o.Layout.Paged {
		capacity = o.Layout.Tokens()
	}
	s.seqCap = min(o.MaxSeqLen, capacity)
	cfg := o.Config
	s.cfg.Store(&cfg)
	s.loop.init(engine.NewBlockManager(o.Layout, o.PrefixCache), o.OutputBuffer)
	s.snap.Store(&Snapshot{KVTotal: s.loop.bm.Total(), Config: cfg})
	for range s.workers {
		s.workerWG.Add(1)
		go s.tokenizeWorker()
	}
	return s, nil
}

// maxOutputBuffer bounds Options.OutputBuffer: each chunk of events is allocated whole.
const maxOutputBuffer = 1 << 20

func (o *Options) validate() error {
	switch {
	case o.Backend == nil:
		return fmt.Errorf("%w: no backend", ErrBadConfig)
	case o.Layout.BlockSize < 1 || o.Layout.NumBlocks < 1:
		return fmt.Errorf("%w: KV layout of %d blocks of %d positions, want >= 1 of each", ErrBadConfig, o.Layout.NumBlocks, o.Layout.BlockSize)
	case o.MaxSeqLen < 2:
		return fmt.Errorf("%w: max sequence length %d, want >= 2 (a prompt token and an output token)", ErrBadConfig, o.MaxSeqLen)
	case o.TokenizeWorkers < 0:
		return fmt.Errorf("%w: --tokenize-workers %d, want >= 0", ErrBadConfig, o.TokenizeWorkers)
	case o.TokenizeWorkers > 0 && o.Tokenizer == nil:
		return fmt.Errorf("%w: --tokenize-workers %d without a tokenizer", ErrBadConfig, o.TokenizeWorkers)
	case o.OutputBuffer < 0 || o.OutputBuffer > maxOutputBuffer:
		return fmt.Errorf("%w: output buffer %d, want 0 to %d", ErrBadConfig, o.OutputBuffer, maxOutputBuffer)
	case o.Vocab < 0:
		return fmt.Errorf("%w: vocabulary of %d ids, want >= 0", ErrBadConfig, o.Vocab)
	case o.BatchLimit < 0:
		return fmt.Errorf("%w: batch limit %d, want >= 0", ErrBadConfig, o.BatchLimit)
	}
	return o.Config.Validate(o.BatchLimit)
}

// Submit queues a request and returns its id. It stamps Times.SubmitStart on entry and
// Times.SubmitEnd when the request is queued; a text prompt is tokenized here when there are no
// tokenize workers, else by a worker (Times.Tokenized then comes later). Requests are admitted in
// the order Submit queued them, whoever tokenizes them and however long that takes.
func (s *Scheduler) Submit(r Request) (RequestID, error) {
	start := s.clock.Now()
	switch {
	case r.MaxNewTokens < 1:
		return 0, fmt.Errorf("%w: --max-new-tokens %d, want >= 1", ErrBadRequest, r.MaxNewTokens)
	case r.MaxNewTokens >= s.seqCap:
		// Checked before the sequence buffer, sized by both, is allocated; a text prompt's
		// length is not known yet.
		return 0, fmt.Errorf("%w: --max-new-tokens %d leaves no position for a prompt: the longest sequence is %s", ErrBadRequest, r.MaxNewTokens, s.seqLimit())
	case len(r.Tokens)+r.MaxNewTokens > s.seqCap:
		return 0, s.tooLong(len(r.Tokens), r.MaxNewTokens)
	}
	if r.MinNewTokens < 0 || r.MinNewTokens > r.MaxNewTokens {
		return 0, fmt.Errorf("%w: min new tokens %d, want 0..%d (the max new tokens)", ErrBadRequest, r.MinNewTokens, r.MaxNewTokens)
	}
	if r.TopLogprobs < 0 || r.TopLogprobs > engine.MaxTopLogprobs {
		return 0, fmt.Errorf("%w: top logprobs %d, want 0..%d", ErrBadRequest, r.TopLogprobs, engine.MaxTopLogprobs)
	}
	if r.PromptTopLogprobs < 0 || r.PromptTopLogprobs > engine.MaxTopLogprobs {
		return 0, fmt.Errorf("%w: prompt top logprobs %d, want 0..%d", ErrBadRequest, r.PromptTopLogprobs, engine.MaxTopLogprobs)
	}
	q := newRequest(r, start)
	switch {
	case len(r.Tokens) > 0:
		q.setPrompt(r.Tokens)
	case r.Text == "":
		return 0, fmt.Errorf("%w: empty prompt: no text and no tokens", ErrBadRequest)
	case s.tok == nil:
		return 0, fmt.Errorf("%w: a text prompt needs a tokenizer; submit token ids instead", ErrBadRequest)
	case s.workers == 0:
		q.setPrompt(s.tok.Encode(r.Text))
	default:
		q.text = r.Text
	}
	if q.ready {
		if err := s.checkPrompt(q); err != nil {
			return 0, err
		}
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return 0, ErrClosed
	}
	s.nextID++
	q.id = s.nextID
	q.times.SubmitEnd = s.clock.Now() // before the loop can see q: SubmitEnd <= Admitted
	if q.ready {
		q.times.Tokenized = q.times.SubmitEnd
	}
	s.inbox = append(s.inbox, q)
	s.arrived.Add(1)
	if !q.ready {
		s.tokq = append(s.tokq, q)
		s.tokCond.Signal()
	}
	s.mu.Unlock()
	s.poke()
	return q.id, nil
}

// checkPrompt validates a tokenized request: a non-empty prompt of valid ids that fits, with every
// token it may generate, in MaxSeqLen and in the KV pool.
func (s *Scheduler) checkPrompt(q *request) error {
	n := q.prompt
	switch {
	case n == 0:
		return fmt.Errorf("%w: empty prompt: the text has no tokens", ErrBadRequest)
	case n+q.maxNew > s.seqCap:
		return s.tooLong(n, q.maxNew)
	}
	for _, id := range q.tokens[:n] {
		if id < 0 || (s.vocab > 0 && int(id) >= s.vocab) {
			return fmt.Errorf("%w: prompt token id %d, want %s", ErrBadRequest, id, s.idRange())
		}
	}
	return nil
}

// tooLong is the error for a request whose prompt and output cannot fit one sequence; it says
// whether the limit is the max sequence length or the KV pool.
func (s *Scheduler) tooLong(prompt, maxNew int) error {
	return fmt.Errorf("%w: prompt of %d tokens + --max-new-tokens %d exceeds the longest sequence: %s", ErrBadRequest, prompt, maxNew, s.seqLimit())
}

// seqLimit names what bounds a sequence: the max sequence length or the KV pool.
func (s *Scheduler) seqLimit() string {
	if s.seqCap < s.maxSeqLen {
		return fmt.Sprintf("the %d positions the KV pool holds for one sequence", s.seqCap)
	}
	return fmt.Sprintf("the max sequence length, %d tokens", s.maxSeqLen)
}

// idRange says which prompt token ids the backend takes.
func (s *Scheduler) idRange() string {
	if s.vocab > 0 {
		return fmt.Sprintf("0..%d (the vocabulary)", s.vocab-1)
	}
	return ">= 0"
}

// Cancel ends request id with FinishCancelled at the next step boundary, releasing its KV blocks;
// when every request of the backend call in progress has been cancelled, the call may stop early
// (engine.Batch.Stop). Unknown ids (Submit has not returned them) and already finished ones are
// ignored. Safe from any goroutine, at any time.
func (s *Scheduler) Cancel(id RequestID) { s.end(id, FinishCancelled) }

// Stopped ends request id as Cancel does, with FinishStop: for a caller that found a stop
// condition of its own in the output (a stop string), so that the request counts as finished,
// not cancelled. It takes effect at a step boundary, after any tokens sampled meanwhile;
// Request.Stop ends a request at the very token instead. The first of a request's Cancel and
// Stopped calls sets its reason.
func (s *Scheduler) Stopped(id RequestID) { s.end(id, FinishStop) }

// ending is a Cancel or Stopped call: the request and the reason it ends with.
type ending struct {
	id     RequestID
	reason FinishReason
}

func (s *Scheduler) end(id RequestID, reason FinishReason) {
	s.mu.Lock()
	if id == 0 || id > s.nextID { // not handed out yet: kept, it would end the request that gets it
		s.mu.Unlock()
		return
	}
	s.cancels = append(s.cancels, ending{id, reason})
	s.uncall(id)
	s.mu.Unlock()
	s.poke()
}

// endReason is the reason of the first Cancel or Stopped call naming id not yet taken by the
// loop (FinishCancelled if none); the caller holds s.mu.
func (s *Scheduler) endReason(id RequestID) FinishReason {
	for _, c := range s.cancels {
		if c.id == id {
			return c.reason
		}
	}
	return FinishCancelled
}

// uncall removes id from the call in progress's requests and sets stop when none is left; the
// caller holds s.mu.
func (s *Scheduler) uncall(id RequestID) {
	for i, c := range s.inCall {
		if c == id {
			last := len(s.inCall) - 1
			s.inCall[i] = s.inCall[last]
			s.inCall = s.inCall[:last]
			if last == 0 {
				s.stop.Store(true)
			}
			return
		}
	}
}

// SetConfig validates c and applies it from the next step. Safe from any goroutine.
func (s *Scheduler) SetConfig(c Config) error {
	if err := c.Validate(s.batchLimit); err != nil {
		return err
	}
	s.cfg.Store(&c)
	s.poke()
	return nil
}

// Config returns the knobs the next step will run with.
func (s *Scheduler) Config() Config { return *s.cfg.Load() }

// Snapshot returns the state after the latest step. Safe from any goroutine.
func (s *Scheduler) Snapshot() Snapshot { return *s.snap.Load() }

// Close stops the tokenize workers and refuses further submissions. Prompts still waiting for a
// worker end with FinishError (Err wraps ErrClosed) at the next step. Close does not stop Run:
// cancel Run's context for that. Idempotent.
func (s *Scheduler) Close() {
	s.mu.Lock()
	if !s.closed {
		s.closed = true
		for _, q := range s.tokq {
			s.tokDone = append(s.tokDone, tokResult{r: q, err: ErrClosed})
		}
		clear(s.tokq)
		s.tokq = s.tokq[:0]
		s.tokCond.Broadcast()
	}
	s.mu.Unlock()
	s.workerWG.Wait()
	s.poke()
}

// poke wakes the loop if it is waiting for work.
func (s *Scheduler) poke() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// tokenizeWorker tokenizes queued text prompts until Close.
func (s *Scheduler) tokenizeWorker() {
	defer s.workerWG.Done()
	s.mu.Lock()
	defer s.mu.Unlock()
	for {
		for len(s.tokq) == 0 && !s.closed {
			s.tokCond.Wait()
		}
		if s.closed {
			return
		}
		q := s.tokq[0]
		s.tokq[0] = nil
		s.tokq = s.tokq[1:]
		s.mu.Unlock()
		ids := s.tok.Encode(q.text) // q.text is read-only once submitted
		at := s.clock.Now()
		s.mu.Lock()
		s.tokDone = append(s.tokDone, tokResult{r: q, ids: ids, at: at})
		s.poke()
	}
}

// newStream returns a text stream for one request, or nil without a tokenizer.
func (s *Scheduler) newStream() *tokenizer.Stream {
	if s.tok == nil {
		return nil
	}
	return tokenizer.NewStream(s.tok)
}
