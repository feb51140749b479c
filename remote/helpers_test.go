package remote

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fakeClock is a clock the test server sets: each chunk's arrival reads the time the server
// stamped on it before writing.
type fakeClock struct{ now atomic.Int64 }

func (c *fakeClock) Now() time.Duration      { return time.Duration(c.now.Load()) }
func (c *fakeClock) set(d time.Duration)     { c.now.Store(int64(d)) }
func (c *fakeClock) add(d time.Duration)     { c.now.Add(int64(d)) }
func ms(n float64) time.Duration             { return time.Duration(n * float64(time.Millisecond)) }
func newFake(start time.Duration) *fakeClock { c := &fakeClock{}; c.set(start); return c }

// step is one thing a scripted server does.
type step struct {
	at    time.Duration // set the fake clock to this before writing (when clock is set and at > 0)
	write string        // bytes written and flushed
	ack   bool          // then wait until the client has reported one chunk
	cut   bool          // close the connection without ending the response
	hold  bool          // stop writing until the client goes away
}

// script is a test server's behaviour: a status, headers, then steps.
type script struct {
	status int
	header map[string]string
	steps  []step
	onConn func(http.ConnState) // sees every connection state change
}

// scriptServer serves one script to every request and records the request bodies and headers.
type scriptServer struct {
	*httptest.Server
	clock  *fakeClock    // may be nil
	acks   chan struct{} // one per chunk the client reported; buffered so the client never blocks
	bodies chan string   // request bodies, buffered
	auth   chan string   // Authorization headers, buffered
	gone   chan struct{} // one per hold step that saw the client go away
}

func newScriptServer(t *testing.T, clock *fakeClock, sc script) *scriptServer {
	t.Helper()
	s := &scriptServer{
		clock:  clock,
		acks:   make(chan struct{}, 1<<12),
		bodies: make(chan string, 64),
		auth:   make(chan string, 64),
		gone:   make(chan struct{}, 64),
	}
	s.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		select {
		case s.bodies <- string(b):
		default:
		}
		select {
		case s.auth <- r.Header.Get("Authorization"):
		default:
		}
		s.serve(w, r, sc)
	}))
	if sc.onConn != nil {
		s.Config.ConnState = func(_ net.Conn, st http.ConnState) { sc.onConn(st) }
	}
	s.Start()
	t.Cleanup(s.Close)
	return s
}

func (s *scriptServer) serve(w http.ResponseWriter, r *http.Request, sc script) {
	w.Header().Set("Content-Type", "text/event-stream")
	for k, v := range sc.header {
		w.Header().Set(k, v)
	}
	status := sc.status
	if status == 0 {
		status = http.StatusOK
	}
	w.WriteHeader(status)
	rc := http.NewResponseController(w)
	for _, st := range sc.steps {
		if s.clock != nil && st.at > 0 {
			s.clock.set(st.at)
		}
		switch {
		case st.cut:
			if conn, _, err := rc.Hijack(); err == nil {
				conn.Close()
			}
			return
		case st.hold:
			<-r.Context().Done()
			s.gone <- struct{}{}
			return
		}
		if _, err := io.WriteString(w, st.write); err != nil {
			return
		}
		if err := rc.Flush(); err != nil {
			return
		}
		if st.ack {
			select {
			case <-s.acks:
			case <-r.Context().Done():
				return
			}
		}
	}
}

// ackChunk is an onChunk callback that lets the server go on.
func (s *scriptServer) ackChunk(Chunk) { s.acks <- struct{}{} }

// lastBody is the most recent request body.
func (s *scriptServer) lastBody(t *testing.T) string {
	t.Helper()
	select {
	case b := <-s.bodies:
		return b
	default:
		t.Fatal("no request reached the server")
		return ""
	}
}

// newTestClient builds a client for srv's /v1 and closes its pool when the test ends.
func newTestClient(t *testing.T, url string, cfg Config) *Client {
	t.Helper()
	cfg.BaseURL = url + "/v1"
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// events splits a raw stream after each blank line into steps, one write per event.
func events(raw string) []step {
	var steps []step
	for raw != "" {
		i := strings.Index(raw, "\n\n")
		if i < 0 {
			steps = append(steps, step{write: raw})
			break
		}
		steps = append(steps, step{write: raw[:i+2]})
		raw = raw[i+2:]
	}
	return steps
}

// bytewise writes raw one byte per flush.
func bytewise(raw string) []step {
	steps := make([]step, len(raw))
	for i := range raw {
		steps[i] = step{write: raw[i : i+1]}
	}
	return steps
}

// request is a small completions request.
func request(api API) Request {
	return Request{API: api, Model: "m", Prompt: "Hello", MaxTokens: 16}
}

// do runs one request with a deadline so that a broken test fails instead of hanging.
func do(t *testing.T, c *Client, r Request, onChunk func(Chunk)) (Result, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return c.Do(ctx, r, onChunk)
}
