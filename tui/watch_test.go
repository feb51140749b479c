package tui

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/charmbracelet/x/ansi"

	"rosetop/bench"
)

// watchView makes v a watch session's over a vLLM server: no requests of rosetop's, so no
// client-side figures; the server's queue, rates and totals.
func watchView(v *bench.View) {
	remoteView(v)
	v.Header.Remote.Watch, v.Header.Job, v.Header.Concurrency, v.Header.Schedule, v.Header.RunLabel = true, "", 0, "external", "watching"
	v.Header.TokensPerSec = 0
	v.ITL, v.SlowITL, v.Steady, v.Cold = nil, nil, nil, nil
	for i := range v.Latency {
		v.Latency[i].Dist = bench.Dist{}
	}
	v.QueueLast = bench.QueuePoint{At: v.Now, Waiting: 3, Running: 61}
	m := &v.Server.ServerMetrics
	m.GenRate, m.PromptRate, m.ReqRate = bench.Gauge{V: 2710.4, Known: true}, bench.Gauge{V: 880, Known: true}, bench.Gauge{V: 4.42, Known: true}
	m.Total = &bench.ServerTotals{Span: 5*time.Minute + 12*time.Second, Scrapes: 624, Failed: 2, Requests: bench.Gauge{V: 1380, Known: true},
		GenTokens: bench.Gauge{V: 845000, Known: true}, PromptTokens: bench.Gauge{V: 274000, Known: true}}
	for i := range v.Server.Rows {
		v.Server.Rows[i].Client = bench.Dist{}
		m.Latency = append(m.Latency, v.Server.Rows[i].Server)
	}
	v.P99, v.ServerP99 = nil, serverTrend(v)
}

// serverTrend is a minute of the server's p99 as bench samples it in watch mode: TTFT, ITL,
// E2E latency and queue (whose p99 fell into its first bucket lately: drawn at its 300 ms
// bound), and nothing for the prefill histogram, which this server does not expose.
func serverTrend(v *bench.View) []bench.Timeline {
	var out []bench.Timeline
	for k, name := range []string{"TTFT", "ITL", "E2E latency", "Queue"} {
		var pts []bench.Point
		for i := 0; i <= 60; i++ {
			t := 30 + float64(i)
			val := []float64{780, 44, 6000, 500}[k] * (1 + 0.3*math.Sin(t/7+float64(k)))
			if name == "Queue" && t >= 75 {
				val = 300
			}
			pts = append(pts, bench.Point{At: time.Duration(t * float64(time.Second)), Value: val})
		}
		out = append(out, timeline(name+" p99", pts))
	}
	return out
}

// tgiWatchView is a watch session's over a server with no TTFT histogram and no token
// counters: the header's rates and the totals say n/a.
func tgiWatchView(v *bench.View) {
	watchView(v)
	v.Header.Remote.Kind, v.Header.Remote.ServerFirsts, v.Header.Device = "tgi", false, "tgi at http://10.0.0.7:8000/v1"
	m := &v.Server.ServerMetrics
	m.Kind, m.GenRate, m.PromptRate, m.KVUsage = "tgi", bench.Gauge{}, bench.Gauge{}, bench.Gauge{}
	m.Total.GenTokens, m.Total.PromptTokens = bench.Gauge{}, bench.Gauge{}
}

// TestWatchPanes: in watch mode the header names the mode and shows the server's throughput,
// and the client-side panes say that they are not measured rather than show zeros.
func TestWatchPanes(t *testing.T) {
	for _, tc := range []struct {
		name  string
		mod   func(*bench.View)
		wants []string
	}{
		{"vllm", watchView, []string{"WATCH vllm", "generation   2710 tok/s", "prompt    880 tok/s", "finished   4.42 req/s", "server queue", "KV 43.8%",
			"server p99 (ms, log scale) · last 60s", "T TTFT 847  I ITL 56.7  E E2E 7353  Q queue ≤300",
			"per-request ITL: not measured", "server · since start · 5:12", "845k",
			"no cold or steady runs: watch mode sends no requests"}},
		{"targets", func(v *bench.View) { // --goodput ttft:200,e2el:3000: the shares within them from the server's histograms
			watchView(v)
			withTargets(v)
		}, []string{"req/s  TTFT≤200 97.3%  E2E≤3000 ≥85.0%", "┈ 200  ┈ 3000"}}, // the p99 chart draws both: the server's E2E latency has a line there
		{"tgi", tgiWatchView, []string{"WATCH tgi", "generation    n/a tok/s", "finished   4.42 req/s", "first tokens: not measured", "KV n/a",
			"the server does not count it"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := testView()
			tc.mod(v)
			m := sized(t, newFakeSession(v), "dark", 140, 45)
			out := ansi.Strip(m.View())
			checkFrame(t, out, 140, 45)
			for _, w := range tc.wants {
				if !strings.Contains(out, w) {
					t.Errorf("frame lacks %q:\n%s", w, out)
				}
			}
			for _, bad := range []string{"cold vs steady", "0.00 tok/s", "NaN", "concurrency", "submit ", "engine keys: set on the server"} {
				if strings.Contains(out, bad) {
					t.Errorf("frame has %q:\n%s", bad, out)
				}
			}
		})
	}
}

// withTargets gives v --goodput ttft:200,e2el:3000 and the server's shares within them.
func withTargets(v *bench.View) {
	v.Header.SLOs = []bench.SLO{{Metric: "ttft", Ms: 200}, {Metric: "e2el", Ms: 3000}}
	for i, l := range v.Server.Latency {
		switch l.Name {
		case "TTFT":
			v.Server.Latency[i].Target, v.Server.Latency[i].Within = 200, bench.Gauge{V: 0.973, Known: true}
		case "E2E latency":
			v.Server.Latency[i].Target, v.Server.Latency[i].Within, v.Server.Latency[i].WithinFloor = 3000, bench.Gauge{V: 0.85, Known: true}, true
		}
	}
}

// TestWatchHeaderNarrow: on a narrow terminal the header's watch line drops the prompt rate,
// then the finished requests, before the shares within the targets or a fleet's finished
// requests are cut off.
func TestWatchHeaderNarrow(t *testing.T) {
	for _, tc := range []struct {
		name      string
		mod       func(*bench.View)
		w         int
		want, not []string
	}{
		{"targets, 80 columns", func(v *bench.View) { watchView(v); withTargets(v) }, 80,
			[]string{"WATCH vllm  generation   2710 tok/s  TTFT≤200 97.3%  E2E≤3000 ≥85.0%"}, []string{"prompt", "finished", "…"}},
		{"targets, 100 columns", func(v *bench.View) { watchView(v); withTargets(v) }, 100,
			[]string{"generation   2710 tok/s  finished   4.42 req/s  TTFT≤200 97.3%  E2E≤3000 ≥85.0%"}, []string{"prompt", "…"}},
		{"targets, 120 columns", func(v *bench.View) { watchView(v); withTargets(v) }, 120,
			[]string{"prompt    880 tok/s  finished   4.42 req/s  TTFT≤200 97.3%  E2E≤3000 ≥85.0%"}, nil},
		{"fleet, 80 columns", fleetView, 80,
			[]string{"WATCH 3 × vllm · 1 not answering  generation   2710 tok/s  finished   4.42 req/s"}, []string{"prompt", "…"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := testView()
			tc.mod(v)
			m := sized(t, newFakeSession(v), "dark", tc.w, 40)
			out := ansi.Strip(m.View())
			checkFrame(t, out, tc.w, 40)
			line := strings.Split(out, "\n")[1]
			for _, w := range tc.want {
				if !strings.Contains(line, w) {
					t.Errorf("header line lacks %q:\n%s", w, line)
				}
			}
			for _, bad := range tc.not {
				if strings.Contains(line, bad) {
					t.Errorf("header line has %q:\n%s", bad, line)
				}
			}
		})
	}
}

// TestWatchTotalsFollow: the server's totals, drawn in the latency pane's place, follow every
// new view (the latency pane's drawing is reused while its client-side figures stay the same,
// and in watch mode they always do).
func TestWatchTotalsFollow(t *testing.T) {
	v := testView()
	watchView(v)
	s := newFakeSession(v)
	m := sized(t, s, "dark", 140, 45)
	if out := ansi.Strip(m.View()); !strings.Contains(out, "845k") {
		t.Fatalf("frame lacks the first totals:\n%s", out)
	}
	nv := *v
	srv := *v.Server
	tot := *srv.Total
	tot.GenTokens = bench.Gauge{V: 912000, Known: true}
	srv.Total = &tot
	nv.Server = &srv
	s.publish(&nv)
	tm, _ := m.Update(tickMsg{id: m.id})
	if out := ansi.Strip(tm.(Model).View()); !strings.Contains(out, "912k") {
		t.Fatalf("the totals pane kept the first view's figures:\n%s", out)
	}
}

// TestWatchServerP99: the p99 pane charts the server's own p99 in watch mode, under a title
// that says so: "no data yet" until a line has two points in the window, and a value that is
// not a number is neither drawn nor printed.
func TestWatchServerP99(t *testing.T) {
	nan := math.NaN()
	one := func(v *bench.View) { // one scrape with observations so far, and a NaN bench never sends
		watchView(v)
		v.ServerP99 = []bench.Timeline{timeline("TTFT p99", []bench.Point{{At: 89 * time.Second, Value: 512}}),
			timeline("ITL p99", []bench.Point{{At: 88 * time.Second, Value: nan}, {At: 89 * time.Second, Value: nan}})}
	}
	none := func(v *bench.View) { watchView(v); v.ServerP99 = nil }
	for _, tc := range []struct {
		name  string
		mod   func(*bench.View)
		wants []string
		bad   []string
	}{
		{"a minute", watchView, []string{"server p99 (ms, log scale) · last 60s", "T TTFT 847", "Q queue ≤300"}, []string{"no data yet"}},
		{"one point", one, []string{"server p99 (ms, log scale)", "server p99: no data yet"}, []string{"T TTFT"}},
		{"no histogram yet", none, []string{"server p99 (ms, log scale)", "server p99: no data yet"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := testView()
			tc.mod(v)
			for _, size := range [][2]int{{140, 45}, {80, 24}} {
				out := ansi.Strip(sized(t, newFakeSession(v), "dark", size[0], size[1]).View())
				checkFrame(t, out, size[0], size[1])
				if size[0] < 100 {
					continue // the narrow frame: only that it draws
				}
				for _, w := range tc.wants {
					if !strings.Contains(out, w) {
						t.Errorf("frame lacks %q:\n%s", w, out)
					}
				}
				for _, b := range append(tc.bad, "NaN", "Inf", "client-side latencies", "p99 latency") {
					if strings.Contains(out, b) {
						t.Errorf("frame has %q:\n%s", b, out)
					}
				}
			}
		})
	}
}
