package serve

import (
	"bytes"
	"unicode/utf8"

	"rosetop/engine/tokenizer"
)

// stopRule applies a request's stop strings token by token, as vLLM does: each output token's
// text (EOS left out as skip_special_tokens says) is searched from min_tokens outputs on, and the
// EOS that ends the request adds no text. The handler's generation runs one to cut its text; the
// scheduler runs another (stopCheck) to end the request at the same token: one rule over the same
// tokens, so that the reply and the request's record agree.
type stopRule struct {
	detok     *tokenizer.Stream
	text      *stopText
	eos       int32 // ends the request with stopOnEOS, from minNew outputs on
	stopOnEOS bool
	minNew    int
	outputs   int // output tokens pushed so far
}

func newStopRule(j *job, m *Model) *stopRule {
	var src tokenizer.ByteSource = m.Tokenizer
	if j.skipSpecial {
		src = skipToken{m.Tokenizer, m.EOS}
	}
	return &stopRule{detok: tokenizer.NewStream(src), text: newStopText(j.stops), eos: m.EOS,
		stopOnEOS: j.req.StopOnEOS, minNew: j.req.MinNewTokens}
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

// push adds output token t. end: t is the EOS that ends the request (the scheduler's rule,
// sched.Request.MinNewTokens), which adds no text; matched: a stop string was found, and the
// text ends before it.
func (r *stopRule) push(t int32) (end, matched bool) {
	r.outputs++
	if t == r.eos && r.stopOnEOS && r.outputs >= r.minNew {
		return true, false
	}
	return false, r.text.push(r.detok.Push(t), r.outputs >= r.minNew)
}

// flush adds, at the request's end, the bytes of a character left unfinished (as U+FFFD); it
// reports whether that completed a stop string.
func (r *stopRule) flush() bool { return r.text.push(r.detok.Flush(), r.outputs >= r.minNew) }

// stopCheck is a request's stop rule as the scheduler runs it (sched.StopCheck), for requests
// with stop strings only: the request ends in the scheduler at the token that completes a match,
// with its record (and the metrics and logs built from it) saying "stop" and counting the tokens
// the reply counts, as vLLM's engine ends it. It keeps only the text a later match can begin in.
// It belongs to the scheduler's loop from Submit on.
type stopCheck struct{ r *stopRule }

func (c stopCheck) Check(t int32, last bool) bool {
	_, matched := c.r.push(t) // never an ending EOS: the scheduler ends the request on it first
	if !matched && last {
		matched = c.r.flush() // as the handler flushes at the end
	}
	c.r.text.trim()
	return matched
}

// stopText finds stop strings in generated text as it grows, the way vLLM does: after each token
// it searches the new text and the len(stop)-1 bytes before it, so a stop string is found in the
// step that completes it; the earliest match wins, and the text is cut before it. Until the
// request ends it holds back the last longest-stop-1 bytes (whole characters), which may still
// become the start of a stop string. Text is whole UTF-8 characters throughout.
type stopText struct {
	stops   []string
	hold    int    // bytes held back: the longest stop string's length - 1
	pending []byte // text not yet taken
	matched bool   // a stop string was found: pending ends before it
}

func newStopText(stops []string) *stopText {
	s := &stopText{stops: stops}
	for _, x := range stops {
		s.hold = max(s.hold, len(x)-1)
	}
	return s
}

// push adds text; with check it searches for a stop string (vLLM checks none before min_tokens
// outputs). It reports whether one was found; after that, push must not be called again.
func (s *stopText) push(text string, check bool) bool {
	old := len(s.pending)
	s.pending = append(s.pending, text...)
	if !check {
		return false
	}
	cut := -1
	for _, x := range s.stops {
		from := max(0, old-len(x)+1)
		if i := bytes.Index(s.pending[from:], []byte(x)); i >= 0 && (cut < 0 || from+i < cut) {
			cut = from + i
		}
	}
	if cut < 0 {
		return false
	}
	s.pending, s.matched = s.pending[:cut], true
	return true
}

// trim drops the text that no later match can begin in, keeping the last hold bytes, for a
// reader that only needs to know whether a stop string is found. It moves the kept bytes only
// once the part to drop outgrows them, so each byte is copied a bounded number of times.
func (s *stopText) trim() {
	if n := len(s.pending) - s.hold; n > max(s.hold, 64) {
		s.pending = append(s.pending[:0], s.pending[n:]...)
	}
}

// take returns the text that can be sent now: all of it once a stop string was found or when
// final, else all but the held-back tail.
func (s *stopText) take(final bool) string {
	n := len(s.pending)
	if !final && !s.matched && s.hold > 0 {
		n -= s.hold // < len(s.pending): the index below is in range
		for n > 0 && !utf8.RuneStart(s.pending[n]) {
			n--
		}
	}
	if n <= 0 {
		return ""
	}
	out := string(s.pending[:n])
	s.pending = append(s.pending[:0], s.pending[n:]...)
	return out
}
