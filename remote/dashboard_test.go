package remote

import (
	"context"
	"errors"
	"io"
	"math"
	"strings"
	"testing"
	"time"

	"rosetop/bench"
	"rosetop/remote/remotetest"
	"rosetop/sched"
)

// TestDashboardSession runs a live session against a vLLM-like server: the header names the
// model, the server's kind and the endpoint; the server panel shows its gauges and its own
// latency histograms over the window beside the client-side figures with their difference;
// the keys that need rosetop's engine say why they do nothing, the load keys work.
func TestDashboardSession(t *testing.T) {
	srv := startTestServer(t, remotetest.Options{})
	p := newTestProvider(t, srv, ProviderOptions{ScrapeEvery: 5 * time.Millisecond})
	sess, steps := startStepped(t, p, false)
	defer sess.Close()

	// Each step (a chunk, a finished request, a scrape) publishes a view at most 50 ms after
	// the last; wait on them until the panel has both sides of the TTFT row.
	guard := time.After(30 * time.Second)
	ttftRow := func(v *bench.View) *bench.ServerRow {
		if v.Server == nil {
			return nil
		}
		for i := range v.Server.Rows {
			if v.Server.Rows[i].Name == "TTFT" {
				return &v.Server.Rows[i]
			}
		}
		return nil
	}
	v := sess.View()
	for r := ttftRow(v); r == nil || r.Server.Dist.N == 0 || r.Client.N == 0 || !v.Server.Running.Known; r = ttftRow(v) {
		select {
		case <-steps:
		case <-guard:
			t.Fatalf("no server panel with both TTFT columns: %+v", v.Server)
		}
		v = sess.View()
	}
	h := v.Header
	if h.Model != "test-model" || h.Device != "vllm at "+srv.URL+"/v1" || h.Remote == nil || h.Remote.Kind != "vllm" || h.Remote.API != "completions" {
		t.Errorf("header: %+v remote %+v", h, h.Remote)
	}
	sp := v.Server
	if sp.Kind != "vllm" || sp.Source != srv.URL+"/metrics" || sp.Note != "" || !sp.KVUsage.Known || sp.Window < 0 {
		t.Errorf("server panel: %+v", sp.ServerMetrics)
	}
	names := []string{}
	for _, r := range sp.Rows {
		names = append(names, r.Name)
		switch r.Name {
		case "TTFT", "ITL", "E2E latency":
			if !r.Server.Known {
				t.Errorf("%s: the server exposes it, the panel says not", r.Name)
			}
		case "Queue", "Prefill":
			if r.Server.Known || r.Client.N != 0 || !math.IsNaN(r.DiffP50) {
				t.Errorf("%s: the test server does not expose it, and a client cannot see it: %+v", r.Name, r)
			}
		}
	}
	if strings.Join(names, ",") != "TTFT,ITL,E2E latency,Queue,Prefill" {
		t.Errorf("rows %v", names)
	}
	r := ttftRow(v)
	for _, q := range []struct{ diff, cli, srv float64 }{{r.DiffP50, r.Client.P50, r.Server.Dist.P50}, {r.DiffP99, r.Client.P99, r.Server.Dist.P99}} {
		// A server percentile in the first bucket (vLLM's TTFT buckets start at 1 ms) is a bound.
		if r.Server.FirstBound != 1 || (r.Server.Bounded(q.srv) && !math.IsNaN(q.diff)) || (!r.Server.Bounded(q.srv) && q.diff != q.cli-q.srv) {
			t.Errorf("TTFT row: %+v", r)
		}
	}

	for _, a := range []bench.Action{bench.ActTogglePaged, bench.ActToggleGraph, bench.ActRestart, bench.ActMaxBatchUp, bench.ActPrefillBatchDown} {
		if _, err := sess.Do(a); !errors.Is(err, bench.ErrRemoteServer) || !strings.Contains(err.Error(), "vllm at "+srv.URL) {
			t.Errorf("action %d: %v, want a refusal naming the server", a, err)
		}
	}
	if msg, err := sess.Do(bench.ActIntervalUp); err != nil || msg != "submit interval 1 ms" {
		t.Errorf("interval up: %q, %v", msg, err)
	}
	if msg, err := sess.Do(bench.ActTogglePause); err != nil || msg != "arrivals paused" {
		t.Errorf("pause: %q, %v", msg, err)
	}
	if err := sess.Close(); err != nil {
		t.Fatal(err)
	}
	var rep strings.Builder
	if err := sess.Report(&rep); err != nil || !strings.Contains(rep.String(), "remote server: test-model on vllm at "+srv.URL+"/v1 (completions API)\n") {
		t.Errorf("summary (%v):\n%s", err, rep.String())
	}
}

// TestNoMetrics: a server without /metrics still runs; the panel says why it is empty and the
// queue comes from the client's own counts.
func TestNoMetrics(t *testing.T) {
	srv := startTestServer(t, remotetest.Options{NoMetrics: true})
	p := newTestProvider(t, srv, ProviderOptions{})
	out, _ := runBench(t, p, sessionConfig(2, 4, 0, 1))
	if !strings.Contains(out, "Server: unknown\n") || !strings.Contains(out, "Requests: 2\n") {
		t.Errorf("report:\n%s", out)
	}
	s, err := p.NewServer(context.Background(), bench.ServerSpec{Clock: bench.NewRealClock(), MaxBatch: 4, Sched: sched.Config{MaxBatch: 4, PrefillMaxBatch: 4}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	m := s.(*remoteServer).ServerMetrics()
	if m.Kind != "unknown" || !strings.Contains(m.Note, "no server metrics") || !strings.Contains(m.Note, "404") || m.Waiting.Known {
		t.Errorf("metrics: %+v", m)
	}
}

// TestAdmissionsSource: a step's admissions are the server's TTFT count where its /metrics have
// one (the client's first chunks are not added to it), else the client's first chunks.
func TestAdmissionsSource(t *testing.T) {
	for _, tc := range []struct {
		name    string
		opts    remotetest.Options
		server  bool
		clients int
	}{{"vllm", remotetest.Options{}, true, 0}, {"no metrics", remotetest.Options{NoMetrics: true}, false, 2}} {
		t.Run(tc.name, func(t *testing.T) {
			p := newTestProvider(t, startTestServer(t, tc.opts), ProviderOptions{})
			if err := p.Prepare(context.Background(), io.Discard); err != nil {
				t.Fatal(err)
			}
			s, err := p.NewServer(context.Background(), bench.ServerSpec{Clock: bench.NewRealClock(), MaxBatch: 4, Sched: sched.Config{MaxBatch: 4, PrefillMaxBatch: 4}})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			rs := s.(*remoteServer)
			if rs.info.Remote.ServerFirsts != tc.server {
				t.Errorf("header says the server counts first tokens: %v, want %v", rs.info.Remote.ServerFirsts, tc.server)
			}
			rs.mu.Lock()
			for id := range 2 {
				rs.pending = append(rs.pending, sched.Event{Kind: sched.EventTokens, ID: sched.RequestID(id), Tokens: []int32{0}, First: &sched.Times{}})
			}
			rs.mu.Unlock()
			if so, _ := rs.step(); so.Snapshot.Admitted != tc.clients {
				t.Errorf("%d admitted from two first chunks, want %d", so.Snapshot.Admitted, tc.clients)
			}
		})
	}
}

func TestBackoff(t *testing.T) {
	for _, tc := range []struct {
		n    int
		want time.Duration
	}{{0, 0}, {1, 10 * time.Millisecond}, {2, 20 * time.Millisecond}, {7, 640 * time.Millisecond}, {8, time.Second}, {1000, time.Second}} {
		if got := backoff(tc.n); got != tc.want {
			t.Errorf("backoff(%d) = %v, want %v", tc.n, got, tc.want)
		}
	}
}

// TestEqualJitter: a backoff's wait lies in [d/2, d], and waits after the same refusals differ
// (200 draws of a second all equal would have odds of about 2^-5800).
func TestEqualJitter(t *testing.T) {
	for _, d := range []time.Duration{0, 1, 3, backoffMin, backoffMax} {
		seen := map[time.Duration]bool{}
		for range 200 {
			w := equalJitter(d)
			if w < d/2 || w > d {
				t.Fatalf("equalJitter(%v) = %v, outside [%v, %v]", d, w, d/2, d)
			}
			seen[w] = true
		}
		if d == backoffMax && len(seen) < 2 {
			t.Errorf("200 waits after %v of backoff: %d distinct", d, len(seen))
		}
	}
}

// TestMetricsKey: the API key goes to the endpoint's own host's metrics page only.
func TestMetricsKey(t *testing.T) {
	for _, tc := range []struct {
		endpoint, metrics string
		sent              bool
	}{
		{"http://h:8000/v1", "", true},
		{"http://h:8000/v1", "http://h:8000/metrics", true},
		{"http://h:8000/v1", "http://h:9090/metrics", false},
		{"https://h/v1", "http://h/metrics", false},
		{"http://h:8000/v1", "http://prometheus.example/api/metrics", false},
	} {
		p, err := NewProvider(ProviderOptions{Client: Config{BaseURL: tc.endpoint, APIKey: "sk-1"}, MetricsURL: tc.metrics})
		if err != nil {
			t.Fatal(err)
		}
		if got := p.metricsKey() != ""; got != tc.sent {
			t.Errorf("%s with metrics %q: key sent %v, want %v", tc.endpoint, tc.metrics, got, tc.sent)
		}
	}
}

// TestRecordOverflow: a server whose own counts pass max_tokens fails the request with
// ReasonOverflow, and no count it sent sizes an allocation; a tokenizer's count of the text may
// pass it (another model's tokenizer) and stands.
func TestRecordOverflow(t *testing.T) {
	tok, err := LoadTokenizer(context.Background(), "", nil)
	if err != nil {
		t.Fatal(err)
	}
	s := &remoteServer{p: &Provider{tok: tok}, clock: bench.NewRealClock()}
	ms := func(n int) time.Duration { return time.Duration(n) * time.Millisecond }
	chunks := []ChunkTime{{At: ms(2), Tokens: 1}, {At: ms(3), Tokens: 1}}
	cases := []struct {
		name     string
		res      Result
		overflow bool
		output   int
	}{
		{"usage past max_tokens", Result{Start: ms(1), First: ms(2), Last: ms(3), OutputTokens: 1 << 40, Tokens: TokensUsage, Chunks: chunks, Finish: "length"}, true, 8},
		{"a chunk's count past max_tokens", Result{Start: ms(1), First: ms(2), Last: ms(3), OutputTokens: 2, Tokens: TokensUsage,
			Chunks: []ChunkTime{{At: ms(2), Tokens: 1}, {At: ms(3), Tokens: 1 << 62}, {At: ms(4), Tokens: 1 << 62}}, Finish: "length"}, true, 2},
		{"a tokenizer's count past max_tokens", Result{Start: ms(1), First: ms(2), Last: ms(3), OutputTokens: 12, Tokens: TokensTokenizer, Chunks: chunks, Finish: "length"}, false, 12},
		{"within max_tokens", Result{Start: ms(1), First: ms(2), Last: ms(3), OutputTokens: 8, Tokens: TokensUsage, Chunks: chunks, Finish: "length"}, false, 8},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rec := s.record(1, Request{MaxTokens: 8, Prompt: "Hello"}, sched.Request{Text: "Hello"}, &tc.res, nil)
			var f *Failure
			if got := errors.As(rec.Err, &f) && f.Reason == ReasonOverflow && rec.Reason == sched.FinishError; got != tc.overflow {
				t.Errorf("overflow %v (%v, %v), want %v", got, rec.Reason, rec.Err, tc.overflow)
			}
			if len(rec.Output) != tc.output {
				t.Errorf("%d output tokens, want %d", len(rec.Output), tc.output)
			}
		})
	}
}

// TestWatcherBrokenPage: gauges and counters that are not finite, negative or absurd are left
// out of the steps and the panel rather than drawn as numbers.
func TestWatcherBrokenPage(t *testing.T) {
	nan, inf := math.NaN(), math.Inf(1)
	w := &watcher{window: time.Minute}
	w.add(Snapshot{At: time.Second, Kind: KindVLLM, Waiting: Value{V: nan, Known: true}, Running: Value{V: -3, Known: true},
		KVUsage: Value{V: inf, Known: true}, Preemptions: Value{V: 1e300, Known: true}}, nil)
	var snap sched.Snapshot
	w.fill(&snap)
	if snap.Waiting != 0 || snap.Running != 0 || snap.Preemptions != 0 {
		t.Errorf("step from a broken page: %+v", snap)
	}
	m := w.latest()
	if m.Waiting.Known || m.KVUsage.Known || m.Running.Known {
		t.Errorf("panel gauges: waiting %+v KV %+v running %+v", m.Waiting, m.KVUsage, m.Running)
	}
	w.add(Snapshot{At: 2 * time.Second, Kind: KindVLLM, Waiting: Value{V: 4, Known: true}, Running: Value{V: 12, Known: true}, Preemptions: Value{V: 7, Known: true}}, nil)
	w.fill(&snap)
	if snap.Waiting != 4 || snap.Running != 12 || snap.Preemptions != 7 {
		t.Errorf("step from a good page: %+v", snap)
	}
	// TTFT counts past uint64 (which the text parser turns into anything) and a sum past
	// float64: no admissions or latencies are made of them.
	const name = "vllm:time_to_first_token_seconds"
	for i, page := range []string{
		"# TYPE " + name + " histogram\n" + name + "_bucket{le=\"1\"} 1e30\n" + name + "_bucket{le=\"+Inf\"} 1e30\n" + name + "_count 1e30\n" + name + "_sum 1\n",
		"# TYPE " + name + " histogram\n" + name + "_bucket{le=\"1\",a=\"1\"} 1\n" + name + "_count{a=\"1\"} 1\n" + name + "_sum{a=\"1\"} 1e308\n" +
			name + "_bucket{le=\"1\",a=\"2\"} 1\n" + name + "_count{a=\"2\"} 1\n" + name + "_sum{a=\"2\"} 1e308\n",
	} {
		s, err := ParseSnapshot(strings.NewReader(page), 2*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		w := &watcher{window: time.Minute, serverFirsts: true}
		w.add(Snapshot{At: time.Second, Kind: KindVLLM, TTFT: hist(1, 0, inf, 0)}, nil)
		w.add(s, nil)
		w.fill(&snap)
		d := w.latest().Latency[0].Dist
		if snap.Admitted < 0 || snap.Admitted > 2 || d.N < 0 || math.IsInf(d.Mean, 0) || math.IsInf(d.P50, 0) {
			t.Errorf("page %d: %d admitted, TTFT %+v", i, snap.Admitted, d)
		}
	}
}

// TestWatcherHistogramAppears: a histogram absent from an earlier page of the same server
// (SGLang's and TGI's series appear with their first observation) counts from zero: its first
// observations are admissions and fill the window. A page of no known server is no such zero.
func TestWatcherHistogramAppears(t *testing.T) {
	ttft := hist(0.1, 4, 1, 10, inf, 10)
	ttft.Sum = 2
	for _, tc := range []struct {
		name     string
		earlier  ServerKind
		admitted int
	}{{"same server", KindSGLang, 10}, {"unknown page", KindUnknown, 0}} {
		t.Run(tc.name, func(t *testing.T) {
			w := &watcher{window: time.Minute, serverFirsts: true}
			w.add(Snapshot{At: time.Second, Kind: tc.earlier}, nil)
			w.add(Snapshot{At: 2 * time.Second, Kind: KindSGLang, TTFT: ttft}, nil)
			var snap sched.Snapshot
			w.fill(&snap)
			if snap.Admitted != tc.admitted {
				t.Errorf("%d admitted, want %d", snap.Admitted, tc.admitted)
			}
			l := w.latest().Latency[0]
			if tc.admitted > 0 {
				if !l.Known || math.IsNaN(l.Dist.P50) || l.Dist.Mean != 200 {
					t.Errorf("TTFT over the window %+v, want 10 observations of mean 200 ms", l)
				}
			} else if !math.IsNaN(l.Dist.P50) {
				t.Errorf("TTFT over the window %+v, want none", l)
			}
		})
	}
}

// TestWatcherBaselineAfterFailedFirstScrape: without the provider's first scrape, the watcher's
// first good one is the baseline of the server's lifetime counters.
func TestWatcherBaselineAfterFailedFirstScrape(t *testing.T) {
	w := &watcher{window: time.Minute}
	w.add(Snapshot{}, errors.New("timeout"))
	w.add(Snapshot{At: time.Second, Kind: KindVLLM, Preemptions: Value{V: 5000, Known: true}}, nil)
	w.add(Snapshot{At: 2 * time.Second, Kind: KindVLLM, Preemptions: Value{V: 5003, Known: true}}, nil)
	var snap sched.Snapshot
	w.fill(&snap)
	if snap.Preemptions != 3 {
		t.Errorf("%d preemptions, want the 3 since the first good scrape", snap.Preemptions)
	}
}
