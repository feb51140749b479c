package bench

import (
	"context"
	"encoding/csv"
	"errors"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"rosetop/internal/benchcheck"
	"rosetop/sched"
)

func testRemote() *RemoteInfo {
	return &RemoteInfo{Endpoint: "http://h:8000/v1", API: "completions", Kind: "vllm"}
}

// TestRemoteRecordsUnknownParts: a record without the server's inner times has TTFT, TPOT, ITL
// and latency, and n/a for the parts a client cannot see, never a difference with zero.
func TestRemoteRecordsUnknownParts(t *testing.T) {
	msd := func(x float64) time.Duration { return time.Duration(x * 1e6) }
	rec := &sched.Record{Reason: sched.FinishLength, Output: make([]int32, 4), Times: sched.Times{
		SubmitStart: msd(10), FirstToken: msd(20), Tokens: []time.Duration{msd(20), msd(26)}, Finished: msd(26),
	}, Stream: &sched.StreamRecord{ChunkTokens: []int{1, 3}, TokenSource: "usage"}}
	m := metricsOf(&RequestResult{Record: rec})
	if m.HasSubmit || m.HasAdmit || m.TTFT != 10 || m.Latency != 16 || m.TPOT != 2 || !slices.Equal(m.ITL, []float64{6}) ||
		!m.HasTokenGaps || !slices.Equal(m.TokenGaps, []float64{2, 2, 2}) {
		t.Errorf("metrics = %+v", m)
	}
	s := summarize(runInfo{}, []RequestResult{{Record: rec}})
	for name, d := range map[string]Dist{"add_request": s.AddRequest, "tokenize": s.Tokenize, "queue wait": s.QueueWait, "prefill": s.PrefillFirst} {
		if d.N != 0 {
			t.Errorf("%s has %d samples from a record that does not show it", name, d.N)
		}
	}
	if s.TTFT.N != 1 || s.TokenGap.N != 3 || s.TokenSources["usage"] != 1 {
		t.Errorf("summary %+v", s)
	}
}

func TestTokenGaps(t *testing.T) {
	ms := func(xs ...float64) []time.Duration {
		out := make([]time.Duration, len(xs))
		for i, x := range xs {
			out[i] = time.Duration(x * 1e6)
		}
		return out
	}
	cases := []struct {
		name   string
		at     []time.Duration
		counts []int
		want   []float64
		ok     bool
	}{
		{"one token a chunk", ms(1, 3, 6), []int{1, 1, 1}, []float64{2, 3}, true},
		{"a chunk of three", ms(1, 7), []int{1, 3}, []float64{2, 2, 2}, true},
		{"a role chunk of none first", ms(1, 2, 4), []int{0, 1, 2}, []float64{1, 1}, true},
		{"an empty chunk between", ms(1, 2, 5), []int{1, 0, 2}, []float64{2, 2}, true},
		{"one count unknown", ms(1, 2), []int{1, -1}, nil, false},
		{"counts do not match the chunks", ms(1, 2), []int{1}, nil, false},
		{"counts past the outputs", ms(1, 2, 3), []int{1, 4, 2}, nil, false},
		{"a huge count", ms(1, 2), []int{1, 1 << 62}, nil, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := tokenGaps(tc.at, tc.counts, 6)
			if ok != tc.ok || !slices.Equal(got, tc.want) {
				t.Errorf("tokenGaps = %v, %v; want %v, %v", got, ok, tc.want, tc.ok)
			}
		})
	}
}

// TestFailuresByCause: the report counts failures by their brief name (a remote server's) or
// finish reason, most first; the exports carry each request's cause.
func TestFailuresByCause(t *testing.T) {
	fail := func(err error, reason sched.FinishReason) RequestResult {
		return RequestResult{Record: &sched.Record{Reason: reason, Err: err}}
	}
	reqs := []RequestResult{
		fail(fakeFailure("http 429"), sched.FinishError), fail(fakeFailure("timeout (stall)"), sched.FinishError),
		fail(errors.New("wrapped: "+string(fakeFailure("x"))), sched.FinishError), fail(fakeFailure("http 429"), sched.FinishError),
		fail(nil, sched.FinishTooLong), {Record: &sched.Record{Reason: sched.FinishCancelled}},
	}
	s := summarize(runInfo{}, reqs)
	lines := strings.Join(reportLines(reportHeader{}, s), "\n")
	if want := "Failed: 5 (http 429: 2, error: 1, timeout (stall): 1, too_long: 1); first: http 429: Too many requests"; !strings.Contains(lines, want) {
		t.Errorf("report lacks %q:\n%s", want, lines)
	}
	if s.Cancelled != 1 {
		t.Errorf("cancelled %d", s.Cancelled)
	}
	if j := toJSONRequest(&reqs[0]); j.Failure != "http 429" || !strings.Contains(j.Error, "Too many requests") {
		t.Errorf("json request %+v", j)
	}
	if j := toJSONRequest(&reqs[5]); j.Failure != "" {
		t.Errorf("a cancelled request has failure %q", j.Failure)
	}
}

// TestFailureText: the report's first failure is one line led by the name it is counted under,
// clipped.
func TestFailureText(t *testing.T) {
	long := strings.Repeat("é", maxFailureText)
	cases := []struct {
		name string
		rec  sched.Record
		want string
	}{
		{"remote failure", sched.Record{Reason: sched.FinishError, Err: fakeFailure("http 404")}, "http 404: Too many requests"},
		{"engine error", sched.Record{Reason: sched.FinishError, Err: errors.New("scheduler: backend failed")}, "error: scheduler: backend failed"},
		{"no error", sched.Record{Reason: sched.FinishTooLong}, "too_long"},
		{"lines and controls folded", sched.Record{Reason: sched.FinishError, Err: errors.New("a\n\tb \x1b[31mc\u202e d")}, "error: a b [31mc d"},
		{"clipped on a rune", sched.Record{Reason: sched.FinishError, Err: errors.New(long)}, "error: " + long[:maxFailureText-len("error: ")-1] + "..."},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := failureText(&tc.rec); got != tc.want {
				t.Errorf("failureText = %q, want %q", got, tc.want)
			}
		})
	}
}

// TestRemoteExports: a remote run's JSON has the chunk counts, token sources and failures, and
// recomputes to every printed number; its CSV leaves the unknown parts empty and names the
// failures.
func TestRemoteExports(t *testing.T) {
	dir := t.TempDir()
	jsonPath, csvPath := filepath.Join(dir, "out.json"), filepath.Join(dir, "out.csv")
	p := newFakeProvider()
	p.remote = testRemote()
	out, _, err := fakeBench(t, context.Background(), p, testConfig(requests(10, 5), runs(1, 2)), Exports{JSONPath: jsonPath, CSVPath: csvPath})
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(jsonPath)
	if err != nil {
		t.Fatal(err)
	}
	if benchcheck.Check(t, out, data) == 0 || !strings.Contains(out, "Token gap p50/p95/p99: 1.") {
		t.Fatalf("report:\n%s", out)
	}
	for _, want := range []string{`"token_gap_ms": {`, `"failures": {`, `"http 429": 2`, `"token_sources": {`, `"chunk_tokens": [`, `"failure": "http 429"`, `"endpoint": "http://h:8000/v1"`} {
		if !strings.Contains(string(data), want) {
			t.Errorf("json lacks %s", want)
		}
	}
	f, err := os.Open(csvPath)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rows, err := csv.NewReader(f).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	col := map[string]int{}
	for i, name := range rows[0] {
		col[name] = i
	}
	for _, row := range rows[1:] {
		if row[col["admitted_ms"]] != "" || row[col["queue_wait_ms"]] != "" || row[col["add_request_ms"]] != "" {
			t.Errorf("a remote request has server-side cells: %v", row)
		}
		switch row[col["reason"]] {
		case "length":
			if row[col["ttft_ms"]] == "" || row[col["token_source"]] != "usage" || row[col["chunks"]] != "3" || row[col["failure"]] != "" {
				t.Errorf("completed row: %v", row)
			}
		case "error":
			if row[col["failure"]] != "http 429" || row[col["ttft_ms"]] != "" {
				t.Errorf("failed row: %v", row)
			}
		default:
			t.Errorf("row reason %q", row[col["reason"]])
		}
	}
}

// TestServerPanel: the panel pairs the server's histograms with the client-side windows of the
// same name, and the difference is client minus server where both have samples.
func TestServerPanel(t *testing.T) {
	l := newLiveState(30 * time.Second)
	now := 40 * time.Second
	for i, v := range []float64{10, 20, 30} {
		l.windows[winTTFT].add(now-time.Duration(i)*time.Second, v)
	}
	l.windows[winTTFT].add(now-31*time.Second, 1000) // out of the window
	l.e2e.add(now, 50)
	l.windows[winITL].add(now, 5)
	nan := math.NaN()
	srvDist := Dist{P50: 15, P95: 18, P99: 19, Mean: 15, Max: nan, N: 7}
	m := &ServerMetrics{Kind: "vllm", Running: Gauge{V: 3, Known: true}, Latency: []ServerLatency{
		{Name: "TTFT", Known: true, Dist: srvDist},
		{Name: "E2E latency", Known: true, Dist: Dist{P50: nan, P95: nan, P99: nan, Mean: nan, Max: nan}},
		{Name: "Queue", Known: true, Dist: srvDist},
		{Name: "Prefill"},
		{Name: "ITL", Known: true, Dist: srvDist, FirstBound: 16}, // p50 in the first bucket, p99 past it
	}}
	p := l.serverPanel(now, m)
	if p.Kind != "vllm" || p.Running.V != 3 || len(p.Rows) != 5 {
		t.Fatalf("panel %+v", p)
	}
	if itl := p.Rows[4]; !math.IsNaN(itl.DiffP50) || itl.DiffP99 != 5-19 {
		t.Errorf("ITL row (server p50 only a bound): %+v", itl)
	}
	ttft, e2e, queue, prefill := p.Rows[0], p.Rows[1], p.Rows[2], p.Rows[3]
	if ttft.Client.N != 3 || ttft.Client.P50 != 20 || ttft.DiffP50 != 5 || math.Abs(ttft.DiffP99-(ttft.Client.P99-19)) > 1e-12 {
		t.Errorf("TTFT row %+v", ttft)
	}
	if e2e.Client.N != 1 || !math.IsNaN(e2e.DiffP50) {
		t.Errorf("E2E row (no server observations in the window) %+v", e2e)
	}
	if queue.Client.N != 0 || !math.IsNaN(queue.DiffP99) || prefill.Server.Known {
		t.Errorf("server-only rows: %+v %+v", queue, prefill)
	}
	if l.serverPanel(now, nil) != nil {
		t.Error("a panel without server metrics")
	}
}

// TestRemoteActions: against a remote server the keys that need rosetop's engine are refused
// with the reason, and nothing restarts; the arrival keys work.
func TestRemoteActions(t *testing.T) {
	p := newFakeProvider()
	p.remote = testRemote()
	p.hold = 1
	s, err := NewSession(context.Background(), testConfig(requests(4, 3)), SessionOptions{Provider: p, Clock: newFakeClock(time.Second)})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, a := range []Action{ActTogglePaged, ActToggleGraph, ActRestart, ActMaxBatchUp, ActMaxBatchDown, ActPrefillBatchUp, ActPrefillBatchDown} {
		msg, err := s.Do(a)
		if !errors.Is(err, ErrRemoteServer) || !strings.Contains(err.Error(), "vllm at http://h:8000/v1") || msg != "" {
			t.Errorf("action %d: %q, %v", a, msg, err)
		}
	}
	for _, a := range []Action{ActIntervalUp, ActToggleSchedule, ActTogglePause} {
		if _, err := s.Do(a); err != nil {
			t.Errorf("action %d refused: %v", a, err)
		}
	}
	if v := s.View(); v.Header.Remote == nil || v.Header.Remote.Kind != "vllm" || v.Header.Device != "vllm at http://h:8000/v1" {
		t.Errorf("header %+v", v.Header)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.built) != 1 {
		t.Errorf("%d servers built: a refused restart restarted", len(p.built))
	}
}
