package sched

import (
	"time"

	"rosetop/engine"
	"rosetop/engine/tokenizer"
)

// request is one request's state. Submit fills it and hands it to the loop through the inbox
// (under Scheduler.mu); from then on only the loop touches it, except text, which a tokenize
// worker reads (it never changes after Submit).
type request struct {
	id             RequestID
	text           string // prompt text for a tokenize worker; "" otherwise
	maxNew         int
	stopOnEOS      bool
	minNew         int // Request.MinNewTokens
	sampling       engine.SamplingParams
	streamInterval int
	stop           StopCheck // Request.Stop: nil, or called by the loop only (advance)
	logprobs       bool      // Request.Logprobs
	topLogprobs    int       // Request.TopLogprobs when logprobs is set, else 0
	// promptLogprobs: Request.PromptLogprobs, until the first token event has carried them
	// (a recompute after preemption asks no more); promptTop is Request.PromptTopLogprobs.
	promptLogprobs bool
	promptTop      int
	// promptLP is the copy of the first prefill's prompt logprobs that its token event carries.
	promptLP []engine.TokenLogprobs

	// tokens is the sequence: prompt ids, then output ids. Elements are never changed once
	// appended: events and records hand out sub-slices of it.
	tokens []int32
	prompt int  // prompt length; tokens[prompt:] is the output
	ready  bool // the prompt is tokenized
	times  Times

	seq         engine.SeqID // KV sequence while it holds blocks; 0 when waiting
	blocks      []int32      // seq's block table as of this step's reservation (BlockManager-owned)
	computed    int          // positions of tokens whose KV is written (while it holds blocks)
	admitted    bool         // has entered a prefill batch (Times.Admitted is stamped)
	preemptions int
	done        bool // finished: the record is out; running slots drop it at the end of the step

	stream   *tokenizer.Stream // nil without a tokenizer
	pending  []byte            // text decoded since the last text piece
	fullText []byte            // every text piece so far: Record.Text
	since    int               // tokens since the last text piece

	// With logprobs: lp[k] is output token k's entry, its Top a piece of lpTop. Appended only:
	// events hand out capped sub-slices of both, whose elements are never written again.
	lp    []engine.TokenLogprobs
	lpTop []engine.Logprob
}

func newRequest(r Request, now time.Duration) *request {
	q := &request{
		maxNew:         r.MaxNewTokens,
		stopOnEOS:      r.StopOnEOS,
		minNew:         r.MinNewTokens,
		sampling:       r.Sampling,
		streamInterval: max(1, r.StreamInterval),
		stop:           r.Stop,
		times:          Times{SubmitStart: now},
	}
	if r.Logprobs {
		q.logprobs, q.topLogprobs = true, r.TopLogprobs
	}
	if r.PromptLogprobs {
		q.promptLogprobs, q.promptTop = true, r.PromptTopLogprobs
	}
	return q
}

// setPrompt copies the prompt ids into a sequence buffer with room for every output token, and
// the token timestamps likewise, so that decoding never reallocates either.
func (q *request) setPrompt(ids []int32) {
	q.tokens = make([]int32, len(ids), len(ids)+q.maxNew)
	copy(q.tokens, ids)
	q.prompt = len(ids)
	q.ready = true
	q.times.Tokens = make([]time.Duration, 0, q.maxNew)
}

// outputs is the number of tokens generated so far.
func (q *request) outputs() int { return len(q.tokens) - q.prompt }

// last returns the newest token as a one-element slice that the caller may keep (capacity 1: an
// append by the caller cannot write into the sequence).
func (q *request) last() []int32 {
	n := len(q.tokens)
	return q.tokens[n-1 : n : n]
}

// decode adds token id to the text and returns a text piece when one is due: every
// streamInterval tokens, and at the end (final), when whatever is pending is flushed.
// The EOS token that stops a request (skip) adds no text.
func (q *request) decode(id int32, skip, final bool) string {
	if q.stream == nil {
		return ""
	}
	if !skip {
		q.pending = append(q.pending, q.stream.Push(id)...)
	}
	q.since++
	if final {
		q.pending = append(q.pending, q.stream.Flush()...)
	}
	if (q.since < q.streamInterval && !final) || len(q.pending) == 0 {
		return ""
	}
	piece := string(q.pending)
	q.fullText = append(q.fullText, q.pending...)
	q.pending, q.since = q.pending[:0], 0
	return piece
}

// keepLogprobs appends a copy of the newest output token's entry (the backend's, whose Top the
// backend reuses) and returns it as a one-element slice the caller may keep: an append by the
// caller cannot write into the request's buffers.
func (q *request) keepLogprobs(e *engine.TokenLogprobs) []engine.TokenLogprobs {
	var top []engine.Logprob
	if len(e.Top) > 0 {
		n := len(q.lpTop)
		q.lpTop = append(q.lpTop, e.Top...)
		m := len(q.lpTop)
		top = q.lpTop[n:m:m]
	}
	k := len(q.lp)
	q.lp = append(q.lp, engine.TokenLogprobs{Sampled: e.Sampled, Top: top, Rank: e.Rank})
	return q.lp[k : k+1 : k+1]
}

// keepPromptLogprobs stores a copy of the backend's prompt logprobs (whose Top the backend
// reuses) in q.promptLP, in memory of its own: one allocation for the entries, one for every
// Top. A prompt of one token has no entry: the copy is then empty, not nil.
func (q *request) keepPromptLogprobs(es []engine.TokenLogprobs) {
	n := 0
	for i := range es {
		n += len(es[i].Top)
	}
	tops := make([]engine.Logprob, 0, n)
	out := make([]engine.TokenLogprobs, len(es))
	for i, e := range es {
		out[i] = engine.TokenLogprobs{Sampled: e.Sampled, Rank: e.Rank}
		if len(e.Top) > 0 {
			k := len(tops)
			tops = append(tops, e.Top...)
			out[i].Top = tops[k:len(tops):len(tops)]
		}
	}
	q.promptLP = out
}

// firstTimes copies the request's timestamps at its first token for Event.First. Its Tokens
// shares the first element of times.Tokens, which is never written again, with capacity 1: an
// append by the consumer cannot write into the request's buffer.
func (q *request) firstTimes() *Times {
	t := q.times
	t.Tokens = t.Tokens[:1:1]
	t.Finished = 0
	return &t
}

// record builds the request's final record; the caller has set times.Finished.
func (q *request) record(reason FinishReason, err error) *Record {
	if q.stream != nil {
		// A request ended by Cancel or an error may hold undelivered text; it belongs to the record.
		q.fullText = append(q.fullText, q.pending...)
		q.fullText = append(q.fullText, q.stream.Flush()...)
		q.pending = q.pending[:0]
	}
	n := len(q.tokens)
	return &Record{
		ID:           q.id,
		PromptTokens: q.prompt,
		Output:       q.tokens[q.prompt:n:n],
		Text:         string(q.fullText),
		Reason:       reason,
		Err:          err,
		Preemptions:  q.preemptions,
		Times:        q.times,
	}
}
