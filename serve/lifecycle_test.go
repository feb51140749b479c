package serve

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"rosetop/sched"
)

// TestDisconnect: a client that goes away cancels its request in the scheduler at once, and every
// KV block returns: mid-stream, and while a whole reply's request is still queued.
func TestDisconnect(t *testing.T) {
	t.Run("mid-stream", func(t *testing.T) {
		for _, path := range []string{"/v1/completions", "/v1/chat/completions"} {
			h := newHarness(t, engineOpts{maxSeqLen: 512}, Options{})
			ctx, cancel := context.WithCancel(context.Background())
			body := map[string]any{"prompt": "Hello", "messages": []map[string]string{{"role": "user", "content": "Hello"}},
				"max_tokens": 400, "ignore_eos": true, "stream": true}
			if path == "/v1/completions" {
				delete(body, "messages")
			} else {
				delete(body, "prompt")
			}
			resp := h.do(ctx, http.MethodPost, path, body)
			rd := bufio.NewReader(resp.Body)
			if line, err := rd.ReadString('\n'); err != nil || !strings.HasPrefix(line, "data: {") {
				t.Fatalf("%s: first line %q, %v", path, line, err)
			}
			h.leaveMidStream(cancel, resp.Body)
			snap, recs := h.te.waitIdle()
			if r := recs[0]; r.Reason != sched.FinishCancelled || len(r.Output) >= 400 || snap.KVUsed != 0 {
				t.Fatalf("%s: reason %s after %d tokens, KV blocks used %d; want cancelled early, 0", path, r.Reason, len(r.Output), snap.KVUsed)
			}
		}
	})
	t.Run("whole reply, queued", func(t *testing.T) {
		h := newHarness(t, engineOpts{paused: true}, Options{})
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() {
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, h.url+"/v1/completions", strings.NewReader(`{"prompt": "Hi", "max_tokens": 50}`))
			req.Header.Set("Content-Type", "application/json")
			resp, err := h.client.Do(req)
			if err == nil {
				resp.Body.Close()
			}
			done <- err
		}()
		h.te.waitFor(func() bool { return h.te.submitted == 1 })
		cancel()
		if err := <-done; err == nil {
			t.Fatal("the cancelled request got a reply")
		}
		h.te.waitFor(func() bool { return h.te.cancels == 1 })
		h.te.release()
		snap, recs := h.te.waitIdle()
		if r := recs[0]; r.Reason != sched.FinishCancelled || len(r.Output) != 0 || snap.KVUsed != 0 {
			t.Fatalf("reason %s after %d tokens, KV blocks used %d; want cancelled before any, 0", r.Reason, len(r.Output), snap.KVUsed)
		}
	})
}

// TestSlowClient: a streaming client that stops reading holds its handler no longer than one
// write's WriteTimeout: its request is then cancelled and its KV blocks return.
func TestSlowClient(t *testing.T) {
	h, _ := stalledStream(t, Options{WriteTimeout: 50 * time.Millisecond})
	h.te.waitFor(func() bool { return h.te.cancels == 1 })
	h.te.resume()
	snap, recs := h.te.waitIdle()
	if r := recs[0]; r.Reason != sched.FinishCancelled || len(r.Output) >= 1000 || snap.KVUsed != 0 {
		t.Fatalf("reason %s after %d tokens, KV blocks used %d; want cancelled early, 0", r.Reason, len(r.Output), snap.KVUsed)
	}
}

// TestUnreadReply: a client that asks for a reply and never reads it holds its handler and its
// connection no longer than WriteTimeout, on a route whose handler sets no deadline of its own:
// /metrics, its page made larger than the socket buffers.
func TestUnreadReply(t *testing.T) {
	ledger := make([]LedgerEntry, 2000)
	for i := range ledger {
		ledger[i] = LedgerEntry{What: "graph capture", Detail: fmt.Sprintf("batch %d", i), Took: time.Millisecond}
	}
	m, err := NewMetrics(MetricsOptions{Model: "tiny-gpt2", MaxModelLen: 256, Ledger: func() []LedgerEntry { return ledger }})
	if err != nil {
		t.Fatal(err)
	}
	lines := make(logLines, 4)
	small := func(c net.Conn) { c.(*net.TCPConn).SetWriteBuffer(4096) }
	h := newHarnessConns(t, engineOpts{}, Options{Metrics: m, WriteTimeout: 50 * time.Millisecond, Log: slog.New(slog.NewTextHandler(lines, nil))}, small)
	conn, err := net.Dial("tcp", strings.TrimPrefix(h.url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.(*net.TCPConn).SetReadBuffer(4096)
	fmt.Fprintf(conn, "GET /metrics HTTP/1.1\r\nHost: rosetop\r\n\r\n")
	select { // a failure, not a measurement: far past WriteTimeout
	case line := <-lines:
		if !strings.Contains(line, "path=/metrics") {
			t.Fatalf("log line %q, want the /metrics request's", line)
		}
	case <-time.After(time.Minute):
		t.Fatal("the /metrics handler still writes to a client that reads nothing")
	}
	conn.SetReadDeadline(time.Now().Add(time.Minute))
	if _, err := io.Copy(io.Discard, conn); err != nil {
		t.Fatalf("the connection was not closed: %v", err)
	}
}

// TestLongRepliesOutliveWriteTimeout: the connection's write deadline, set when a request is
// read, has passed long before a queued request's reply or stream is written; each write sets a
// deadline of its own, so both arrive whole.
func TestLongRepliesOutliveWriteTimeout(t *testing.T) {
	const wt = 50 * time.Millisecond
	h := newHarness(t, engineOpts{paused: true}, Options{WriteTimeout: wt})
	type reply struct {
		raw []byte
		err error
	}
	send := func(stream bool) <-chan reply {
		c := make(chan reply, 1)
		go func() {
			body := fmt.Sprintf(`{"prompt": "Hi", "max_tokens": 5, "ignore_eos": true, "stream": %v}`, stream)
			resp, err := h.client.Post(h.url+"/v1/completions", "application/json", strings.NewReader(body))
			if err != nil {
				c <- reply{err: err}
				return
			}
			defer resp.Body.Close()
			raw, err := io.ReadAll(resp.Body)
			c <- reply{raw, err}
		}()
		return c
	}
	whole, stream := send(false), send(true)
	h.te.waitFor(func() bool { return h.te.submitted == 2 })
	<-time.After(4 * wt) // the condition under test: both connections' first deadlines have passed
	h.te.release()
	w := <-whole
	var got gotReply
	if w.err != nil || json.Unmarshal(w.raw, &got) != nil || got.Usage == nil || got.Usage.CompletionTokens != 5 {
		t.Fatalf("the reply written after WriteTimeout: %q, %v; want 5 tokens", w.raw, w.err)
	}
	st := <-stream
	if st.err != nil {
		t.Fatalf("the stream written after WriteTimeout: %v", st.err)
	}
	s := parseStream(t, readSSE(t, bytes.NewReader(st.raw)))
	if len(s.errs) != 0 || len(s.chunks) < 5 {
		t.Fatalf("the stream written after WriteTimeout: %d chunks, errors %q; want 5 tokens", len(s.chunks), s.errs)
	}
}

// TestErrorLog: net/http's own error lines (here a failed accept, as when the process is out of
// file descriptors) go to ErrorLog, not to the standard logger's stderr, where a dashboard draws;
// the server goes on accepting.
func TestErrorLog(t *testing.T) {
	lines := make(logLines, 4)
	srv, err := New(newTestEngine(t, engineOpts{maxBatch: 4, maxSeqLen: 256}), Options{ErrorLog: log.New(lines, "", 0)})
	if err != nil {
		t.Fatal(err)
	}
	tcp, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ctx, &failOnce{Listener: tcp}) }()
	defer func() {
		cancel()
		if err := <-served; err != nil {
			t.Errorf("Serve: %v", err)
		}
	}()
	select {
	case line := <-lines:
		if !strings.Contains(line, "Accept error") || !strings.Contains(line, "too many open files") {
			t.Fatalf("error log line %q, want net/http's accept error", line)
		}
	case <-time.After(time.Minute): // a failure, not a measurement
		t.Fatal("net/http's accept error did not reach ErrorLog")
	}
	client := &http.Client{Timeout: time.Minute, Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := client.Get("http://" + tcp.Addr().String() + "/health")
	if err != nil {
		t.Fatalf("after the failed accept: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("/health after the failed accept: %d", resp.StatusCode)
	}
}

// failOnce is a listener whose first Accept fails as it does when the process has no file
// descriptor left: a temporary error, after which net/http retries.
type failOnce struct {
	net.Listener
	failed atomic.Bool
}

func (l *failOnce) Accept() (net.Conn, error) {
	if !l.failed.Swap(true) {
		return nil, &net.OpError{Op: "accept", Net: "tcp", Err: os.NewSyscallError("accept4", syscall.EMFILE)}
	}
	return l.Listener.Accept()
}

// stalledStream serves a scripted engine that holds after 300 steps, far more tokens than the
// small socket buffers take, to a client that asks for a 1000-token stream and then reads
// nothing; the connection is closed when the test ends.
func stalledStream(t *testing.T, o Options) (*harness, net.Conn) {
	t.Helper()
	small := func(c net.Conn) { c.(*net.TCPConn).SetWriteBuffer(4096) } // the stream backs up soon
	eo := engineOpts{maxSeqLen: 1024, script: func(int) int32 { return 262 }, holdAt: 300}
	h := newHarnessConns(t, eo, o, small)
	conn, err := net.Dial("tcp", strings.TrimPrefix(h.url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	conn.(*net.TCPConn).SetReadBuffer(4096)
	body := `{"prompt": "Hi", "max_tokens": 1000, "ignore_eos": true, "stream": true}`
	fmt.Fprintf(conn, "POST /v1/completions HTTP/1.1\r\nHost: rosetop\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
	return h, conn
}

// logLines is a log's writer that hands each line to the test.
type logLines chan string

func (l logLines) Write(p []byte) (int, error) {
	l <- string(p)
	return len(p), nil
}

// TestUnsentBody: a client that declares a body and never sends it holds its connection no longer
// than ReadTimeout, whether or not the handler reads the body (net/http reads an unread body
// before it answers): on every route, and through a shutdown.
func TestUnsentBody(t *testing.T) {
	for _, c := range []struct {
		name, method, path, contentType string
		status                          int
	}{
		{"generation", "POST", "/v1/completions", "application/json", 400},
		{"refused content type", "POST", "/v1/chat/completions", "text/plain", 400},
		{"health", "GET", "/health", "", 200},
		{"models", "GET", "/v1/models", "", 200},
		{"unknown path", "POST", "/v1/embeddings", "application/json", 404},
		{"wrong method", "PUT", "/v1/completions", "application/json", 405},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := newHarness(t, engineOpts{}, Options{ReadTimeout: 50 * time.Millisecond, ShutdownTimeout: 50 * time.Millisecond})
			conn, err := net.Dial("tcp", strings.TrimPrefix(h.url, "http://"))
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			fmt.Fprintf(conn, "%s %s HTTP/1.1\r\nHost: rosetop\r\nContent-Type: %s\r\nContent-Length: 100\r\n\r\n{", c.method, c.path, c.contentType)
			conn.SetReadDeadline(time.Now().Add(time.Minute)) // a failure, not a measurement: far past ReadTimeout
			resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
			if err != nil {
				t.Fatalf("no reply: %v", err)
			}
			resp.Body.Close()
			if resp.StatusCode != c.status {
				t.Fatalf("status %d, want %d", resp.StatusCode, c.status)
			}
		})
	}
}

// TestOverload: past --max-queue waiting requests a request is answered 429 with Retry-After;
// the queued ones are served once the engine runs.
func TestOverload(t *testing.T) {
	h := newHarness(t, engineOpts{paused: true}, Options{MaxQueue: 2, RetryAfter: 1500 * time.Millisecond})
	codes := make(chan int, 2)
	for range 2 {
		go func() {
			resp, err := h.client.Post(h.url+"/v1/completions", "application/json", strings.NewReader(`{"prompt": "Hi", "max_tokens": 3}`))
			if err != nil {
				codes <- 0
				return
			}
			resp.Body.Close()
			codes <- resp.StatusCode
		}()
	}
	h.te.waitFor(func() bool { return h.te.submitted == 2 })
	resp := h.do(context.Background(), http.MethodPost, "/v1/completions", `{"prompt": "Hi", "max_tokens": 3}`)
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") != "2" ||
		!strings.Contains(string(raw), `"type":"rate_limit_error"`) || !strings.Contains(string(raw), "--max-queue 2") {
		t.Fatalf("third request: %d, Retry-After %q, %s; want 429, 2, a rate_limit_error", resp.StatusCode, resp.Header.Get("Retry-After"), raw)
	}
	h.te.release()
	for range 2 {
		if c := <-codes; c != http.StatusOK {
			t.Fatalf("a queued request: status %d, want 200", c)
		}
	}
}

// TestOverloadBurst: a burst of concurrent requests against --max-queue 3 and an engine that
// admits none queues exactly 3 of them (each handler checking the queue before any had entered it
// let most of the burst through); the rest are answered 429, the queued ones served at release.
func TestOverloadBurst(t *testing.T) {
	const limit, burst = 3, 40
	h := newHarness(t, engineOpts{paused: true}, Options{MaxQueue: limit})
	var mu sync.Mutex // guards count
	count := map[int]int{}
	var done sync.WaitGroup
	start := make(chan struct{})
	for range burst {
		done.Add(1)
		go func() {
			defer done.Done()
			<-start
			code := 0
			if resp, err := h.client.Post(h.url+"/v1/completions", "application/json", strings.NewReader(`{"prompt": "Hi", "max_tokens": 2}`)); err == nil {
				resp.Body.Close()
				code = resp.StatusCode
			}
			mu.Lock()
			count[code]++
			mu.Unlock()
			h.te.mu.Lock() // wake waitFor below: an answer is not an engine event
			h.te.cond.Broadcast()
			h.te.mu.Unlock()
		}()
	}
	close(start)
	// Every request is either answered (429 at once) or in the engine's queue until the release.
	h.te.waitFor(func() bool {
		mu.Lock()
		defer mu.Unlock()
		return h.te.submitted+count[http.StatusTooManyRequests]+count[0] == burst
	})
	queued := h.te.submitted
	h.te.release()
	done.Wait()
	if ok, busy := count[http.StatusOK], count[http.StatusTooManyRequests]; queued != limit || ok != limit || busy != burst-limit {
		t.Fatalf("a burst of %d against --max-queue %d: %d queued, %d served, %d answered 429 (%v); want %d queued and served, the rest 429",
			burst, limit, queued, ok, busy, count, limit)
	}
}

// TestShutdownLetsRequestsFinish: once Serve's context is done it stops accepting, and a stream
// in flight runs to its end.
func TestShutdownLetsRequestsFinish(t *testing.T) {
	h := newHarness(t, engineOpts{}, Options{})
	resp := h.do(context.Background(), http.MethodPost, "/v1/completions",
		map[string]any{"prompt": "Hello", "max_tokens": 60, "ignore_eos": true, "stream": true, "stream_options": map[string]bool{"include_usage": true}})
	defer resp.Body.Close()
	rd := bufio.NewReader(resp.Body)
	first, err := rd.ReadString('\n')
	if blank, err2 := rd.ReadString('\n'); err != nil || err2 != nil || blank != "\n" {
		t.Fatalf("first event %q %q: %v %v", first, blank, err, err2)
	}
	h.te.hold() // still in flight when the shutdown begins
	stopped := make(chan error, 1)
	go func() { stopped <- h.stop() }()
	<-h.lnClosed
	h.te.resume()
	s := parseStream(t, append([]string{strings.TrimPrefix(strings.TrimSpace(first), "data: ")}, readSSE(t, rd)...))
	if s.finish != "length" || s.usage == nil || s.usage.CompletionTokens != 60 {
		t.Fatalf("the stream in flight: finish %q usage %+v; want length after 60 tokens", s.finish, s.usage)
	}
	if err := <-stopped; err != nil {
		t.Fatalf("Serve: %v", err)
	}
	if _, err := h.client.Get(h.url + "/health"); err == nil {
		t.Fatal("a new request was served after the shutdown")
	}
}

// TestShutdownTimeout: requests still running after --shutdown-timeout are cancelled (their KV
// blocks return) and their clients told so: a 503, or an error event closing the stream; with no
// time given (a negative timeout), at once rather than after the default.
func TestShutdownTimeout(t *testing.T) {
	for _, grace := range []time.Duration{100 * time.Millisecond, -1} {
		t.Run(grace.String(), func(t *testing.T) { testShutdownTimeout(t, grace) })
	}
}

func testShutdownTimeout(t *testing.T, grace time.Duration) {
	h := newHarness(t, engineOpts{paused: true}, Options{ShutdownTimeout: grace})
	whole := make(chan string, 1)
	go func() {
		resp, err := h.client.Post(h.url+"/v1/completions", "application/json", strings.NewReader(`{"prompt": "Hi", "max_tokens": 5}`))
		if err != nil {
			whole <- err.Error()
			return
		}
		raw, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		whole <- resp.Status + " " + string(raw)
	}()
	resp := h.do(context.Background(), http.MethodPost, "/v1/chat/completions",
		map[string]any{"messages": []map[string]string{{"role": "user", "content": "Hi"}}, "max_tokens": 5, "stream": true})
	defer resp.Body.Close()
	h.te.waitFor(func() bool { return h.te.submitted == 2 })
	stopped := make(chan error, 1)
	go func() { stopped <- h.stop() }()
	select { // a failure, not a measurement: the default grace is 30 s
	case err := <-stopped:
		if err != nil {
			t.Fatalf("Serve: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("Serve still running 20 s after its context ended, with a grace of %v", grace)
	}
	events := readSSE(t, resp.Body)
	if len(events) != 2 || !strings.Contains(events[0], `"shutting_down"`) || events[1] != "[DONE]" {
		t.Fatalf("the stream: %q; want an error event and [DONE]", events)
	}
	if got := <-whole; !strings.HasPrefix(got, "503") || !strings.Contains(got, "shutting down") {
		t.Fatalf("the whole reply: %s; want a 503 error object", got)
	}
	h.te.release()
	snap, recs := h.te.waitIdle()
	for _, r := range recs {
		if r.Reason != sched.FinishCancelled {
			t.Fatalf("a request ended %s, want cancelled", r.Reason)
		}
	}
	if snap.KVUsed != 0 {
		t.Fatalf("%d KV blocks used after the shutdown", snap.KVUsed)
	}
}

// TestShutdownStopNow: a shutdown with requests in flight says so (OnDrain: how many, for how
// long), and StopNow during it cancels them at once instead of after the 30 s grace.
func TestShutdownStopNow(t *testing.T) {
	type drain struct {
		n     int
		grace time.Duration
	}
	drains := make(chan drain, 1)
	var h *harness
	h = newHarness(t, engineOpts{paused: true}, Options{OnDrain: func(n int, grace time.Duration) {
		drains <- drain{n, grace}
		h.srv.StopNow()
	}})
	resp := h.do(context.Background(), http.MethodPost, "/v1/completions", map[string]any{"prompt": "Hi", "max_tokens": 5, "stream": true})
	defer resp.Body.Close()
	h.te.waitFor(func() bool { return h.te.submitted == 1 })
	stopped := make(chan error, 1)
	go func() { stopped <- h.stop() }()
	select { // a failure, not a measurement: without StopNow the grace is 30 s
	case err := <-stopped:
		if err != nil {
			t.Fatalf("Serve: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("Serve still running 20 s after StopNow")
	}
	if d := <-drains; d.n != 1 || d.grace != 30*time.Second {
		t.Errorf("OnDrain(%d, %v); want 1 request, 30s", d.n, d.grace)
	}
	if events := readSSE(t, resp.Body); len(events) != 2 || !strings.Contains(events[0], `"shutting_down"`) {
		t.Fatalf("the stream: %q; want an error event and [DONE]", events)
	}
	h.te.release()
	h.te.waitIdle()
}

// TestShutdownStalledClient: a stream whose client stopped reading holds the shutdown no longer
// than ShutdownTimeout and finishTimeout, however long WriteTimeout is: its connection is closed,
// its request cancelled and its KV blocks returned.
func TestShutdownStalledClient(t *testing.T) {
	h, conn := stalledStream(t, Options{WriteTimeout: time.Hour, ShutdownTimeout: 50 * time.Millisecond})
	h.te.waitFor(func() bool { return h.te.held })
	stopped := make(chan error, 1)
	go func() { stopped <- h.stop() }()
	select { // a failure, not a measurement: far past ShutdownTimeout + finishTimeout
	case err := <-stopped:
		if err != nil {
			t.Fatalf("Serve: %v", err)
		}
	case <-time.After(time.Minute):
		conn.Close()
		t.Fatal("the shutdown waits for a client that reads nothing")
	}
	h.te.resume()
	snap, recs := h.te.waitIdle()
	if r := recs[0]; r.Reason != sched.FinishCancelled || len(r.Output) >= 1000 || snap.KVUsed != 0 {
		t.Fatalf("reason %s after %d tokens, KV blocks used %d; want cancelled early, 0", r.Reason, len(r.Output), snap.KVUsed)
	}
}

// TestModelsHealth: GET /v1/models lists the served model as vLLM does; /health answers 200
// with no body; /metrics is absent without Metrics.
func TestModelsHealth(t *testing.T) {
	h := newHarness(t, engineOpts{}, Options{})
	resp := h.do(context.Background(), http.MethodGet, "/v1/models", nil)
	var list struct {
		Object string `json:"object"`
		Data   []struct {
			ID          string `json:"id"`
			Object      string `json:"object"`
			Created     int64  `json:"created"`
			OwnedBy     string `json:"owned_by"`
			MaxModelLen int    `json:"max_model_len"`
		} `json:"data"`
	}
	err := json.NewDecoder(resp.Body).Decode(&list)
	resp.Body.Close()
	if err != nil || list.Object != "list" || len(list.Data) != 1 || list.Data[0].ID != "tiny-gpt2" || list.Data[0].Object != "model" ||
		list.Data[0].Created != 1700000000 || list.Data[0].OwnedBy != "rosetop" || list.Data[0].MaxModelLen != 256 {
		t.Fatalf("models: %+v (%v)", list, err)
	}
	for _, c := range []struct {
		method, path string
		status       int
	}{{"GET", "/health", 200}, {"HEAD", "/health", 200}, {"GET", "/metrics", 404}} {
		resp := h.do(context.Background(), c.method, c.path, nil)
		raw, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != c.status || (c.status == 200 && len(raw) != 0) {
			t.Fatalf("%s %s: %d %q; want %d", c.method, c.path, resp.StatusCode, raw, c.status)
		}
	}
}

// syncBuffer is a bytes.Buffer for a logger written from several goroutines.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// TestRequestLog: one line per request, with what the request did.
func TestRequestLog(t *testing.T) {
	var buf syncBuffer
	h := newHarness(t, engineOpts{}, Options{Log: slog.New(slog.NewTextHandler(&buf, nil))})
	var r gotReply
	h.post("/v1/completions", map[string]any{"prompt": "Hi", "max_tokens": 3, "ignore_eos": true}, &r)
	h.stream("/v1/chat/completions", map[string]any{"messages": []map[string]string{{"role": "user", "content": "Hi"}}, "max_tokens": 2, "ignore_eos": true})
	h.post("/v1/completions", `{"prompt": "Hi", "best_of": 2}`, nil)
	if err := h.stop(); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	want := [][]string{
		{"path=/v1/completions", "status=200", "id=" + r.ID, "stream=false", "prompt_tokens=1", "completion_tokens=3", "finish=length", "ttft="},
		{"path=/v1/chat/completions", "status=200", "id=chatcmpl-", "stream=true", "completion_tokens=2", "finish=length"},
		{"path=/v1/completions", "status=400"},
	}
	if len(lines) != len(want) {
		t.Fatalf("log:\n%s\nwant %d lines", buf.String(), len(want))
	}
	for i, w := range want {
		for _, field := range w {
			if !strings.Contains(lines[i], field) {
				t.Fatalf("line %q lacks %q", lines[i], field)
			}
		}
	}
}

// leaveMidStream is a client leaving a request that holds KV: the engine held so that the request
// cannot finish meanwhile, the client cancels and closes the body; it returns once the request is
// cancelled, the engine going on.
func (h *harness) leaveMidStream(cancel context.CancelFunc, body io.Closer) {
	h.te.hold()
	h.te.waitFor(func() bool { return h.te.last.KVUsed > 0 })
	cancels, _ := h.te.counts()
	cancel()
	body.Close()
	h.te.waitFor(func() bool { return h.te.cancels == cancels+1 })
	h.te.resume()
}
