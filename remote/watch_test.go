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

// ttftPage is a vLLM page with a queue and a TTFT histogram of cumulative counts over bounds
// 0.1, 1, 2.5 and +Inf, and its sum.
func ttftPage(counts []float64, sum float64) string {
	return "vllm:num_requests_running 1\nvllm:num_requests_waiting 0\n" +
		pyHistogram("vllm:time_to_first_token_seconds", []string{"0.1", "1.0", "2.5", "+Inf"}, pySeries{`engine="0"`, counts, sum})
}

// TestWatchWindowAcrossRestart: a server that restarts within the window (its TTFT histogram
// starts again from zero) counts in the window what it observed before the restart, within the
// window, plus what it observed since, as Prometheus' increase() takes a reset: never its new
// counts minus its old ones. Here the restarted server has, by its next scrape, more fast first
// tokens than the window's first scrape had, so no count fell below that scrape's: against it
// alone the window would hold 50 fast ones and a p99 under 100 ms.
func TestWatchWindowAcrossRestart(t *testing.T) {
	srv := newPagedServer(t, "m",
		ttftPage([]float64{1000, 1000, 1000, 1000}, 50),  // the server's past: 1000 fast first tokens
		ttftPage([]float64{1000, 1000, 1100, 1100}, 200), // 100 slow ones, in (1, 2.5] s
		ttftPage([]float64{1050, 1050, 1050, 1050}, 52),  // restarted: 1050 fast ones since
	)
	p, err := NewProvider(ProviderOptions{Client: Config{BaseURL: srv.URL + "/v1"}, Watch: true, ScrapeEvery: 5 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	sess, steps := startWatch(t, p)
	defer sess.Close()
	ttft := func(ls []bench.ServerLatency) bench.ServerLatency {
		for _, l := range ls {
			if l.Name == "TTFT" {
				return l
			}
		}
		return bench.ServerLatency{}
	}
	waitView(t, sess, steps, "a first scrape", func(v *bench.View) bool { return v.Server != nil && v.Server.Total != nil })
	srv.phase.Store(1)
	waitView(t, sess, steps, "the slow first tokens", func(v *bench.View) bool { return ttft(v.Server.Latency).Dist.N == 100 })
	srv.phase.Store(2)
	v := waitView(t, sess, steps, "the restart in the totals", func(v *bench.View) bool { return ttft(v.Server.Total.Latency).Dist.N == 1150 })
	// 100 slow and 1050 fast: the 99th percentile (rank 1138.5) is in (1, 2.5] s, at
	// 1 + 1.5 * (1138.5 - 1050) / 100 s.
	if l := ttft(v.Server.Latency); l.Dist.N != 1150 || math.Abs(l.Dist.P99-2327.5) > 1e-6 {
		t.Errorf("window TTFT over the restart: %d first tokens, p99 %v ms; want 1150, 2327.5 ms", l.Dist.N, l.Dist.P99)
	}
}

// TestWatcherWindowRestarts: over two restarts within the window, one of them onto new bucket
// bounds, the window adds each stretch between restarts: the first from the window's baseline,
// each later one from zero; and a histogram the newest page lacks is not known.
func TestWatcherWindowRestarts(t *testing.T) {
	w := &watcher{window: time.Minute, every: time.Second, watch: true}
	for i, h := range []Histogram{
		hist(0.1, 10, 1, 10, inf, 10), // the baseline
		hist(0.1, 30, 1, 30, inf, 30), // +20 fast
		hist(0.1, 0, 1, 5, inf, 5),    // restarted: 5 in (0.1, 1]
		hist(0.1, 0, 1, 7, inf, 7),    // +2
		hist(0.5, 3, inf, 3),          // restarted onto new bounds: 3 at most 0.5 s
		hist(0.5, 4, inf, 4),          // +1
	} {
		w.add(Snapshot{At: time.Duration(i+1) * time.Second, Kind: KindVLLM, TTFT: h}, nil)
	}
	m := w.latest()
	if l := m.Latency[0]; l.Name != "TTFT" || l.Dist.N != 20+7+4 {
		t.Errorf("window TTFT: %s with %d, want TTFT with 31", l.Name, l.Dist.N)
	}
	p := w.part()
	if g := p.window[0]; g.h.Count != 31 || g.h.Buckets[len(g.h.Buckets)-1].Count != 31 || len(g.byLayout()) != 2 {
		t.Errorf("the fleet's share: %v first tokens (+Inf bucket %v) in %d layouts; want 31 in 2", g.h.Count, g.h.Buckets[len(g.h.Buckets)-1].Count, len(g.byLayout()))
	}
	for _, b := range p.window[0].h.Buckets {
		if b.Count < 0 {
			t.Errorf("negative bucket %+v", b)
		}
	}
	w.add(Snapshot{At: 7 * time.Second, Kind: KindVLLM}, nil) // a page without the histogram
	if l := w.latest().Latency[0]; l.Known || l.Dist.N != 0 {
		t.Errorf("window TTFT the page lacks: known %v with %d", l.Known, l.Dist.N)
	}
}
