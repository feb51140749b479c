package record

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"rosetop/bench"
	"rosetop/internal/atomicfile"
)

// Session is what a Recorder taps: the dashboard's Session (tui.Session, bench.Session).
type Session interface {
	View() *bench.View
	Do(a bench.Action) (string, error)
	Report(w io.Writer) error
	Close() error
}

// Options configure a Recorder.
type Options struct {
	Meta Meta // Model and Device, when empty, come from the first view's header
	// Sample, when set, is read every Meta.Tick for views (a session with no dashboard reading
	// them: rosetop bench, rosetop serve); nil until it has a view. Otherwise views come from
	// the dashboard through Tap.
	Sample func() *bench.View
}

// DefaultTick is how often a sampled session's views are recorded: the dashboard's tick.
const DefaultTick = 100 * time.Millisecond

// Recorder appends a session's views and key presses to a recording. Views are handed over
// without waiting (the newest wins) and encoded on the Recorder's goroutine, so the dashboard
// never waits for the disk; key presses are queued and written, and those that find the queue
// full (the disk fell behind) are counted and written as one note. Safe for concurrent use.
type Recorder struct {
	sample func() *bench.View         // immutable; see Options.Sample
	tick   time.Duration              // immutable
	tapped atomic.Pointer[tap]        // set by Tap; read by the goroutine at Close for the final view
	latest atomic.Pointer[bench.View] // the newest view handed over
	wake   chan struct{}              // buffered 1: a view was handed over
	keys   chan KeyPress              // key presses, in order
	lost   atomic.Int64               // key presses that found keys full, not yet noted
	stop   chan struct{}              // closed by Close
	done   chan struct{}              // closed when the goroutine has returned
	once   sync.Once
	w      *writer // owned by the goroutine; read by Close and Empty after done
	err    error   // w.close's; read after done
}

// Create starts a recording at path. It is made beside path and swapped in (atomically) when its
// header is written with the first view, then only appended to, a frame a write: until then,
// and when the session ends without a view (a model that did not load), path keeps what it
// held, and once swapped in it replays up to its last whole frame whenever the process stops.
func Create(path string, opts Options) (*Recorder, error) {
	if opts.Meta.Tick <= 0 {
		opts.Meta.Tick = DefaultTick
	}
	w, err := newWriter(path, opts.Meta)
	if err != nil {
		return nil, err
	}
	r := &Recorder{
		sample: opts.Sample, tick: opts.Meta.Tick, w: w,
		wake: make(chan struct{}, 1), keys: make(chan KeyPress, 64), stop: make(chan struct{}), done: make(chan struct{}),
	}
	go r.loop()
	return r, nil
}

// Offer hands a view over to be recorded; it never blocks. A view equal (the same pointer) to
// the last written is not written again.
func (r *Recorder) Offer(v *bench.View) {
	if v == nil {
		return
	}
	r.latest.Store(v)
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// Key records a key press's result at the session time at.
func (r *Recorder) Key(at time.Duration, msg string, err error) {
	k := KeyPress{At: at, OK: err == nil, Text: msg}
	if err != nil {
		k.Text = err.Error()
	}
	select {
	case r.keys <- k:
	case <-r.done: // closed
	default: // the goroutine is held up writing: the caller does not wait for the disk
		r.lost.Add(1)
	}
}

// Close writes the key presses handed over, the session's final view (Options.Sample's, or the
// tapped session's: close the session first, so that the recording ends with what it filed
// after the dashboard's last frame and at its close), the end frame, and closes the file. It
// returns the first error writing the recording, naming the file.
func (r *Recorder) Close() error {
	r.once.Do(func() { close(r.stop) })
	<-r.done
	return r.err
}

// Empty reports, after Close, that the session ended before its first view: nothing was
// recorded, and the file at the path is as it was before Create.
func (r *Recorder) Empty() bool {
	<-r.done
	return !r.w.started
}

func (r *Recorder) loop() {
	defer close(r.done)
	noted := false
	var tick <-chan time.Time
	if r.sample != nil {
		t := time.NewTicker(r.tick)
		defer t.Stop()
		tick = t.C
	}
	for {
		select {
		case <-r.wake:
			r.w.view(r.latest.Load())
		case k := <-r.keys:
			r.w.view(r.latest.Load())
			r.w.key(k)
			r.noteLost(k.At)
		case <-tick:
			r.Offer(r.sample())
			r.w.view(r.latest.Load())
		case <-r.stop:
			for pending := true; pending; {
				select {
				case k := <-r.keys:
					r.w.view(r.latest.Load())
					r.w.key(k)
					r.noteLost(k.At)
				default:
					pending = false
				}
			}
			if r.sample != nil {
				r.Offer(r.sample())
			} else if t := r.tapped.Load(); t != nil {
				r.Offer(t.s.View())
			}
			r.w.view(r.latest.Load())
			r.note(&noted)
			r.err = r.w.close()
			return
		}
		r.note(&noted)
	}
}

// noteLost writes, once the queue has been written out, how many key presses found it full:
// they came after every key in it, at about the time of the last.
func (r *Recorder) noteLost(at time.Duration) {
	if len(r.keys) > 0 {
		return
	}
	if n := r.lost.Swap(0); n > 0 {
		r.w.key(KeyPress{At: at, Text: fmt.Sprintf("%d key presses not recorded: the recording fell behind the disk", n)})
	}
}

// noter is a session whose events pane takes a line from outside it (bench.Session).
type noter interface{ Note(text string) }

// note tells the tapped session's dashboard, once, that the recording failed: the session goes
// on, unrecorded, and the dashboard says so rather than wait for its quit.
func (r *Recorder) note(noted *bool) {
	if *noted || r.w.err == nil {
		return
	}
	*noted = true
	if t := r.tapped.Load(); t != nil {
		if n, ok := t.s.(noter); ok {
			n.Note(r.w.failed(r.w.err).Error())
		}
	}
}

// writer appends frames to a recording file. Owned by one goroutine.
type writer struct {
	path    string
	p       *atomicfile.Pending // swapped in over path with the header
	f       *os.File            // p's file
	meta    Meta
	ve      viewEncoder
	last    *bench.View // the last view written whole
	started bool        // the header is written
	buf     []byte
	payload enc
	n       int64 // bytes of frames written
	err     error // the first write error; nothing is written after it
}

func newWriter(path string, meta Meta) (*writer, error) {
	p, err := atomicfile.Begin(path)
	if err != nil {
		return nil, err
	}
	w := &writer{path: path, p: p, f: p.File, meta: meta}
	if _, err := w.f.Write(fileStart(Version)); err != nil {
		p.Close()
		return nil, err
	}
	return w, nil
}

// view writes v unless it is nil, the view written last or older than it (views handed over
// from two goroutines may arrive out of order); the header goes first.
func (w *writer) view(v *bench.View) {
	if v == nil || v == w.last || w.err != nil || w.last != nil && v.Now < w.last.Now {
		return
	}
	if !w.started {
		w.header(v)
	}
	w.payload.b = w.payload.b[:0]
	w.ve.encode(&w.payload, v)
	w.write(kindView, w.payload.b)
	if w.err == nil { // a view that failed to write is not in the file: the recording stops before it
		w.last = v
	}
}

// header writes the header, completing Meta from the first view.
func (w *writer) header(v *bench.View) {
	m := w.meta
	if m.Model == "" {
		m.Model = v.Header.Model
	}
	if m.Device == "" {
		m.Device = v.Header.Device
	}
	if m.Start.IsZero() {
		m.Start = v.Start
	}
	b, err := json.Marshal(m)
	if err != nil {
		w.err = err
		return
	}
	w.write(kindMeta, b)
	if w.err == nil {
		w.err = w.p.Commit() // the file replaces path now that it replays
	}
	w.started = true
}

// key writes a key press; one before the first view is dropped (nothing was drawn yet).
func (w *writer) key(k KeyPress) {
	if !w.started || w.err != nil {
		return
	}
	w.payload.b = w.payload.b[:0]
	w.payload.record(func(e *enc) {
		e.dur(k.At)
		e.bool(k.OK)
		e.string(k.Text)
	})
	w.write(kindKey, w.payload.b)
}

// bytes is how many bytes of frames were written.
func (w *writer) bytes() int64 { return w.n }

// write appends one frame with one write call.
func (w *writer) write(kind byte, payload []byte) {
	if w.err != nil {
		return
	}
	w.buf = appendFrame(w.buf[:0], kind, payload)
	n, err := w.f.Write(w.buf)
	w.n += int64(n)
	if err != nil {
		w.err = err
	}
}

// close writes the end frame, syncs and closes the file; the error names the file and says
// how far the recording got. A recording with no view is dropped: path keeps what it held.
func (w *writer) close() error {
	if !w.started && w.err == nil {
		w.p.Close()
		return nil
	}
	w.write(kindEnd, nil)
	err := w.err
	if fi, serr := w.f.Stat(); err == nil && serr == nil && fi.Mode().IsRegular() {
		err = w.f.Sync() // a pipe or a device (--record /dev/null) has nothing to sync
	}
	if cerr := w.p.Close(); err == nil { // removed if never swapped in (its header did not write)
		err = cerr
	}
	if err != nil {
		return w.failed(err)
	}
	return nil
}

// failed is err naming the file and saying how far the recording got.
func (w *writer) failed(err error) error {
	if w.last == nil {
		return fmt.Errorf("--record %s: %w (no view was recorded)", w.path, err)
	}
	return fmt.Errorf("--record %s: %w (the recording stops at %s)", w.path, err, clock(w.last.Now))
}

// Tap is a Session that records every view the dashboard reads from s and every key press, and
// at Close s's final view. One session is tapped: a later Tap replaces it for that view.
func (r *Recorder) Tap(s Session) Session {
	t := tap{s: s, r: r}
	r.tapped.Store(&t)
	return t
}

type tap struct {
	s Session
	r *Recorder
}

func (t tap) View() *bench.View {
	v := t.s.View()
	t.r.Offer(v)
	return v
}

// Do records the key's result at the time of the view the session published with it.
func (t tap) Do(a bench.Action) (string, error) {
	msg, err := t.s.Do(a)
	var at time.Duration
	if v := t.s.View(); v != nil {
		at = v.Now
		t.r.Offer(v)
	}
	t.r.Key(at, msg, err)
	return msg, err
}

func (t tap) Report(w io.Writer) error { return t.s.Report(w) }
func (t tap) Close() error             { return t.s.Close() }
