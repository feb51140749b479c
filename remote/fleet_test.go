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
	"sync/atomic"
	"testing"
	"time"

	"rosetop/bench"
	"rosetop/sched"
)

// pagedServer is a test server whose /metrics is pages[phase] (an empty page, or past the last
// one: HTTP 500, the server down), and whose /v1/models lists model.
type pagedServer struct {
	*httptest.Server
	phase atomic.Int32
}

func newPagedServer(t *testing.T, model string, pages ...string) *pagedServer {
	t.Helper()
	s := &pagedServer{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/v1/models":
			fmt.Fprintf(w, `{"object":"list","data":[{"id":%q,"object":"model"}]}`, model)
		case "/metrics":
			i := int(s.phase.Load())
			if i >= len(pages) || pages[i] == "" {
				http.Error(w, "down", http.StatusInternalServerError)
				return
			}
			fmt.Fprint(w, pages[i])
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(s.Close)
	return s
}

// vllmFleetPage is a vLLM page: queue, KV use, a generation counter and a TTFT histogram.
func vllmFleetPage(running, waiting int, kv, gen float64, ttft []float64) string {
	return fmt.Sprintf("vllm:num_requests_running %d\nvllm:num_requests_waiting %d\nvllm:kv_cache_usage_perc %g\nvllm:generation_tokens_total %g\n",
		running, waiting, kv, gen) +
		pyHistogram("vllm:time_to_first_token_seconds", []string{"0.1", "1.0", "2.5", "+Inf"}, pySeries{`engine="0"`, ttft, 0})
}

// TestFleetWatch: three vLLM servers watched as one fleet. The fleet's queue is the servers'
// sum, its KV use their mean, its TTFT p99 the p99 of their merged histograms (not a mean of
// their p99s), its generated tokens their sum; each member is there as itself; when one stops
// answering, it is named in its row and the fleet's window figures are the other two's, while
// its tokens stay in the totals.
func TestFleetWatch(t *testing.T) {
	zero := []float64{0, 0, 0, 0}
	a := newPagedServer(t, "m", vllmFleetPage(0, 0, 0, 0, zero), vllmFleetPage(2, 1, 0.5, 100, []float64{100, 100, 100, 100}))
	b := newPagedServer(t, "m", vllmFleetPage(0, 0, 0, 0, zero), vllmFleetPage(3, 0, 0.3, 50, []float64{0, 0, 100, 100}))
	c := newPagedServer(t, "m", vllmFleetPage(0, 0, 0, 0, zero), vllmFleetPage(1, 4, 0.1, 10, zero))
	p, err := NewProvider(ProviderOptions{Client: Config{BaseURL: a.URL + "/v1"}, Watch: true, ScrapeEvery: 5 * time.Millisecond,
		Fleet: []string{b.URL + "/v1", c.URL + "/v1"}})
	if err != nil {
		t.Fatal(err)
	}
	sess, steps := startWatch(t, p)
	defer sess.Close()
	v := waitView(t, sess, steps, "a first scrape of each", func(v *bench.View) bool {
		return v.Server != nil && len(v.Server.Members) == 3 && !slices.ContainsFunc(v.Server.Members, func(m bench.ServerMetrics) bool { return m.Total == nil })
	})
	if r := v.Header.Remote; r == nil || !r.Watch || r.Kind != "vllm" || !r.ServerFirsts ||
		!slices.Equal(r.Fleet, []string{a.URL + "/v1", b.URL + "/v1", c.URL + "/v1"}) || r.Endpoint != a.URL+"/v1" {
		t.Fatalf("header remote %+v", r)
	}
	for _, s := range []*pagedServer{a, b, c} {
		s.phase.Store(1)
	}
	near := func(got, want float64) bool { return math.Abs(got-want) <= 1e-9*math.Max(1, math.Abs(want)) }
	ttftP99 := func(ls []bench.ServerLatency) float64 {
		for _, l := range ls {
			if l.Name == "TTFT" && l.Dist.N > 0 {
				return l.Dist.P99
			}
		}
		return math.NaN()
	}
	v = waitView(t, sess, steps, "the loaded pages in every member", func(v *bench.View) bool {
		m := v.Server
		return m.Running.V == 6 && m.Waiting.V == 5 && m.Total != nil && m.Total.GenTokens.V == 160 && !math.IsNaN(ttftP99(m.Latency)) &&
			v.QueueLast.Running == 6 && v.QueueLast.Waiting == 5
	})
	m := v.Server
	if !near(m.KVUsage.V, 0.3) || m.Kind != "vllm" || m.Note != "" || m.Source != "3 /metrics pages" {
		t.Errorf("fleet: KV %v, kind %q, note %q, source %q; want 0.3, vllm, none, 3 pages", m.KVUsage.V, m.Kind, m.Note, m.Source)
	}
	// 200 TTFTs merged: 100 at most 0.1 s, 100 in (1, 2.5]: the 99th percentile interpolates to
	// 1 + 1.5 * (198 - 100) / 100 s. A mean of the servers' p99s would be about 1.27 s.
	if got := ttftP99(m.Latency); !near(got, 2470) {
		t.Errorf("fleet TTFT p99 %v ms, want 2470", got)
	}
	for i, mm := range m.Members {
		if want := []string{a.URL, b.URL, c.URL}[i] + "/metrics"; mm.Source != want || mm.Members != nil {
			t.Errorf("member %d: source %q, want %q, alone", i, mm.Source, want)
		}
	}
	if got := m.Members[1].Running.V; got != 3 {
		t.Errorf("member 1 running %v, want 3", got)
	}

	c.phase.Store(2) // c stops answering
	v = waitView(t, sess, steps, "c named as failing, the window the other two's", func(v *bench.View) bool {
		m := v.Server
		return strings.HasPrefix(m.Members[2].Note, "last scrape failed") && m.Running.V == 5 && v.QueueLast.Running == 5
	})
	m = v.Server
	if m.Note != "" || !near(m.KVUsage.V, 0.4) || m.Waiting.V != 1 || m.Total.GenTokens.V != 160 || m.Total.Failed == 0 {
		t.Errorf("with c down: note %q, KV %v, waiting %v, generated %v, failed scrapes %d; want none, 0.4, 1, 160, > 0",
			m.Note, m.KVUsage.V, m.Waiting.V, m.Total.GenTokens.V, m.Total.Failed)
	}
	if m.Members[0].Note != "" || m.Members[1].Note != "" {
		t.Errorf("members a and b: notes %q, %q", m.Members[0].Note, m.Members[1].Note)
	}
}

// TestFleetViewNoneAnswering: with no server answering (a session sends no step then, so this
// is the view on its own), the fleet says so with the first server's reason, knows no queue,
// rate or window, and keeps the totals of what the servers reported before.
func TestFleetViewNoneAnswering(t *testing.T) {
	down := func(note string, gen float64) part {
		return part{note: note, m: &bench.ServerMetrics{Kind: "vllm", Note: "queue not known: " + note, Running: bench.Gauge{V: 3, Known: true}, GenRate: bench.Gauge{V: 9, Known: true},
			Total: &bench.ServerTotals{Scrapes: 4, Failed: 2, GenTokens: bench.Gauge{V: gen, Known: true}}}}
	}
	m := fleetView([]part{down("last scrape failed: a", 10), down("last scrape failed: b", 32)}, nil)
	if m.Note != "no server answering (last scrape failed: a)" || m.Running.Known || m.GenRate.Known || m.Latency != nil {
		t.Errorf("note %q, running %+v, rate %+v, latency %v", m.Note, m.Running, m.GenRate, m.Latency)
	}
	if m.Total == nil || m.Total.GenTokens.V != 42 || m.Total.Scrapes != 8 || m.Total.Failed != 4 || len(m.Members) != 2 {
		t.Errorf("totals %+v, %d members; want 42 tokens, 8 scrapes, 4 failed, 2 members", m.Total, len(m.Members))
	}
	if m.Members[1].Note != "last scrape failed: b" {
		t.Errorf("member note %q, want the scrape's failure alone", m.Members[1].Note)
	}
}

// TestFleetMemberWithoutQueue: a server that answers but whose page lacks a queue gauge is no
// server "not answering": its member note stays empty (its row shows n/a), and its figures count.
func TestFleetMemberWithoutQueue(t *testing.T) {
	p := part{live: true, m: &bench.ServerMetrics{Kind: "llama.cpp", Note: "queue not known: the server's waiting is absent",
		GenRate: bench.Gauge{V: 7, Known: true}}}
	m := fleetView([]part{p}, nil)
	if m.Members[0].Note != "" || m.Note != "" || m.GenRate.V != 7 {
		t.Errorf("member note %q, fleet note %q, rate %+v", m.Members[0].Note, m.Note, m.GenRate)
	}
}

// TestFleetMixedKinds: a vLLM server and a TGI one make a "mixed" fleet whose first tokens are
// not counted (TGI's page has no TTFT histogram), whose model names both models, and whose
// ledger and start-up lines are each server's, in the fleet's order.
func TestFleetMixedKinds(t *testing.T) {
	a := newPagedServer(t, "llama", vllmFleetPage(1, 0, 0.2, 5, []float64{1, 1, 1, 1}))
	b := newPagedServer(t, "mistral", "tgi_queue_size 2\ntgi_batch_current_size 3\n")
	p, err := NewProvider(ProviderOptions{Client: Config{BaseURL: a.URL + "/v1"}, Watch: true, Fleet: []string{b.URL + "/v1"}})
	if err != nil {
		t.Fatal(err)
	}
	var progress bytes.Buffer
	if err := p.Prepare(context.Background(), &progress); err != nil {
		t.Fatal(err)
	}
	info := p.info(bench.ServerSpec{})
	if r := info.Remote; r.Kind != "mixed" || r.ServerFirsts || len(r.Fleet) != 2 || info.Model != "llama, mistral" {
		t.Errorf("info: model %q, remote %+v", info.Model, r)
	}
	var ledger []string
	for _, e := range p.Ledger() {
		ledger = append(ledger, e.What+" "+e.Detail)
	}
	if want := []string{"connect GET " + a.URL + "/v1/models", "first scrape GET " + a.URL + "/metrics",
		"connect GET " + b.URL + "/v1/models", "first scrape GET " + b.URL + "/metrics"}; !slices.Equal(ledger, want) {
		t.Errorf("ledger %q, want %q", ledger, want)
	}
	lines := strings.Split(strings.TrimSpace(progress.String()), "\n")
	if len(lines) != 2 || !strings.Contains(lines[0], "watching vllm at "+a.URL) || !strings.Contains(lines[1], "watching tgi at "+b.URL) {
		t.Errorf("progress, one line a server in order:\n%s", progress.String())
	}
}

// TestFleetRefused: a fleet is only watched, each server at its own /metrics, each given once
// (two on one host and port would read one page twice), at most MaxFleet of them; and every
// server must answer at start, the error naming the one that did not.
func TestFleetRefused(t *testing.T) {
	good := newPagedServer(t, "m", vllmFleetPage(0, 0, 0, 0, []float64{0, 0, 0, 0}))
	many := make([]string, MaxFleet)
	for i := range many {
		many[i] = fmt.Sprintf("http://127.0.0.1:%d/v1", 10000+i)
	}
	base := Config{BaseURL: good.URL + "/v1"}
	for _, tc := range []struct {
		name string
		o    ProviderOptions
		want string
	}{
		{"driven", ProviderOptions{Client: base, Fleet: []string{"http://127.0.0.1:9/v1"}}, "only watched"},
		{"metrics url", ProviderOptions{Client: base, Watch: true, MetricsURL: good.URL + "/metrics", Fleet: []string{"http://127.0.0.1:9/v1"}}, "one server's page"},
		{"twice", ProviderOptions{Client: base, Watch: true, Fleet: []string{good.URL + "/v1/"}}, "given twice"},
		{"one page", ProviderOptions{Client: Config{BaseURL: "http://gpu-a:8000/a/v1"}, Watch: true, Fleet: []string{"http://k:9000/v1", "http://GPU-A:8000/b/v1"}},
			"http://gpu-a:8000/a/v1 and http://GPU-A:8000/b/v1 have one /metrics page (http://GPU-A:8000/metrics)"},
		{"too many", ProviderOptions{Client: base, Watch: true, Fleet: many}, fmt.Sprintf("%d servers to watch, at most %d", MaxFleet+1, MaxFleet)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := NewProvider(tc.o)
			if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("NewProvider: %v; want %v saying %q", err, ErrConfig, tc.want)
			}
		})
	}

	down := newPagedServer(t, "m")
	p, err := NewProvider(ProviderOptions{Client: base, Watch: true, Fleet: []string{down.URL + "/v1"}})
	if err != nil {
		t.Fatal(err)
	}
	err = p.Prepare(context.Background(), &bytes.Buffer{})
	if !errors.Is(err, ErrNoMetrics) || !strings.Contains(err.Error(), down.URL+"/metrics: remote: http-status 500") || strings.Contains(err.Error(), "--metrics-url") {
		t.Errorf("Prepare: %v; want %v naming %s/metrics, without the --metrics-url hint", err, ErrNoMetrics, down.URL)
	}
}

// TestFleetMemberRestart: a server that restarts (its counters and histograms start again from
// zero) keeps what it counted before in the fleet's totals, and its rate stays in the fleet's
// sum, counted from zero after the restart as Prometheus' rate() counts it: the fleet's figures
// neither fall back nor drop the server.
func TestFleetMemberRestart(t *testing.T) {
	page := func(at time.Duration, n float64) Snapshot { // n requests so far, each of 10 tokens
		return Snapshot{At: at, Kind: KindVLLM, Waiting: Value{0, true}, Running: Value{1, true},
			GenerationTokens: Value{10 * n, true}, E2E: hist(0.1, n, inf, n), TTFT: hist(0.1, n, inf, n)}
	}
	a := &watcher{window: time.Minute, every: time.Second, watch: true}
	b := &watcher{window: time.Minute, every: time.Second, watch: true}
	f := &fleet{ws: []*watcher{a, b}}
	for _, s := range []struct{ a, b float64 }{{100, 50}, {200, 60}, {5, 70}} { // a restarts before the third
		at := time.Duration(len(a.hist)+1) * time.Second
		a.add(page(at, s.a), nil)
		b.add(page(at, s.b), nil)
	}
	m := f.latest()
	// a: 100 before its restart and 5 after; b: 20.
	if tot := m.Total; tot.Requests.V != 125 || tot.GenTokens.V != 1250 || tot.Latency[0].Dist.N != 125 {
		t.Errorf("totals: %v requests, %v tokens, %d first tokens; want 125, 1250, 125", tot.Requests.V, tot.GenTokens.V, tot.Latency[0].Dist.N)
	}
	// Over the 2 s of the rate span: a generated 1000 + 50 tokens, b 200.
	if ra := m.Members[0].GenRate; !ra.Known || ra.V != 525 || !m.GenRate.Known || m.GenRate.V != 625 {
		t.Errorf("rates: a %+v, fleet %+v; want 525 and 625 tok/s", ra, m.GenRate)
	}
	// Finished requests, from the end-to-end histograms' counts: a 100 + 5, b 20, over 2 s.
	if ra, rb := m.Members[0].ReqRate, m.Members[1].ReqRate; ra.V != 52.5 || rb.V != 10 || !m.ReqRate.Known || m.ReqRate.V != 62.5 {
		t.Errorf("request rates: a %+v, b %+v, fleet %+v; want 52.5, 10 and 62.5 req/s", ra, rb, m.ReqRate)
	}
}

// TestFleetMixedLayouts: servers whose TTFT buckets differ (vLLM's start at 1 ms, SGLang's at
// 100 ms) merge over the union of their bounds, where an observation in a server's first
// bucket is known only to be at most its bound: a fleet percentile at or below the largest
// such bound is that bound ("≤100"), as the server's own is, never a value between bounds that
// neither server measured.
func TestFleetMixedLayouts(t *testing.T) {
	fine := hist(0.001, 0, 0.005, 0, 0.01, 0, 0.02, 100, 0.04, 100, 0.06, 100, 0.08, 100, 0.1, 100, inf, 100) // 100 of 10 to 20 ms
	coarse := hist(0.1, 100, 0.2, 100, 0.4, 100, inf, 100)                                                    // 100 of at most 100 ms
	zero := func(h Histogram) Histogram {
		z := Histogram{Known: true, Buckets: slices.Clone(h.Buckets)}
		for i := range z.Buckets {
			z.Buckets[i].Count = 0
		}
		return z
	}
	of := func(kind ServerKind, h Histogram) part {
		w := &watcher{window: time.Minute, every: time.Second, watch: true}
		w.add(Snapshot{At: time.Second, Kind: kind, TTFT: zero(h)}, nil)
		w.add(Snapshot{At: 2 * time.Second, Kind: kind, TTFT: h}, nil)
		return w.part()
	}
	slos := []bench.SLO{{Metric: "ttft", Ms: 50}}
	alone := fleetView([]part{of(KindSGLang, coarse)}, slos)
	m := fleetView([]part{of(KindVLLM, fine), of(KindSGLang, coarse)}, slos)
	for _, c := range []struct {
		what string
		ls   []bench.ServerLatency
	}{{"SGLang alone", alone.Latency}, {"the fleet's window", m.Latency}, {"the fleet's totals", m.Total.Latency}} {
		l := c.ls[0]
		if l.Name != "TTFT" || l.FirstBound != 100 || !l.Bounded(l.Dist.P99) {
			t.Errorf("%s: TTFT p99 %v ms, first bound %v ms; want one at most 100 ms, shown as ≤100", c.what, l.Dist.P99, l.FirstBound)
		}
	}
	// Within 50 ms: SGLang's 100 interpolated in its first bucket (half), vLLM's 100 all; merged
	// over the union of the bounds first, SGLang's would count only at 100 ms (0.5 in all).
	for what, ls := range map[string][]bench.ServerLatency{"SGLang alone": alone.Latency, "the fleet's window": m.Latency, "the fleet's totals": m.Total.Latency} {
		want := 0.75
		if what == "SGLang alone" {
			want = 0.5
		}
		if l := ls[0]; l.Target != 50 || !l.Within.Known || l.Within.V != want || l.WithinFloor {
			t.Errorf("%s: TTFT within %v ms %+v (floor %v); want %v", what, l.Target, l.Within, l.WithinFloor, want)
		}
	}
}

// TestWatchTargets: a watch session's --goodput targets reach the watcher: the server's TTFT
// carries the target and the share of its observations within it, in the window and the totals.
func TestWatchTargets(t *testing.T) {
	zero := []float64{0, 0, 0, 0}
	a := newPagedServer(t, "m", vllmFleetPage(0, 0, 0, 0, zero), vllmFleetPage(1, 0, 0.1, 10, []float64{30, 80, 100, 100}))
	p, err := NewProvider(ProviderOptions{Client: Config{BaseURL: a.URL + "/v1"}, Watch: true, ScrapeEvery: 5 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	cfg := sessionConfig(4, 8, 1, 1)
	cfg.Goodput = []bench.SLO{{Metric: "ttft", Ms: 1000}}
	steps := make(chan struct{}, 1)
	sess, err := bench.NewSession(context.Background(), cfg, bench.SessionOptions{Provider: p, External: true, OnStep: func(*sched.StepOutput) {
		select {
		case steps <- struct{}{}:
		default:
		}
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	waitView(t, sess, steps, "a first scrape", func(v *bench.View) bool { return v.Server != nil && v.Server.Total != nil })
	a.phase.Store(1)
	ttft := func(ls []bench.ServerLatency) bench.ServerLatency {
		for _, l := range ls {
			if l.Name == "TTFT" {
				return l
			}
		}
		return bench.ServerLatency{}
	}
	// 80 of 100 TTFTs at most 1 s (a bucket bound: exact).
	v := waitView(t, sess, steps, "the TTFT share within 1 s", func(v *bench.View) bool {
		l := ttft(v.Server.Latency)
		return l.Dist.N == 100 && l.Within.Known
	})
	for what, l := range map[string]bench.ServerLatency{"window": ttft(v.Server.Latency), "totals": ttft(v.Server.Total.Latency)} {
		if l.Target != 1000 || l.Within.V != 0.8 || l.WithinFloor {
			t.Errorf("%s: TTFT %+v; want target 1000 ms, 0.8 within", what, l)
		}
	}
}

// TestWatchFirstsKept: first tokens the servers counted reach the admissions of the steps a
// watch session is sent, even when the step that takes them knows no queue (every server's
// newest scrape failed: Run sends no such step): they go with the next step it sends. One
// server alone and a fleet of two, scraped and stepped in turn as their loops and Run would,
// the step after the loaded pages coming only after the failed scrapes (Run was still sending
// the step before, and the scrapes' wakes were one).
func TestWatchFirstsKept(t *testing.T) {
	zero := []float64{0, 0, 0, 0}
	for _, tc := range []struct {
		name   string
		firsts []float64 // each server's first tokens once loaded
	}{{"one server", []float64{5}}, {"fleet", []float64{5, 3}}} {
		t.Run(tc.name, func(t *testing.T) {
			var srvs []*pagedServer
			want := 0
			for _, n := range tc.firsts {
				loaded := vllmFleetPage(1, 0, 0.1, 0, []float64{n, n, n, n})
				srvs = append(srvs, newPagedServer(t, "m", vllmFleetPage(1, 0, 0.1, 0, zero), loaded, "not a metrics page {\n", loaded))
				want += int(n)
			}
			o := ProviderOptions{Client: Config{BaseURL: srvs[0].URL + "/v1"}, Watch: true}
			for _, s := range srvs[1:] {
				o.Fleet = append(o.Fleet, s.URL+"/v1")
			}
			p, err := NewProvider(o)
			if err != nil {
				t.Fatal(err)
			}
			if err := p.Prepare(context.Background(), &bytes.Buffer{}); err != nil {
				t.Fatal(err)
			}
			bs, err := p.NewServer(context.Background(), bench.ServerSpec{Clock: bench.NewRealClock(), MaxBatch: 4, Sched: sched.Config{MaxBatch: 4, PrefillMaxBatch: 4}})
			if err != nil {
				t.Fatal(err)
			}
			defer bs.Close()
			s := bs.(*remoteServer)
			ws := []*watcher{}
			switch side := s.watch.(type) {
			case *watcher:
				ws = append(ws, side)
			case *fleet:
				ws = side.ws
			}
			sent := 0 // the admissions of the steps Run sends
			for phase := range 4 {
				for _, srv := range srvs {
					srv.phase.Store(int32(phase))
				}
				for _, w := range ws {
					w.add(w.sc.Scrape(context.Background()))
				}
				if phase == 1 {
					continue
				}
				if so, serverQueue := s.step(); serverQueue { // Run sends a watch step only with the server's queue
					sent += so.Snapshot.Admitted
				} else if phase != 2 {
					t.Errorf("phase %d: no queue known", phase)
				}
			}
			if sent != want {
				t.Errorf("the steps sent carry %d admissions; the servers counted %d first tokens", sent, want)
			}
		})
	}
}

// TestFleetViewOnRead: the fleet's view is made when it is read after a server's scrape, not
// again without one, and shows what merging every server's histograms afresh shows: a build
// that adds into the sum's own buckets leaves the servers' histograms as they were (a second
// build is the same), with servers of one bucket layout and one of another.
func TestFleetViewOnRead(t *testing.T) {
	f, n := benchFleet(3)
	other := &watcher{window: 30 * time.Second, every: 500 * time.Millisecond, watch: true, serverFirsts: true}
	other.publish()
	for s := 1; s <= n; s++ {
		snap := benchScrape(3, s)
		snap.TTFT = hist(0.1, float64(s), 0.5, float64(2*s), inf, float64(3*s)) // SGLang's first bound
		other.add(snap, nil)
	}
	f.ws = append(f.ws, other)
	v := f.latest()
	if again := f.latest(); again != v {
		t.Error("the view was made again without a scrape")
	}
	var window, total []gain
	for _, w := range f.ws {
		p := w.part()
		window, total = mergeGains(window, p.window), mergeGains(total, p.total)
	}
	if got, want := fmt.Sprint(v.Latency), fmt.Sprint(summarize(window, f.slos)); got != want {
		t.Errorf("window latencies\n%s\nwant\n%s", got, want)
	}
	if got, want := fmt.Sprint(v.Total.Latency), fmt.Sprint(summarize(total, f.slos)); got != want {
		t.Errorf("total latencies\n%s\nwant\n%s", got, want)
	}
	f.mu.Lock()
	f.buildLocked()
	rebuilt := f.view
	f.mu.Unlock()
	if fmt.Sprint(rebuilt.Latency, rebuilt.Total.Latency) != fmt.Sprint(v.Latency, v.Total.Latency) {
		t.Errorf("a second build differs:\n%v\nfirst\n%v", rebuilt.Latency, v.Latency)
	}
	f.ws[1].add(benchScrape(1, n+1), nil)
	if now := f.latest(); now == rebuilt || now.Members[1].At != benchScrape(1, n+1).At {
		t.Errorf("after a scrape: the same view %v, member at %v", now == rebuilt, now.Members[1].At)
	}
}
