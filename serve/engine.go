package serve

import (
	"context"
	"time"

	"rosetop/sched"
)

// Engine is the serving side of a running rosetop session: what the HTTP handlers need of it.
// All methods are called from the handlers' goroutines, concurrently.
type Engine interface {
	// Submit queues r and returns its event stream. ctx bounds only the wait to enter the queue
	// (e.g. while the engine is being rebuilt). r.Stop, set for a request with stop strings or
	// stop token ids, must reach the scheduler (sched.Scheduler runs it), which ends the request
	// at the token that completes a stop string or is a stop id; an engine that drops it gets
	// Stream.Stop, later. Errors wrap sched.ErrBadRequest (e.g. prompt + max tokens over the
	// context length) or sched.ErrClosed (shutting down), or are ctx's.
	Submit(ctx context.Context, r sched.Request) (Stream, error)
	// Waiting is the number of requests queued and not yet admitted (for Options.MaxQueue).
	Waiting() int
	// Model describes what is served; it does not change while the server runs.
	Model() Model
}

// Stream is one submitted request's events, in the order the scheduler produced them.
type Stream interface {
	ID() sched.RequestID
	// Next returns the request's next event (sched.EventTokens ..., then one sched.EventFinished
	// carrying the Record), blocking until one arrives or ctx is done (then ctx's error); after the
	// finished event it returns io.EOF. An error wrapping sched.ErrClosed says the engine stopped
	// before the request finished. One goroutine reads a Stream.
	Next(ctx context.Context) (sched.Event, error)
	// Cancel ends the request at the next scheduler step (its KV blocks return); the finished
	// event (Reason sched.FinishCancelled) still follows, and a reader may stop reading after
	// Cancel: the engine drops what it would have delivered. Idempotent, any goroutine.
	Cancel()
	// Stop ends the request as Cancel does, for a handler that found a stop string in its text (or
	// a stop id) while the engine went on sampling (it did not run sched.Request.Stop): the
	// finished event's Reason is sched.FinishStop where the engine tells the two apart (the
	// request counts as finished, "stop" in request_success_total), else sched.FinishCancelled.
	Stop()
}

// Tokenizer turns text into ids and ids into bytes; *tokenizer.Tokenizer is one. Both are called
// from many goroutines at once: the handlers', and TokenBytes from the scheduler's loop too (the
// stop-string check of a request with stop strings).
type Tokenizer interface {
	Encode(text string) []int32
	TokenBytes(id int32) []byte // nil for an id out of range
}

// Model describes the served model.
type Model struct {
	ID        string    // the name clients send as "model" (e.g. "gpt2")
	MaxSeqLen int       // longest sequence, prompt + completion (max_model_len)
	VocabSize int       // prompt token ids must lie in [0, VocabSize)
	Tokenizer Tokenizer // the model's tokenizer
	EOS       int32     // end-of-text id: a stop token unless ignore_eos, dropped from text by skip_special_tokens
	Created   time.Time // when the model was loaded: /v1/models' "created"
}

// LedgerEntry is one cold-start cost of the engine (model load, graph capture, ...), for the
// cold-start gauges.
type LedgerEntry struct {
	What, Detail string
	Took         time.Duration
}
