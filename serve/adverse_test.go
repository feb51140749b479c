package serve

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"rosetop/sched"
)

// Clients that misbehave, or come in numbers, against the server over a real bench.Session.

// TestStalledClientHoldsNoOther: a streaming client that reads nothing holds neither the scheduler
// nor anyone else: its request is generated to its end while its handler waits on the socket,
// and another client's stream and /health are answered meanwhile.
func TestStalledClientHoldsNoOther(t *testing.T) {
	const stalledTokens = 1000    // far more than the socket buffers take
	finished := make(chan int, 4) // output tokens of each request that ends
	onStep := func(so *sched.StepOutput) {
		for _, e := range so.Events {
			if e.Kind == sched.EventFinished {
				finished <- len(e.Record.Output)
			}
		}
	}
	small := func(c net.Conn) { c.(*net.TCPConn).SetWriteBuffer(4096) }
	h := newSessionHarness(t, 1024, 4, Options{WriteTimeout: time.Hour}, onStep, small)
	conn, err := net.Dial("tcp", strings.TrimPrefix(h.url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.(*net.TCPConn).SetReadBuffer(4096)
	body := fmt.Sprintf(`{"prompt": "Hi", "max_tokens": %d, "ignore_eos": true, "stream": true}`, stalledTokens)
	fmt.Fprintf(conn, "POST /v1/completions HTTP/1.1\r\nHost: rosetop\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
	if n := <-finished; n != stalledTokens { // the client has read nothing
		t.Fatalf("the stalled client's request ended after %d tokens, want %d", n, stalledTokens)
	}
	st := h.stream("/v1/chat/completions", map[string]any{"messages": []map[string]string{{"role": "user", "content": "Hi"}},
		"max_tokens": 20, "ignore_eos": true, "stream_options": map[string]bool{"include_usage": true}})
	if st.finish != "length" || st.usage == nil || st.usage.CompletionTokens != 20 {
		t.Fatalf("another client's stream: finish %q usage %+v; want length after 20 tokens", st.finish, st.usage)
	}
	resp := h.do(t.Context(), http.MethodGet, "/health", nil)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("/health: %d", resp.StatusCode)
	}
}

// TestManyClients: many streams at once beside many idle keep-alive connections, with /metrics and
// /health scraped throughout (under -race: the metrics' writer and its scrapers): every stream
// ends whole, every scrape is answered, the counters add up, and once the clients close their
// connections no goroutine is left of them.
func TestManyClients(t *testing.T) {
	const streams, idle, tokens = 100, 300, 16
	m, err := NewMetrics(MetricsOptions{Model: "tiny-gpt2", MaxModelLen: 256})
	if err != nil {
		t.Fatal(err)
	}
	h := newSessionHarness(t, 256, 32, Options{Metrics: m}, m.ObserveStep, nil)
	resp := h.do(t.Context(), http.MethodGet, "/health", nil) // the server accepts: its goroutines run
	resp.Body.Close()
	h.client.CloseIdleConnections()
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	defer h.client.CloseIdleConnections()
	addr := strings.TrimPrefix(h.url, "http://")
	var idleConns []net.Conn
	defer func() {
		for _, c := range idleConns {
			c.Close()
		}
	}()
	for range idle {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		idleConns = append(idleConns, c)
		fmt.Fprintf(c, "GET /health HTTP/1.1\r\nHost: rosetop\r\n\r\n")
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("an idle connection's /health: %v", err)
		}
		resp.Body.Close()
	}
	tr := &http.Transport{MaxIdleConnsPerHost: streams}
	defer tr.CloseIdleConnections()
	client := &http.Client{Timeout: time.Minute, Transport: tr}
	errs := make(chan error, streams+1)
	var wg sync.WaitGroup
	for i := range streams {
		wg.Go(func() {
			body := fmt.Sprintf(`{"prompt": "Client %d", "max_tokens": %d, "ignore_eos": true, "stream": true}`, i, tokens)
			resp, err := client.Post(h.url+"/v1/completions", "application/json", strings.NewReader(body))
			if err != nil {
				errs <- err
				return
			}
			defer resp.Body.Close()
			raw, err := io.ReadAll(resp.Body) // parseStream fails the test: not from this goroutine
			if s := string(raw); err != nil || !strings.Contains(s, `"finish_reason":"length"`) || !strings.HasSuffix(s, "data: [DONE]\n\n") {
				errs <- fmt.Errorf("a stream: %v, %q", err, raw)
			}
		})
	}
	streamed := make(chan struct{})
	go func() { wg.Wait(); close(streamed) }()
	scrapes := 0
	for done := false; !done; {
		select {
		case <-streamed:
			done = true // one more scrape, after the last stream
		default:
		}
		for _, path := range []string{"/health", "/metrics"} {
			resp, err := client.Get(h.url + path)
			if err != nil {
				t.Fatalf("%s under load: %v", path, err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("%s under load: %d", path, resp.StatusCode)
			}
		}
		scrapes++
	}
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	fams, _ := h.scrape()
	if got := fams["rosetop_generation_tokens_total"].Metric[0].Counter.GetValue(); got != streams*tokens {
		t.Errorf("generation_tokens_total %v, want %d", got, streams*tokens)
	}
	for _, name := range []string{"rosetop_num_requests_running", "rosetop_num_requests_waiting", "rosetop_kv_cache_usage_perc"} {
		if got := fams[name].Metric[0].Gauge.GetValue(); got != 0 {
			t.Errorf("%s %v after the load, want 0", name, got)
		}
	}
	t.Logf("%d scrapes of /health and /metrics during the load", scrapes)
}

// TestHeaderLimits: a request's headers are bounded in size (net/http's 1 MiB: a 431) and in time:
// headers sent a byte at a time, however steadily, are cut at ReadTimeout from their start (the
// connection is closed, with a 400 or without a reply, as net/http sees the timeout).
func TestHeaderLimits(t *testing.T) {
	dial := func(t *testing.T, o Options) net.Conn {
		h := newHarness(t, engineOpts{}, o)
		conn, err := net.Dial("tcp", strings.TrimPrefix(h.url, "http://"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		conn.SetReadDeadline(time.Now().Add(time.Minute)) // a failure, not a measurement
		return conn
	}
	t.Run("size", func(t *testing.T) {
		conn := dial(t, Options{})
		go func() { // fails once the server has answered and closed
			fmt.Fprintf(conn, "GET /health HTTP/1.1\r\nHost: rosetop\r\nX-Big: %s\r\n\r\n", strings.Repeat("a", 2<<20))
		}()
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			t.Fatalf("no reply: %v", err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
			t.Fatalf("status %d, want 431", resp.StatusCode)
		}
	})
	t.Run("time", func(t *testing.T) {
		conn := dial(t, Options{ReadTimeout: 50 * time.Millisecond})
		io.WriteString(conn, "GET /health HTTP/1.1\r\nHost: rosetop\r\nX-Slow: ")
		stop := make(chan struct{})
		defer close(stop)
		go func() { // a byte every few milliseconds, for as long as the server listens
			tick := time.NewTicker(5 * time.Millisecond)
			defer tick.Stop()
			for {
				select {
				case <-stop:
					return
				case <-tick.C:
				}
				if _, err := conn.Write([]byte{'a'}); err != nil {
					return
				}
			}
		}()
		got, err := io.ReadAll(conn)
		if ne, ok := err.(net.Error); ok && ne.Timeout() {
			t.Fatal("the server still reads the headers of a client that sends a byte at a time")
		}
		if len(got) > 0 && !strings.HasPrefix(string(got), "HTTP/1.1 400 ") {
			t.Fatalf("reply %q, want a 400 or none", got)
		}
	})
}
