package remote

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"rosetop/bench"
	"rosetop/record"
)

// TestWatcherRestartsSeen: a watcher counts the server's restarts between good scrapes and keeps
// the newest: when (the good scrape before it and the one that showed it) and what told it, a
// new process start or counts that went down. Counts that grow, a failed scrape, or a new
// process that already counted more than the old one on a page that does not say when its
// process started, show none.
func TestWatcherRestartsSeen(t *testing.T) {
	const t0, t1 = "1.7356896e+09", "1.7356902e+09"
	ttft := func(n float64) []float64 { return []float64{n, n, n, n} }
	for _, tc := range []struct {
		name  string
		pages []string // scraped at 1 s, 2 s, ...; "" down
		want  bench.ServerRestarts
	}{
		{"new process across an outage", restartPages(t0, t1), bench.ServerRestarts{Count: 1, After: 2 * time.Second, At: 4 * time.Second, How: "a new process start time"}},
		{"unseen", restartPages("", ""), bench.ServerRestarts{}},
		{"counts grow", []string{vllmProcessPage(t0, 1, 100, 10, ttft(5), 1), vllmProcessPage(t0, 2, 200, 20, ttft(6), 2)}, bench.ServerRestarts{}},
		{"a counter went down", []string{vllmProcessPage("", 1, 100, 10, ttft(5), 1), vllmProcessPage("", 2, 200, 20, ttft(6), 2), vllmProcessPage("", 0, 50, 5, ttft(6), 2)},
			bench.ServerRestarts{Count: 1, After: 2 * time.Second, At: 3 * time.Second, How: "its counts went down"}},
		{"a histogram went down", []string{vllmProcessPage("", 1, 100, 10, ttft(5), 1), vllmProcessPage("", 1, 100, 10, ttft(2), 0.5)},
			bench.ServerRestarts{Count: 1, After: time.Second, At: 2 * time.Second, How: "its counts went down"}},
		{"twice", []string{vllmProcessPage(t0, 1, 100, 10, ttft(5), 1), vllmProcessPage(t1, 1, 100, 10, ttft(5), 1), vllmProcessPage(t0, 1, 100, 10, ttft(5), 1)},
			bench.ServerRestarts{Count: 2, After: 2 * time.Second, At: 3 * time.Second, How: "a new process start time"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := newPagedServer(t, "m", tc.pages...)
			w, clk := pagedWatcher(t, srv, true, false, time.Minute)
			for i := range tc.pages {
				scrapeAt(t, w, clk, srv, i, time.Duration(i+1)*time.Second)
			}
			if got := w.serverRestarts(); len(got) != 1 || got[0] != tc.want {
				t.Errorf("restarts %+v, want %+v", got, tc.want)
			}
		})
	}
}

// TestWatchFleetRestartEvent: watching two servers, one restarts: the events tell of it once,
// naming it as the servers table does (its host and port) and between which scrapes it came, and
// a chart marker stands at that scrape; a recording of the view keeps both, with no field of its
// own, so that a replay's table shows the restart as the live one does.
func TestWatchFleetRestartEvent(t *testing.T) {
	const t0, t1 = "1.7356896e+09", "1.7356902e+09"
	ttft := []float64{5, 5, 5, 5}
	a := newPagedServer(t, "m", vllmProcessPage(t0, 1, 100, 10, ttft, 1))
	b := newPagedServer(t, "m", vllmProcessPage(t0, 1, 100, 10, ttft, 1), vllmProcessPage(t1, 0, 10, 1, ttft, 1))
	p, err := NewProvider(ProviderOptions{Client: Config{BaseURL: a.URL + "/v1"}, Fleet: []string{b.URL + "/v1"}, Watch: true, ScrapeEvery: ms(5)})
	if err != nil {
		t.Fatal(err)
	}
	sess, steps := startWatch(t, p)
	defer sess.Close()
	waitView(t, sess, steps, "both servers scraped", func(v *bench.View) bool {
		return v.Server != nil && len(v.Server.Members) == 2 && v.Server.Members[0].Total != nil && v.Server.Members[1].Total != nil
	})
	b.phase.Store(1)
	isRestart := func(e bench.LogEvent) bool { return e.Kind == bench.LogRestart }
	v := waitView(t, sess, steps, "a restart event", func(v *bench.View) bool { return slices.ContainsFunc(v.Events, isRestart) })
	// Scrapes go on after it: the restart is told once.
	n := v.Server.Members[1].Total.Scrapes
	v = waitView(t, sess, steps, "more scrapes of the restarted server", func(v *bench.View) bool { return v.Server.Members[1].Total.Scrapes >= n+3 })
	name := strings.TrimPrefix(b.URL, "http://")
	var events []bench.LogEvent
	for _, e := range v.Events {
		if isRestart(e) {
			events = append(events, e)
		}
	}
	if len(events) != 1 || !strings.HasPrefix(events[0].Text, name+" restarted between the scrapes at ") || !strings.HasSuffix(events[0].Text, ": a new process start time") {
		t.Fatalf("restart events %+v, want one naming %s", events, name)
	}
	at := events[0].At
	if !slices.Contains(v.Markers, bench.Marker{At: at, Label: "restart " + name}) {
		t.Errorf("markers %+v, want one at %v for %s", v.Markers, at, name)
	}
	if got := v.LastRestarts(); !slices.Equal(got, []time.Duration{-1, at}) {
		t.Errorf("last restarts %v, want [-1 %v]", got, at)
	}

	path := filepath.Join(t.TempDir(), "watch.rosetop")
	rec, err := record.Create(path, record.Options{})
	if err != nil {
		t.Fatal(err)
	}
	rec.Offer(v)
	if err := rec.Close(); err != nil {
		t.Fatal(err)
	}
	r, err := record.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	got, err := r.NewCursor().View(r.Frames() - 1)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(got.Events, events[0]) || !slices.Equal(got.LastRestarts(), []time.Duration{-1, at}) {
		t.Errorf("replayed: restart events %v, last restarts %v", slices.DeleteFunc(slices.Clone(got.Events), func(e bench.LogEvent) bool { return !isRestart(e) }), got.LastRestarts())
	}
}
