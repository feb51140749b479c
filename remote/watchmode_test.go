package remote

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"rosetop/bench"
	"rosetop/remote/remotetest"
	"rosetop/sched"
)

// startWatch starts a watching session over p (ProviderOptions.Watch) whose steps signal on
// the returned channel.
func startWatch(t *testing.T, p *Provider) (*bench.Session, <-chan struct{}) {
	t.Helper()
	return startStepped(t, p, true)
}

// startStepped starts a dashboard session over p (external: no workload of its own) whose
// steps signal on the returned channel.
func startStepped(t *testing.T, p *Provider, external bool) (*bench.Session, <-chan struct{}) {
	t.Helper()
	steps := make(chan struct{}, 1)
	sess, err := bench.NewSession(context.Background(), sessionConfig(4, 8, 1, 1), bench.SessionOptions{
		Provider: p, External: external,
		OnStep: func(*sched.StepOutput) {
			select {
			case steps <- struct{}{}:
			default:
			}
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	return sess, steps
}

// waitView returns the first view that ok accepts, reading one after each step; it fails the
// test after a minute, so that a broken session fails instead of hanging.
func waitView(t *testing.T, sess *bench.Session, steps <-chan struct{}, what string, ok func(*bench.View) bool) *bench.View {
	t.Helper()
	guard := time.After(time.Minute)
	for v := sess.View(); ; v = sess.View() {
		if ok(v) {
			return v
		}
		select {
		case <-steps:
		case <-guard:
			t.Fatalf("no view with %s; last: queue %+v server %+v", what, v.QueueLast, v.Server)
		}
	}
}

// TestWatchSession: a watching session beside a server that a separate client loads. Its views
// show the server's own running requests and a generation rate above zero, and its summary the
// tokens the client's requests made; every load and engine key says that watch mode sends
// nothing; and the server sees no POST but the client's.
func TestWatchSession(t *testing.T) {
	const done, held, tokens = 3, 2, 16 // the client's finished and held (stalled) requests
	started := make(chan struct{}, done+held)
	srv := startTestServer(t, remotetest.Options{Started: started, Faults: func(n int) remotetest.Fault {
		if n >= done {
			return remotetest.Stall // one token, then held open until the client goes away
		}
		return remotetest.OK
	}})
	p := newTestProvider(t, srv, ProviderOptions{Watch: true, ScrapeEvery: 5 * time.Millisecond})
	sess, steps := startWatch(t, p)
	defer sess.Close()
	waitView(t, sess, steps, "a first scrape", func(v *bench.View) bool { return v.Server != nil && v.Server.Total != nil })

	client := newTestClient(t, srv.URL, Config{})
	req := Request{API: Completions, Model: "test-model", Prompt: "Hello", MaxTokens: tokens}
	for range done {
		if _, err := do(t, client, req, nil); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	for range held {
		wg.Add(1)
		go func() {
			defer wg.Done()
			client.Do(ctx, req, nil)
		}()
	}
	for range done + held {
		<-started
	}

	sawRate := false
	v := waitView(t, sess, steps, "the held requests running and a generation rate", func(v *bench.View) bool {
		m := v.Server
		sawRate = sawRate || (m.GenRate.Known && m.GenRate.V > 0)
		return sawRate && v.QueueLast.Running == held && m.Running.V == held && m.Total.GenTokens.V >= done*tokens
	})
	if h := v.Header; h.Remote == nil || !h.Remote.Watch || h.RunLabel != "watching" || h.Remote.Kind != "vllm" {
		t.Errorf("header: %+v remote %+v", h, h.Remote)
	}
	if m := v.Server; !m.PromptRate.Known || m.Note != "" || !m.KVUsage.Known {
		t.Errorf("server metrics: %+v", m)
	}
	for _, mk := range v.Markers { // no engine of rosetop's starts cold
		if strings.HasPrefix(mk.Label, "cold start") {
			t.Errorf("marker %q in a watch session", mk.Label)
		}
	}

	for _, a := range []bench.Action{bench.ActIntervalUp, bench.ActIntervalDown, bench.ActToggleSchedule, bench.ActTogglePause,
		bench.ActConcurrencyDown, bench.ActConcurrencyUp, bench.ActTogglePaged, bench.ActToggleGraph, bench.ActRestart, bench.ActMaxBatchUp} {
		if msg, err := sess.Do(a); !errors.Is(err, bench.ErrWatchMode) {
			t.Errorf("action %d: %q, %v; want %v", a, msg, err, bench.ErrWatchMode)
		}
	}
	cancel()
	wg.Wait()
	if err := sess.Close(); err != nil {
		t.Fatal(err)
	}
	if got := srv.Posts(); got != done+held {
		t.Errorf("the server saw %d POSTs; the client sent %d and the watcher none", got, done+held)
	}
	var rep bytes.Buffer
	if err := sess.Report(&rep); err != nil {
		t.Fatal(err)
	}
	out := rep.String()
	for _, want := range []string{"=== rosetop watch: vllm at " + srv.URL + "/v1, ", "Requests sent by rosetop:  0 (watch mode)\n",
		"Metrics:                   " + srv.URL + "/metrics (", "TTFT (ms):                 p50 "} {
		if !strings.Contains(out, want) {
			t.Errorf("summary lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "NaN") || strings.Contains(out, "Inf") {
		t.Errorf("summary:\n%s", out)
	}
}

// TestWatchSubmitRefused: a watching server refuses a request instead of sending it.
func TestWatchSubmitRefused(t *testing.T) {
	srv := startTestServer(t, remotetest.Options{})
	p := newTestProvider(t, srv, ProviderOptions{Watch: true})
	if err := p.Prepare(context.Background(), &bytes.Buffer{}); err != nil {
		t.Fatal(err)
	}
	s, err := p.NewServer(context.Background(), bench.ServerSpec{Clock: bench.NewRealClock(), MaxBatch: 4, Sched: sched.Config{MaxBatch: 4, PrefillMaxBatch: 4}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.Submit(sched.Request{Text: "Hello", MaxNewTokens: 4}); !errors.Is(err, ErrWatchOnly) {
		t.Errorf("Submit: %v, want %v", err, ErrWatchOnly)
	}
	if n := srv.Posts(); n != 0 {
		t.Errorf("%d POSTs reached the server", n)
	}
}

// TestWatchNeedsMetrics: a server whose metrics are absent or unknown cannot be watched: the
// session is refused at start with an error naming the page, and nothing is POSTed.
func TestWatchNeedsMetrics(t *testing.T) {
	unknown := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/v1/models":
			fmt.Fprint(w, `{"object":"list","data":[{"id":"m","object":"model"}]}`)
		case "/metrics":
			fmt.Fprint(w, "# TYPE process_cpu_seconds_total counter\nprocess_cpu_seconds_total 1.5\n")
		default:
			http.NotFound(w, r)
		}
	}))
	defer unknown.Close()
	noMetrics := startTestServer(t, remotetest.Options{NoMetrics: true})
	for _, tc := range []struct {
		name, base, want string
	}{
		{"404", noMetrics.URL, noMetrics.URL + "/metrics: remote: http-status 404"},
		{"unknown names", unknown.URL, unknown.URL + "/metrics names none that rosetop knows"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := NewProvider(ProviderOptions{Client: Config{BaseURL: tc.base + "/v1"}, Watch: true})
			if err != nil {
				t.Fatal(err)
			}
			_, err = bench.NewSession(context.Background(), sessionConfig(1, 1, 0, 1), bench.SessionOptions{Provider: p, External: true})
			if !errors.Is(err, ErrNoMetrics) || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
				t.Errorf("NewSession: %v; want %v naming %q, on one line", err, ErrNoMetrics, tc.want)
			}
		})
	}
	if n := noMetrics.Posts(); n != 0 {
		t.Errorf("%d POSTs reached the server", n)
	}
}

// TestWatchServerP99: a watching session's views carry the server's own p99 over time, one
// line per histogram its page has, each point the p99 over the server pane's window at a
// scrape: TTFT following its histogram from 248.5 ms to 2484.85 ms as the page's buckets fill,
// ITL (every observation in the first bucket) at that bucket's 10 ms bound, E2E latency steady.
func TestWatchServerP99(t *testing.T) {
	ttftBounds, itlBounds := []string{"0.1", "0.25", "1.0", "2.5", "+Inf"}, []string{"0.01", "0.025", "0.05", "+Inf"}
	pages := []string{ // the page's histograms as the test moves the server on: none, then 100 requests, then 10000 slow ones more
		pyHistogram("vllm:time_to_first_token_seconds", ttftBounds, pySeries{`engine="0"`, []float64{0, 0, 0, 0, 0}, 0}),
		pyHistogram("vllm:time_to_first_token_seconds", ttftBounds, pySeries{`engine="0"`, []float64{0, 100, 100, 100, 100}, 20}) +
			pyHistogram("vllm:inter_token_latency_seconds", itlBounds, pySeries{`engine="0"`, []float64{100, 100, 100, 100}, 0.5}) +
			pyHistogram("vllm:e2e_request_latency_seconds", ttftBounds, pySeries{`engine="0"`, []float64{0, 0, 0, 100, 100}, 200}),
		pyHistogram("vllm:time_to_first_token_seconds", ttftBounds, pySeries{`engine="0"`, []float64{0, 100, 100, 10100, 10100}, 20000}) +
			pyHistogram("vllm:inter_token_latency_seconds", itlBounds, pySeries{`engine="0"`, []float64{100, 100, 100, 100}, 0.5}) +
			pyHistogram("vllm:e2e_request_latency_seconds", ttftBounds, pySeries{`engine="0"`, []float64{0, 0, 0, 100, 100}, 200}),
	}
	var phase atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/v1/models":
			fmt.Fprint(w, `{"object":"list","data":[{"id":"m","object":"model"}]}`)
		case "/metrics":
			fmt.Fprint(w, "vllm:num_requests_running 1\nvllm:num_requests_waiting 0\n"+pages[phase.Load()])
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	p, err := NewProvider(ProviderOptions{Client: Config{BaseURL: srv.URL + "/v1"}, Watch: true, ScrapeEvery: 5 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	sess, steps := startWatch(t, p)
	defer sess.Close()
	points := func(v *bench.View, name string) []bench.Point {
		for _, tl := range v.ServerP99 {
			if tl.Name == name {
				return tl.Tracks[0].Points
			}
		}
		return nil
	}
	near := func(got, want float64) bool { return math.Abs(got-want) <= 1e-6*want }
	lastNear := func(name string, want float64) func(*bench.View) bool {
		return func(v *bench.View) bool {
			pts := points(v, name)
			return len(pts) > 0 && near(pts[len(pts)-1].Value, want)
		}
	}

	waitView(t, sess, steps, "a first scrape", func(v *bench.View) bool { return v.Server != nil && v.Server.Total != nil })
	phase.Store(1)
	v := waitView(t, sess, steps, "TTFT p99 at 248.5 ms", lastNear("TTFT p99", 248.5))
	var names []string
	for _, tl := range v.ServerP99 {
		names = append(names, tl.Name)
	}
	if want := []string{"TTFT p99", "ITL p99", "E2E latency p99"}; !slices.Equal(names, want) {
		t.Errorf("series %q, want %q (queue and prefill are not on the page)", names, want)
	}
	phase.Store(2)
	v = waitView(t, sess, steps, "TTFT p99 at 2484.85 ms", lastNear("TTFT p99", 2484.85))
	ttft := points(v, "TTFT p99")
	for i, pt := range ttft { // from the first histogram's p99 to the second's, never back
		if !(pt.Value >= 248.5-1e-6 && pt.Value <= 2484.85+1e-6) || (i > 0 && pt.Value < ttft[i-1].Value-1e-9) || (i > 0 && pt.At <= ttft[i-1].At) {
			t.Errorf("TTFT p99 point %d of %d: %+v", i, len(ttft), pt)
		}
	}
	if !near(ttft[0].Value, 248.5) {
		t.Errorf("TTFT p99's first point %v, want 248.5", ttft[0].Value)
	}
	for name, want := range map[string]float64{"ITL p99": 10, "E2E latency p99": 2485} {
		pts := points(v, name)
		if len(pts) == 0 {
			t.Errorf("%s: no points", name)
		}
		for _, pt := range pts {
			if !near(pt.Value, want) {
				t.Errorf("%s: %v, want %v", name, pt.Value, want)
			}
		}
	}
}
