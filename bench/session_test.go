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

func TestUnwritableJSONKeepsReport(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "no", "such", "dir", "out.json")
	csvPath := filepath.Join(dir, "out.csv")
	out, _, err := fakeBench(t, context.Background(), newFakeProvider(), testConfig(requests(3, 2)), Exports{JSONPath: bad, CSVPath: csvPath})
	if err == nil {
		t.Fatal("RunBench with an unwritable --json returned nil")
	}
	if msg := err.Error(); !strings.HasPrefix(msg, "--json "+bad+": ") || strings.Contains(msg, "\n") {
		t.Errorf("error = %q, want one line naming --json", msg)
	}
	if !strings.Contains(out, "Throughput (completion,total):") || !strings.Contains(out, "Requests: 3") {
		t.Errorf("the report was not printed in full:\n%s", out)
	}
	rows, rerr := os.ReadFile(csvPath)
	if rerr != nil {
		t.Fatalf("--csv not written next to a failing --json: %v", rerr)
	}
	if n := strings.Count(string(rows), "\n"); n != 4 {
		t.Errorf("csv has %d lines, want a header and 3 rows", n)
	}
}

func TestCtrlCPrintsWhatFinishedAndLeaksNothing(t *testing.T) {
	p := newFakeProvider()
	p.hold = 3 // the first three requests finish, the rest stay running until cancelled
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		for range 5 { // every request past the third submitted and held
			<-p.held
		}
		cancel() // Ctrl-C while requests are in flight
	}()
	dir := t.TempDir()
	jsonPath := filepath.Join(dir, "out.json")
	out, _, err := fakeBench(t, ctx, p, testConfig(requests(8, 3)), Exports{JSONPath: jsonPath})
	if !errors.Is(err, ErrInterrupted) || !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want ErrInterrupted", err)
	}
	for _, want := range []string{"=== streaming benchmark ===", "Requests: 3", "Interrupted: partial run, 5 requests cancelled"} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q:\n%s", want, out)
		}
	}
	var rep struct {
		Runs []struct {
			Partial  bool
			Requests []struct{ Reason string }
		}
	}
	data, rerr := os.ReadFile(jsonPath)
	if rerr != nil {
		t.Fatal(rerr)
	}
	if err := json.Unmarshal(data, &rep); err != nil {
		t.Fatal(err)
	}
	if len(rep.Runs) != 1 || !rep.Runs[0].Partial || len(rep.Runs[0].Requests) < 4 {
		t.Fatalf("json runs = %+v, want one partial run with its cancelled requests", rep.Runs)
	}
	// goleak (TestMain) checks that no goroutine is left.
}

// TestCtrlCBeforeEverySubmitCountsTheRest: an interruption while the run is still submitting says
// how many requests were never sent, in the report, on stderr and in the JSON.
func TestCtrlCBeforeEverySubmitCountsTheRest(t *testing.T) {
	p := newFakeProvider()
	p.hold = 2 // requests 0 and 1 finish; 2 and 3 stay running until cancelled
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	p.onSubmit = func(k int) {
		if k == 3 {
			cancel() // Ctrl-C after the fourth submit: the submitter stops before the fifth
		}
	}
	jsonPath := filepath.Join(t.TempDir(), "out.json")
	out, stderr, err := fakeBench(t, ctx, p, testConfig(requests(8, 3)), Exports{JSONPath: jsonPath})
	if !errors.Is(err, ErrInterrupted) {
		t.Fatalf("err = %v, want ErrInterrupted", err)
	}
	if want := "Interrupted: partial run, 2 requests cancelled, 4 not sent"; !strings.Contains(out, want) {
		t.Errorf("report lacks %q:\n%s", want, out)
	}
	if want := "2 requests finished, 2 cancelled, 4 not sent"; !strings.Contains(stderr, want) {
		t.Errorf("stderr lacks %q:\n%s", want, stderr)
	}
	var rep struct {
		Runs []struct {
			Summary struct {
				Cancelled int `json:"cancelled"`
				NotSent   int `json:"not_sent"`
			}
		}
	}
	data, rerr := os.ReadFile(jsonPath)
	if rerr != nil {
		t.Fatal(rerr)
	}
	if err := json.Unmarshal(data, &rep); err != nil {
		t.Fatal(err)
	}
	if len(rep.Runs) != 1 || rep.Runs[0].Summary.Cancelled != 2 || rep.Runs[0].Summary.NotSent != 4 {
		t.Fatalf("json runs = %+v, want one run with 2 cancelled and 4 not sent", rep.Runs)
	}
}

// newFakeSession starts a live session on the fake provider; published receives a token after
// every new View.
func newFakeSession(t *testing.T, p *fakeProvider, cfg Config) (s *Session, published chan struct{}) {
	t.Helper()
	return newClockedSession(t, p, newFakeClock(time.Second), cfg)
}

// newClockedSession starts a live session on prov (fakeProvider's servers, maybe wrapped) with
// clk, a fakeClock or one built on it; published receives a token after every new View.
func newClockedSession(t *testing.T, prov Provider, clk Clock, cfg Config) (s *Session, published chan struct{}) {
	t.Helper()
	published = make(chan struct{}, 1)
	notify := func() {
		select {
		case published <- struct{}{}:
		default:
		}
	}
	s, err := NewSession(context.Background(), cfg, SessionOptions{Provider: prov, Clock: clk, onPublish: notify})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return s, published
}

// waitFor waits for published views until cond holds. The fake engine keeps running on its own
// goroutines, so views keep coming; the deadline only turns a hang into a failure.
func waitFor(t *testing.T, s *Session, published <-chan struct{}, what string, cond func(v *View) bool) *View {
	t.Helper()
	deadline := time.After(20 * time.Second)
	for {
		if v := s.View(); cond(v) {
			return v
		}
		select {
		case <-published:
		case <-deadline:
			v := s.View()
			t.Fatalf("timed out waiting for %s (cold %v, %d steady, %+v)", what, v.Cold, len(v.Steady), v.Live)
		}
	}
}

func TestLiveSessionViewAndActions(t *testing.T) {
	p := newFakeProvider()
	s, published := newFakeSession(t, p, testConfig(requests(4, 3), runs(1, 1), func(c *Config) { c.Sched.MaxBatch, c.Sched.PrefillMaxBatch = 8, 4 }))
	v := waitFor(t, s, published, "a cold run and two steady runs", func(v *View) bool { return v.Cold != nil && len(v.Steady) >= 2 })
	if !v.Cold.Warmup || v.Cold.Label != "warmup 1/1" || !strings.HasPrefix(v.Steady[len(v.Steady)-1].Label, "live ") {
		t.Errorf("runs: cold %q steady %q", v.Cold.Label, v.Steady[len(v.Steady)-1].Label)
	}
	if v.Live.Windows == 0 || v.Live.Requests != 4*v.Live.Windows {
		t.Errorf("live counts %+v, want windows of 4 requests", v.Live)
	}
	s.mu.Lock()
	labels := []string{s.results[0].sum.Label, s.results[1].sum.Label, s.results[2].sum.Label}
	s.mu.Unlock()
	if [3]string(labels) != [3]string{"warmup 1/1", "run 1/1", "live 1"} {
		t.Errorf("the first runs are %q, want the cold run, the measured run, then the steady state's windows", labels)
	}
	if len(v.Compare) != 4 || v.Compare[0].Ratio <= 0 || len(v.Latency) != 5 || v.Latency[0].Dist.N == 0 || len(v.Queue) == 0 {
		t.Errorf("view lacks data: compare %+v latency %+v queue %d", v.Compare, v.Latency, len(v.Queue))
	}
	// Every request is in the TTFT window once: from its first token, so at most the 4 of the
	// run in flight are ahead of the TPOT window, which takes them when they finish.
	if ttft, tpot := v.Latency[winTTFT].Dist.N, v.Latency[winTPOT].Dist.N; ttft < tpot || ttft > tpot+4 {
		t.Errorf("TTFT window has %d samples, TPOT %d: a request counted twice or not at all", ttft, tpot)
	}
	if len(v.Ledger) < 2 || v.Header.Model != "fake-gpt2" {
		t.Errorf("ledger %+v header %+v", v.Ledger, v.Header)
	}

	steps := []struct {
		act   Action
		check func(h Header) bool
	}{
		{ActPrefillBatchDown, func(h Header) bool { return h.PrefillMaxBatch == 3 }},
		{ActPrefillBatchUp, func(h Header) bool { return h.PrefillMaxBatch == 4 }},
		{ActMaxBatchDown, func(h Header) bool { return h.MaxBatch == 4 && h.PrefillMaxBatch == 4 }},
		{ActToggleSchedule, func(h Header) bool { return h.Schedule == "absolute" }},
		{ActIntervalUp, func(h Header) bool { return h.IntervalMs == 1 }},
		{ActTogglePause, func(h Header) bool { return h.Paused }},
		{ActTogglePause, func(h Header) bool { return !h.Paused }},
	}
	for _, st := range steps {
		if _, err := s.Do(st.act); err != nil {
			t.Fatalf("Do(%d): %v", st.act, err)
		}
		if h := s.View().Header; !st.check(h) {
			t.Errorf("after Do(%d): header %+v", st.act, h)
		}
	}
	if _, err := s.Do(ActMaxBatchUp); err != nil || s.View().Header.PrefillMaxBatch != 8 {
		t.Fatalf("max batch 4 -> 8: %v; a prefill max batch equal to the max batch follows it up: %+v", err, s.View().Header)
	}
	if _, err := s.Do(ActMaxBatchUp); err == nil {
		t.Error("max batch above the engine's capacity was accepted")
	}
	if _, err := s.Do(ActToggleGraph); !errors.Is(err, ErrNeedsGPU) {
		t.Errorf("CUDA Graph on a CPU engine: err = %v, want ErrNeedsGPU", err)
	}
	msg, err := s.Do(ActTogglePaged)
	if err != nil || !strings.Contains(msg, "restarting engine") {
		t.Fatalf("toggle paged: %q %v", msg, err)
	}
	v = waitFor(t, s, published, "the new engine's cold run", func(v *View) bool {
		return v.Header.Paged && v.Cold != nil && strings.HasPrefix(v.Cold.Label, "cold run (engine 2)")
	})
	p.mu.Lock()
	built := append([]EngineOptions(nil), p.built...)
	p.mu.Unlock()
	if len(built) != 2 || built[0].Paged || !built[1].Paged {
		t.Errorf("engines built = %+v, want paged off then on", built)
	}
	if len(v.Markers) == 0 {
		t.Error("no markers for config changes")
	}
	if h := v.Header; h.MaxBatch != 8 || h.PrefillMaxBatch != 8 || h.Schedule != "absolute" {
		t.Errorf("knobs not kept across the restart: %+v", h)
	}
	var b bytes.Buffer
	if err := s.Report(&b); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"=== rosetop session: ", "engine 1: fake-gpt2", "  cold (warmup 1/1)  ", "  steady (median of ", "  cold run (engine 2)  "} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("summary table lacks %q:\n%s", want, b.String())
		}
	}
	// Only what a person did and cold starts mark the charts; the windows are counted, not logged.
	for _, m := range v.Markers {
		if strings.HasPrefix(m.Label, "live") || strings.HasPrefix(m.Label, "run") || strings.HasPrefix(m.Label, "warmup") {
			t.Errorf("routine run marked on the charts: %q", m.Label)
		}
	}
	for _, e := range v.Events {
		if strings.HasPrefix(e.Text, "live ") && !strings.Contains(e.Text, "interrupted") {
			t.Errorf("routine window logged: %q", e.Text)
		}
	}

}

// TestEveryExportErrorReturned: when every export fails after the run (a disk that filled up),
// each error comes back, joined, and the report is still printed.
func TestEveryExportErrorReturned(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "gone")
	out, _, err := fakeBench(t, context.Background(), newFakeProvider(), testConfig(requests(2, 2)),
		Exports{JSONPath: filepath.Join(dir, "a.json"), CSVPath: filepath.Join(dir, "b.csv")})
	var joined interface{ Unwrap() []error }
	if !errors.As(err, &joined) || !strings.Contains(err.Error(), "--json ") || !strings.Contains(err.Error(), "--csv ") {
		t.Fatalf("err = %v, want both exports' errors", err)
	}
	if !strings.Contains(out, "Requests: 2") {
		t.Errorf("report not printed:\n%s", out)
	}
}

// TestNote: text from outside the session reaches the events pane as one line of error, its
// line breaks and control characters folded, so that it cannot draw over the dashboard.
func TestNote(t *testing.T) {
	p := newFakeProvider()
	s, published := newFakeSession(t, p, testConfig(requests(4, 3), runs(1, 1)))
	s.Note("http: Accept error: accept tcp: too many open files; retrying in 5ms\n\x1b[2Jmore\n")
	v := waitFor(t, s, published, "the note", func(v *View) bool {
		for _, e := range v.Events {
			if strings.Contains(e.Text, "Accept error") {
				return true
			}
		}
		return false
	})
	for _, e := range v.Events {
		if strings.Contains(e.Text, "Accept error") {
			if want := "http: Accept error: accept tcp: too many open files; retrying in 5ms [2Jmore"; e.Kind != LogError || e.Text != want {
				t.Errorf("event %d %q, want %d %q", e.Kind, e.Text, LogError, want)
			}
		}
	}
}
