package serve

import (
	"bytes"
	"encoding/json"
	"net/http"
	"time"
)

// sse writes a Server-Sent Events stream as OpenAI's API does: each event one "data: {json}\n\n"
// line, flushed as it is written, and "data: [DONE]\n\n" at the end. Every write has a deadline,
// so a client that stops reading cannot hold the handler. It belongs to the handler's goroutine.
type sse struct {
	w       http.ResponseWriter
	rc      *http.ResponseController
	timeout time.Duration // each write's deadline
	buf     bytes.Buffer  // one event, reused
}

func newSSE(w http.ResponseWriter, timeout time.Duration) *sse {
	return &sse{w: w, rc: http.NewResponseController(w), timeout: timeout}
}

// start sends the headers, so the client knows the request was accepted before the first token.
func (s *sse) start() error {
	h := s.w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	s.rc.SetWriteDeadline(time.Now().Add(s.timeout)) // best effort: not every writer has deadlines
	s.w.WriteHeader(http.StatusOK)
	return s.rc.Flush()
}

// send writes v as one event.
func (s *sse) send(v any) error {
	s.buf.Reset()
	s.buf.WriteString("data: ")
	enc := json.NewEncoder(&s.buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil { // Encode ends the JSON with "\n"
		return err
	}
	s.buf.WriteByte('\n')
	return s.write(s.buf.Bytes())
}

// done writes the stream's last event.
func (s *sse) done() error { return s.write([]byte("data: [DONE]\n\n")) }

func (s *sse) write(b []byte) error {
	s.rc.SetWriteDeadline(time.Now().Add(s.timeout)) // best effort: not every writer has deadlines
	if _, err := s.w.Write(b); err != nil {
		return err
	}
	return s.rc.Flush()
}
