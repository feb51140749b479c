package remote

import (
	"context"
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

// vllmProcessPage is a vLLM page as one API server writes it: prometheus_client's default
// registry, whose process collector gives process_start_time_seconds (on Linux; start ""
// leaves it out, as the multiprocess registry of --api-server-count > 1 does), then
// vllm/v1/metrics/loggers.py's queue, preemption and token counters (with their _created
// families) and a TTFT histogram over bounds 0.1, 1, 2.5 and +Inf.
func vllmProcessPage(start string, preempt, prompt, gen float64, ttft []float64, sum float64) string {
	const l = `model_name="m",engine="0"`
	var b strings.Builder
	if start != "" {
		fmt.Fprintf(&b, "# HELP process_start_time_seconds Start time of the process since unix epoch in seconds.\n"+
			"# TYPE process_start_time_seconds gauge\nprocess_start_time_seconds %s\n", start)
	}
	for _, g := range []struct {
		name string
		v    float64
	}{{"vllm:num_requests_running", 1}, {"vllm:num_requests_waiting", 0}} {
		fmt.Fprintf(&b, "# HELP %s Gauge.\n# TYPE %s gauge\n%s{%s} %.1f\n", g.name, g.name, g.name, l, g.v)
	}
	for _, c := range []struct {
		name string
		v    float64
	}{{"vllm:num_preemptions", preempt}, {"vllm:prompt_tokens", prompt}, {"vllm:generation_tokens", gen}} {
		fmt.Fprintf(&b, "# HELP %s_total Counter.\n# TYPE %s_total counter\n%s_total{%s} %.1f\n", c.name, c.name, c.name, l, c.v)
		fmt.Fprintf(&b, "# HELP %s_created Counter.\n# TYPE %s_created gauge\n%s_created{%s} 1.7356896e+09\n", c.name, c.name, c.name, l)
	}
	b.WriteString(pyHistogram("vllm:time_to_first_token_seconds", []string{"0.1", "1.0", "2.5", "+Inf"}, pySeries{l, ttft, sum}))
	return b.String()
}

// restartPages are a vLLM server's pages over a restart that no count shows: 1000 fast first
// tokens, 100 slow ones more, an outage, then a new process that has already made 1100 fast and
// 100 slow ones, more of everything (each bucket, the count, the sum) than the old one had.
// before and after are the two processes' starts ("" for none).
func restartPages(before, after string) []string {
	return []string{
		vllmProcessPage(before, 10, 5000, 1000, []float64{1000, 1000, 1000, 1000}, 50),
		vllmProcessPage(before, 12, 5500, 1100, []float64{1000, 1000, 1100, 1100}, 200),
		"", // down
		vllmProcessPage(after, 20, 7000, 1500, []float64{1100, 1100, 1200, 1200}, 205),
	}
}

// pagedWatcher is a watcher of srv's pages over window on a clock of its own, its provider
// watching or not (watch), and with prepare having read srv's first page as its baseline; the
// watcher is closed with the test.
func pagedWatcher(t *testing.T, srv *pagedServer, watch, prepare bool, window time.Duration) (*watcher, *sleepClock) {
	t.Helper()
	p, err := NewProvider(ProviderOptions{Client: Config{BaseURL: srv.URL + "/v1"}, Watch: watch})
	if err != nil {
		t.Fatal(err)
	}
	if prepare {
		if err := p.Prepare(context.Background(), io.Discard); err != nil {
			t.Fatal(err)
		}
	}
	clk := newSleepClock()
	w, err := newWatcher(p, bench.ServerSpec{Clock: clk, Window: window})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.close)
	return w, clk
}

// scrapeAt moves clk to at, sets srv's page to phase and has w scrape it as its loop does.
func scrapeAt(t *testing.T, w *watcher, clk *sleepClock, srv *pagedServer, phase int, at time.Duration) {
	t.Helper()
	srv.phase.Store(int32(phase))
	clk.set(at)
	snap, err := w.sc.Scrape(context.Background())
	w.add(snap, err)
}

// TestWatcherRestartAcrossOutage: a vLLM server restarted during an outage, whose new process
// has by its first scrape counted more of everything than the old one had, so no counter or
// bucket went down: its process_start_time_seconds changed, and every count of the new process
// is taken whole, as after a count that went down. The totals, the window, the rates, the
// step's first tokens and preemptions add what the old process counted before the outage to all
// the new one counted, never the new counts minus the old ones; for a dashboard driving the
// server (bench --endpoint) as for one watching it.
func TestWatcherRestartAcrossOutage(t *testing.T) {
	for _, watch := range []bool{false, true} {
		t.Run(fmt.Sprintf("watch=%v", watch), func(t *testing.T) {
			srv := newPagedServer(t, "m", restartPages("1.7356896e+09", "1.7356902e+09")...)
			w, clk := pagedWatcher(t, srv, watch, true, time.Minute) // the first page: the baseline
			var snap sched.Snapshot
			scrapeAt(t, w, clk, srv, 0, time.Second)
			scrapeAt(t, w, clk, srv, 1, 2*time.Second)
			if w.fill(&snap); snap.Admitted != 100 || snap.Preemptions != 2 {
				t.Errorf("before the outage: %d first tokens, %d preemptions; want 100, 2", snap.Admitted, snap.Preemptions)
			}
			scrapeAt(t, w, clk, srv, 2, 3*time.Second) // down
			scrapeAt(t, w, clk, srv, 3, 4*time.Second) // restarted
			snap = sched.Snapshot{}
			if w.fill(&snap); snap.Admitted != 1200 || snap.Preemptions != 2+20 {
				t.Errorf("after the restart: %d first tokens, %d preemptions; want 1200, 22", snap.Admitted, snap.Preemptions)
			}
			m := w.latest()
			tot := m.Total
			if tot == nil {
				t.Fatal("no totals")
			}
			if tot.GenTokens.V != 100+1500 || tot.PromptTokens.V != 500+7000 || tot.Latency[0].Dist.N != 100+1200 {
				t.Errorf("totals: %v generated, %v prompt tokens, %d first tokens; want 1600, 7500, 1300", tot.GenTokens.V, tot.PromptTokens.V, tot.Latency[0].Dist.N)
			}
			// The window holds 1100 fast first tokens and 200 slow ones: the 99th percentile (rank
			// 1287) is in (1, 2.5] s, at 1 + 1.5 * (1287 - 1100) / 200 s.
			if l := m.Latency[0]; l.Dist.N != 1300 || math.Abs(l.Dist.P99-2402.5) > 1e-6 {
				t.Errorf("window TTFT: %d first tokens, p99 %v ms; want 1300, 2402.5 ms", l.Dist.N, l.Dist.P99)
			}
			// From the first scrape to the last, 3 s: 100 tokens, then the new process's 1500.
			if g := m.GenRate; !g.Known || math.Abs(g.V-1600.0/3) > 1e-9 {
				t.Errorf("generation rate %+v, want %v", g, 1600.0/3)
			}
		})
	}
}

// TestWatcherRestartUnseen: where the page does not say when its process started (SGLang's,
// vLLM's with several API servers), a restart is only seen where a count went down: the new
// counts less the old are what the server is taken to have done.
func TestWatcherRestartUnseen(t *testing.T) {
	srv := newPagedServer(t, "m", restartPages("", "")...)
	w, clk := pagedWatcher(t, srv, true, false, time.Minute)
	for i, at := range []time.Duration{time.Second, 2 * time.Second, 3 * time.Second, 4 * time.Second} {
		scrapeAt(t, w, clk, srv, i, at)
	}
	if tot := w.latest().Total; tot.GenTokens.V != 500 || tot.Latency[0].Dist.N != 200 {
		t.Errorf("totals: %v generated, %d first tokens; want 500 and 200", tot.GenTokens.V, tot.Latency[0].Dist.N)
	}
}

// llamaPage is llama-server's page (tools/server/server-context.cpp: counters then gauges, one
// unlabelled sample each) with the tokens it predicted.
func llamaPage(predicted float64) string {
	return fmt.Sprintf("# HELP llamacpp:prompt_tokens_total Number of prompt tokens processed.\n# TYPE llamacpp:prompt_tokens_total counter\nllamacpp:prompt_tokens_total 100\n"+
		"# HELP llamacpp:tokens_predicted_total Number of generation tokens processed.\n# TYPE llamacpp:tokens_predicted_total counter\nllamacpp:tokens_predicted_total %g\n"+
		"# HELP llamacpp:requests_processing Number of requests processing.\n# TYPE llamacpp:requests_processing gauge\nllamacpp:requests_processing 1\n"+
		"# HELP llamacpp:requests_deferred Number of requests deferred.\n# TYPE llamacpp:requests_deferred gauge\nllamacpp:requests_deferred 0\n", predicted)
}

// TestWatcherRestartHeader: llama-server says which process answered in the
// Process-Start-Time-Unix header of /metrics (its start in µs on a monotonic clock): a new
// value there is a restart, whatever the counts did.
func TestWatcherRestartHeader(t *testing.T) {
	type answer struct {
		start     string // the header; "" for none
		predicted float64
	}
	answers := []answer{{"86400000000", 1000}, {"86400000000", 1200}, {"86460000000", 1300}}
	var phase atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a := answers[phase.Load()]
		if a.start != "" {
			w.Header().Set("Process-Start-Time-Unix", a.start)
		}
		w.Header().Set("Content-Type", "text/plain; version=0.0.4")
		io.WriteString(w, llamaPage(a.predicted))
	}))
	defer srv.Close()
	clk := newSleepClock()
	sc, err := NewScraper(ScraperConfig{URL: srv.URL + "/metrics", Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	defer sc.Close()
	w := &watcher{sc: sc, window: time.Minute, every: time.Second, watch: true}
	for i := range answers {
		phase.Store(int32(i))
		clk.set(time.Duration(i+1) * time.Second)
		snap, err := sc.Scrape(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		w.add(snap, nil)
	}
	if tot := w.latest().Total; tot.GenTokens.V != 200+1300 {
		t.Errorf("%v tokens generated, want 1500: 200 before the restart, 1300 by the new process", tot.GenTokens.V)
	}
}

// TestSnapshotProcessStart: process_start_time_seconds as Python's prometheus_client writes it
// (vLLM) and as Go's client_golang does; none where the page has none, several processes' series
// or a value that is no time.
func TestSnapshotProcessStart(t *testing.T) {
	const help = "# HELP process_start_time_seconds Start time of the process since unix epoch in seconds.\n# TYPE process_start_time_seconds gauge\n"
	for _, tc := range []struct {
		name, page string
		want       Value
	}{
		{"python", help + "process_start_time_seconds 1.7356896e+09\n", Value{1.7356896e+09, true}},
		{"go", help + "process_start_time_seconds 1.73568960012e+09\n", Value{1.73568960012e+09, true}},
		{"none", "# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running 1\n", Value{}},
		{"two processes", help + "process_start_time_seconds{pid=\"1\"} 1.7e+09\nprocess_start_time_seconds{pid=\"2\"} 1.8e+09\n", Value{}},
		{"not a time", help + "process_start_time_seconds NaN\n", Value{}},
	} {
		s, err := ParseSnapshot(strings.NewReader(tc.page+"vllm:num_requests_waiting 0\n"), 0)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if s.Started != tc.want {
			t.Errorf("%s: started %+v, want %+v", tc.name, s.Started, tc.want)
		}
	}
}

// TestScrapeStartHeader: the Process-Start-Time-Unix header stands in for a page without
// process_start_time_seconds, never for one with it.
func TestScrapeStartHeader(t *testing.T) {
	var page atomic.Value
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Process-Start-Time-Unix", "86400000000")
		io.WriteString(w, page.Load().(string))
	}))
	defer srv.Close()
	sc, err := NewScraper(ScraperConfig{URL: srv.URL + "/metrics"})
	if err != nil {
		t.Fatal(err)
	}
	defer sc.Close()
	for _, tc := range []struct {
		page string
		want Value
	}{
		{llamaPage(1), Value{86400000000, true}},
		{"process_start_time_seconds 1.7356896e+09\n" + llamaPage(1), Value{1.7356896e+09, true}},
	} {
		page.Store(tc.page)
		snap, err := sc.Scrape(context.Background())
		if err != nil || snap.Started != tc.want {
			t.Errorf("started %+v (%v), want %+v", snap.Started, err, tc.want)
		}
	}
}

// TestRestartedSlack: one process's start may move by the second that client_golang's process
// collector takes from the boot time it reads again at each scrape; a new process is one whose
// start moved further, and no start is no restart.
func TestRestartedSlack(t *testing.T) {
	at := func(v float64) *Snapshot { return &Snapshot{Started: Value{v, true}} }
	const t0 = 1.73568960012e+09
	for _, tc := range []struct {
		name      string
		now, then *Snapshot
		want      bool
	}{
		{"same", at(t0), at(t0), false},
		{"boot time a second on", at(t0 + 1), at(t0), false},
		{"boot time a second back", at(t0 - 1), at(t0), false},
		{"a new process", at(t0 + 600), at(t0), true},
		{"llama-server's µs", at(86460000000), at(86400000000), true},
		{"now says none", &Snapshot{}, at(t0), false},
		{"then says none", at(t0), &Snapshot{}, false},
	} {
		if got := restarted(tc.now, tc.then); got != tc.want {
			t.Errorf("%s: restarted %v, want %v", tc.name, got, tc.want)
		}
	}
	// A step of the boot time between two scrapes is no restart: the counts' increase is added.
	w := &watcher{window: time.Minute, every: time.Second, watch: true}
	w.add(Snapshot{At: time.Second, Kind: KindVLLM, Started: Value{t0, true}, GenerationTokens: Value{1000, true}}, nil)
	w.add(Snapshot{At: 2 * time.Second, Kind: KindVLLM, Started: Value{t0 + 1, true}, GenerationTokens: Value{1100, true}}, nil)
	if g := w.latest().Total.GenTokens; g.V != 100 {
		t.Errorf("%v tokens generated across a boot time step, want 100", g.V)
	}
}
