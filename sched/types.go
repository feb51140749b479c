package sched

import (
	"time"

	"rosetop/engine"
)

// RequestID identifies a request for its whole life, across preemptions.
type RequestID uint64

// Request is what a client submits: either a prompt text (tokenized by the scheduler, inline or
// by its tokenize workers) or already-tokenized prompt ids (pretok).
type Request struct {
	Text           string  // prompt text; ignored when Tokens is set
	Tokens         []int32 // prompt ids (pretokenized)
	MaxNewTokens   int     // >= 1
	StopOnEOS      bool    // finish when the model samples EOS
	MinNewTokens   int     // with StopOnEOS, EOS finishes the request only after MinNewTokens outputs (as output MinNewTokens+1 or later, as vLLM's min_tokens); an earlier EOS stays in the output (vLLM masks its logit)
	Sampling       engine.SamplingParams
	StreamInterval int // emit a text piece every N tokens (and at the end); <= 1: every token
	// Stop is the caller's own stop condition (a server's stop strings and stop token ids), or
	// nil. The loop checks it as each token is sampled, so that the request ends at the token
	// that meets it, with FinishStop in its record, rather than steps later on a Stopped call.
	// Only requests that set it pay for it.
	Stop StopCheck
	// Logprobs asks for every output token's log-probability and TopLogprobs
	// (0..engine.MaxTopLogprobs) alternatives' (Event.Logprobs).
	Logprobs    bool
	TopLogprobs int
	// PromptLogprobs asks for each prompt token's log-probability given the tokens before it
	// (the first token has none) and PromptTopLogprobs (0..engine.MaxTopLogprobs) alternatives'
	// (Event.PromptLogprobs). Such a prompt is computed whole: it reuses no cached prefix (as
	// vLLM skips the prefix cache for prompt_logprobs). They come once: a recompute after a
	// preemption asks no more (and may use the cache).
	PromptLogprobs    bool
	PromptTopLogprobs int
}

// StopCheck is a request's own stop condition, decided on the scheduler's loop. Check is called
// with each output token in order, exactly once (a preempted request's tokens are not repeated),
// except an EOS that ends the request (FinishEOS comes first); last says the token is the
// request's MaxNewTokens-th. True ends the request at that token with FinishStop, which wins over
// FinishLength. From Submit on a StopCheck belongs to the loop's goroutine: the submitter must
// not touch it again, nor submit it with another request. Check runs inside a step, so it must be
// quick and must not block.
type StopCheck interface {
	Check(tok int32, last bool) bool
}

// Policy says how a step runs its prefill and decode work.
type Policy int

const (
	DecodeFirst  Policy = iota // run the decode batch of a step before its prefill batch: running sequences' tokens come first
	PrefillFirst               // run the prefill batch of a step before its decode batch: new requests' first tokens come first
	// Mixed runs a step's decode rows and its new prompts as one engine call: one forward pass
	// over both, so a step that admits costs about one pass instead of two (vLLM mixes them the
	// same way). Every token of such a step arrives at the same time.
	Mixed
)

// Config holds the live-tunable knobs; a change applies from the next step.
type Config struct {
	MaxBatch         int    // most running sequences
	PrefillMaxBatch  int    // most requests admitted (prefilled) in one step
	PrefillMaxTokens int    // most prompt tokens prefilled in one step; 0: no limit
	Policy           Policy // see Policy
	// BurstQuiet: when requests reach a loop that holds none, its step first waits until none has
	// arrived for this long (at most burstWaits times it in all), so that requests submitted back
	// to back start as one batch (step.go gather). 0: the step starts at once.
	BurstQuiet time.Duration
}

// Times are a request's monotonic timestamps, measured from the scheduler clock's epoch.
// Zero means "not yet".
type Times struct {
	SubmitStart time.Duration   // Submit called
	SubmitEnd   time.Duration   // Submit returned: enqueued (tokenized too, when tokenizing inline)
	Tokenized   time.Duration   // prompt ids ready (== SubmitEnd unless tokenize workers are used)
	Admitted    time.Duration   // entered a prefill batch (the first time; not reset by preemption)
	FirstToken  time.Duration   // first output token sampled
	Tokens      []time.Duration // every output token, Tokens[0] == FirstToken
	Finished    time.Duration   // finished or cancelled
}

// FinishReason says why a request ended.
type FinishReason string

const (
	FinishLength    FinishReason = "length"    // reached MaxNewTokens
	FinishEOS       FinishReason = "eos"       // sampled EOS with StopOnEOS
	FinishCancelled FinishReason = "cancelled" // Cancel was called
	FinishStop      FinishReason = "stop"      // the caller's own stop condition (a stop string or stop token id) met: Request.Stop, or a Stopped call
	FinishError     FinishReason = "error"     // the engine failed; Err says why
	FinishTooLong   FinishReason = "too_long"  // prompt + MaxNewTokens cannot fit the KV cache/n_positions
)

// Record is a finished request: everything the benchmark needs, handed over exactly once.
type Record struct {
	ID           RequestID
	PromptTokens int
	Output       []int32
	Text         string
	Reason       FinishReason
	Err          error
	Preemptions  int
	Times        Times
	// Stream is set by a Server outside this process (a remote OpenAI-compatible server, whose
	// Times.Tokens hold one entry per stream chunk): what its stream said beyond the fields
	// above. nil for this package's own requests.
	Stream *StreamRecord
}

// StreamRecord is what a remote server's response stream adds to a Record.
type StreamRecord struct {
	// ChunkTokens[i] is how many tokens the chunk that arrived at Times.Tokens[i] carried; -1
	// where the server did not say.
	ChunkTokens []int
	// TokenSource says where len(Output) came from: "usage" (the server's count), "chunks"
	// (the sum of ChunkTokens), "tokenizer" (the text, tokenized here) or "unknown" (the
	// number of chunks).
	TokenSource string
}

// EventKind tells what an Event carries.
type EventKind int

const (
	EventTokens   EventKind = iota // new output token ids (and, every StreamInterval tokens, a text piece)
	EventFinished                  // the request ended; Record is set
)

// Event is one thing that happened to one request in a step.
type Event struct {
	Kind   EventKind
	ID     RequestID
	Tokens []int32 // EventTokens: the ids produced this step
	// Logprobs: EventTokens of a request that asked (Request.Logprobs): Logprobs[i] is Tokens[i]'s,
	// a fresh value the scheduler never writes again.
	Logprobs []engine.TokenLogprobs
	// PromptLogprobs: the first EventTokens of a request that asked (Request.PromptLogprobs):
	// entry j is prompt token j+1's, len(prompt)-1 entries (a one-token prompt: empty, not nil),
	// a fresh value never written again; nil on every other event. A backend that does not fill
	// them fails its step, as for Logprobs: the requests in it end with FinishError.
	PromptLogprobs []engine.TokenLogprobs
	Text           string  // EventTokens: a text piece (whole UTF-8 characters), when one is due
	Record         *Record // EventFinished
	// At is, for EventTokens, when the step's token was sampled: its entry in the record's
	// Times.Tokens (the end of the backend call that produced it, not Snapshot.At, which is the
	// end of the whole step).
	At time.Duration
	// First is set on a request's first EventTokens only: its timestamps up to the first token
	// (SubmitStart, SubmitEnd, Tokenized, Admitted, FirstToken; Tokens holds the first token's
	// time; Finished is zero), equal to those its Record will carry. A fresh value the scheduler
	// never writes again, so a consumer can measure TTFT and its parts as the first token arrives.
	First *Times
}

// StepKind says what a step ran.
type StepKind int

const (
	StepIdle StepKind = iota
	StepPrefill
	StepDecode
	StepMixed
)

// Snapshot is the scheduler's state after a step: an immutable value, safe to keep.
type Snapshot struct {
	Step          uint64        // steps that ran the engine so far (idle steps are not counted)
	At            time.Duration // clock time at the end of the step
	Kind          StepKind
	Waiting       int           // requests queued, not yet admitted (tokenized or not)
	Tokenizing    int           // of Waiting, prompts still with the tokenize workers
	Running       int           // sequences holding KV blocks
	Admitted      int           // requests admitted (prefilled) this step
	PrefillTokens int           // prompt tokens run this step
	DecodeTokens  int           // decode tokens run this step
	StepTime      time.Duration // how long the engine step took: PrefillTime + DecodeTime, or a Mixed step's one call
	PrefillTime   time.Duration // the prefill batch's Backend.Step call (0: none this step; Mixed: the one call)
	DecodeTime    time.Duration // the decode batch's Backend.Step call (0: none this step; Mixed: the one call)
	CachedTokens  int           // prompt tokens found in the prefix cache this step (not run)
	KVUsed        int           // KV blocks in use
	KVTotal       int           // KV blocks in the pool
	Preemptions   uint64        // total so far
	Finished      uint64        // requests finished so far
	Config        Config        // the knobs this step ran with
}

// StepOutput is everything one step produced, delivered in order on the scheduler's output channel.
type StepOutput struct {
	Snapshot Snapshot
	Events   []Event
	Finished []RequestID // just-finished ids this step (no scan over all requests)
}
