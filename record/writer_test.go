package record

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"rosetop/bench"
)

// synthSession is a Session publishing a Synth's views, one more each Publish.
type synthSession struct {
	mu   sync.Mutex
	s    *Synth
	v    *bench.View
	done []bench.Action
}

func (f *synthSession) Publish() *bench.View {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.v = f.s.Next()
	return f.v
}

func (f *synthSession) View() *bench.View {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.v
}

func (f *synthSession) Do(a bench.Action) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.done = append(f.done, a)
	if a == bench.ActToggleGraph {
		return "", errors.New("CUDA Graph needs a GPU")
	}
	return "prefill max batch 9", nil
}

func (f *synthSession) Report(w io.Writer) error { _, err := io.WriteString(w, "report\n"); return err }
func (f *synthSession) Close() error             { return nil }

// tapRecording records, through a Tap, a dashboard over a synthetic session of seed.
func tapRecording(t *testing.T, seed uint64) (r *Recorder, src *synthSession, s Session, path string) {
	t.Helper()
	path = filepath.Join(t.TempDir(), "tap.rec")
	r, err := Create(path, Options{Meta: Meta{Command: "dashboard"}})
	if err != nil {
		t.Fatal(err)
	}
	src = &synthSession{s: NewSynth(seed)}
	return r, src, r.Tap(src), path
}

// closeAndReopen closes r and opens what it wrote at path, with its last view.
func closeAndReopen(t *testing.T, r *Recorder, path string) (*Recording, *bench.View) {
	t.Helper()
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	rec, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rec.Close() })
	last, err := rec.NewCursor().View(rec.Frames() - 1)
	if err != nil {
		t.Fatal(err)
	}
	return rec, last
}

// Through a Tap the dashboard's session works as before, and the recording holds the last view
// it read and every key press with its answer, in order; Close leaves no goroutine.
func TestRecorderTap(t *testing.T) {
	defer goleak.VerifyNone(t)
	r, src, s, path := tapRecording(t, 1)
	var last *bench.View
	for i := range 50 {
		src.Publish()
		last = s.View()
		if i == 20 {
			if msg, err := s.Do(bench.ActPrefillBatchUp); msg != "prefill max batch 9" || err != nil {
				t.Fatalf("Do through the tap: %q, %v", msg, err)
			}
		}
		if i == 30 {
			if _, err := s.Do(bench.ActToggleGraph); err == nil {
				t.Fatal("the session's refusal was lost in the tap")
			}
		}
	}
	var sb strings.Builder
	if err := s.Report(&sb); err != nil || sb.String() != "report\n" {
		t.Fatalf("Report through the tap: %q, %v", sb.String(), err)
	}
	rec, got := closeAndReopen(t, r, path)
	if rec.Stop != nil || rec.Frames() == 0 || rec.Length() != last.Now {
		t.Fatalf("stop %v, %d views to %v; want a closed recording ending at the last view read, %v", rec.Stop, rec.Frames(), rec.Length(), last.Now)
	}
	if d := viewDiff(last, got); d != "" {
		t.Fatalf("the last view: %s", d)
	}
	keys := rec.Keys()
	if len(keys) != 2 || !keys[0].OK || keys[0].Text != "prefill max batch 9" || keys[1].OK || keys[1].Text != "CUDA Graph needs a GPU" || keys[0].At > keys[1].At {
		t.Fatalf("key presses %+v", keys)
	}
}

// Through a Tap the recording ends with the session's view at Close, which the dashboard never
// read: what the session filed after the dashboard's last frame, and on closing, is recorded;
// a key pressed before it comes before it.
func TestRecorderTapFinalView(t *testing.T) {
	defer goleak.VerifyNone(t)
	r, src, s, path := tapRecording(t, 4)
	for range 30 {
		src.Publish()
		s.View()
	}
	if _, err := s.Do(bench.ActPrefillBatchUp); err != nil {
		t.Fatal(err)
	}
	var final *bench.View
	for range 3 { // after the last frame drawn: q, then the session closes
		final = src.Publish()
	}
	if err := src.Close(); err != nil {
		t.Fatal(err)
	}
	rec, got := closeAndReopen(t, r, path)
	if rec.Stop != nil || rec.Length() != final.Now || len(rec.Keys()) != 1 || rec.Keys()[0].At > final.Now {
		t.Fatalf("stop %v, %d views to %v, keys %+v; want a closed recording ending at the session's final view, %v, after the key", rec.Stop, rec.Frames(), rec.Length(), rec.Keys(), final.Now)
	}
	if d := viewDiff(final, got); d != "" {
		t.Fatalf("the final view: %s", d)
	}
}

// Sampled (no dashboard reads the views), the recorder takes one every tick until Close, and
// takes the last one at Close.
func TestRecorderSample(t *testing.T) {
	defer goleak.VerifyNone(t)
	path := filepath.Join(t.TempDir(), "sample.rec")
	src := &synthSession{s: NewSynth(2)}
	r, err := Create(path, Options{Meta: Meta{Command: "bench", Tick: time.Millisecond}, Sample: src.View})
	if err != nil {
		t.Fatal(err)
	}
	var last *bench.View
	for range 20 {
		last = src.Publish()
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	rec, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Close()
	if rec.Frames() == 0 || rec.Length() != last.Now || rec.Meta.Tick != time.Millisecond || rec.Meta.Command != "bench" {
		t.Fatalf("%d views to %v, meta %+v; want the last view %v taken at Close", rec.Frames(), rec.Length(), rec.Meta, last.Now)
	}
}

// A recording that cannot be written says so, naming the file: at Create (no such directory)
// and at Close (a write failed: how far it got, here not to the first view).
func TestRecorderErrors(t *testing.T) {
	defer goleak.VerifyNone(t)
	if _, err := Create(filepath.Join(t.TempDir(), "missing", "x.rec"), Options{}); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("Create in a missing directory: %v", err)
	}
	path := filepath.Join(t.TempDir(), "x.rec")
	r, err := Create(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	r.w.f.Close() // the disk goes away under it: every write fails
	src := &synthSession{s: NewSynth(3)}
	r.Offer(src.Publish())
	err = r.Close()
	if err == nil || !strings.Contains(err.Error(), "--record "+path) || !strings.Contains(err.Error(), "no view was recorded") {
		t.Fatalf("Close after a failed write: %v", err)
	}
}

// A recording to a pipe (--record /dev/stdout, a FIFO) is streamed into it: Close has nothing to
// sync and succeeds, and what the reader got replays.
func TestRecorderToFIFO(t *testing.T) {
	dir := t.TempDir()
	fifo, copied := filepath.Join(dir, "rec.fifo"), filepath.Join(dir, "copied.rec")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skip("no FIFOs here:", err)
	}
	r, err := os.OpenFile(fifo, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		t.Fatal(err)
	}
	hold, err := os.OpenFile(fifo, os.O_WRONLY, 0) // the reader meets the end only after Close
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan []byte, 1)
	go func() {
		b, _ := io.ReadAll(r)
		got <- b
	}()
	src := &synthSession{s: NewSynth(3)}
	rec, err := Create(fifo, Options{Meta: Meta{Command: "bench", Tick: time.Millisecond}, Sample: src.View})
	if err != nil {
		t.Fatal(err)
	}
	for range 5 {
		src.Publish()
	}
	err = rec.Close()
	hold.Close()
	if err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := os.WriteFile(copied, <-got, 0o644); err != nil {
		t.Fatal(err)
	}
	r.Close()
	back, err := Open(copied)
	if err != nil {
		t.Fatal(err)
	}
	defer back.Close()
	if back.Frames() == 0 || back.Stop != nil {
		t.Fatalf("%d views, stop %v: want the whole recording", back.Frames(), back.Stop)
	}
}

// A recording replaces the file at its path only once its header is written with the first
// view: a session stopped before (killed while loading, or a model that failed to load) leaves
// the previous recording whole, and one killed after leaves a recording that replays.
func TestCreateKeepsOldUntilFirstView(t *testing.T) {
	defer goleak.VerifyNone(t)
	dir := t.TempDir()
	path, _ := writeSynth(t, dir, 20, 1)
	old, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	same := func(when string) {
		t.Helper()
		got, err := os.ReadFile(path)
		if err != nil || string(got) != string(old) {
			t.Fatalf("%s: the previous recording changed (%d bytes, err %v)", when, len(got), err)
		}
	}

	r, err := Create(path, Options{Meta: Meta{Command: "bench"}})
	if err != nil {
		t.Fatal(err)
	}
	same("before the first view")
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	same("after a session with no view")
	if !r.Empty() {
		t.Fatal("Empty() = false for a session with no view")
	}
	if es, _ := os.ReadDir(dir); len(es) != 1 {
		t.Fatalf("%d entries in the directory, want the recording alone", len(es))
	}

	w, err := newWriter(path, Meta{Command: "bench"})
	if err != nil {
		t.Fatal(err)
	}
	defer w.f.Close()
	w.view(NewSynth(2).Next())
	rec, err := Open(path) // as a kill would leave it
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Close()
	if rec.Frames() != 1 || !errors.Is(rec.Stop, ErrNoEnd) {
		t.Fatalf("after the first view: %d views, stop %v; want 1 and ErrNoEnd", rec.Frames(), rec.Stop)
	}
}
