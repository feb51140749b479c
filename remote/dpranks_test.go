package remote

import (
	"errors"
	"fmt"
	"math"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"rosetop/bench"
)

// vllmEngine is one vLLM engine core's gauges as --data-parallel-size writes them: each
// engine's series labelled engine="i" beside model_name (vllm/v1/metrics/loggers.py,
// PrometheusStatLogger, one label set per engine index).
type vllmEngine struct {
	id               string
	running, waiting float64
	usage            float64
}

// vllmDPPage is a vLLM page of these engines, in their order, with a TTFT histogram per engine.
func vllmDPPage(engines []vllmEngine) string {
	var b strings.Builder
	labels := func(e vllmEngine) string {
		return `model_name="meta-llama/Llama-3.1-8B-Instruct",engine="` + e.id + `"`
	}
	for _, g := range []struct {
		name string
		of   func(vllmEngine) float64
	}{
		{"vllm:num_requests_running", func(e vllmEngine) float64 { return e.running }},
		{"vllm:num_requests_waiting", func(e vllmEngine) float64 { return e.waiting }},
		{"vllm:kv_cache_usage_perc", func(e vllmEngine) float64 { return e.usage }},
	} {
		fmt.Fprintf(&b, "# HELP %s Gauge.\n# TYPE %s gauge\n", g.name, g.name)
		for _, e := range engines {
			fmt.Fprintf(&b, "%s{%s} %s\n", g.name, labels(e), pyFloat(g.of(e)))
		}
	}
	var ttft []pySeries
	for _, e := range engines {
		ttft = append(ttft, pySeries{labels(e), []float64{1, 4, 5}, 0.7})
	}
	b.WriteString(pyHistogram("vllm:time_to_first_token_seconds", []string{"0.1", "1.0", "+Inf"}, ttft...))
	return b.String()
}

// wantRanks checks a snapshot's ranks against want, in order, and its totals against theirs:
// running and waiting their sums, KV usage their mean.
func wantRanks(t *testing.T, s Snapshot, label string, want []DPRank) {
	t.Helper()
	if s.DP == nil {
		t.Fatal("no ranks apart")
	}
	if s.DP.Label != label || s.DP.More != 0 || len(s.DP.Ranks) != len(want) {
		t.Fatalf("ranks by %q, %d (+%d more); want by %q, %d", s.DP.Label, len(s.DP.Ranks), s.DP.More, label, len(want))
	}
	var running, waiting, kv float64
	for i, w := range want {
		if got := s.DP.Ranks[i]; got != w {
			t.Errorf("rank %d: %+v, want %+v", i, got, w)
		}
		running, waiting, kv = running+w.Running.V, waiting+w.Waiting.V, kv+w.KVUsage.V
	}
	kv /= float64(len(want))
	if s.Running != (Value{running, true}) || s.Waiting != (Value{waiting, true}) || !s.KVUsage.Known || math.Abs(s.KVUsage.V-kv) > 1e-12 {
		t.Errorf("totals running %+v waiting %+v KV %+v; want %v %v %v", s.Running, s.Waiting, s.KVUsage, running, waiting, kv)
	}
}

func known(v float64) Value { return Value{v, true} }

// TestSnapshotDPRanksVLLM: a vLLM page of 2 or 4 engines keeps each engine's running, waiting
// and KV usage apart, ordered by engine as a number whatever the page's order; the totals are
// their sum and mean as before, and the histograms still add up.
func TestSnapshotDPRanksVLLM(t *testing.T) {
	tests := []struct {
		name    string
		engines []vllmEngine
		want    []DPRank
	}{
		{
			name:    "2 engines",
			engines: []vllmEngine{{"0", 24, 3, 0.625}, {"1", 16, 0, 0.125}},
			want:    []DPRank{{"0", known(24), known(3), known(0.625)}, {"1", known(16), known(0), known(0.125)}},
		},
		{
			name:    "4 engines, one backing up, written out of order",
			engines: []vllmEngine{{"2", 8, 41, 0.97}, {"0", 8, 0, 0.31}, {"3", 7, 1, 0.3}, {"1", 9, 0, 0.33}},
			want: []DPRank{{"0", known(8), known(0), known(0.31)}, {"1", known(9), known(0), known(0.33)},
				{"2", known(8), known(41), known(0.97)}, {"3", known(7), known(1), known(0.3)}},
		},
		{
			name:    "engine 10 after engine 9",
			engines: []vllmEngine{{"10", 1, 2, 0.5}, {"9", 3, 4, 0.25}},
			want:    []DPRank{{"9", known(3), known(4), known(0.25)}, {"10", known(1), known(2), known(0.5)}},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, err := ParseSnapshot(strings.NewReader(vllmDPPage(tc.engines)), 0)
			if err != nil {
				t.Fatal(err)
			}
			wantRanks(t, s, "engine", tc.want)
			if n := float64(5 * len(tc.engines)); s.TTFT.Count != n {
				t.Errorf("TTFT count %v, want %v", s.TTFT.Count, n)
			}
		})
	}
	// The two-engine page of the other tests: its totals as TestSnapshotVLLM has them.
	s, err := ParseSnapshot(strings.NewReader(vllmPage()), 0)
	if err != nil {
		t.Fatal(err)
	}
	wantRanks(t, s, "engine", []DPRank{{"0", known(24), known(3), known(0.625)}, {"1", known(16), known(0), known(0.125)}})
}

// TestSnapshotDPRanksSGLang: SGLang's replicas are told by dp_rank; the processes of one (its
// tp, pp and ep ranks) are one rank, read once as for the totals.
func TestSnapshotDPRanksSGLang(t *testing.T) {
	q := []float64{1, 2, 2, 2, 2}
	tests := []struct {
		name  string
		ranks []sglangRank
		want  []DPRank
	}{
		{
			name: "--dp 2 --tp 2",
			ranks: []sglangRank{
				{dp: "0", tp: 0, gauges: true, running: 5, waiting: 1, usage: 0.5, queue: q},
				{dp: "0", tp: 1, queue: q},
				{dp: "1", tp: 0, gauges: true, running: 7, waiting: 2, usage: 0.25, queue: q},
				{dp: "1", tp: 1, queue: q},
			},
			want: []DPRank{{"0", known(5), known(1), known(0.5)}, {"1", known(7), known(2), known(0.25)}},
		},
		{
			name: "--tp 4 --dp 4 --enable-dp-attention --enable-metrics-for-all-schedulers",
			ranks: []sglangRank{
				{dp: "3", tp: 3, gauges: true, running: 2, waiting: 9, usage: 0.99, queue: q},
				{dp: "0", tp: 0, gauges: true, running: 6, waiting: 0, usage: 0.4, queue: q},
				{dp: "1", tp: 1, gauges: true, running: 5, waiting: 0, usage: 0.45, queue: q},
				{dp: "2", tp: 2, gauges: true, running: 6, waiting: 1, usage: 0.5, queue: q},
			},
			want: []DPRank{{"0", known(6), known(0), known(0.4)}, {"1", known(5), known(0), known(0.45)},
				{"2", known(6), known(1), known(0.5)}, {"3", known(2), known(9), known(0.99)}},
		},
		{
			name: "--dp 2 --tp 2 --pp 2: each stage's tp_rank 0 logs the gauges; the first stage's is read",
			ranks: []sglangRank{
				{dp: "0", pp: 0, gauges: true, running: 5, waiting: 1, usage: 0.5, queue: q},
				{dp: "0", pp: 1, gauges: true, running: 50, waiting: 10, usage: 0.05, queue: q},
				{dp: "1", pp: 0, gauges: true, running: 7, waiting: 2, usage: 0.25, queue: q},
				{dp: "1", pp: 1, gauges: true, running: 70, waiting: 20, usage: 0.025, queue: q},
			},
			want: []DPRank{{"0", known(5), known(1), known(0.5)}, {"1", known(7), known(2), known(0.25)}},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, err := ParseSnapshot(strings.NewReader(sglangPage(tc.ranks)), 0)
			if err != nil {
				t.Fatal(err)
			}
			wantRanks(t, s, "dp_rank", tc.want)
		})
	}
}

// TestSnapshotOneRank: a page of one data-parallel rank, or of none, keeps no ranks apart.
func TestSnapshotOneRank(t *testing.T) {
	q := []float64{1, 2, 2, 2, 2}
	pages := map[string]string{
		"vllm, engine 0":            vllmDPPage([]vllmEngine{{"0", 3, 1, 0.5}}),
		"vllm, no engine label":     "vllm:num_requests_running{model_name=\"m\"} 3\nvllm:num_requests_waiting{model_name=\"m\"} 1\n",
		"sglang --tp 2":             sglangPage([]sglangRank{{tp: 0, gauges: true, running: 3, queue: q}, {tp: 1, queue: q}}),
		"sglang --tp 2, dp_rank 0":  sglangPage([]sglangRank{{dp: "0", tp: 0, gauges: true, running: 3, queue: q}, {dp: "0", tp: 1, queue: q}}),
		"tgi":                       "tgi_batch_current_size 3\ntgi_queue_size 1\n",
		"llama.cpp":                 "llamacpp:requests_processing 3\nllamacpp:requests_deferred 1\n",
		"vllm, twice one engine":    "vllm:num_requests_running{engine=\"0\",model_name=\"a\"} 3\nvllm:num_requests_running{engine=\"0\",model_name=\"b\"} 1\n",
		"unknown page with engines": "foo{engine=\"0\"} 1\nfoo{engine=\"1\"} 2\n",
	}
	for name, page := range pages {
		s, err := ParseSnapshot(strings.NewReader(page), 0)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if s.DP != nil {
			t.Errorf("%s: ranks apart %+v", name, *s.DP)
		}
	}
}

// TestSnapshotDPRanksPartial: a rank's gauge that the page lacks, or that is not a number, is
// not known for that rank; series without the rank's label are in the totals alone.
func TestSnapshotDPRanksPartial(t *testing.T) {
	page := "vllm:num_requests_running{engine=\"0\"} 4\nvllm:num_requests_running{engine=\"1\"} NaN\n" +
		"vllm:num_requests_running 2\n" +
		"vllm:num_requests_waiting{engine=\"1\"} 5\n" +
		"vllm:gpu_cache_usage_perc{engine=\"0\"} 0.5\nvllm:gpu_cache_usage_perc{engine=\"1\"} 0.25\n"
	s, err := ParseSnapshot(strings.NewReader(page), 0)
	if err != nil {
		t.Fatal(err)
	}
	if s.DP == nil || len(s.DP.Ranks) != 2 {
		t.Fatalf("ranks %+v", s.DP)
	}
	want := []DPRank{{"0", known(4), Value{}, known(0.5)}, {"1", Value{}, known(5), known(0.25)}}
	for i, w := range want {
		if s.DP.Ranks[i] != w {
			t.Errorf("rank %d: %+v, want %+v", i, s.DP.Ranks[i], w)
		}
	}
	if s.Running != known(6) || s.Waiting != known(5) || s.KVUsage != known(0.375) {
		t.Errorf("totals %+v %+v %+v", s.Running, s.Waiting, s.KVUsage)
	}
}

// TestSnapshotDPRanksBound: past maxDPRanks the ranks are counted, not kept; the totals are
// every rank's.
func TestSnapshotDPRanksBound(t *testing.T) {
	const n = maxDPRanks + 44
	var engines []vllmEngine
	for i := n - 1; i >= 0; i-- {
		engines = append(engines, vllmEngine{strconv.Itoa(i), 1, float64(i % 2), 0.5})
	}
	s, err := ParseSnapshot(strings.NewReader(vllmDPPage(engines)), 0)
	if err != nil {
		t.Fatal(err)
	}
	if s.DP == nil || len(s.DP.Ranks) != maxDPRanks || s.DP.More != 44 || cap(s.DP.Ranks) != maxDPRanks {
		t.Fatalf("ranks %d (cap %d), +%d more", len(s.DP.Ranks), cap(s.DP.Ranks), s.DP.More)
	}
	for i, r := range s.DP.Ranks {
		if r.ID != strconv.Itoa(i) {
			t.Fatalf("rank %d is %q", i, r.ID)
		}
	}
	if s.Running != known(n) || s.Waiting != known(n/2) {
		t.Errorf("totals %+v %+v", s.Running, s.Waiting)
	}
}

// TestWatcherDPRanks: the watcher's view carries the newest good scrape's ranks, their
// gauges as the totals'; none while its newest scrape failed, and none once the page has one
// rank.
func TestWatcherDPRanks(t *testing.T) {
	w := &watcher{window: time.Minute}
	parse := func(page string, at time.Duration) Snapshot {
		t.Helper()
		s, err := ParseSnapshot(strings.NewReader(page), at)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	w.publish()
	if w.latest().DP != nil {
		t.Fatal("ranks before a scrape")
	}
	w.add(parse(vllmDPPage([]vllmEngine{{"0", 1, 0, 0.1}, {"1", 2, 7, 0.9}}), time.Second), nil)
	m := w.latest()
	if r := m.DP; r == nil || len(r.Ranks) != 2 || r.Ranks[1] != (bench.DPRank{ID: "1", Running: bg(2), Waiting: bg(7), KVUsage: bg(0.9)}) {
		t.Fatalf("ranks %+v", r)
	}
	if m.Waiting.V != 7 || m.Running.V != 3 || m.KVUsage.V != 0.5 {
		t.Errorf("view's totals %+v", m)
	}
	w.add(Snapshot{}, errors.New("connection refused"))
	if r := w.latest().DP; r != nil {
		t.Errorf("ranks of a failed scrape %+v", r)
	}
	w.add(parse(vllmDPPage([]vllmEngine{{"0", 4, 2, 0.1}, {"1", 2, 0, 0.5}}), 2*time.Second), nil)
	if r := w.latest().DP; r == nil || r.Ranks[0].Waiting != bg(2) {
		t.Fatalf("ranks %+v", r)
	}
	w.add(parse(vllmDPPage([]vllmEngine{{"0", 4, 2, 0.1}}), 3*time.Second), nil)
	if r := w.latest().DP; r != nil {
		t.Errorf("ranks of a page of one %+v", r)
	}
}

// TestDPViewGauges: a rank's gauge that is negative or not finite is not known in the view, as
// the totals' are not; the count of ranks not kept carries over.
func TestDPViewGauges(t *testing.T) {
	r := dpView(&DPRanks{Label: "engine", Ranks: []DPRank{{"0", known(-1), known(math.Inf(1)), known(0.5)}, {"1", Value{}, known(3), known(math.NaN())}}, More: 5})
	if r.More != 5 || len(r.Ranks) != 2 || r.Ranks[0].ID != "0" || r.Ranks[1].ID != "1" {
		t.Fatalf("%+v", r)
	}
	for i, want := range [][3]bool{{false, false, true}, {false, true, false}} { // running, waiting, KV known
		x := r.Ranks[i]
		if got := [3]bool{x.Running.Known, x.Waiting.Known, x.KVUsage.Known}; got != want {
			t.Errorf("rank %d: known %v, want %v (%+v)", i, got, want, x)
		}
	}
	if r.Ranks[0].KVUsage != bg(0.5) || r.Ranks[1].Waiting != bg(3) {
		t.Errorf("values %+v", r.Ranks)
	}
	if dpView(nil) != nil {
		t.Error("ranks of none")
	}
}

func bg(v float64) bench.Gauge { return bench.Gauge{V: v, Known: true} }

// TestWatchDPRanksSession: a watching session over a vLLM server run with two data-parallel
// engines: its views carry each engine's running, waiting and KV use as the page labels them,
// in engine order, beside their totals, and follow the page as it changes. (A failed scrape's
// view has none: TestWatcherDPRanks; a session sends no step while its server fails.)
func TestWatchDPRanksSession(t *testing.T) {
	srv := newPagedServer(t, "m",
		vllmDPPage([]vllmEngine{{"1", 16, 0, 0.125}, {"0", 24, 3, 0.625}}), // engine 1 written first
		vllmDPPage([]vllmEngine{{"0", 2, 0, 0.25}, {"1", 5, 9, 0.75}}))
	p, err := NewProvider(ProviderOptions{Client: Config{BaseURL: srv.URL + "/v1"}, Watch: true, ScrapeEvery: 5 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	sess, steps := startWatch(t, p)
	defer sess.Close()
	v := waitView(t, sess, steps, "the engines apart", func(v *bench.View) bool { return v.Server != nil && v.Server.DP != nil })
	m := v.Server
	want := &bench.DPRanks{Ranks: []bench.DPRank{
		{ID: "0", Running: bg(24), Waiting: bg(3), KVUsage: bg(0.625)},
		{ID: "1", Running: bg(16), Waiting: bg(0), KVUsage: bg(0.125)},
	}}
	if !reflect.DeepEqual(m.DP, want) {
		t.Errorf("ranks %+v, want %+v", m.DP, want)
	}
	if m.Running != bg(40) || m.Waiting != bg(3) || m.KVUsage != bg(0.375) || m.Note != "" || m.Kind != "vllm" {
		t.Errorf("totals running %+v waiting %+v KV %+v, note %q kind %q", m.Running, m.Waiting, m.KVUsage, m.Note, m.Kind)
	}

	srv.phase.Store(1)
	v = waitView(t, sess, steps, "the new page's engines", func(v *bench.View) bool {
		return v.Server.Note == "" && v.Server.DP != nil && v.Server.DP.Ranks[1].Waiting == bg(9)
	})
	if r := v.Server.DP.Ranks; len(r) != 2 || r[0] != (bench.DPRank{ID: "0", Running: bg(2), Waiting: bg(0), KVUsage: bg(0.25)}) || r[1].KVUsage != bg(0.75) {
		t.Errorf("ranks %+v", r)
	}
}

// TestFleetDPRanks: watching a fleet, each member carries its own ranks (one run data parallel,
// one not); the fleet's own figures have none.
func TestFleetDPRanks(t *testing.T) {
	a := newPagedServer(t, "m", vllmDPPage([]vllmEngine{{"0", 8, 0, 0.31}, {"1", 9, 1, 0.33}, {"2", 8, 41, 0.97}, {"3", 7, 0, 0.3}}))
	b := newPagedServer(t, "m", vllmFleetPage(3, 0, 0.3, 50, []float64{0, 0, 100, 100}))
	p, err := NewProvider(ProviderOptions{Client: Config{BaseURL: a.URL + "/v1"}, Watch: true, ScrapeEvery: 5 * time.Millisecond,
		Fleet: []string{b.URL + "/v1"}})
	if err != nil {
		t.Fatal(err)
	}
	sess, steps := startWatch(t, p)
	defer sess.Close()
	v := waitView(t, sess, steps, "a scrape of each", func(v *bench.View) bool {
		return v.Server != nil && len(v.Server.Members) == 2 && v.Server.Members[0].DP != nil && v.Server.Members[1].Total != nil
	})
	m := v.Server
	if r := m.Members[0].DP; len(r.Ranks) != 4 || r.Ranks[2] != (bench.DPRank{ID: "2", Running: bg(8), Waiting: bg(41), KVUsage: bg(0.97)}) {
		t.Errorf("a's ranks %+v", r)
	}
	if m.Members[1].DP != nil || m.DP != nil {
		t.Errorf("ranks of b %+v, of the fleet %+v", m.Members[1].DP, m.DP)
	}
	if m.Waiting != bg(42) || m.Running != bg(35) {
		t.Errorf("fleet waiting %+v running %+v, want 42 and 35", m.Waiting, m.Running)
	}
}
