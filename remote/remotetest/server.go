// Package remotetest is an OpenAI-compatible test server that streams as vLLM does, for tests
// of rosetop against a remote server: GET /v1/models with max_model_len, streaming POST
// /v1/completions and /v1/chat/completions, and a /metrics page under vLLM's names, with
// scripted faults per request.
//
// The chunk and usage shapes follow vllm/entrypoints/openai/completion/serving.py and
// chat_completion/serving.py (a role chunk first in chat, one chunk per token, the finish
// reason on the last, then a usage chunk with "choices": [] when stream_options.include_usage,
// then [DONE]); the metric names and histogram buckets follow vllm/v1/metrics/loggers.py.
package remotetest

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"time"

	"rosetop/engine/tokenizer"
)

// Fault is how one generation request misbehaves.
type Fault int

// The faults.
const (
	OK            Fault = iota
	Status429           // 429 with an OpenAI error object
	Status500           // 500 with a plain text body
	Status503HTML       // 503 with the HTML page a proxy sends when the server is down
	Stall               // one chunk, then nothing until the client goes away
	Cut                 // two chunks, then the connection closes in the middle of an event
	Garbage             // one chunk, then a data field that is not JSON
	NoUsage             // a whole stream without the usage chunk
)

// Options shape a Server.
type Options struct {
	Model       string // the one model served; "": test-model
	MaxModelLen int    // the model card's max_model_len; 0: not given
	ChunkTokens int    // tokens per content chunk; 0: 1
	// TokenIDs puts token_ids in every chunk (vLLM's return_token_ids), so that a client knows
	// how many tokens each chunk carried.
	TokenIDs  bool
	NoMetrics bool              // /metrics answers 404
	Faults    func(n int) Fault // the behaviour of the n-th generation request, from 0; nil: OK
	// RetryAfter is the Retry-After header of the n-th generation request's 429, 500 or 503
	// answer; nil or "": none.
	RetryAfter func(n int) string
	// Started gets a value when a stream has written its first content chunk, Left when a
	// stream ended because its client went away. nil: none sent. The caller sizes their
	// buffers: a handler blocks on a full one.
	Started, Left chan<- struct{}
}

// Server is a running test server; Close it when done.
type Server struct {
	*httptest.Server
	opts Options
	tok  *tokenizer.Tokenizer

	mu      sync.Mutex // guards the fields below
	posts   int        // POST requests seen, to any path, well-formed or not
	n       int        // generation requests seen
	running int
	gone    int // streams whose client went away before the end
	prompt  float64
	gen     float64
	ttft    histogram
	itl     histogram
	e2e     histogram
}

// NewServer starts a server.
func NewServer(o Options) (*Server, error) {
	tok, err := tokenizer.GPT2()
	if err != nil {
		return nil, err
	}
	if o.Model == "" {
		o.Model = "test-model"
	}
	if o.ChunkTokens <= 0 {
		o.ChunkTokens = 1
	}
	s := &Server{opts: o, tok: tok, ttft: newHistogram(ttftBuckets), itl: newHistogram(itlBuckets), e2e: newHistogram(e2eBuckets)}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/models", s.models)
	mux.HandleFunc("POST /v1/completions", func(w http.ResponseWriter, r *http.Request) { s.generate(w, r, false) })
	mux.HandleFunc("POST /v1/chat/completions", func(w http.ResponseWriter, r *http.Request) { s.generate(w, r, true) })
	mux.HandleFunc("GET /metrics", s.metrics)
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			s.mu.Lock()
			s.posts++
			s.mu.Unlock()
		}
		mux.ServeHTTP(w, r)
	}))
	return s, nil
}

// Posts is how many POST requests arrived, to any path.
func (s *Server) Posts() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.posts
}

// Requests is how many generation requests arrived.
func (s *Server) Requests() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.n
}

// Gone is how many streams ended because their client went away (a cancelled request).
func (s *Server) Gone() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.gone
}

// Running is how many streams are in progress.
func (s *Server) Running() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.running
}

func (s *Server) models(w http.ResponseWriter, r *http.Request) {
	card := map[string]any{"id": s.opts.Model, "object": "model", "owned_by": "remotetest"}
	if s.opts.MaxModelLen > 0 {
		card["max_model_len"] = s.opts.MaxModelLen
	}
	writeJSON(w, http.StatusOK, map[string]any{"object": "list", "data": []any{card}})
}

// body is the part of a request the server reads.
type body struct {
	Model         string                     `json:"model"`
	Prompt        json.RawMessage            `json:"prompt"`
	Messages      []struct{ Content string } `json:"messages"`
	MaxTokens     int                        `json:"max_tokens"`
	StreamOptions struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
	ReturnTokenIDs bool `json:"return_token_ids"`
}

func (s *Server) generate(w http.ResponseWriter, r *http.Request, chat bool) {
	start := time.Now()
	var b body
	if err := json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&b); err != nil {
		writeError(w, http.StatusBadRequest, "malformed JSON: "+err.Error())
		return
	}
	if b.Model != s.opts.Model {
		writeError(w, http.StatusNotFound, fmt.Sprintf("The model `%s` does not exist.", b.Model))
		return
	}
	if b.MaxTokens < 1 || b.MaxTokens > 1<<16 {
		writeError(w, http.StatusBadRequest, "max_tokens must be from 1 to 65536")
		return
	}
	prompt, ok := s.promptTokens(&b, chat)
	if !ok {
		writeError(w, http.StatusBadRequest, "prompt must be a string or an array of token ids")
		return
	}
	s.mu.Lock()
	fault, retry := OK, ""
	if s.opts.Faults != nil {
		fault = s.opts.Faults(s.n)
	}
	if s.opts.RetryAfter != nil {
		retry = s.opts.RetryAfter(s.n)
	}
	s.n++
	s.mu.Unlock()
	if retry != "" && (fault == Status429 || fault == Status500 || fault == Status503HTML) {
		w.Header().Set("Retry-After", retry)
	}
	switch fault {
	case Status429:
		writeError(w, http.StatusTooManyRequests, "Too many requests, retry later")
		return
	case Status500:
		w.WriteHeader(http.StatusInternalServerError)
		io.WriteString(w, "Internal Server Error")
		return
	case Status503HTML:
		w.Header().Set("Content-Type", "text/html")
		w.WriteHeader(http.StatusServiceUnavailable)
		io.WriteString(w, "<html>\r\n<head><title>503 Service Temporarily Unavailable</title></head>\r\n<body>\r\n<center><h1>503 Service Temporarily Unavailable</h1></center>\r\n</body>\r\n</html>\r\n")
		return
	}
	st := &stream{s: s, w: w, rc: http.NewResponseController(w), chat: chat, ids: s.opts.TokenIDs || b.ReturnTokenIDs, start: start}
	s.mu.Lock()
	s.running++
	s.prompt += float64(prompt)
	s.mu.Unlock()
	done := st.run(r, fault, b.MaxTokens, prompt, b.StreamOptions.IncludeUsage && fault != NoUsage)
	s.mu.Lock()
	s.running--
	left := !done && r.Context().Err() != nil
	if left {
		s.gone++
	}
	s.mu.Unlock()
	if left && s.opts.Left != nil {
		s.opts.Left <- struct{}{}
	}
}

// promptTokens counts the prompt as the server's tokenizer (GPT-2's) does.
func (s *Server) promptTokens(b *body, chat bool) (int, bool) {
	if chat {
		if len(b.Messages) == 0 {
			return 0, false
		}
		return len(s.tok.Encode(b.Messages[0].Content)), true
	}
	var text string
	if json.Unmarshal(b.Prompt, &text) == nil {
		return len(s.tok.Encode(text)), true
	}
	var ids []int32
	if json.Unmarshal(b.Prompt, &ids) == nil && len(ids) > 0 {
		return len(ids), true
	}
	return 0, false
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}

// writeError answers OpenAI's error object, as vLLM does.
func writeError(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, map[string]any{"error": map[string]any{"message": msg, "type": http.StatusText(status), "param": nil, "code": status}})
}

// stream writes one response's events.
type stream struct {
	s     *Server
	w     http.ResponseWriter
	rc    *http.ResponseController
	chat  bool
	ids   bool
	start time.Time
	last  time.Time // the previous content chunk's write
}

// run streams maxTokens tokens (or a fault's part of them) and reports whether the stream
// reached its end.
func (st *stream) run(r *http.Request, fault Fault, maxTokens, prompt int, usage bool) bool {
	st.w.Header().Set("Content-Type", "text/event-stream")
	st.w.WriteHeader(http.StatusOK)
	if st.chat {
		ids := ""
		if st.ids {
			ids = `,"token_ids":[]`
		}
		if !st.event(`{"object":"chat.completion.chunk","model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null` + ids + `}]}`) {
			return false
		}
	}
	per := st.s.opts.ChunkTokens
	sent := 0
	for k := 0; sent < maxTokens; k++ {
		n := min(per, maxTokens-sent)
		sent += n
		finish := "null"
		if sent == maxTokens {
			finish = `"length"`
		}
		if !st.content(n, finish) {
			return false
		}
		switch {
		case fault == Stall:
			<-r.Context().Done()
			return false
		case fault == Cut && k == 1:
			io.WriteString(st.w, `data: {"choices":[{"index":0,"te`)
			st.rc.Flush()
			if conn, _, err := st.rc.Hijack(); err == nil {
				conn.Close()
			}
			return false
		case fault == Garbage:
			st.event("<!DOCTYPE html><html>upstream error</html>")
			return false
		}
	}
	st.s.mu.Lock()
	st.s.e2e.observe(time.Since(st.start).Seconds())
	st.s.mu.Unlock()
	if usage && !st.event(fmt.Sprintf(`{"object":"text_completion","model":"m","choices":[],"usage":{"prompt_tokens":%d,"total_tokens":%d,"completion_tokens":%d}}`, prompt, prompt+maxTokens, maxTokens)) {
		return false
	}
	return st.event("[DONE]")
}

// content writes one chunk of n tokens (" the" each: one GPT-2 token) and times it as vLLM's
// metrics do.
func (st *stream) content(n int, finish string) bool {
	text := strings.Repeat(" the", n)
	ids := ""
	if st.ids {
		ids = `,"token_ids":[` + strings.TrimSuffix(strings.Repeat("262,", n), ",") + `]`
	}
	var data string
	if st.chat {
		data = fmt.Sprintf(`{"object":"chat.completion.chunk","model":"m","choices":[{"index":0,"delta":{"content":%q},"logprobs":null,"finish_reason":%s%s}]}`, text, finish, ids)
	} else {
		data = fmt.Sprintf(`{"object":"text_completion","model":"m","choices":[{"index":0,"text":%q,"logprobs":null,"finish_reason":%s%s}]}`, text, finish, ids)
	}
	if !st.event(data) {
		return false
	}
	now := time.Now()
	first := st.last.IsZero()
	st.s.mu.Lock()
	if first {
		st.s.ttft.observe(now.Sub(st.start).Seconds())
	} else {
		st.s.itl.observe(now.Sub(st.last).Seconds())
	}
	st.s.gen += float64(n)
	st.s.mu.Unlock()
	st.last = now
	if first && st.s.opts.Started != nil {
		st.s.opts.Started <- struct{}{}
	}
	return true
}

// event writes one SSE event and flushes it.
func (st *stream) event(data string) bool {
	if _, err := io.WriteString(st.w, "data: "+data+"\n\n"); err != nil {
		return false
	}
	return st.rc.Flush() == nil
}
