package record

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"rosetop/bench"
)

// A recording's summaries with NaN or infinite figures (a damaged recording's) print n/a where
// the figure goes in --summary, never NaN or Inf.
func TestSummaryNoNaN(t *testing.T) {
	nan, inf := math.NaN(), math.Inf(1)
	cold := bench.Summary{Label: "cold run (engine 1)", Warmup: true, Requests: 4, TTFT: bench.Dist{P50: nan, P99: inf, N: 4},
		TPOT: bench.Dist{P50: 1, N: 4}, ITL: bench.Dist{P99: math.Inf(-1), N: 4}, Throughput: nan, Wall: time.Second}
	steady := []bench.Summary{
		{Label: "live 1", Requests: 4, TTFT: bench.Dist{P50: 2, P99: 3, N: 4}, TPOT: bench.Dist{P50: nan, N: 4}, Throughput: inf, Wall: time.Second},
		{Label: "live 2", Requests: 4, TTFT: bench.Dist{P50: nan, P99: nan, N: 4}, Throughput: 10, Wall: time.Second},
		{Label: "live 3", Partial: true, Requests: 2, Cancelled: 1, CutTTFT: bench.Dist{P50: nan, P99: inf, N: 2}, TTFT: bench.Dist{P50: 1, P99: 1, N: 2}},
	}
	views := []*bench.View{{Now: time.Second, Cold: &cold, Steady: steady}}
	path := filepath.Join(t.TempDir(), "nan.rec")
	if err := WriteViews(path, Meta{Command: "dashboard"}, views, nil); err != nil {
		t.Fatal(err)
	}
	if s := summaryOf(t, path); strings.Contains(s, "NaN") || strings.Contains(s, "Inf") || !strings.Contains(s, "n/a") {
		t.Fatalf("the summary shows a non-finite figure:\n%s", s)
	}
}

// A recording whose writes fail part way (the disk fills up) says at Close where the recording
// stops: the time of its last whole view, the one a replay ends at, not the view that failed.
func TestWriteErrorStopsAtLastWholeView(t *testing.T) {
	w, path, full := fullDiskWriter(t)
	w.view(&bench.View{Now: 1 * time.Second})
	w.view(&bench.View{Now: 2 * time.Second})
	file := w.f
	w.f = full // the disk is full from here on
	w.view(&bench.View{Now: 3 * time.Second})
	w.view(&bench.View{Now: 4 * time.Second})
	err := w.close()
	file.Close()
	if err == nil || !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("close on a full disk: %v", err)
	}
	rec, oerr := Open(path)
	if oerr != nil {
		t.Fatal(oerr)
	}
	defer rec.Close()
	if rec.Frames() != 2 || rec.Length() != 2*time.Second || !strings.Contains(err.Error(), "the recording stops at 0:02") {
		t.Fatalf("%d views to %v; close says %q; want it to say the recording stops at 0:02, its last whole view", rec.Frames(), rec.Length(), err)
	}
}

// A recording whose first view could not be written says nothing was recorded, not a time.
func TestWriteErrorBeforeFirstView(t *testing.T) {
	w, _, full := fullDiskWriter(t)
	file := w.f
	w.f = full
	w.view(&bench.View{Now: 5 * time.Second})
	err := w.close()
	file.Close()
	if err == nil || strings.Contains(err.Error(), "stops at") || !strings.Contains(err.Error(), "no view was recorded") {
		t.Fatalf("close after the first view failed to write: %v", err)
	}
}

// craftedViews is a recording of views as given, each against the one before, closed cleanly:
// what a writer that kept views out of order wrote.
func craftedViews(t *testing.T, views []*bench.View) string {
	t.Helper()
	b := appendFrame(fileStart(Version), kindMeta, []byte(`{"tool": "crafted"}`))
	var ve viewEncoder
	for _, v := range views {
		var e enc
		ve.encode(&e, v)
		b = appendFrame(b, kindView, e.b)
	}
	b = appendFrame(b, kindEnd, nil)
	path := filepath.Join(t.TempDir(), "crafted.rec")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// A view whose time is before the view before it (two goroutines handed views over in the
// other order) does not break seeking: every view is reached in order, the recording's length
// is its latest time, and the end of the replay shows the last view (the session's final one).
func TestViewBackInTime(t *testing.T) {
	s := time.Second
	for name, nows := range map[string][]time.Duration{
		"middle": {1 * s, 2 * s, 3 * s, 1500 * time.Millisecond, 4 * s},
		"last":   {1 * s, 2 * s, 3 * s, 2500 * time.Millisecond},
	} {
		t.Run(name, func(t *testing.T) {
			var views []*bench.View
			for i, n := range nows {
				views = append(views, &bench.View{Now: n, Header: bench.Header{RunLabel: fmt.Sprint(i)}})
			}
			rec, err := Open(craftedViews(t, views))
			if err != nil {
				t.Fatal(err)
			}
			rp, err := NewReplay(rec, ReplayOptions{Paused: true})
			if err != nil {
				t.Fatal(err)
			}
			defer rp.Close()
			if rec.Stop != nil || rec.Frames() != len(nows) || rec.Length() != slices.Max(nows) {
				t.Fatalf("stop %v, %d views to %v; want %d to %v", rec.Stop, rec.Frames(), rec.Length(), len(nows), slices.Max(nows))
			}
			for i := range nows {
				if got := rec.frameAt(rec.frames[i].now); got < i {
					t.Fatalf("view %d: seeking to its time finds view %d", i, got)
				}
			}
			if _, err := rp.Do(bench.ActReplayEnd); err != nil {
				t.Fatal(err)
			}
			if got, want := rp.View().Header.RunLabel, fmt.Sprint(len(nows)-1); got != want {
				t.Fatalf("the end of the replay shows view %s, want the last, %s", got, want)
			}
		})
	}
}

// The writer never writes a view older than the one it wrote last: its file's views are in
// time order.
func TestWriterDropsOlderView(t *testing.T) {
	s := time.Second
	views := []*bench.View{{Now: 1 * s}, {Now: 3 * s}, {Now: 2 * s}, {Now: 4 * s}}
	path := filepath.Join(t.TempDir(), "w.rec")
	if err := WriteViews(path, Meta{Command: "dashboard"}, views, nil); err != nil {
		t.Fatal(err)
	}
	rec, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Close()
	c := rec.NewCursor()
	var got []time.Duration
	for i := range rec.Frames() {
		v, err := c.View(i)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, v.Now)
	}
	if !slices.Equal(got, []time.Duration{1 * s, 3 * s, 4 * s}) {
		t.Fatalf("views at %v, want 1s 3s 4s", got)
	}
}

// A recording that holds its header and no view (killed between the two writes) says in
// --summary that it holds no view, as the replay does, not that it replays to 0:00.
func TestSummaryNoViews(t *testing.T) {
	b := appendFrame(fileStart(Version), kindMeta, []byte(`{"tool": "rosetop test", "command": "dashboard"}`))
	path := filepath.Join(t.TempDir(), "header.rec")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if s := summaryOf(t, path); strings.Contains(s, "replays") || !strings.Contains(s, "no view") {
		t.Fatalf("the summary of a recording with no view:\n%s", s)
	}
}

// A version number that overflows 64 bits is damage, not a file cut off in its first bytes.
func TestVersionOverflowNotTruncated(t *testing.T) {
	data := append([]byte(magic), bytes.Repeat([]byte{0xff}, 10)...)
	data = append(data, 0x01)
	path := filepath.Join(t.TempDir(), "v.rec")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := Open(path)
	if err == nil || errors.Is(err, ErrTruncated) || !errors.Is(err, ErrCorrupt) {
		t.Fatalf("Open: %v; want ErrCorrupt, not ErrTruncated", err)
	}
}

// notingSession is a synthSession that takes notes for its events pane, as bench.Session does.
type notingSession struct {
	synthSession
	notes []string // guarded by synthSession.mu
}

func (n *notingSession) Note(text string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.notes = append(n.notes, text)
}

// A recording whose write fails (the disk is full) leaves the dashboard running and says so in
// its events pane, once, naming the file; Close still returns the error.
func TestRecorderWriteErrorNoted(t *testing.T) {
	defer goleak.VerifyNone(t)
	path := filepath.Join(t.TempDir(), "x.rec")
	r, err := Create(path, Options{Meta: Meta{Command: "dashboard"}})
	if err != nil {
		t.Fatal(err)
	}
	src := &notingSession{synthSession: synthSession{s: NewSynth(3)}}
	s := r.Tap(src)
	r.w.f.Close() // every write fails from here on
	for range 3 {
		src.Publish()
		s.View()
	}
	if err := r.Close(); err == nil {
		t.Fatal("Close after failed writes: no error")
	}
	src.mu.Lock()
	defer src.mu.Unlock()
	if len(src.notes) != 1 || !strings.Contains(src.notes[0], "--record "+path) {
		t.Fatalf("notes to the dashboard %q; want one naming %s", src.notes, path)
	}
}

// summaryOf is what --summary prints for the recording at path.
func summaryOf(t *testing.T, path string) string {
	t.Helper()
	rec, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Close()
	var out strings.Builder
	if err := WriteSummary(&out, rec); err != nil {
		t.Fatal(err)
	}
	return out.String()
}

// fullDiskWriter is a writer of a recording at path, and /dev/full to swap in for its file.
func fullDiskWriter(t *testing.T) (w *writer, path string, full *os.File) {
	t.Helper()
	full, err := os.OpenFile("/dev/full", os.O_WRONLY, 0)
	if err != nil {
		t.Skip("no /dev/full here:", err)
	}
	t.Cleanup(func() { full.Close() })
	path = filepath.Join(t.TempDir(), "full.rec")
	if w, err = newWriter(path, Meta{Command: "dashboard"}); err != nil {
		t.Fatal(err)
	}
	return w, path, full
}

// TestKeyNeverWaits: a key press never waits for the recording's goroutine, even one held up
// writing (a stalled disk) past the key queue's size; the presses that found it full are written
// as one note after the queued ones.
func TestKeyNeverWaits(t *testing.T) {
	entered, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	path := filepath.Join(t.TempDir(), "keys.rec")
	r, err := Create(path, Options{Meta: Meta{Command: "bench", Tick: time.Millisecond}, Sample: func() *bench.View {
		once.Do(func() {
			close(entered)
			<-release // the goroutine is held up here, as in a write that does not return
		})
		return &bench.View{Now: time.Second}
	}})
	if err != nil {
		t.Fatal(err)
	}
	<-entered
	const presses = 100
	for i := range presses {
		r.Key(time.Second, fmt.Sprintf("key %d", i), nil) // must return: the test hangs otherwise
	}
	close(release)
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	rec, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Close()
	keys := rec.Keys()
	queued := cap(r.keys)
	if len(keys) != queued+1 || keys[queued-1].Text != fmt.Sprintf("key %d", queued-1) ||
		keys[queued].Text != fmt.Sprintf("%d key presses not recorded: the recording fell behind the disk", presses-queued) {
		t.Fatalf("%d key presses recorded, last two %+v; want the %d queued and a note of the %d others", len(keys), keys[max(0, len(keys)-2):], queued, presses-queued)
	}
}
