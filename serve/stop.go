package serve

import (
	"bytes"
	"slices"
	"unicode/utf8"

	"rosetop/engine/tokenizer"
)

// verdict is what an output token does to its request under the request's stop rule.
type verdict int

const (
	goOn    verdict = iota // the request goes on
	endEOS                 // an EOS ends it: the scheduler's own rule (FinishEOS); its finished event follows
	endStop                // a stop string or a stop token id ends it at this token (FinishStop); the text is final
)

// stopRule applies a request's stop strings and stop token ids token by token, as vLLM does
// (vllm/v1/core/sched/utils.py check_stop, vllm/v1/engine/detokenizer.py): after min_tokens
// outputs, an EOS (unless ignore_eos) or a stop id ends the request at that token, and each
// output token's text (EOS left out as skip_special_tokens says) is searched for stop strings.
// The token that ends the request by EOS or stop id adds no text unless
// include_stop_str_in_output. The handler's generation runs one to cut its text; the scheduler
// runs another (stopCheck) to end the request at the same token: one rule over the same tokens,
// so that the reply and the request's record agree.
type stopRule struct {
	detok     *tokenizer.Stream // nil: no text kept (the scheduler's copy of a rule without stop strings)
	text      *stopText
	eos       int32 // ends the request with stopOnEOS, after minNew outputs
	stopOnEOS bool
	stopIDs   []int32 // stop_token_ids, sorted; read-only, shared with the job
	include   bool    // include_stop_str_in_output
	minNew    int
	outputs   int // output tokens pushed so far
}

func newStopRule(j *job, m *Model) *stopRule {
	var src tokenizer.ByteSource = m.Tokenizer
	if j.skipSpecial {
		src = skipToken{m.Tokenizer, m.EOS}
	}
	return &stopRule{detok: tokenizer.NewStream(src), text: newStopText(j.stops, j.includeStop), eos: m.EOS,
		stopOnEOS: j.req.StopOnEOS, stopIDs: j.stopIDs, include: j.includeStop, minNew: j.req.MinNewTokens}
}

// skipToken is a token source that gives one token (EOS: skip_special_tokens) no bytes.
type skipToken struct {
	src  Tokenizer
	skip int32
}

func (s skipToken) TokenBytes(id int32) []byte {
	if id == s.skip {
		return nil
	}
	return s.src.TokenBytes(id)
}

// push adds output token t and returns what it does to the request. An EOS or stop id among the
// first min_tokens outputs ends nothing and stays among the tokens, its text too (vLLM masks their
// logits there instead). With include_stop_str_in_output the ending token's text is searched as
// any other, and a stop string it completes cuts the text after the stop string.
func (r *stopRule) push(t int32) verdict {
	r.outputs++
	// vLLM: stop strings only once num_output_tokens > min_tokens (detokenizer.py); EOS and stop
	// ids are masked from its first min_tokens outputs (the min-tokens logits processor).
	checked := r.outputs > r.minNew
	v := goOn
	switch {
	case !checked:
	case t == r.eos && r.stopOnEOS:
		v = endEOS
	case len(r.stopIDs) > 0 && r.isStopID(t):
		v = endStop
	}
	if r.detok == nil || v != goOn && !r.include {
		return v
	}
	if r.text.push(r.detok.Push(t), checked) && v == goOn {
		return endStop
	}
	return v
}

func (r *stopRule) isStopID(t int32) bool {
	_, found := slices.BinarySearch(r.stopIDs, t)
	return found
}

// flush adds, at the request's end, the bytes of a character left unfinished (as U+FFFD); it
// reports whether that completed a stop string. After a match it adds nothing.
func (r *stopRule) flush() bool {
	if r.detok == nil || r.text.matched {
		return false
	}
	return r.text.push(r.detok.Flush(), r.outputs > r.minNew)
}

// stopCheck is a request's stop rule as the scheduler runs it (sched.StopCheck), for requests
// with stop strings or stop token ids only: the request ends in the scheduler at the token that
// completes a stop string or is a stop id, with its record (and the metrics and logs built from
// it) saying "stop" and counting the tokens the reply counts, as vLLM's engine ends it. It keeps
// only the text a later match can begin in, and none without stop strings. It belongs to the
// scheduler's loop from Submit on.
type stopCheck struct{ r *stopRule }

func (c stopCheck) Check(t int32, last bool) bool {
	// Never an ending EOS: the scheduler ends the request on it first.
	end := c.r.push(t) == endStop || last && c.r.flush() // as the handler flushes at the end
	c.r.text.trim()
	return end
}

// stopText finds stop strings in generated text as it grows, the way vLLM does
// (detokenizer.py check_stop_strings): after each token it searches the new text and the
// len(stop)-1 bytes before it, so a stop string is found in the step that completes it; the first
// listed stop string found there wins (its first occurrence), and the text is cut before it, or
// after it with include_stop_str_in_output. Until the request ends a stream is sent all
// but the last longest-stop-1 bytes (whole characters), which may still become the start of a
// stop string to cut; with include_stop_str_in_output nothing is held back, as vLLM's
// stop_buffer_length is then 0. Text is whole UTF-8 characters throughout.
type stopText struct {
	stops   []string
	include bool   // a match stays in the text
	window  int    // the longest stop string's length - 1: how far before new text a match can begin
	hold    int    // bytes held back from a stream: window, or 0 with include
	buf     []byte // the text not yet taken, after at least the last window bytes taken (or all)
	sent    int    // buf[:sent] was taken already: kept for the search only
	matched bool   // a stop string was found: buf ends where the text is cut
}

func newStopText(stops []string, include bool) *stopText {
	s := &stopText{stops: stops, include: include}
	for _, x := range stops {
		s.window = max(s.window, len(x)-1)
	}
	if !include {
		s.hold = s.window
	}
	return s
}

// push adds text; with check it searches for a stop string (vLLM checks none within the first
// min_tokens outputs). It reports whether one was found; after that, push must not be called again.
func (s *stopText) push(text string, check bool) bool {
	old := len(s.buf)
	s.buf = append(s.buf, text...)
	if !check {
		return false
	}
	start, end := -1, -1
	for _, x := range s.stops {
		from := max(0, old-len(x)+1)
		if i := bytes.Index(s.buf[from:], []byte(x)); i >= 0 {
			start, end = from+i, from+i+len(x)
			break
		}
	}
	if end < 0 {
		return false
	}
	cut := start
	if s.include {
		cut = end
	}
	s.buf, s.matched = s.buf[:cut], true
	return true
}

// trim drops the text that no later match can begin in, keeping the last window bytes, for a
// reader that only needs to know whether a stop string is found (it takes nothing).
func (s *stopText) trim() { s.forget(len(s.buf)) }

// forget drops the bytes before upto - window, which no later match can begin in, from buf. It
// moves the kept bytes only once the part to drop outgrows them, so each byte is copied a
// bounded number of times.
func (s *stopText) forget(upto int) {
	if n := upto - s.window; n > max(len(s.buf)-n, 64) {
		s.buf = append(s.buf[:0], s.buf[n:]...)
		s.sent = max(0, s.sent-n)
	}
}

// take returns the text that can be sent now: all of it once a stop string was found or when
// final, else all but the held-back tail.
func (s *stopText) take(final bool) string {
	n := len(s.buf)
	if !final && !s.matched && s.hold > 0 {
		n = max(s.sent, n-s.hold) // < len(s.buf) unless s.sent is: the index below is in range
		for n > s.sent && !utf8.RuneStart(s.buf[n]) {
			n--
		}
	}
	out := string(s.buf[s.sent:n])
	s.sent = n
	s.forget(n)
	return out
}
