package bench

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"rosetop/sched"
)

// syncBuffer is a writer a test reads while a session writes to it.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer // guarded by mu
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// meterSession is a session as the meter reads it: run label in progress with finished records
// (failed of them failures) and submitted requests of n, started at 1 s on the clock.
func meterSession(clk Clock, label string, n, finished, failed, submitted int) *Session {
	rs := &runState{n: n, maxTokens: 3 * n, start: time.Second, records: map[sched.RequestID]*sched.Record{}, failed: failed}
	rs.info.Label = label
	for i := range finished {
		rs.records[sched.RequestID(i+1)] = &sched.Record{}
	}
	for i := range submitted {
		rs.ids = append(rs.ids, sched.RequestID(i+1))
	}
	return &Session{clock: clk, cur: rs}
}

// TestMeterDraws: on a terminal the line is drawn in place and erased before any other write and
// when its run ends; a tick that read a run which has since ended, or that comes while another
// write's line is unfinished, draws nothing; elsewhere each tick is a plain line.
func TestMeterDraws(t *testing.T) {
	clk := newFakeClock(3500 * time.Millisecond)
	s := meterSession(clk, "run 2/3", 20, 8, 1, 12)
	const line = "rosetop: run 2/3: 8/20 finished, 12/20 submitted, 1 failed, 2.5s elapsed, ETA 3.8s"

	var w bytes.Buffer
	yes := true
	m := newRunMeter(&w, meterHooks{tty: &yes})
	out := m.guard(&w)
	m.update(s)
	if w.String() != "" {
		t.Fatalf("drew %q before its run started", w.String())
	}
	m.runStarted("run 2/3")
	m.update(s)
	if want := "\r\x1b[K" + line; w.String() != want {
		t.Fatalf("drew %q, want %q", w.String(), want)
	}
	w.Reset()
	out.Write([]byte("=== report ===\n"))
	if want := "\r\x1b[K=== report ===\n"; w.String() != want {
		t.Errorf("a write over a drawn line: %q, want %q", w.String(), want)
	}
	w.Reset()
	out.Write([]byte("Requests: "))
	m.update(s)
	out.Write([]byte("8\n"))
	m.update(s)
	if want := "Requests: 8\n\r\x1b[K" + line; w.String() != want {
		t.Errorf("a tick within another write's line: %q, want %q", w.String(), want)
	}
	w.Reset()
	m.runEnded()
	m.update(s) // read the run before it ended
	if want := "\r\x1b[K"; w.String() != want {
		t.Errorf("after the run ended: %q, want %q (erased, nothing drawn)", w.String(), want)
	}

	w.Reset()
	no := false
	m = newRunMeter(&w, meterHooks{tty: &no})
	m.runStarted("run 2/3")
	m.update(s)
	if want := line + "\n"; w.String() != want {
		t.Errorf("not a terminal: %q, want %q", w.String(), want)
	}
}

// TestMeterFits: a line wider than the terminal is cut to one column less, so that erasing it
// leaves nothing of it (a wrapped line's first row would stay).
func TestMeterFits(t *testing.T) {
	var w bytes.Buffer
	m := &runMeter{w: &w, tty: true, width: func() int { return 40 }}
	m.runStarted("warmup 1/1")
	m.update(meterSession(newFakeClock(2*time.Second), "warmup 1/1", 4, 1, 0, 2))
	if want := "\r\x1b[K" + "rosetop: warmup 1/1: 1/4 finished, 2/4 "; w.String() != want {
		t.Errorf("drew %q, want %q", w.String(), want)
	}
}

// TestMeterLongRunNote: a run that will take minutes says once, after progressEvery, which flags
// make it shorter.
func TestMeterLongRunNote(t *testing.T) {
	var w bytes.Buffer
	no := false
	m := newRunMeter(&w, meterHooks{tty: &no})
	s := meterSession(newFakeClock(time.Second+progressEvery), "run 1/1", 100, 2, 0, 2)
	s.wl = &workload{}
	m.runStarted("run 1/1")
	m.update(s)
	m.update(s)
	note := "rosetop: run 1/1 will take minutes: --num-requests and --max-new-tokens make runs shorter\n"
	if strings.Count(w.String(), note) != 1 || !strings.HasPrefix(w.String(), note) {
		t.Errorf("stderr %q, want the note once, first", w.String())
	}
}

// TestMeterNotATerminal: a writer that is not a terminal (a buffer, a file) gets plain lines.
func TestMeterNotATerminal(t *testing.T) {
	f, err := os.Create(filepath.Join(t.TempDir(), "stderr"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, w := range []io.Writer{&bytes.Buffer{}, f} {
		if m := newRunMeter(w, meterHooks{}); m.tty {
			t.Errorf("%T: taken for a terminal", w)
		}
	}
}

// TestBenchProgress: a headless bench shows its run's progress on stderr on each tick, never on
// stdout; Ctrl-C erases the line before the interruption is reported, and the meter has stopped
// when RunBench returns.
func TestBenchProgress(t *testing.T) {
	for _, tty := range []bool{true, false} {
		t.Run(map[bool]string{true: "terminal", false: "not a terminal"}[tty], func(t *testing.T) {
			p := newFakeProvider()
			p.hold = 2                                   // requests 0 and 1 finish, 2 and 3 wait
			p.fails = func(k int) bool { return k == 1 } // request 1 fails
			clk := &heldClock{fakeClock: newFakeClock(time.Second), sleeping: make(chan time.Duration), wake: make(chan struct{})}
			// A sleep follows each submit (relative schedule); with at most 2 requests in flight,
			// request k is submitted once request k-2's record was filed.
			cfg := testConfig(requests(4, 3), runs(0, 1), func(c *Config) { c.Arrivals.Interval, c.Arrivals.MaxConcurrency = time.Second, 2 })
			tick, ticked := make(chan time.Time), make(chan struct{})
			opts := SessionOptions{Provider: p, Clock: clk, meter: meterHooks{tty: &tty, tick: tick, ticked: func() { ticked <- struct{}{} }}}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			var stdout, stderr syncBuffer
			done := make(chan error, 1)
			go func() { done <- RunBench(ctx, cfg, opts, Exports{}, &stdout, &stderr) }()
			for range 3 {
				within(t, clk.sleeping, "a submit's sleep")
				clk.wake <- struct{}{}
			}
			within(t, clk.sleeping, "the last submit's sleep") // records 0 and 1 are filed
			before := stderr.String()
			tick <- time.Time{}
			within(t, ticked, "the tick")
			line := "rosetop: run 1/1: 2/4 finished, 4/4 submitted, 1 failed, 3s elapsed, ETA 3s"
			drawn := strings.TrimPrefix(stderr.String(), before)
			if want := map[bool]string{true: "\r\x1b[K" + line, false: line + "\n"}[tty]; drawn != want {
				t.Fatalf("tick wrote %q, want %q", drawn, want)
			}
			if stdout.String() != "" {
				t.Errorf("stdout during the run: %q", stdout.String())
			}

			cancel() // Ctrl-C
			if err := within(t, done, "RunBench"); !errors.Is(err, ErrInterrupted) {
				t.Fatalf("RunBench = %v, want ErrInterrupted", err)
			}
			select {
			case tick <- time.Time{}:
				t.Error("a tick was taken after RunBench returned")
			default:
			}
			rest := strings.TrimPrefix(stderr.String(), before+drawn)
			note := "rosetop: run 1/1 interrupted: 1 requests finished, 2 cancelled\n"
			if tty {
				note = "\r\x1b[K" + note
			}
			if !strings.HasPrefix(rest, note) || strings.Contains(rest, "/4 submitted") {
				t.Errorf("stderr after the tick %q, want it to start %q and no progress", rest, note)
			}
			if out := stdout.String(); strings.ContainsAny(out, "\r\x1b") || strings.Contains(out, "/4 submitted") || !strings.Contains(out, "Interrupted: partial run") {
				t.Errorf("stdout has progress in it, or lacks the report:\n%q", out)
			}
		})
	}
}

// progressDraw is one drawn progress line on a terminal, and the erase alone.
var progressDraw = regexp.MustCompile(`\r\x1b\[K(rosetop: (warmup|run) \d+/\d+: \d+/\d+ finished, [^\r\n]*)?`)

// TestBenchProgressSharesTheTerminal: with stdout and stderr on one terminal and a line drawn at
// every submit, the output less the drawn lines is what a bench without progress writes: no
// report line is cut or written over.
func TestBenchProgressSharesTheTerminal(t *testing.T) {
	cfg := testConfig(requests(4, 3), runs(1, 2))
	bench := func(tty bool) (string, int) {
		p := newFakeProvider()
		tick, ticked := make(chan time.Time), make(chan struct{})
		if tty {
			p.onSubmit = func(int) { // the submitter's goroutine: a redraw of the run in flight
				tick <- time.Time{}
				<-ticked
			}
		}
		var both bytes.Buffer // every write goes through the meter, one at a time
		opts := SessionOptions{Provider: p, Clock: newFakeClock(time.Second), meter: meterHooks{tty: &tty, tick: tick, ticked: func() { ticked <- struct{}{} }}}
		if err := RunBench(context.Background(), cfg, opts, Exports{}, &both, &both); err != nil {
			t.Fatal(err)
		}
		return both.String(), len(progressDraw.FindAllString(both.String(), -1))
	}
	plain, n := bench(false)
	if n != 0 {
		t.Fatalf("not a terminal, no tick: %d draws", n)
	}
	drawn, _ := bench(true)
	if lines := strings.Count(drawn, "finished, "); lines != 12 {
		t.Errorf("%d lines drawn, want one at each of the 12 submits:\n%q", lines, drawn)
	}
	if got := progressDraw.ReplaceAllString(drawn, ""); got != plain {
		t.Errorf("output less the progress lines differs:\n--- got\n%s\n--- want\n%s", got, plain)
	}
	// Every drawn line is erased before the next write and at the end.
	for _, m := range progressDraw.FindAllStringIndex(drawn, -1) {
		if end := m[1]; drawn[m[0]:end] != "\r\x1b[K" && !strings.HasPrefix(drawn[end:], "\r\x1b[K") {
			t.Errorf("a drawn line not erased: %q", drawn[m[0]:min(len(drawn), end+40)])
		}
	}
}
