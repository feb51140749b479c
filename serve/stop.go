package serve

import (
	"bytes"
	"unicode/utf8"
)

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
