package remote

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"rosetop/bench"
	"rosetop/sched"
)

// TestPageGone: scraping stops only where the page is absent or forbidden; a rate limit, a
// timeout or a server error may pass.
func TestPageGone(t *testing.T) {
	for status, gone := range map[int]bool{401: true, 403: true, 404: true, 405: true, 410: true, 501: true, 400: false, 408: false, 429: false, 500: false, 503: false} {
		err := fmt.Errorf("GET x: %w", &Failure{Reason: ReasonStatus, Status: status})
		if pageGone(err) != gone {
			t.Errorf("status %d: gone %v, want %v", status, !gone, gone)
		}
		w := &watcher{window: time.Minute}
		if w.add(Snapshot{}, err); w.gaveUp != gone {
			t.Errorf("status %d: gave up %v, want %v", status, w.gaveUp, gone)
		}
	}
	if pageGone(&Failure{Reason: ReasonConnect}) || pageGone(errors.New("x")) || pageGone(nil) {
		t.Error("a failure without a status is taken for a page that is gone")
	}
}

// TestWatcherRateLimited: a /metrics page answered 429 with a Retry-After is scraped again
// after that wait, and its figures come back; a 404 stops the scraping.
func TestWatcherRateLimited(t *testing.T) {
	var scrapes atomic.Int32
	page := "vllm:num_requests_running 3\nvllm:num_requests_waiting 1\n"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch scrapes.Add(1) {
		case 1:
			w.Header().Set("Retry-After", "5")
			http.Error(w, "Too many requests", http.StatusTooManyRequests)
		case 2, 3:
			io.WriteString(w, page)
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	p, err := NewProvider(ProviderOptions{Client: Config{BaseURL: srv.URL + "/v1"}, MetricsURL: srv.URL + "/metrics", ScrapeEvery: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	clk := newSleepClock()
	w, err := newWatcher(p, bench.ServerSpec{Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	defer w.close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	landed, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		w.loop(ctx, func() {
			select {
			case landed <- struct{}{}:
			case <-ctx.Done():
			}
		})
	}()
	guard := time.After(30 * time.Second)
	next := func(what string) {
		t.Helper()
		select {
		case <-landed:
		case <-done:
			t.Fatalf("scraping stopped before %s; note %q", what, w.latest().Note)
		case <-guard:
			t.Fatalf("no scrape for %s", what)
		}
	}
	next("the 429")
	if n := w.latest().Note; !strings.Contains(n, "last scrape failed: GET "+srv.URL+"/metrics: remote: http-status 429") {
		t.Errorf("note after a 429: %q", n)
	}
	next("the page after the 429")
	select {
	case d := <-clk.slept:
		if d != 5*time.Second {
			t.Errorf("waited %v after Retry-After: 5", d)
		}
	default:
		t.Error("no wait after Retry-After: 5")
	}
	var snap sched.Snapshot
	w.fill(&snap)
	if m := w.latest(); m.Note != "" || snap.Waiting != 1 || snap.Running != 3 {
		t.Errorf("after the 429 passed: note %q, queue %d waiting %d running", m.Note, snap.Waiting, snap.Running)
	}
	next("the page")
	next("the 404")
	select {
	case <-done:
	case <-guard:
		t.Fatal("scraping went on after a 404")
	}
	if n := w.latest().Note; !strings.HasPrefix(n, "queue: client-side counts; no server metrics (GET "+srv.URL+"/metrics: remote: http-status 404") {
		t.Errorf("note after a 404: %q", n)
	}
}

// TestWatcherQueueSource: the queue is the server's only while its newest scrape worked and
// counted both waiting and running; otherwise (a failed scrape, a broken gauge) it is the
// client's, never a mix, and the panel's note says so. Preemptions, a total, keep the last
// count the server gave.
func TestWatcherQueueSource(t *testing.T) {
	good := func(at time.Duration, waiting, running float64) Snapshot {
		return Snapshot{At: at, Kind: KindVLLM, Waiting: Value{V: waiting, Known: true}, Running: Value{V: running, Known: true},
			Preemptions: Value{V: 7, Known: true}}
	}
	failed := fmt.Errorf("GET http://h/metrics: %w", &Failure{Reason: ReasonConnect, Detail: "connection refused"})
	steps := []struct {
		name             string
		snap             Snapshot
		err              error
		waiting, running int    // the step's queue, from the client's 2 and 3
		preempt          uint64 // the step's preemptions
		note             string // the panel's note
	}{
		{"a good scrape", good(time.Second, 4, 12), nil, 4, 12, 7, ""},
		{"the server gone", Snapshot{}, failed, 2, 3, 7, "queue: client-side counts; last scrape failed: GET http://h/metrics: remote: connect: connection refused"},
		{"the server back", good(2*time.Second, 5, 9), nil, 5, 9, 7, ""},
		{"a negative waiting", good(3*time.Second, -5, 12), nil, 2, 3, 7, "queue: client-side counts; the server's waiting is -5, not a count"},
		{"a NaN running", good(4*time.Second, 1, math.NaN()), nil, 2, 3, 7, "queue: client-side counts; the server's running is NaN, not a count"},
		{"no waiting", Snapshot{At: 5 * time.Second, Kind: KindVLLM, Running: Value{V: 1, Known: true}}, nil, 2, 3, 0, "queue: client-side counts; the server's waiting is absent"},
		{"a page of no known server", Snapshot{At: 6 * time.Second}, nil, 2, 3, 0, "queue: client-side counts; the server's /metrics name nothing rosetop knows"},
	}
	// The baseline of the counters: the provider's first scrape.
	w := &watcher{window: time.Minute, base: &Snapshot{Kind: KindVLLM, Preemptions: Value{Known: true}}}
	for _, st := range steps {
		w.add(st.snap, st.err)
		snap := sched.Snapshot{Waiting: 2, Running: 3}
		w.fill(&snap)
		if snap.Waiting != st.waiting || snap.Running != st.running || snap.Preemptions != st.preempt {
			t.Errorf("%s: %d waiting, %d running, %d preemptions; want %d, %d, %d", st.name, snap.Waiting, snap.Running, snap.Preemptions, st.waiting, st.running, st.preempt)
		}
		if n := w.latest().Note; n != st.note {
			t.Errorf("%s: note %q, want %q", st.name, n, st.note)
		}
	}
}

// TestWatcherWindowAfterOutage: the server pane's window spans the configured one and at most
// maxBehind scrape intervals more; after an outage it starts after it, covering less, never the
// outage.
func TestWatcherWindowAfterOutage(t *testing.T) {
	const every, window = 500 * time.Millisecond, 30 * time.Second
	w := &watcher{window: window, every: every}
	scrape := func(at time.Duration) {
		n := float64(at / every) // one first token a scrape
		w.add(Snapshot{At: at, Kind: KindVLLM, TTFT: hist(0.1, n, inf, n)}, nil)
	}
	check := func(what string, lo, hi time.Duration, firsts int) {
		t.Helper()
		m := w.latest()
		if m.Window < lo || m.Window > hi || m.Latency[0].Dist.N != firsts {
			t.Errorf("%s: window %v with %d first tokens, want %v to %v with %d", what, m.Window, m.Latency[0].Dist.N, lo, hi, firsts)
		}
	}
	for at := every; at <= 40*time.Second; at += every {
		if at != 10*time.Second { // a tick missed where the window starts: 9.5 s is its baseline
			scrape(at)
		}
	}
	check("steady", window, window+maxBehind*every, 61)
	scrape(40*time.Second + every)
	check("steady", window, window+every, 60)
	for at := 41 * time.Second; at < 80*time.Second; at += every {
		w.add(Snapshot{}, errors.New("connection refused"))
	}
	scrape(80 * time.Second)
	check("the first scrape after the outage", 0, 0, 0)
	scrape(80*time.Second + every)
	check("the second", every, every, 1)
}
