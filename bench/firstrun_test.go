package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestFirstRunAllFailedStops: a session whose first run (the first warmup, else the first
// measured run) finishes with every request failed stops with an error naming the run and the
// first failure; what ran is printed and exported.
func TestFirstRunAllFailedStops(t *testing.T) {
	cases := []struct {
		name    string
		cfg     Config
		remote  bool
		wantErr string
		report  string // in stdout
	}{
		{"first warmup", testConfig(requests(4, 3), runs(1, 2)), false,
			"warmup 1/1: all 4 requests failed (http 429: 4); first: http 429: Too many requests", "Cold run, not measured: 0 requests and 4 failed in "},
		{"first measured run without warmups", testConfig(requests(4, 3), runs(0, 2)), false,
			"run 1/2: all 4 requests failed (http 429: 4); first: http 429: Too many requests", "Failed: 4 (http 429: 4); first: http 429: Too many requests"},
		{"remote server", testConfig(requests(4, 3), runs(1, 1)), true,
			"warmup 1/1: all 4 requests failed (http 429: 4); first: http 429: Too many requests", "=== warmup 1/1 ==="}, // a rate limit: no hint
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := newFakeProvider()
			p.fails = func(k int) bool { return k < 4 }
			if tc.remote {
				p.remote = testRemote()
			}
			dir := t.TempDir()
			jsonPath, csvPath := filepath.Join(dir, "out.json"), filepath.Join(dir, "out.csv")
			out, _, err := fakeBench(t, context.Background(), p, tc.cfg, Exports{JSONPath: jsonPath, CSVPath: csvPath})
			if err == nil || err.Error() != tc.wantErr || errors.Is(err, context.Canceled) {
				t.Fatalf("err = %v, want %q", err, tc.wantErr)
			}
			if !strings.Contains(out, tc.report) || strings.Contains(out, "2/2 ===") || strings.Contains(out, "\n=== cold start ===") {
				t.Errorf("stdout: want %q and no run after the first:\n%s", tc.report, out)
			}
			var rep struct {
				Runs []struct {
					Label    string
					Requests []struct{ Failure string }
				}
			}
			data, rerr := os.ReadFile(jsonPath)
			if rerr != nil {
				t.Fatalf("--json not written: %v", rerr)
			}
			if err := json.Unmarshal(data, &rep); err != nil {
				t.Fatal(err)
			}
			if len(rep.Runs) != 1 || len(rep.Runs[0].Requests) != 4 || rep.Runs[0].Requests[0].Failure != "http 429" {
				t.Errorf("json runs %+v, want the failed run's 4 requests", rep.Runs)
			}
			if _, err := os.Stat(csvPath); err != nil {
				t.Errorf("--csv not written: %v", err)
			}
		})
	}
}

// TestLaterFailuresDoNotStop: some of the first run's requests failing is reported and the
// session goes on.
func TestLaterFailuresDoNotStop(t *testing.T) {
	p := newFakeProvider()
	p.fails = func(k int) bool { return k < 3 }
	out, _, err := fakeBench(t, context.Background(), p, testConfig(requests(4, 3), runs(1, 2)), Exports{})
	if err != nil {
		t.Fatalf("RunBench: %v", err)
	}
	if !strings.Contains(out, "=== run 2/2 ===") {
		t.Errorf("report lacks run 2/2:\n%s", out)
	}
}

// TestMeasuredRunAllFailed: a measured run after the first run of the session in which every
// request failed (of the server, or of rosetop's engine) does not stop the session: every run
// is reported and exported, then RunBench fails with a line naming each such run.
func TestMeasuredRunAllFailed(t *testing.T) {
	const first = "; first: http 429: Too many requests"
	cases := []struct {
		name     string
		runs     func(*Config)
		fails    func(k int) bool // 4 requests a run: the warmup's are 0 to 3
		failure  error            // nil: HTTP 429
		remote   bool             // a remote server's requests, else rosetop's engine's
		wantErr  string
		measured int // runs reported
	}{
		{"the one measured run, after a warmup", runs(1, 1), func(k int) bool { return k >= 4 }, nil, true,
			"run 1/1: all 4 requests failed (http 429: 4)" + first, 1},
		{"run 2 of 3", runs(1, 3), func(k int) bool { return k >= 8 && k < 12 }, nil, true,
			"run 2/3: all 4 requests failed (http 429: 4)" + first, 3},
		{"runs 2 and 3 of 3, without warmups", runs(0, 3), func(k int) bool { return k >= 4 }, nil, true,
			"run 2/3: all 4 requests failed (http 429: 4)" + first + "\nrun 3/3: all 4 requests failed (http 429: 4)" + first, 3},
		{"the engine's failures", runs(1, 2), func(k int) bool { return k >= 4 && k < 8 }, errors.New("CUDA error: out of memory"), false,
			"run 1/2: all 4 requests failed (error: 4); first: error: CUDA error: out of memory", 2},
		{"a refusal the flags could fix: no hint after a run that worked", runs(1, 1), func(k int) bool { return k >= 4 }, fakeFailure("http 404"), true,
			"run 1/1: all 4 requests failed (http 404: 4); first: http 404: Too many requests", 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := newFakeProvider()
			p.fails, p.failure = tc.fails, tc.failure
			if tc.remote {
				p.remote = testRemote()
			}
			dir := t.TempDir()
			exp := Exports{JSONPath: filepath.Join(dir, "out.json"), CSVPath: filepath.Join(dir, "out.csv"), TracePath: filepath.Join(dir, "trace.jsonl")}
			out, stderr, err := fakeBench(t, context.Background(), p, testConfig(requests(4, 3), tc.runs), exp)
			if err == nil || err.Error() != tc.wantErr || !errors.Is(err, ErrRunFailed) || errors.Is(err, ErrNothingSucceeded) {
				t.Fatalf("err = %v, want %q (ErrRunFailed)", err, tc.wantErr)
			}
			if n := strings.Count(out, "=== streaming benchmark ==="); n != tc.measured || !strings.Contains(out, "\n=== cold start ===") {
				t.Errorf("stdout: %d reports, want %d, and the cold start block:\n%s", n, tc.measured, out)
			}
			var rep struct{ Runs []struct{ Label string } }
			data, rerr := os.ReadFile(exp.JSONPath)
			if rerr != nil {
				t.Fatalf("--json not written: %v", rerr)
			}
			if err := json.Unmarshal(data, &rep); err != nil {
				t.Fatal(err)
			}
			if want := tc.measured + testConfig(tc.runs).WarmupRuns; len(rep.Runs) != want {
				t.Errorf("json: %d runs, want %d", len(rep.Runs), want)
			}
			if _, err := os.Stat(exp.CSVPath); err != nil {
				t.Errorf("--csv not written: %v", err)
			}
			traces := []string{exp.TracePath}
			if tc.measured > 1 {
				traces = traces[:0]
				for k := 1; k <= tc.measured; k++ {
					traces = append(traces, RunTracePath(exp.TracePath, k))
				}
			}
			for _, path := range traces {
				if _, err := os.Stat(path); err != nil {
					t.Errorf("--save-trace: %v", err)
				}
			}
			if strings.Contains(stderr, "all 4 requests failed") {
				t.Errorf("stderr names the failed run, which the error does:\n%s", stderr)
			}
		})
	}
}

// TestMeasuredRunAllFailedKept: with KeepFailedRuns (rosetop sweep's later points) a measured run
// in which every request failed is a result, not an error.
func TestMeasuredRunAllFailedKept(t *testing.T) {
	p := newFakeProvider()
	p.fails = func(k int) bool { return k >= 8 && k < 12 }
	var out, errOut bytes.Buffer
	opts := SessionOptions{Provider: p, Clock: newFakeClock(time.Second), KeepFailedRuns: true}
	if err := RunBench(context.Background(), testConfig(requests(4, 3), runs(1, 3)), opts, Exports{}, &out, &errOut); err != nil {
		t.Fatalf("RunBench: %v", err)
	}
	if !strings.Contains(out.String(), "=== run 3/3 ===") {
		t.Errorf("report lacks run 3/3:\n%s", out.String())
	}
}

// TestMeasuredRunAllFailedInterrupted: Ctrl-C after a measured run in which every request failed
// exits as an interruption, and stderr still names that run.
func TestMeasuredRunAllFailedInterrupted(t *testing.T) {
	p := newFakeProvider()
	p.fails = func(k int) bool { return k >= 4 && k < 8 } // run 1/2
	p.hold = 8                                            // run 2/2's requests wait
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	p.onSubmit = func(k int) {
		if k == 11 {
			cancel()
		}
	}
	_, stderr, err := fakeBench(t, ctx, p, testConfig(requests(4, 3), runs(1, 2)), Exports{})
	if !errors.Is(err, ErrInterrupted) {
		t.Fatalf("err = %v, want ErrInterrupted", err)
	}
	if want := "rosetop: run 1/2: all 4 requests failed (http 429: 4); first: http 429: Too many requests\n"; !strings.Contains(stderr, want) {
		t.Errorf("stderr lacks %q:\n%s", want, stderr)
	}
}

// TestDashboardFirstRunAllFailed: a dashboard session stops the same way: the error is in its
// events and Close returns it.
func TestDashboardFirstRunAllFailed(t *testing.T) {
	p := newFakeProvider()
	p.fails = func(k int) bool { return k < 4 }
	s, err := NewSession(context.Background(), testConfig(requests(4, 3), runs(1, 1)), SessionOptions{Provider: p, Clock: newFakeClock(0)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	done := make(chan error, 1)
	go func() { done <- s.Wait() }()
	var werr error
	select {
	case werr = <-done:
	case <-time.After(20 * time.Second): // a hang turned into a failure: the steady state never ends by itself
		t.Fatal("the session went on after its first run failed")
	}
	want := "warmup 1/1: all 4 requests failed"
	if werr == nil || !strings.HasPrefix(werr.Error(), want) {
		t.Fatalf("Wait = %v, want %q...", werr, want)
	}
	if cerr := s.Close(); cerr == nil || cerr.Error() != werr.Error() {
		t.Errorf("Close = %v, want the session's error", cerr)
	}
	v := s.View()
	last := v.Events[len(v.Events)-1]
	if v.Header.Phase != PhaseDone || last.Kind != LogError || last.Text != werr.Error() || v.Header.Stopped != werr.Error() {
		t.Errorf("phase %v, stopped %q, last event %+v; want done with the error", v.Header.Phase, v.Header.Stopped, last)
	}
}

// TestKeepFailedRuns: with KeepFailedRuns (rosetop sweep's later points) a first run whose every
// request failed is reported like any run and the session goes on.
func TestKeepFailedRuns(t *testing.T) {
	p := newFakeProvider()
	p.fails = func(k int) bool { return k < 4 }
	var out, errOut bytes.Buffer
	opts := SessionOptions{Provider: p, Clock: newFakeClock(time.Second), KeepFailedRuns: true}
	if err := RunBench(context.Background(), testConfig(requests(4, 3), runs(1, 1)), opts, Exports{}, &out, &errOut); err != nil {
		t.Fatalf("RunBench: %v", err)
	}
	if want := "Cold run, not measured: 0 requests and 4 failed in "; !strings.Contains(out.String(), want) || !strings.Contains(out.String(), "Requests: 4\n") {
		t.Errorf("report lacks %q or the measured run:\n%s", want, out.String())
	}
}

// TestFixableByFlags: the stop's hint to check the command line is given only where every
// failure is one it can fix.
func TestFixableByFlags(t *testing.T) {
	for _, c := range []struct {
		failures map[string]int
		want     bool
	}{
		{map[string]int{"http 404": 2}, true},
		{map[string]int{"http 400": 1, "http 401": 1}, true},
		{map[string]int{"http 429": 2}, false},
		{map[string]int{"http 404": 1, "timeout (stall)": 1}, false},
		{map[string]int{"http 500": 2}, false},
		{map[string]int{"connect": 2}, true},
		{map[string]int{"connect": 1, "http 404": 1}, true},
		{nil, false},
	} {
		if got := fixableByFlags(c.failures); got != c.want {
			t.Errorf("%v: %v, want %v", c.failures, got, c.want)
		}
	}
}
