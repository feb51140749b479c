package tokenizer

// ByteSource gives the raw bytes of a token; *Tokenizer is one.
type ByteSource interface {
	TokenBytes(id int32) []byte
}

// Stream turns token ids into text as they are generated. A GPT-2 token may end in the middle of
// a multi-byte UTF-8 character (emoji and CJK are often split over two or three tokens), so Stream
// holds such a tail until the bytes that complete it arrive, and emits only whole characters.
//
// The concatenation of every Push result and the final Flush equals Decode of all the ids.
// A Stream belongs to one goroutine (one per sequence); it is not safe for concurrent use.
type Stream struct {
	src ByteSource
	// pending holds the bytes of a character that has begun but not ended (at most 3 bytes, always
	// a valid prefix of some character).
	pending []byte
	out     []byte // scratch for the text of one Push, reused
}

// NewStream returns a Stream reading token bytes from src.
func NewStream(src ByteSource) *Stream {
	return &Stream{src: src, pending: make([]byte, 0, 8)}
}

// Push adds one token and returns the whole characters that are now complete ("" when the token
// only extends a pending character). Bytes that can never become a character are returned as
// U+FFFD at once, so nothing is held beyond one incomplete character. An id with no bytes (out of
// range) adds nothing, as in Decode.
func (s *Stream) Push(id int32) string {
	s.pending = append(s.pending, s.src.TokenBytes(id)...)
	var rest int
	s.out, rest = appendLossy(s.out[:0], s.pending, false)
	s.pending = append(s.pending[:0], s.pending[len(s.pending)-rest:]...)
	return string(s.out)
}

// Flush returns whatever is still pending (an unfinished character becomes U+FFFD) and leaves the
// Stream empty, ready for a new sequence.
func (s *Stream) Flush() string {
	s.out, _ = appendLossy(s.out[:0], s.pending, true)
	s.pending = s.pending[:0]
	return string(s.out)
}
