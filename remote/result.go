package remote

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Sentinel errors. Every failed request's error wraps one of them (through *Failure), and so do
// the errors of New, Models and the scraper.
var (
	// ErrConfig: a Config, Request or extra body is not usable.
	ErrConfig = errors.New("remote: bad configuration")
	// ErrConnect: no connection could be made (refused, DNS, TLS).
	ErrConnect = errors.New("remote: cannot connect")
	// ErrStatus: the server answered with a status other than 200.
	ErrStatus = errors.New("remote: HTTP status")
	// ErrTimeout: a connect, first-byte, stall or request deadline passed.
	ErrTimeout = errors.New("remote: timeout")
	// ErrStreamCut: the stream ended before [DONE] or a finish reason, or the connection the
	// request went out on ended before any answer.
	ErrStreamCut = errors.New("remote: stream cut")
	// ErrMalformed: the response is not a well-formed event stream of JSON chunks.
	ErrMalformed = errors.New("remote: malformed response")
	// ErrServer: the server sent an error object in the stream.
	ErrServer = errors.New("remote: error in stream")
	// ErrCanceled: the caller's context ended the request. errors.Is(err, context.Canceled)
	// holds for it too, so an interrupted run is told by one test, whatever failed under it.
	ErrCanceled error = canceledError{}
)

// canceledError is ErrCanceled: its own message, and context.Canceled beneath it.
type canceledError struct{}

func (canceledError) Error() string { return "remote: canceled" }
func (canceledError) Unwrap() error { return context.Canceled }

// Reason says why a request failed.
type Reason int

// The failure reasons. ReasonNone means the request succeeded.
const (
	ReasonNone          Reason = iota
	ReasonConnect              // could not connect
	ReasonStatus               // non-200 status; Failure.Status and Failure.Detail (the body's error message, else its start)
	ReasonTimeout              // Failure.Phase says which deadline
	ReasonStreamCut            // EOF or reset before [DONE] or a finish reason, or before any answer
	ReasonMalformedSSE         // bad framing or an over-long line
	ReasonMalformedJSON        // a data field that is not a JSON object
	ReasonServerError          // an error object in the stream; Failure.Detail is its message
	ReasonNoChunks             // the stream ended without one chunk carrying choices
	ReasonCanceled             // the caller canceled
	ReasonOverflow             // far more chunks or text than max_tokens allows
)

var reasonNames = [...]string{
	ReasonNone:          "ok",
	ReasonConnect:       "connect",
	ReasonStatus:        "http-status",
	ReasonTimeout:       "timeout",
	ReasonStreamCut:     "stream-cut",
	ReasonMalformedSSE:  "malformed-sse",
	ReasonMalformedJSON: "malformed-json",
	ReasonServerError:   "server-error",
	ReasonNoChunks:      "no-chunks",
	ReasonCanceled:      "canceled",
	ReasonOverflow:      "overflow",
}

// String is the reason's short name, for reports and exports.
func (r Reason) String() string {
	if r >= 0 && int(r) < len(reasonNames) {
		return reasonNames[r]
	}
	return fmt.Sprintf("reason(%d)", int(r))
}

// sentinel is the error a reason wraps.
func (r Reason) sentinel() error {
	switch r {
	case ReasonConnect:
		return ErrConnect
	case ReasonStatus:
		return ErrStatus
	case ReasonTimeout:
		return ErrTimeout
	case ReasonStreamCut:
		return ErrStreamCut
	case ReasonMalformedSSE, ReasonMalformedJSON, ReasonNoChunks, ReasonOverflow:
		return ErrMalformed
	case ReasonServerError:
		return ErrServer
	case ReasonCanceled:
		return ErrCanceled
	}
	return nil
}

// Phase names the deadline a ReasonTimeout failure ran into.
type Phase string

// The timeout phases.
const (
	PhaseConnect   Phase = "connect"    // dial and TLS handshake (Config.ConnectTimeout)
	PhaseFirstByte Phase = "first-byte" // POST to the first byte of the body (Config.FirstByteTimeout)
	PhaseStall     Phase = "stall"      // between two reads of the body (Config.StallTimeout)
	PhaseRequest   Phase = "request"    // the whole request (Config.RequestTimeout)
)

// maxDetail bounds Failure.Detail: the start of an error body or message.
const maxDetail = 512

// Failure is why one request failed. It is an error that wraps the reason's sentinel.
type Failure struct {
	Reason Reason
	Phase  Phase  // for ReasonTimeout
	Status int    // HTTP status for ReasonStatus (and whatever status the stream had)
	Detail string // at most maxDetail bytes: body start, error message, offending data; no secrets
	// RetryAfter is the wait a ReasonStatus answer's Retry-After header asked for, at most
	// MaxRetryAfter; 0: none, or one not understood.
	RetryAfter time.Duration
	// Unanswered: a ReasonStreamCut whose connection closed before any answer, as a server does
	// that takes connections and drops them (overloaded, or going down behind a proxy).
	Unanswered bool
}

func (f *Failure) Error() string {
	msg := "remote: " + f.Reason.String()
	switch {
	case f.Reason == ReasonStatus:
		msg = fmt.Sprintf("%s %d", msg, f.Status)
	case f.Phase != "":
		msg += " (" + string(f.Phase) + ")"
	}
	if f.Detail != "" {
		msg += ": " + f.Detail
	}
	return msg
}

// Brief names the failure in a few words, for counts by reason: "http 429", "timeout (stall)",
// "stream-cut".
func (f *Failure) Brief() string {
	switch {
	case f.Reason == ReasonStatus:
		return fmt.Sprintf("http %d", f.Status)
	case f.Reason == ReasonTimeout && f.Phase != "":
		return "timeout (" + string(f.Phase) + ")"
	}
	return f.Reason.String()
}

// Explain is Brief followed by the detail, for a one-line message: "http 404: The model `x`
// does not exist.", "timeout (stall): after 5s".
func (f *Failure) Explain() string {
	if f.Detail == "" {
		return f.Brief()
	}
	return f.Brief() + ": " + f.Detail
}

// Unwrap returns the reason's sentinel error.
func (f *Failure) Unwrap() error { return f.Reason.sentinel() }

// TokenSource says where Result.OutputTokens came from.
type TokenSource int

// The token sources, best first.
const (
	TokensUnknown   TokenSource = iota // no usage, no per-chunk counts and no tokenizer
	TokensUsage                        // usage.completion_tokens
	TokensChunks                       // the sum of every chunk's known token count
	TokensTokenizer                    // the generated text through Config.Tokenizer
)

var sourceNames = [...]string{"unknown", "usage", "chunks", "tokenizer"}

func (s TokenSource) String() string {
	if s >= 0 && int(s) < len(sourceNames) {
		return sourceNames[s]
	}
	return fmt.Sprintf("source(%d)", int(s))
}

// Chunk is one stream chunk that carried choices, as the caller sees it arrive.
type Chunk struct {
	Start  time.Duration // the request's Result.Start: a first chunk's TTFT is At - Start
	At     time.Duration // arrival on the client's clock
	Tokens int           // tokens the chunk carried; -1 when the server did not say
	Text   string        // the chunk's text (completions) or content delta (chat)
}

// ChunkTime is a chunk as the Result keeps it: its arrival and token count, without text.
type ChunkTime struct {
	At     time.Duration
	Tokens int // -1 when unknown
}

// Result is one request's record. Times are on the client's clock. Start is taken right before
// the POST; First and Last are the first and last chunks that carried choices (vLLM bench
// serve's TTFT and E2EL points); a usage-only chunk moves neither.
type Result struct {
	Start   time.Duration
	Headers time.Duration // response headers arrived; 0 if they never did
	First   time.Duration // first chunk with choices; 0 if none
	Last    time.Duration // last chunk with choices; 0 if none
	End     time.Duration // the stream ended ([DONE], EOF or failure)
	Status  int           // HTTP status, 0 if none arrived
	Chunks  []ChunkTime   // every chunk with choices, in order
	Text    string        // all chunks' text
	Finish  string        // the finish reason the server gave, "" if none

	PromptTokens int         // usage.prompt_tokens, -1 if the server did not report it
	OutputTokens int         // see Tokens; -1 when unknown
	Tokens       TokenSource // where OutputTokens came from
	UsageMissing bool        // the stream ended without usage.completion_tokens
	KeepAlives   int         // SSE comment lines seen

	Failure *Failure // nil when the request succeeded
}

// OK reports whether the request succeeded.
func (r *Result) OK() bool { return r.Failure == nil }

// TTFT is the time to the first chunk with choices (vLLM: ttft).
func (r *Result) TTFT() time.Duration { return r.First - r.Start }

// E2EL is the time to the last chunk with choices (vLLM: latency).
func (r *Result) E2EL() time.Duration { return r.Last - r.Start }

// TPOT is (E2EL - TTFT) / (output tokens - 1); ok is false with fewer than two output tokens or
// an unknown count, as vLLM leaves such requests out of TPOT.
func (r *Result) TPOT() (time.Duration, bool) {
	if r.OutputTokens < 2 {
		return 0, false
	}
	return (r.Last - r.First) / time.Duration(r.OutputTokens-1), true
}

// ChunkGaps appends every gap between consecutive chunks with choices to dst (vLLM: itl).
func (r *Result) ChunkGaps(dst []time.Duration) []time.Duration {
	for i := 1; i < len(r.Chunks); i++ {
		dst = append(dst, r.Chunks[i].At-r.Chunks[i-1].At)
	}
	return dst
}

// TokenGaps appends the gaps between tokens to dst: when a chunk carrying k > 0 tokens arrives
// g after the previous chunk that carried any, it adds k gaps of g/k. The first chunk that
// carries tokens adds none. ok is false (and dst is returned unchanged) when some chunk's token
// count is unknown.
func (r *Result) TokenGaps(dst []time.Duration) ([]time.Duration, bool) {
	for _, c := range r.Chunks {
		if c.Tokens < 0 {
			return dst, false
		}
	}
	prev := -1
	for i, c := range r.Chunks {
		if c.Tokens == 0 {
			continue
		}
		if prev >= 0 {
			g := (c.At - r.Chunks[prev].At) / time.Duration(c.Tokens)
			for range c.Tokens {
				dst = append(dst, g)
			}
		}
		prev = i
	}
	return dst, true
}
