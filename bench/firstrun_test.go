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

// TestLaterFailuresDoNotStop: failures in a later run, or some of the first run's, are reported
// and the session goes on.
func TestLaterFailuresDoNotStop(t *testing.T) {
	cases := []struct {
		name  string
		fails func(k int) bool
		want  string
	}{
		{"a later run all failed", func(k int) bool { return k >= 4 && k < 8 }, "Failed: 4 (http 429: 4); first: http 429: Too many requests"},
		{"the first run partly failed", func(k int) bool { return k < 3 }, "=== run 2/2 ==="},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := newFakeProvider()
			p.fails = tc.fails
			out, _, err := fakeBench(t, context.Background(), p, testConfig(requests(4, 3), runs(1, 2)), Exports{})
			if err != nil {
				t.Fatalf("RunBench: %v", err)
			}
			if !strings.Contains(out, tc.want) || !strings.Contains(out, "=== run 2/2 ===") {
				t.Errorf("report lacks %q or run 2/2:\n%s", tc.want, out)
			}
		})
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
