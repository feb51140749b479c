package remote

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"time"
)

// Stream limits. A chunk may carry no token (a role-only first chunk, a finish chunk), so a
// stream may hold a few more chunks than tokens; far more is a server bug, not a reason to grow
// memory without end.
const (
	maxTokenBytes = 256 // text bytes allowed per requested token
	slackChunks   = 64  // chunks allowed beyond two per requested token
	slackText     = 4096
)

var doneMarker = []byte("[DONE]")

// streamReader reads one response's event stream into a Result. It lives on Do's goroutine.
type streamReader struct {
	c       *Client
	sse     *sseReader
	res     *Result
	onChunk func(Chunk)

	maxChunks int
	maxText   int
	text      []byte // all chunks' text so far

	chunk        chunk
	done         bool // [DONE] seen
	usageTokens  int  // last non-negative usage.completion_tokens seen; -1 if none
	continuous   bool // every chunk with choices so far carried usage
	allCounted   bool // every chunk with choices so far had a known token count
	countedTotal int  // sum of known per-chunk counts
}

func newStreamReader(c *Client, body io.Reader, res *Result, maxTokens int, onChunk func(Chunk)) *streamReader {
	return &streamReader{
		c:           c,
		sse:         newSSEReader(body, c.cfg.ReadBufferBytes, c.cfg.MaxLineBytes),
		res:         res,
		onChunk:     onChunk,
		maxChunks:   2*maxTokens + slackChunks,
		maxText:     maxTokens*maxTokenBytes + slackText,
		usageTokens: -1,
		continuous:  true,
		allCounted:  true,
	}
}

// run reads events until [DONE], the end of the body or a failure. It returns the failure, or
// nil when the stream ended well; readErr is the underlying read error for classification.
func (s *streamReader) run() (f *Failure, readErr error) {
	defer func() { s.res.KeepAlives = s.sse.Comments }()
	for !s.done {
		ev, err := s.sse.next()
		if err != nil {
			if errors.Is(err, io.EOF) {
				return s.atEOF(), nil
			}
			return nil, err
		}
		if f := s.event(ev); f != nil {
			return f, nil
		}
	}
	if len(s.res.Chunks) == 0 {
		return &Failure{Reason: ReasonNoChunks, Detail: "[DONE] before any chunk with choices"}, nil
	}
	return nil, nil
}

// atEOF judges a body that ended without [DONE]: fine after a finish reason, cut otherwise.
func (s *streamReader) atEOF() *Failure {
	if s.res.Finish != "" {
		return nil
	}
	if len(s.res.Chunks) == 0 {
		return &Failure{Reason: ReasonStreamCut, Detail: "end of body before any chunk"}
	}
	return &Failure{Reason: ReasonStreamCut, Detail: fmt.Sprintf("end of body after %d chunks, before [DONE] or a finish reason", len(s.res.Chunks))}
}

// event handles one dispatched event.
func (s *streamReader) event(ev sseEvent) *Failure {
	at := s.c.clock.Now()
	data := bytes.TrimSpace(ev.Data)
	if ev.Type == "error" {
		return &Failure{Reason: ReasonServerError, Detail: s.c.detail(errorText(data, &s.chunk))}
	}
	if bytes.Equal(data, doneMarker) {
		s.done = true
		return nil
	}
	if len(data) == 0 {
		return nil
	}
	c := &s.chunk
	if !decodeChunk(data, c) {
		return &Failure{Reason: ReasonMalformedJSON, Detail: s.c.detail(string(data))}
	}
	if msg, ok := c.errorMessage(); ok {
		return &Failure{Reason: ReasonServerError, Detail: s.c.detail(msg)}
	}
	prevUsage := s.usageTokens
	if c.completion >= 0 {
		s.usageTokens = int(c.completion)
	}
	if c.prompt >= 0 {
		s.res.PromptTokens = int(c.prompt)
	}
	if c.choices == 0 {
		return nil
	}
	return s.choices(at, prevUsage)
}

// errorText is the message of an error event's data: the error object's message where the data
// is one ({"error": ...}, or llama.cpp's {"code", "message", "type"}), else the data as it is.
func errorText(data []byte, c *chunk) string {
	if !decodeChunk(data, c) {
		return string(data)
	}
	if msg, ok := c.errorMessage(); ok && msg != "" {
		return msg
	}
	if c.message != "" {
		return c.message
	}
	return string(data)
}

// choices records a chunk that carried choices: the TTFT/ITL/E2EL points of vLLM bench serve.
func (s *streamReader) choices(at time.Duration, prevUsage int) *Failure {
	c := &s.chunk
	text := c.textOf()
	r := s.res
	if len(r.Chunks) == s.maxChunks || len(s.text)+len(text) > s.maxText {
		return &Failure{Reason: ReasonOverflow, Detail: fmt.Sprintf("more than %d chunks or %d text bytes", s.maxChunks, s.maxText)}
	}
	tokens := -1
	switch {
	case c.tokenIDs >= 0:
		tokens = c.tokenIDs
	case c.completion < 0 && text == "" && s.continuous:
		// SGLang's continuous usage skips the chunks that carry no token (its role and finish
		// chunks): one without text or usage keeps the count going, and after usage has come
		// it carries none. Before, it is unknown (an empty text may be a token's).
		if s.usageTokens >= 0 {
			tokens = 0
		}
	case c.completion < 0:
		s.continuous = false
	case s.continuous:
		// Continuous usage is cumulative. A count that did not grow under new text is not a
		// count (Ollama puts zero usage on every chunk when asked for usage).
		if d := s.usageTokens - max(prevUsage, 0); d > 0 || (d == 0 && text == "") {
			tokens = d
		}
	}
	if tokens >= 0 {
		s.countedTotal += tokens
	} else {
		s.allCounted = false
	}
	if len(r.Chunks) == 0 {
		r.First = at
	}
	r.Last = at
	r.Chunks = append(r.Chunks, ChunkTime{At: at, Tokens: tokens})
	s.text = append(s.text, text...)
	if c.finish != "" {
		r.Finish = c.finish
	}
	if s.onChunk != nil {
		s.onChunk(Chunk{Start: r.Start, At: at, Tokens: tokens, Text: text})
	}
	return nil
}

// finish fills the Result's text and token count once the stream is over.
func (s *streamReader) finish(tok Tokenizer) {
	r := s.res
	r.Text = string(s.text)
	// vLLM bench serve treats a zero completion_tokens as missing and counts the text instead.
	if s.usageTokens > 0 || (s.usageTokens == 0 && len(s.text) == 0) {
		r.OutputTokens, r.Tokens = s.usageTokens, TokensUsage
		return
	}
	r.UsageMissing = true
	switch {
	case s.allCounted && len(r.Chunks) > 0:
		r.OutputTokens, r.Tokens = s.countedTotal, TokensChunks
	case tok != nil:
		r.OutputTokens, r.Tokens = len(tok.Encode(r.Text)), TokensTokenizer
	}
}
