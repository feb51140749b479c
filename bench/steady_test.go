package bench

import (
	"context"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"rosetop/sched"
)

// TestSteadyLoadIsContinuous: after the cold and measured runs the load does not restart in
// bursts: a request is submitted as soon as another finishes, never more than NumRequests in
// flight. The fake engine finishes the first nine requests (a cold run of 4, a measured run of
// 4, the first of the steady state) and holds the rest: back-to-back runs would wait for the
// held ones and submit 12 in all; the steady state refills the finished one's slot at once (a
// 13th), then waits with 4 in flight.
func TestSteadyLoadIsContinuous(t *testing.T) {
	const n = 4
	p := newFakeProvider()
	p.hold = 2*n + 1
	submitted := make(chan int, 64)
	p.onSubmit = func(k int) { submitted <- k }
	s, err := NewSession(context.Background(), testConfig(requests(n, 3), runs(1, 1)), SessionOptions{Provider: p, Clock: newFakeClock(time.Second)})
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.After(20 * time.Second) // turns a hang into a failure
	for k := -1; k < 3*n; {
		select {
		case k = <-submitted:
		case <-deadline:
			t.Fatalf("request %d was never submitted: the steady state does not refill a finished request's slot", 3*n)
		}
	}
	v := s.View()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	close(submitted)
	extra := 0
	for range submitted {
		extra++
	}
	if extra != 0 {
		t.Errorf("%d requests submitted past the %d in flight", extra, n)
	}
	if v.Header.Phase != PhaseLive || v.Header.Run != nil {
		t.Errorf("phase %v, run progress %+v: want the steady state", v.Header.Phase, v.Header.Run)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	last := s.results[len(s.results)-1].sum
	if last.Label != "live 1" || !last.Partial || last.Requests != 1 || last.Cancelled != n {
		t.Errorf("the window cut short: %+v, want live 1 with 1 finished and %d cancelled", last, n)
	}
}

// TestSteadyWindows: every NumRequests finished requests of the steady state are a window, a
// run of the current engine.
func TestSteadyWindows(t *testing.T) {
	p := newFakeProvider()
	published := make(chan struct{}, 1)
	s, err := NewSession(context.Background(), testConfig(requests(4, 3), runs(1, 1)), SessionOptions{Provider: p, Clock: newFakeClock(time.Second), onPublish: func() {
		select {
		case published <- struct{}{}:
		default:
		}
	}})
	if err != nil {
		t.Fatal(err)
	}
	v := waitFor(t, s, published, "five steady windows", func(v *View) bool { return v.Live.Windows >= 5 })
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	windows := 0
	for _, r := range s.results {
		if strings.HasPrefix(r.sum.Label, "live ") && !r.sum.Partial {
			windows++
			if r.sum.Requests != 4 || !r.live || r.engine != 1 {
				t.Errorf("%s: %d requests (live %v, engine %d), want a window of 4", r.sum.Label, r.sum.Requests, r.live, r.engine)
			}
		}
	}
	if windows < 5 || v.Cold == nil || v.Compare[0].Ratio != v.Compare[0].Ratio {
		t.Errorf("%d windows, cold %v, compare %+v", windows, v.Cold, v.Compare)
	}
}

// TestKeepBoundsALongSession: a dashboard session keeps its planned runs whole and bounds its
// steady windows (summaries past maxResults, records past maxKeptRecords); bench keeps all.
func TestKeepBoundsALongSession(t *testing.T) {
	reqs := make([]RequestResult, 1000)
	for _, headless := range []bool{false, true} {
		s := &Session{opts: SessionOptions{KeepRecords: true, headless: headless}}
		s.keep(&runResult{sum: Summary{Label: "warmup 1/1", Warmup: true}, reqs: reqs})
		s.keep(&runResult{sum: Summary{Label: "run 1/1"}, reqs: reqs})
		for i := range 600 {
			s.keep(&runResult{sum: Summary{Label: "live"}, reqs: reqs, live: true})
			if !headless && (len(s.results) > maxResults || s.kept > maxKeptRecords) {
				t.Fatalf("after %d windows: %d results, %d records", i+1, len(s.results), s.kept)
			}
		}
		if headless {
			if len(s.results) != 602 || s.kept != 602_000 || s.dropped != 0 {
				t.Errorf("bench dropped runs: %d results, %d records", len(s.results), s.kept)
			}
			continue
		}
		if s.results[0].reqs == nil || s.results[1].reqs == nil || s.results[1].sum.Label != "run 1/1" {
			t.Error("a planned run lost its records or its place")
		}
		last := s.results[len(s.results)-1]
		if last.reqs == nil || !s.results[2].recordsDropped || s.dropped != 602-maxResults || s.filed != 602 {
			t.Errorf("newest window records %v, oldest kept window dropped %v, %d dropped, %d filed", last.reqs != nil, s.results[2].recordsDropped, s.dropped, s.filed)
		}
	}
}

// TestDashboardExport: a dashboard session asked for --json/--csv keeps its runs' records and
// writes them on demand: the cold run, the measured runs and the steady windows.
func TestDashboardExport(t *testing.T) {
	p := newFakeProvider()
	published := make(chan struct{}, 1)
	s, err := NewSession(context.Background(), testConfig(requests(4, 3), runs(1, 1)), SessionOptions{Provider: p, Clock: newFakeClock(time.Second), KeepRecords: true,
		onPublish: func() {
			select {
			case published <- struct{}{}:
			default:
			}
		}})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, s, published, "two steady windows", func(v *View) bool { return v.Live.Windows >= 2 })
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	exp := Exports{JSONPath: filepath.Join(dir, "out.json"), CSVPath: filepath.Join(dir, "out.csv"), Settings: map[string]string{"job": "x"}}
	var notes strings.Builder
	if err := s.Export(exp, &notes); err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(notes.String(), "rosetop: wrote "); n != 2 {
		t.Errorf("notes = %q, want a line per file", notes.String())
	}
	data, err := os.ReadFile(exp.JSONPath)
	if err != nil {
		t.Fatal(err)
	}
	var rep struct {
		Runs []struct {
			Label    string
			Engine   int
			Requests []json.RawMessage
		}
	}
	if err := json.Unmarshal(data, &rep); err != nil {
		t.Fatal(err)
	}
	if len(rep.Runs) < 4 || rep.Runs[0].Label != "warmup 1/1" || rep.Runs[1].Label != "run 1/1" || rep.Runs[2].Label != "live 1" {
		t.Fatalf("runs = %+v", rep.Runs)
	}
	for _, r := range rep.Runs {
		if r.Engine != 1 || (len(r.Requests) != 4 && r.Label != rep.Runs[len(rep.Runs)-1].Label) {
			t.Errorf("run %s: engine %d, %d requests", r.Label, r.Engine, len(r.Requests))
		}
	}
	csv, err := os.ReadFile(exp.CSVPath)
	if err != nil || strings.Count(string(csv), "\nlive 1,") != 4 {
		t.Errorf("csv lacks the steady windows' rows (%v)", err)
	}
}

// TestViewMovesWhenIdle: with arrivals paused and nothing stepping, the view still follows the
// clock (the header's time runs, the rate falls to 0) instead of freezing at the last step.
func TestViewMovesWhenIdle(t *testing.T) {
	p := newFakeProvider()
	clock := newFakeClock(time.Second)
	published := make(chan struct{}, 1)
	s, err := NewSession(context.Background(), testConfig(requests(4, 3), runs(1, 1)), SessionOptions{Provider: p, Clock: clock, onPublish: func() {
		select {
		case published <- struct{}{}:
		default:
		}
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	waitFor(t, s, published, "the steady state", func(v *View) bool { return v.Live.Windows >= 1 })
	if _, err := s.Do(ActTogglePause); err != nil {
		t.Fatal(err)
	}
	before := s.View().Header.Elapsed
	clock.advance(10 * time.Second) // nothing steps: the fake engine only moves the clock on submits
	h := s.View().Header
	if h.Elapsed < before+10*time.Second || !h.Paused || h.TokensPerSec != 0 {
		t.Errorf("after 10 s paused: elapsed %v (was %v), paused %v, %v tokens/s", h.Elapsed, before, h.Paused, h.TokensPerSec)
	}
}

// TestStepKnob: the max batch moves by powers of two within the engine's capacity; the prefill
// max batch moves by one, never above the max batch, follows it down, and back up when equal.
func TestStepKnob(t *testing.T) {
	tests := []struct {
		name            string
		max, prefill    int
		acts            []Action
		wantMax, wantPf int
		wantErr         string
	}{
		{"down to a power of two", 48, 16, []Action{ActMaxBatchDown}, 32, 16, ""},
		{"down drags prefill", 64, 40, []Action{ActMaxBatchDown}, 32, 32, ""},
		{"tied goes down and up together", 64, 64, []Action{ActMaxBatchDown, ActMaxBatchDown, ActMaxBatchUp}, 32, 32, ""},
		{"untied prefill stays", 16, 4, []Action{ActMaxBatchUp}, 32, 4, ""},
		{"up stops at capacity", 64, 8, []Action{ActMaxBatchUp}, 96, 8, ""},
		{"at capacity", 96, 8, []Action{ActMaxBatchUp}, 96, 8, "capacity, 96"},
		{"down to one", 2, 2, []Action{ActMaxBatchDown}, 1, 1, ""},
		{"not below one", 1, 1, []Action{ActMaxBatchDown}, 1, 1, "already 1"},
		{"prefill up to max", 8, 7, []Action{ActPrefillBatchUp}, 8, 8, ""},
		{"prefill not above max", 8, 8, []Action{ActPrefillBatchUp}, 8, 8, "} raises that first"},
		{"prefill not below one", 8, 1, []Action{ActPrefillBatchDown}, 8, 1, "already 1"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := &Session{knobs: sched.Config{MaxBatch: tc.max, PrefillMaxBatch: tc.prefill, Policy: sched.Mixed}, info: ServerInfo{MaxBatch: 96}}
			var err error
			for _, a := range tc.acts {
				if _, err = s.stepKnob(a); err != nil {
					break
				}
			}
			if k := s.knobs; k.MaxBatch != tc.wantMax || k.PrefillMaxBatch != tc.wantPf {
				t.Errorf("max %d prefill %d, want %d %d", k.MaxBatch, k.PrefillMaxBatch, tc.wantMax, tc.wantPf)
			}
			if (err == nil) != (tc.wantErr == "") || (err != nil && !strings.Contains(err.Error(), tc.wantErr)) {
				t.Errorf("err = %v, want %q", err, tc.wantErr)
			}
		})
	}
}

// TestSummaryTable: the table a dashboard prints on quit has, per engine, the cold run, the
// steady median and the last window, the failed requests by cause, and a window cut short with
// the figures of what finished in it.
func TestSummaryTable(t *testing.T) {
	sum := func(label string, warmup, partial bool, ttft float64, n int) Summary {
		d := Dist{P50: ttft / 2, P99: ttft, N: n}
		return Summary{Label: label, Warmup: warmup, Partial: partial, Requests: n, Cancelled: 64 - n, TTFT: d, TPOT: d, ITL: d, Throughput: 1000 / ttft, Wall: time.Second}
	}
	hdr := reportHeader{Model: "m", DeviceDetail: "cpu (2 threads)", Paged: true}
	results := []*runResult{
		{hdr: hdr, engine: 1, sum: sum("warmup 1/1", true, false, 40, 64)},
		{hdr: hdr, engine: 1, sum: sum("run 1/1", false, false, 10, 64)},
		{hdr: hdr, engine: 1, live: true, sum: sum("live 1", false, false, 30, 64)},
		{hdr: hdr, engine: 1, live: true, sum: sum("live 2", false, false, 20, 64)},
		{hdr: hdr, engine: 1, live: true, sum: sum("live 3", false, true, 20, 3)},
	}
	results[4].sum.CutTokens, results[4].sum.CutTTFT = 1234, Dist{P50: 4, P99: 9, N: 61}
	results[3].sum.Failed, results[3].sum.Failures = 2, map[string]int{"http 429": 2}
	results[4].sum.Failed, results[4].sum.Failures = 1, map[string]int{"http 429": 1}
	got := strings.Join(summaryTable(results, 0, nil, 95*time.Second), "\n")
	for _, want := range []string{
		"=== rosetop session: 1m35s, 1 engine(s) ===",
		"engine 1: m on cpu (2 threads), paged attention on, CUDA Graph off",
		"  cold (warmup 1/1)              64     20.00     40.00",
		"  steady (median of 3)          192     10.00     20.00     10.00     20.00        50",
		"  last (live 2)                  64     10.00     20.00",
		"  failed: 3 (http 429: 3)",
		"  cut short (live 3)              3     10.00     20.00     10.00     20.00        50",
		"  cut short (live 3): 3 finished, 62 cancelled after 1234 tokens (61 had started: TTFT p50 4.00, p99 9.00 ms)",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("table lacks %q:\n%s", want, got)
		}
	}
}

// TestRunProgress: a planned run's progress has an ETA from its token or request rate.
func TestRunProgress(t *testing.T) {
	rs := &runState{n: 4, maxTokens: 256, start: time.Second, tokens: 64, records: map[sched.RequestID]*sched.Record{1: {}}}
	p := rs.status(5 * time.Second)
	if p.Finished != 1 || p.MaxTokens != 256 || p.Elapsed != 4*time.Second || p.ETA != 12*time.Second {
		t.Errorf("progress %+v, want 1/4 finished, 64/256 tokens in 4 s: 12 s left", p)
	}
	// Long prompts, short outputs: one token after a long prefill gives no estimate; then the
	// finished requests' rate gives one where the tokens' would say hours.
	rs = &runState{n: 100, maxTokens: 400, start: 0, tokens: 1, records: map[sched.RequestID]*sched.Record{}}
	if p := rs.status(10 * time.Second); p.ETA != 0 {
		t.Errorf("one token of 400 in 10 s: ETA %v, want none yet", p.ETA)
	}
	rs.tokens, rs.records[1], rs.records[2] = 3, &sched.Record{}, &sched.Record{}
	if p := rs.status(10 * time.Second); p.ETA != 490*time.Second {
		t.Errorf("2 of 100 requests in 10 s (3 of 400 tokens): ETA %v, want 490 s", p.ETA)
	}
	if (*runState)(nil).status(0) != nil {
		t.Error("no run: progress not nil")
	}
}

// TestGraphOnCPUNotedOnce: asking for CUDA Graphs on an engine that runs on the CPU is said once
// (stderr and the events), not at every engine rebuild.
func TestGraphOnCPUNotedOnce(t *testing.T) {
	var progress strings.Builder
	published := make(chan struct{}, 1)
	cfg := testConfig(requests(4, 3), runs(1, 1), func(c *Config) { c.Engine.CUDAGraph = true })
	s, err := NewSession(context.Background(), cfg, SessionOptions{Provider: newFakeProvider(), Clock: newFakeClock(time.Second), Progress: &progress,
		onPublish: func() {
			select {
			case published <- struct{}{}:
			default:
			}
		}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.Do(ActRestart); err != nil {
		t.Fatal(err)
	}
	waitFor(t, s, published, "the second engine", func(v *View) bool { return v.Cold != nil && strings.Contains(v.Cold.Label, "engine 2") })
	if n := strings.Count(progress.String(), "CUDA Graphs (--cuda-graph) are off"); n != 1 {
		t.Errorf("noted %d times on stderr: %q", n, progress.String())
	}
}

// TestGraphNotNotedForRemote: a job's CUDA Graph preset means nothing against a remote server
// (its own engine decides), so no note says graphs are off on it.
func TestGraphNotNotedForRemote(t *testing.T) {
	p := newFakeProvider()
	p.remote = testRemote()
	cfg := testConfig(requests(4, 3), runs(1, 1), func(c *Config) { c.Engine.CUDAGraph = true })
	_, stderr, err := fakeBench(t, context.Background(), p, cfg, Exports{})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(stderr, "CUDA Graph") {
		t.Errorf("a remote session notes CUDA Graphs on stderr:\n%s", stderr)
	}
}

// TestColdSlower: the cold-vs-steady ratio says which way it goes: above 1 is slower for a
// latency, below 1 is slower for a throughput.
func TestColdSlower(t *testing.T) {
	tests := []struct {
		name   string
		ratio  float64
		higher bool
		want   int
	}{
		{"latency up", 2.86, false, 1},
		{"latency down", 0.5, false, -1},
		{"throughput down", 0.66, true, 1},
		{"throughput up", 1.5, true, -1},
		{"within 2%", 1.01, false, 0},
		{"no data", math.NaN(), false, 0},
	}
	for _, tc := range tests {
		if got := (Comparison{Ratio: tc.ratio, HigherIsBetter: tc.higher}).ColdSlower(); got != tc.want {
			t.Errorf("%s: %d, want %d", tc.name, got, tc.want)
		}
	}
}

// TestLongRunNoted: a few seconds into a planned run that will take minutes, the dashboard's
// events say so once, with what makes runs shorter.
func TestLongRunNoted(t *testing.T) {
	s := &Session{live: newLiveState(30 * time.Second), clock: newFakeClock(0), cfg: testConfig(requests(64, 256)), info: ServerInfo{DeviceDetail: "cpu (2 threads)"}, wl: &workload{maxNew: 256}}
	rs := &runState{n: 64, maxTokens: 64 * 256, info: runInfo{Label: "warmup 1/1"}, records: map[sched.RequestID]*sched.Record{}}
	for i, at := range []time.Duration{time.Second, 4 * time.Second, 8 * time.Second} {
		rs.tokens = 64 * (i + 1) // 64 tokens every few seconds: 16384 take minutes
		s.noteLongRun(rs, at)
	}
	ev := s.live.events.slice()
	if len(ev) != 1 || !strings.Contains(ev[0].Text, "warmup 1/1 will take about ") || !strings.Contains(ev[0].Text, "--num-requests") {
		t.Errorf("events = %+v, want one note", ev)
	}
}

// TestSummarizeCutShort: a run cut short counts what its cancelled requests did: the tokens
// they produced and the TTFT of those that had started.
func TestSummarizeCutShort(t *testing.T) {
	done := fakeRequest(1, 0, 4, time.Millisecond)
	started := &sched.Record{ID: 2, Reason: sched.FinishCancelled, Output: make([]int32, 5),
		Times: sched.Times{SubmitStart: time.Millisecond, FirstToken: 4 * time.Millisecond}}
	queued := &sched.Record{ID: 3, Reason: sched.FinishCancelled, Times: sched.Times{SubmitStart: time.Millisecond}}
	s := summarize(runInfo{Label: "warmup 1/1", Partial: true}, []RequestResult{*done, {Record: started}, {Record: queued}})
	if s.Requests != 1 || s.Cancelled != 2 || s.CutTokens != 5 || s.CutTTFT.N != 1 || s.CutTTFT.P50 != 3 {
		t.Errorf("summary %+v: want 1 finished, 2 cancelled, 5 tokens, one TTFT of 3 ms", s)
	}
}

// TestWindowWallStartsAtThePreviousWindow: under a continuous load a window's requests were in
// flight alongside the previous window's, so its wall clock (and its throughput and request rate)
// starts where that window ended, not at its own first submit; after an idle gap it starts at
// its first submit.
func TestWindowWallStartsAtThePreviousWindow(t *testing.T) {
	s := &Session{cfg: testConfig(requests(2, 10)), live: newLiveState(time.Minute), clock: newFakeClock(time.Second)}
	g := &generation{index: 1}
	msAt := func(v int) time.Duration { return time.Duration(v) * time.Millisecond }
	finish := func(submit, done int) {
		s.addToWindow(g, RequestResult{Record: &sched.Record{Reason: sched.FinishLength, Output: make([]int32, 10),
			Times: sched.Times{SubmitStart: msAt(submit), FirstToken: msAt(submit + 1), Finished: msAt(done)}}}, windowLive)
	}
	finish(0, 10)
	finish(5, 20) // live 1: from its first submit, 0-20 ms
	finish(12, 30)
	finish(18, 40) // live 2: submitted during live 1, filed from live 1's end: 20-40 ms
	finish(100, 110)
	finish(105, 120) // live 3: after an idle gap, from its first submit: 100-120 ms
	want := []time.Duration{msAt(20), msAt(20), msAt(20)}
	if len(s.results) != len(want) {
		t.Fatalf("%d windows filed, want %d", len(s.results), len(want))
	}
	for i, r := range s.results {
		if r.sum.Wall != want[i] || r.sum.Throughput != 20/want[i].Seconds() {
			t.Errorf("%s: wall %v, %.0f tok/s; want %v, %.0f tok/s", r.sum.Label, r.sum.Wall, r.sum.Throughput, want[i], 20/want[i].Seconds())
		}
	}
}

// TestSteadyCostsCounted: one-time costs paid in the steady state (a graph captured for a new
// step shape, here one a request) are counted in the View, not logged a line each; those of the
// cold and measured runs are logged.
func TestSteadyCostsCounted(t *testing.T) {
	p := newFakeProvider()
	p.captures = true
	s, published := newFakeSession(t, p, testConfig(requests(4, 3), runs(1, 1)))
	v := waitFor(t, s, published, "three steady windows", func(v *View) bool { return v.Live.Windows >= 3 })
	logged := 0
	for _, e := range v.Events {
		if e.Kind == LogCapture && strings.HasPrefix(e.Text, "graph capture") {
			logged++
		}
	}
	// 8 requests before the steady state (a cold run and a measured run of 4); 12 finished in
	// three windows, of which at most 4 were submitted before their entries were seen.
	if logged > 8 || v.Live.Costs < 8 || v.Live.CostTook != time.Duration(v.Live.Costs)*time.Millisecond {
		t.Errorf("%d captures logged, %d counted (%v); want at most 8 logged (before the steady state) and at least 8 counted",
			logged, v.Live.Costs, v.Live.CostTook)
	}
}
