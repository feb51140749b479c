package remote

import (
	"context"
	"errors"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"strings"
	"sync/atomic"
	"testing"
	"time"
	"unicode"
	"unicode/utf8"
)

const (
	tok1 = "data: {\"choices\":[{\"index\":0,\"text\":\"a\",\"finish_reason\":null}]}\n\n"
	fin1 = "data: {\"choices\":[{\"index\":0,\"text\":\"b\",\"finish_reason\":\"length\"}]}\n\n"
	done = "data: [DONE]\n\n"
)

// nginxHTML is the body nginx sends with a 503 when the upstream is down.
const nginxHTML = "<html>\r\n<head><title>503 Service Temporarily Unavailable</title></head>\r\n<body>\r\n" +
	"<center><h1>503 Service Temporarily Unavailable</h1></center>\r\n<hr><center>nginx/1.25.3</center>\r\n</body>\r\n</html>\r\n"

// TestFaults: every way a request can fail is recorded with its reason, and nothing leaks
// (TestMain runs goleak).
func TestFaults(t *testing.T) {
	longLine := "data: {\"choices\":[{\"text\":\"" + strings.Repeat("x", 5000) + "\"}]}\n\n"
	tests := []struct {
		name     string
		sc       script
		cfg      Config
		max      int // Request.MaxTokens (16 when 0)
		reason   Reason
		phase    Phase
		status   int
		sentinel error
		detail   string // substring of the detail
		chunks   int    // chunks recorded before the failure
	}{
		{name: "429", sc: script{status: 429, steps: []step{{write: `{"error":{"message":"Too many requests, retry later","type":"rate_limit_error","code":429}}`}}},
			reason: ReasonStatus, status: 429, sentinel: ErrStatus, detail: "Too many requests"},
		{name: "500", sc: script{status: 500, steps: []step{{write: "Internal Server Error"}}},
			reason: ReasonStatus, status: 500, sentinel: ErrStatus, detail: "Internal Server Error"},
		{name: "503 html", sc: script{status: 503, header: map[string]string{"Content-Type": "text/html"}, steps: []step{{write: nginxHTML}}},
			reason: ReasonStatus, status: 503, sentinel: ErrStatus, detail: "<head><title>503 Service Temporarily Unavailable</title></head> <body>"},
		{name: "huge error body", sc: script{status: 400, steps: []step{{write: strings.Repeat("e", 1<<20)}}},
			reason: ReasonStatus, status: 400, sentinel: ErrStatus, detail: "eee"},
		{name: "stall past the timeout", sc: script{steps: []step{{write: tok1}, {hold: true}}}, cfg: Config{StallTimeout: 50 * time.Millisecond},
			reason: ReasonTimeout, phase: PhaseStall, sentinel: ErrTimeout, chunks: 1},
		{name: "no first byte", sc: script{steps: []step{{hold: true}}}, cfg: Config{FirstByteTimeout: 50 * time.Millisecond},
			reason: ReasonTimeout, phase: PhaseFirstByte, sentinel: ErrTimeout},
		{name: "request deadline", sc: script{steps: []step{{write: tok1}, {hold: true}}}, cfg: Config{RequestTimeout: 80 * time.Millisecond},
			reason: ReasonTimeout, phase: PhaseRequest, sentinel: ErrTimeout, chunks: 1},
		{name: "connection cut mid-stream", sc: script{steps: []step{{write: tok1}, {write: "data: {\"choi"}, {cut: true}}},
			reason: ReasonStreamCut, sentinel: ErrStreamCut, chunks: 1},
		{name: "body ends before done or finish", sc: script{steps: []step{{write: tok1}}},
			reason: ReasonStreamCut, sentinel: ErrStreamCut, chunks: 1, detail: "before [DONE]"},
		{name: "garbage data", sc: script{steps: []step{{write: tok1}, {write: "data: <!DOCTYPE html>\n\n"}, {write: done}}},
			reason: ReasonMalformedJSON, sentinel: ErrMalformed, chunks: 1, detail: "<!DOCTYPE html>"},
		{name: "json that is not an object", sc: script{steps: []step{{write: "data: [1,2,3]\n\n"}, {write: done}}},
			reason: ReasonMalformedJSON, sentinel: ErrMalformed},
		{name: "line over the limit", sc: script{steps: []step{{write: tok1}, {write: longLine}, {write: done}}}, cfg: Config{MaxLineBytes: 1024},
			reason: ReasonMalformedSSE, sentinel: ErrMalformed, chunks: 1, detail: "too long"},
		{name: "error event", sc: script{steps: []step{{write: tok1}, {write: "event: error\ndata: upstream reset\n\n"}}},
			reason: ReasonServerError, sentinel: ErrServer, chunks: 1, detail: "upstream reset"},
		{name: "done before any chunk", sc: script{steps: []step{{write: ": ping\n\n"}, {write: done}}},
			reason: ReasonNoChunks, sentinel: ErrMalformed},
		{name: "llama.cpp error field mid-stream", sc: script{steps: []step{{write: tok1}, {write: "error: {\"code\":500,\"message\":\"out of KV cache\",\"type\":\"server_error\"}\n\n"}, {write: done}}},
			reason: ReasonServerError, sentinel: ErrServer, chunks: 1, detail: "out of KV cache"},
		{name: "llama.cpp error field first", sc: script{steps: []step{{write: "error: {\"code\":400,\"message\":\"the request exceeds the available context size\",\"type\":\"exceed_context_size_error\"}\n\n"}, {write: done}}},
			reason: ReasonServerError, sentinel: ErrServer, detail: "the request exceeds the available context size"},
		{name: "error event with an error object", sc: script{steps: []step{{write: "event: error\ndata: {\"error\": {\"message\": \"engine dead\"}}\n\n"}}},
			reason: ReasonServerError, sentinel: ErrServer, detail: "engine dead"},
		{name: "200 with a JSON error", sc: script{header: map[string]string{"Content-Type": "application/json"}, steps: []step{{write: `{"error": {"message": "model is loading", "code": 503}}`}}},
			reason: ReasonServerError, sentinel: ErrServer, detail: "model is loading"},
		{name: "200 with a whole JSON reply", sc: script{header: map[string]string{"Content-Type": "application/json; charset=utf-8"}, steps: []step{{write: `{"choices": [{"text": "hi", "finish_reason": "length"}]}`}}},
			reason: ReasonMalformedSSE, sentinel: ErrMalformed, detail: "not an event stream: {\"choices\""},
		{name: "200 with a gzip-encoded stream", sc: script{header: map[string]string{"Content-Encoding": "gzip"}, steps: []step{{write: "\x1f\x8b\x08\x00"}}},
			reason: ReasonMalformedSSE, sentinel: ErrMalformed, detail: "the server sent the stream gzip-encoded (Content-Encoding), unasked"},
		{name: "200 with an html page", sc: script{header: map[string]string{"Content-Type": "text/html"}, steps: []step{{write: nginxHTML}}},
			reason: ReasonStreamCut, sentinel: ErrStreamCut, detail: `not an event stream (Content-Type "text/html")`},
		{name: "302 not followed", sc: script{status: 302, header: map[string]string{"Location": "/v2/completions"}, steps: []step{{write: "Found"}}},
			reason: ReasonStatus, status: 302, sentinel: ErrStatus, detail: "/v2/completions, which a POST does not follow"},
		{name: "500 with invalid UTF-8 and terminal controls", sc: script{status: 500, steps: []step{{write: "bad \xff\xfe byte, \u009b31m C1 CSI, \u202e bidi override"}}},
			reason: ReasonStatus, status: 500, sentinel: ErrStatus, detail: "bad \ufffd byte, 31m C1 CSI, bidi override"},
		{name: "more chunks than max tokens allow", sc: script{steps: []step{{write: strings.Repeat(tok1, 2*1+slackChunks+1)}, {write: done}}}, max: 1,
			reason: ReasonOverflow, sentinel: ErrMalformed, chunks: 2*1 + slackChunks},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := newScriptServer(t, nil, tt.sc)
			c := newTestClient(t, srv.URL, tt.cfg)
			r := request(Completions)
			if tt.max > 0 {
				r.MaxTokens = tt.max
			}
			res, err := do(t, c, r, nil)
			var f *Failure
			if !errors.As(err, &f) || res.Failure != f {
				t.Fatalf("error %v (%T), want the Result's *Failure", err, err)
			}
			if f.Reason != tt.reason || f.Phase != tt.phase || !errors.Is(err, tt.sentinel) {
				t.Fatalf("failure %v: want reason %v, phase %q, wrapping %v", f, tt.reason, tt.phase, tt.sentinel)
			}
			if tt.status != 0 && (f.Status != tt.status || res.Status != tt.status) {
				t.Errorf("status %d / %d, want %d", f.Status, res.Status, tt.status)
			}
			if !strings.Contains(f.Detail, tt.detail) || len(f.Detail) > maxDetail+3 || !printable(f.Detail) {
				t.Errorf("detail %q: want one printable line of at most %d bytes containing %q", f.Detail, maxDetail, tt.detail)
			}
			if len(res.Chunks) != tt.chunks {
				t.Errorf("%d chunks recorded, want %d", len(res.Chunks), tt.chunks)
			}
			if strings.Contains(err.Error(), "\n") {
				t.Errorf("multi-line error %q", err)
			}
		})
	}
}

// printable reports whether s is valid UTF-8 without control characters or bidi overrides.
func printable(s string) bool {
	return utf8.ValidString(s) && !strings.ContainsFunc(s, func(r rune) bool {
		return unicode.IsControl(r) || unicode.Is(unicode.Bidi_Control, r)
	})
}

// TestRedirect: a 307 keeps the POST and its body and is followed; the stream it leads to is
// read as usual.
func TestRedirect(t *testing.T) {
	var moved atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/completions" {
			http.Redirect(w, r, "/new/v1/completions", http.StatusTemporaryRedirect)
			return
		}
		if b, _ := io.ReadAll(r.Body); r.Method != http.MethodPost || !strings.Contains(string(b), `"prompt":"Hello"`) {
			http.Error(w, "want the POST's body", http.StatusBadRequest)
			return
		}
		moved.Add(1)
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, tok1+fin1+done)
	}))
	defer srv.Close()
	c := newTestClient(t, srv.URL, Config{})
	res, err := do(t, c, request(Completions), nil)
	if err != nil || res.Text != "ab" || moved.Load() != 1 {
		t.Fatalf("%v, text %q, %d requests at the new address", err, res.Text, moved.Load())
	}
}

// TestGarbageLinesIgnored: lines that are not SSE fields the client reads (unknown fields,
// ids, retries, comments, binary junk before a colon) do not disturb the stream.
func TestGarbageLinesIgnored(t *testing.T) {
	stream := "retry: 3000\nid: 7\nnonsense line without colon\n\x00\xff\xfe: junk\n" + tok1 +
		":\n\nevent: message\n" + fin1 + "x-unknown: 1\n\n" + done
	srv := newScriptServer(t, nil, script{steps: bytewise(stream)})
	c := newTestClient(t, srv.URL, Config{})
	res, err := do(t, c, request(Completions), nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Chunks) != 2 || res.Text != "ab" || res.Finish != "length" || res.KeepAlives != 1 {
		t.Errorf("chunks %d text %q finish %q keep-alives %d", len(res.Chunks), res.Text, res.Finish, res.KeepAlives)
	}
}

// TestEOFAfterFinish: a body that ends after a finish reason, without [DONE], is complete.
func TestEOFAfterFinish(t *testing.T) {
	srv := newScriptServer(t, nil, script{steps: []step{{write: tok1}, {write: fin1}}})
	c := newTestClient(t, srv.URL, Config{})
	res, err := do(t, c, request(Completions), nil)
	if err != nil || len(res.Chunks) != 2 || res.Finish != "length" {
		t.Fatalf("%v, %d chunks, finish %q", err, len(res.Chunks), res.Finish)
	}
}

func TestConnectRefused(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	c := newTestClient(t, "http://"+addr, Config{})
	res, err := do(t, c, request(Completions), nil)
	if !errors.Is(err, ErrConnect) || res.Failure.Reason != ReasonConnect || res.Status != 0 {
		t.Fatalf("error %v, want ReasonConnect", err)
	}
	if _, err := c.Models(context.Background()); !errors.Is(err, ErrConnect) {
		t.Fatalf("Models: %v, want ErrConnect", err)
	}
}

// TestCancel: canceling the caller's context mid-stream ends the request as canceled, keeps
// what arrived, and closes the connection so the server sees the client go away (which frees
// the request's KV cache on a real server).
func TestCancel(t *testing.T) {
	srv := newScriptServer(t, nil, script{steps: []step{{write: tok1}, {hold: true}}})
	c := newTestClient(t, srv.URL, Config{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	res, err := c.Do(ctx, request(Completions), func(Chunk) { cancel() })
	if !errors.Is(err, ErrCanceled) || res.Failure.Reason != ReasonCanceled || len(res.Chunks) != 1 {
		t.Fatalf("error %v with %d chunks, want canceled after 1", err, len(res.Chunks))
	}
	select {
	case <-srv.gone:
	case <-time.After(10 * time.Second):
		t.Fatal("the server never saw the client go away")
	}
}

// TestClassifyConnectTimeout: a dial that times out is a connect timeout, not a refusal.
func TestClassifyConnectTimeout(t *testing.T) {
	c, err := New(Config{BaseURL: "http://h"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	dialErr := &net.OpError{Op: "dial", Net: "tcp", Err: timeoutErr{}}
	f := c.classify(context.Background(), context.Background(), dialErr, reachedNothing)
	if f.Reason != ReasonTimeout || f.Phase != PhaseConnect {
		t.Fatalf("dial timeout classified as %v", f)
	}
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connect: connection refused")}
	if f := c.classify(context.Background(), context.Background(), refused, reachedNothing); f.Reason != ReasonConnect {
		t.Fatalf("refusal classified as %v", f)
	}
}

type timeoutErr struct{}

func (timeoutErr) Error() string   { return "i/o timeout" }
func (timeoutErr) Timeout() bool   { return true }
func (timeoutErr) Temporary() bool { return true }

// TestKeepAlive: sequential requests reuse one connection, and once MaxConns requests have
// been in flight together, later rounds of as many take idle connections from the pool.
func TestKeepAlive(t *testing.T) {
	conns := make(chan struct{}, 64)
	srv := newScriptServer(t, nil, script{steps: events(tok1 + fin1 + done), onConn: func(s http.ConnState) {
		if s == http.StateNew {
			conns <- struct{}{}
		}
	}})
	c := newTestClient(t, srv.URL, Config{})
	for i := 0; i < 5; i++ {
		if _, err := do(t, c, request(Completions), nil); err != nil {
			t.Fatal(err)
		}
	}
	if n := len(conns); n != 1 {
		t.Errorf("%d connections for 5 sequential requests, want 1", n)
	}

	const streams = 8
	var arrived atomic.Int32
	gate := make(chan struct{}) // closed once the first round's streams are all in flight
	gated := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if arrived.Add(1) == streams {
			close(gate)
		}
		<-gate
		io.WriteString(w, tok1+fin1+done)
	}))
	defer gated.Close()
	pool := newTestClient(t, gated.URL, Config{MaxConns: streams})
	var fresh atomic.Int32 // requests after the first round that did not get an idle connection
	for round := range 3 {
		ctx := context.Background()
		if round > 0 {
			ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{GotConn: func(i httptrace.GotConnInfo) {
				if !i.WasIdle {
					fresh.Add(1)
				}
			}})
		}
		errs := make(chan error, streams)
		for range streams {
			go func() {
				_, err := pool.Do(ctx, request(Completions), nil)
				errs <- err
			}()
		}
		for range streams {
			if err := <-errs; err != nil {
				t.Fatal(err)
			}
		}
	}
	if n := fresh.Load(); n != 0 {
		t.Errorf("%d requests after the first round of %d did not reuse an idle connection", n, streams)
	}
}

// TestTLSSystemRoots: the client trusts the system's roots only, so a server with a
// self-signed certificate is a connect failure that says why.
func TestTLSSystemRoots(t *testing.T) {
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, tok1+fin1+done)
	}))
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the refused handshake is expected
	srv.StartTLS()
	defer srv.Close()
	c := newTestClient(t, srv.URL, Config{})
	res, err := do(t, c, request(Completions), nil)
	if !errors.Is(err, ErrConnect) || !strings.Contains(res.Failure.Detail, "certificate") {
		t.Fatalf("error %v, want a connect failure naming the certificate", err)
	}
}
