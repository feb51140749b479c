package serve

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

// harness runs a Server on a real listener over a testEngine, with a client of its own.
type harness struct {
	t        testing.TB
	lnClosed chan struct{} // closed when Serve closes its listener: its shutdown began
	te       *testEngine
	srv      *Server
	url      string
	client   *http.Client
	stop     func() error // ends Serve (its context is cancelled) and returns its error
}

func newHarness(t testing.TB, eo engineOpts, so Options) *harness {
	t.Helper()
	return newHarnessConns(t, eo, so, nil)
}

// newHarnessConns is newHarness with accepted connections passed to setup (when not nil) first.
func newHarnessConns(t testing.TB, eo engineOpts, so Options, setup func(net.Conn)) *harness {
	t.Helper()
	if eo.maxBatch == 0 {
		eo.maxBatch = 4
	}
	if eo.maxSeqLen == 0 {
		eo.maxSeqLen = 256
	}
	te := newTestEngine(t, eo)
	srv, err := New(te, so)
	if err != nil {
		t.Fatal(err)
	}
	h := serveHarness(t, srv, setup, 2*time.Minute, nil)
	h.te = te
	return h
}

// serveHarness runs srv on a real listener (accepted connections passed to setup first, when not
// nil) for a harness whose client waits up to timeout; it stops with the test, then calls done
// (when not nil).
func serveHarness(t testing.TB, srv *Server, setup func(net.Conn), timeout time.Duration, done func()) *harness {
	t.Helper()
	tcp, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln := &notifyListener{Listener: tcp, closed: make(chan struct{}), setup: setup}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ctx, ln) }()
	tr := &http.Transport{}
	h := &harness{t: t, lnClosed: ln.closed, srv: srv, url: "http://" + tcp.Addr().String(),
		client: &http.Client{Timeout: timeout, Transport: tr}}
	h.stop = sync.OnceValue(func() error {
		cancel()
		return <-served
	})
	t.Cleanup(func() {
		if err := h.stop(); err != nil {
			t.Errorf("Serve: %v", err)
		}
		tr.CloseIdleConnections()
		if done != nil {
			done()
		}
	})
	return h
}

// notifyListener tells when it is closed, and passes each accepted connection to setup.
type notifyListener struct {
	net.Listener
	once   sync.Once
	closed chan struct{}
	setup  func(net.Conn) // nil: none
}

func (l *notifyListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil && l.setup != nil {
		l.setup(c)
	}
	return c, err
}

func (l *notifyListener) Close() error {
	l.once.Do(func() { close(l.closed) })
	return l.Listener.Close()
}

// do sends a request with a JSON body (a string is sent as is) and returns the response.
func (h *harness) do(ctx context.Context, method, path string, body any) *http.Response {
	h.t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	default:
		raw, err := json.Marshal(b)
		if err != nil {
			h.t.Fatal(err)
		}
		rd = bytes.NewReader(raw)
	}
	req, err := http.NewRequestWithContext(ctx, method, h.url+path, rd)
	if err != nil {
		h.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := h.client.Do(req)
	if err != nil {
		h.t.Fatalf("%s %s: %v", method, path, err)
	}
	return resp
}

// post sends body and decodes the JSON reply into out (when not nil); it returns the status.
func (h *harness) post(path string, body, out any) int {
	h.t.Helper()
	resp := h.do(context.Background(), http.MethodPost, path, body)
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		h.t.Fatal(err)
	}
	if out != nil {
		if err := json.Unmarshal(raw, out); err != nil {
			h.t.Fatalf("POST %s: reply %q: %v", path, raw, err)
		}
	}
	return resp.StatusCode
}

// readSSE reads a whole event stream and returns each event's data, checking the framing:
// every event one "data: " line followed by an empty line.
func readSSE(t testing.TB, r io.Reader) []string {
	t.Helper()
	var out []string
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok {
			t.Fatalf("stream line %q: want \"data: ...\"", line)
		}
		out = append(out, data)
		if !sc.Scan() || sc.Text() != "" {
			t.Fatalf("event %q not followed by an empty line", line)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// The reply shapes as a client decodes them.

type gotUsage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	TotalTokens      int `json:"total_tokens"`
}

type gotChoice struct {
	Index        int     `json:"index"`
	Text         string  `json:"text"`
	FinishReason *string `json:"finish_reason"`
	Message      *struct {
		Role    string `json:"role"`
		Content string `json:"content"`
	} `json:"message"`
	Delta *struct {
		Role    *string `json:"role"`
		Content *string `json:"content"`
	} `json:"delta"`
	TokenIDs       []int32 `json:"token_ids"`
	PromptTokenIDs []int32 `json:"prompt_token_ids"`
}

type gotReply struct {
	ID      string      `json:"id"`
	Object  string      `json:"object"`
	Created int64       `json:"created"`
	Model   string      `json:"model"`
	Choices []gotChoice `json:"choices"`
	Usage   *gotUsage   `json:"usage"`
	// vLLM's return_token_ids: a chat reply's prompt ids (first chunk of a stream); a completion's
	// are on its choice.
	PromptTokenIDs []int32 `json:"prompt_token_ids"`
	Error          *struct {
		Message string  `json:"message"`
		Type    string  `json:"type"`
		Param   *string `json:"param"`
		Code    *string `json:"code"`
	} `json:"error"`
}

// text is the reply's text (completion text or chat message content).
func (r *gotReply) text() string {
	c := r.Choices[0]
	if c.Message != nil {
		return c.Message.Content
	}
	return c.Text
}

// streamed is a stream's events put together.
type streamed struct {
	chunks []gotReply
	raw    []map[string]any // each chunk as generic JSON, for field checks
	text   string
	tokens []int32
	prompt []int32
	finish string
	usage  *gotUsage
	errs   []string // error events' messages
}

// stream posts a streaming request and reads the whole stream.
func (h *harness) stream(path string, body map[string]any) *streamed {
	h.t.Helper()
	body["stream"] = true
	resp := h.do(context.Background(), http.MethodPost, path, body)
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
		raw, _ := io.ReadAll(resp.Body)
		h.t.Fatalf("POST %s: %d %s: %s", path, resp.StatusCode, resp.Header.Get("Content-Type"), raw)
	}
	return parseStream(h.t, readSSE(h.t, resp.Body))
}

func parseStream(t testing.TB, events []string) *streamed {
	t.Helper()
	s := &streamed{}
	if len(events) == 0 || events[len(events)-1] != "[DONE]" {
		t.Fatalf("stream %q does not end with [DONE]", events)
	}
	for _, e := range events[:len(events)-1] {
		var c gotReply
		var raw map[string]any
		if err := json.Unmarshal([]byte(e), &c); err != nil {
			t.Fatalf("event %q: %v", e, err)
		}
		json.Unmarshal([]byte(e), &raw)
		if c.Error != nil {
			s.errs = append(s.errs, c.Error.Message)
			continue
		}
		s.chunks, s.raw = append(s.chunks, c), append(s.raw, raw)
		if c.Usage != nil {
			s.usage = c.Usage
		}
		s.prompt = append(s.prompt, c.PromptTokenIDs...)
		for _, ch := range c.Choices {
			s.text += ch.Text
			if ch.Delta != nil && ch.Delta.Content != nil {
				s.text += *ch.Delta.Content
			}
			s.tokens = append(s.tokens, ch.TokenIDs...)
			s.prompt = append(s.prompt, ch.PromptTokenIDs...)
			if ch.FinishReason != nil {
				if s.finish != "" {
					t.Fatalf("two chunks with a finish reason: %q", events)
				}
				s.finish = *ch.FinishReason
			}
		}
	}
	return s
}
