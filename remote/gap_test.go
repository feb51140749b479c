package remote

import (
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"rosetop/bench"
	"rosetop/sched"
)

// gapPage is vllmProcessPage with gen tokens generated and ttft first tokens (all under 100 ms,
// 50 ms each on average); a negative one leaves its series out of the page.
func gapPage(start string, gen, ttft float64) string {
	page := vllmProcessPage(start, 0, 1000, max(gen, 0), []float64{ttft, ttft, ttft, ttft}, 0.05*max(ttft, 0))
	var kept []string
	for _, line := range strings.SplitAfter(page, "\n") {
		if (gen < 0 && strings.Contains(line, "vllm:generation_tokens")) || (ttft < 0 && strings.Contains(line, "vllm:time_to_first_token")) {
			continue
		}
		kept = append(kept, line)
	}
	return strings.Join(kept, "")
}

// TestWatcherSeriesGap: a series missing from one vLLM page and back on the next adds what it
// gained since the last page that had it, as Prometheus' increase() takes a gap (staleness),
// not as a count from zero: the window, the totals, the first tokens a step takes and the rates
// agree. A series first seen on a later page counts from zero; one that came back lower, or after
// another process started, is the new process's, taken whole, and the server restarted.
func TestWatcherSeriesGap(t *testing.T) {
	const s1, s2 = "1.7356896e+09", "1.7356902e+09"
	type page struct {
		start     string
		gen, ttft float64 // -1: absent from the page
	}
	gap := func(start, after string) []page {
		return []page{{start, 100, 10}, {start, 200, 20}, {start, -1, -1}, {after, 250, 25}}
	}
	for _, tc := range []struct {
		name     string
		pages    []page // scraped at 1, 2, 3 and 4 s
		window   time.Duration
		gen      float64     // generated tokens in the totals
		ttft     int         // first tokens in the totals, and those a step takes
		win      int         // first tokens in the window
		rate     bench.Gauge // generation rate over the last scrapes
		restarts int
	}{
		{"gap", gap(s1, s1), time.Minute, 150, 15, 15, bench.Gauge{V: 50, Known: true}, 0},
		{"gap, no start time", gap("", ""), time.Minute, 150, 15, 15, bench.Gauge{V: 50, Known: true}, 0},
		// The window's baseline is the page without the series: what it gained is since the page
		// before, 20 first tokens; the rate has no sample at the window's start.
		{"the window starts in the gap", gap(s1, s1), 900 * time.Millisecond, 150, 15, 5, bench.Gauge{}, 0},
		{"appears", []page{{s1, -1, -1}, {s1, -1, -1}, {s1, 100, 10}, {s1, 250, 25}}, time.Minute, 250, 25, 25, bench.Gauge{}, 0},
		{"a restart after the gap", gap(s1, s2), time.Minute, 100 + 250, 10 + 25, 10 + 25, bench.Gauge{V: 350.0 / 3, Known: true}, 1},
		{"a restart in the gap", []page{{s1, 100, 10}, {s1, 200, 20}, {s2, -1, -1}, {s2, 250, 25}}, time.Minute, 100 + 250, 10 + 25, 10 + 25,
			bench.Gauge{V: 350.0 / 3, Known: true}, 1},
		{"lower after the gap", []page{{"", 100, 10}, {"", 200, 20}, {"", -1, -1}, {"", 50, 5}}, time.Minute, 100 + 50, 10 + 5, 10 + 5,
			bench.Gauge{V: 50, Known: true}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pages := make([]string, len(tc.pages))
			for i, p := range tc.pages {
				pages[i] = gapPage(p.start, p.gen, p.ttft)
			}
			srv := newPagedServer(t, "m", pages...)
			w, clk := pagedWatcher(t, srv, true, true, tc.window)
			for i := range pages {
				scrapeAt(t, w, clk, srv, i, time.Duration(i+1)*time.Second)
			}
			m := w.latest()
			if m.Note != "" || m.Total == nil {
				t.Fatalf("note %q, totals %v", m.Note, m.Total)
			}
			got := fmt.Sprintf("totals: %v generated, %d first tokens; window: %d first tokens", m.Total.GenTokens.V, m.Total.Latency[0].Dist.N, m.Latency[0].Dist.N)
			if want := fmt.Sprintf("totals: %v generated, %d first tokens; window: %d first tokens", tc.gen, tc.ttft, tc.win); got != want {
				t.Errorf("%s\nwant %s", got, want)
			}
			var snap sched.Snapshot
			if w.fill(&snap); snap.Admitted != tc.ttft {
				t.Errorf("a step took %d first tokens, want %d", snap.Admitted, tc.ttft)
			}
			if r := m.GenRate; r.Known != tc.rate.Known || math.Abs(r.V-tc.rate.V) > 1e-9 {
				t.Errorf("generation rate %+v, want %+v", r, tc.rate)
			}
			if r := w.restartsSoFar(); r.Count != tc.restarts {
				t.Errorf("%d restarts (%+v), want %d", r.Count, r, tc.restarts)
			}
		})
	}
}

// TestWatcherGapPages: a page naming no known server between two of a vLLM server is a gap,
// not a count from zero; a page of another kind of server is another server, whose series count
// from zero as they appear.
func TestWatcherGapPages(t *testing.T) {
	page := func(at int, kind ServerKind, gen, ttft float64) Snapshot {
		return Snapshot{At: time.Duration(at) * time.Second, Kind: kind, GenerationTokens: Value{V: gen, Known: true}, TTFT: hist(0.1, ttft, inf, ttft)}
	}
	for _, tc := range []struct {
		name      string
		between   Snapshot
		gen       float64
		ttft, win int
	}{
		{"a page naming no server", Snapshot{At: 2 * time.Second}, 150, 15, 15},
		{"another server", Snapshot{At: 2 * time.Second, Kind: KindSGLang}, 250, 25, 25},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := &watcher{window: time.Minute, every: time.Second, serverFirsts: true}
			w.add(page(1, KindVLLM, 100, 10), nil)
			w.add(tc.between, nil)
			last := page(3, KindVLLM, 250, 25)
			if tc.between.Kind != KindUnknown {
				last.Kind = tc.between.Kind
			}
			w.add(last, nil)
			m := w.latest()
			got := fmt.Sprintf("totals: %v generated, %d first tokens; window: %d first tokens", m.Total.GenTokens.V, m.Total.Latency[0].Dist.N, m.Latency[0].Dist.N)
			if want := fmt.Sprintf("totals: %v generated, %d first tokens; window: %d first tokens", tc.gen, tc.ttft, tc.win); got != want {
				t.Errorf("%s\nwant %s", got, want)
			}
			var snap sched.Snapshot
			if w.fill(&snap); snap.Admitted != tc.ttft {
				t.Errorf("a step took %d first tokens, want %d", snap.Admitted, tc.ttft)
			}
		})
	}
}

// TestWatcherRestartPages: after a restart every count on the new process's pages is its own,
// those that did not go down too, and the window, the totals and the rates agree: a restart whose
// first good page names no server (its series appear on the next), one told only by a count that
// went down (no start time: SGLang), and another kind of server answering.
func TestWatcherRestartPages(t *testing.T) {
	page := func(at int, kind ServerKind, start, gen, done float64) Snapshot {
		s := Snapshot{At: time.Duration(at) * time.Second, Kind: kind, GenerationTokens: Value{V: gen, Known: true}, E2E: hist(1, done, inf, done)}
		if start > 0 {
			s.Started = Value{V: start, Known: true}
		}
		return s
	}
	for _, tc := range []struct {
		name      string
		pages     []Snapshot
		gen, done float64
		restarts  int
	}{
		{"a restart's first page names no server", []Snapshot{page(1, KindVLLM, 1000, 100, 10), page(2, KindVLLM, 1000, 200, 20),
			{At: 3 * time.Second, Started: Value{V: 2000, Known: true}}, page(4, KindVLLM, 2000, 50, 5), page(5, KindVLLM, 2000, 60, 6)}, 160, 16, 1},
		{"told by a count that went down", []Snapshot{page(1, KindSGLang, 0, 10000, 100), page(2, KindSGLang, 0, 10100, 110),
			page(3, KindSGLang, 0, 5000, 130)}, 5100, 140, 1},
		{"another kind of server", []Snapshot{page(1, KindVLLM, 0, 100, 10), page(2, KindVLLM, 0, 200, 20),
			page(3, KindSGLang, 0, 5000, 300), page(4, KindSGLang, 0, 5100, 310)}, 5200, 320, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := &watcher{window: time.Minute, every: time.Second, serverFirsts: true}
			for _, p := range tc.pages {
				w.add(p, nil)
			}
			m := w.latest()
			window := -1
			for _, l := range m.Latency {
				if l.Name == "E2E latency" {
					window = l.Dist.N
				}
			}
			dt := (tc.pages[len(tc.pages)-1].At - tc.pages[0].At).Seconds()
			got := fmt.Sprintf("totals: %v generated, %v finished; window: %d finished; rate %.1f tok/s; %d restarts",
				m.Total.GenTokens.V, m.Total.Requests.V, window, m.GenRate.V, w.restartsSoFar().Count)
			want := fmt.Sprintf("totals: %v generated, %v finished; window: %v finished; rate %.1f tok/s; %d restarts",
				tc.gen, tc.done, tc.done, tc.gen/dt, tc.restarts)
			if got != want {
				t.Errorf("%s\nwant %s", got, want)
			}
		})
	}
}
