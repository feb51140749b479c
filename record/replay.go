package record

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"sort"
	"strconv"
	"sync"
	"time"

	"rosetop/bench"
)

// SeekStep is how far ← and → move a replay.
const SeekStep = 5 * time.Second

// Speeds are the replay speeds < and > step through.
var speeds = [...]float64{0.25, 0.5, 1, 2, 4, 8, 16}

// ErrEngineKey answers an engine key (p, g, [, ...) in a replay.
var ErrEngineKey = errors.New("a replay shows what the engine did: engine keys do nothing here (space pauses, ← → seek, < > speed, n N events)")

// ErrNoViews is a recording that holds no view to replay.
var ErrNoViews = errors.New("no view was recorded: the session stopped before the dashboard drew anything")

// ReplayOptions configure a Replay.
type ReplayOptions struct {
	Speed  float64          // one of 0.25, 0.5, 1, 2, 4, 8, 16; 0: 1
	Paused bool             // start paused
	Now    func() time.Time // the wall clock; nil: time.Now
}

// Replay is a dashboard Session over a recording: View returns the view recorded at the
// playback position, which moves with the wall clock times the speed and stops at the end; Do
// takes the replay keys and refuses the engine keys with ErrEngineKey. Safe for concurrent use.
type Replay struct {
	rec    *Recording // immutable
	now    func() time.Time
	events []time.Duration // rec.events; immutable

	mu       sync.Mutex    // guards the fields below
	cur      *Cursor       // decodes the views
	anchor   time.Duration // the position at anchorAt
	anchorAt time.Time
	speed    int // index into speeds
	paused   bool
	shown    *bench.View // the last view View returned (nil: none yet)
	shownErr error       // a view that could not be read: the replay stays on the last good one
}

// NewReplay returns a replay of rec at its first view; it takes rec over (Close closes it).
func NewReplay(rec *Recording, o ReplayOptions) (*Replay, error) {
	if rec.Frames() == 0 {
		return nil, ErrNoViews
	}
	if o.Speed == 0 {
		o.Speed = 1
	}
	sp := slices.Index(speeds[:], o.Speed)
	if sp < 0 {
		return nil, fmt.Errorf("replay speed %g: valid speeds are 0.25, 0.5, 1, 2, 4, 8, 16", o.Speed)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	r := &Replay{rec: rec, now: o.Now, events: rec.events, cur: rec.NewCursor(), speed: sp, paused: o.Paused}
	r.anchor, r.anchorAt = r.first(), o.Now()
	return r, nil
}

func (r *Replay) first() time.Duration { return r.rec.frames[0].now }

// position is where playback is now; reaching the end pauses it there. The caller holds r.mu.
func (r *Replay) position() time.Duration {
	if r.paused {
		return r.anchor
	}
	p := r.anchor + time.Duration(float64(r.now().Sub(r.anchorAt))*speeds[r.speed])
	if p >= r.rec.Length() {
		r.seek(r.rec.Length())
		r.paused = true
		return r.anchor
	}
	return p
}

// seek moves playback to p (clamped to the recording). The caller holds r.mu.
func (r *Replay) seek(p time.Duration) {
	r.anchor, r.anchorAt = min(max(p, r.first()), r.rec.Length()), r.now()
}

// View returns the view recorded at the playback position, with the playback's state; the
// same pointer while neither changes.
func (r *Replay) View() *bench.View {
	r.mu.Lock()
	defer r.mu.Unlock()
	pos := r.position()
	v, err := r.cur.View(r.rec.frameAt(pos))
	if err != nil {
		r.shownErr, r.paused, r.anchor = err, true, r.shownAt()
		if r.shown != nil {
			return r.shown
		}
		v = &bench.View{}
	}
	pb := bench.Playback{
		Position: v.Now, Length: r.rec.Length(), Speed: speeds[r.speed], Paused: r.paused,
		Recorded: r.rec.Meta.Start, Note: stopShort(r.rec),
	}
	if r.shownErr != nil {
		pb.Note = "reading the recording failed: " + r.shownErr.Error()
	}
	if k, ok := r.keyAt(v.Now); ok {
		pb.Key, pb.KeyAt, pb.KeyRefused = k.Text, k.At, !k.OK
	}
	if s := r.shown; s != nil && *s.Replay == pb && s.Now == v.Now {
		return s
	}
	shown := *v
	shown.Replay = &pb
	r.shown = &shown
	return r.shown
}

func (r *Replay) shownAt() time.Duration {
	if r.shown == nil {
		return r.first()
	}
	return r.shown.Now
}

// keyAt is the last key press recorded at or before t.
func (r *Replay) keyAt(t time.Duration) (KeyPress, bool) {
	ks := r.rec.keys
	i := sort.Search(len(ks), func(i int) bool { return ks[i].At > t })
	if i == 0 {
		return KeyPress{}, false
	}
	return ks[i-1], true
}

// Do applies a replay key; an engine key is refused with ErrEngineKey.
func (r *Replay) Do(a bench.Action) (string, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	pos := r.position()
	switch a {
	case bench.ActTogglePause:
		if !r.paused {
			r.seek(pos)
			r.paused = true
			return "paused at " + clock(pos), nil
		}
		if pos >= r.rec.Length() {
			pos = r.first() // at the end: play again from the start
		}
		r.seek(pos)
		r.paused = false
		return fmt.Sprintf("playing at %s from %s", speedName(speeds[r.speed]), clock(r.anchor)), nil
	case bench.ActReplayBack, bench.ActReplayForward:
		step := SeekStep
		if a == bench.ActReplayBack {
			step = -step
		}
		r.seek(pos + step)
		return r.at(), nil
	case bench.ActReplayStart:
		r.seek(r.first())
		return r.at(), nil
	case bench.ActReplayEnd:
		r.seek(r.rec.Length())
		return r.at(), nil
	case bench.ActReplaySlower, bench.ActReplayFaster:
		return r.step(pos, a == bench.ActReplayFaster)
	case bench.ActReplayNextEvent, bench.ActReplayPrevEvent:
		return r.jump(pos, a == bench.ActReplayNextEvent)
	}
	return "", ErrEngineKey
}

// at says where playback is after a seek. The caller holds r.mu.
func (r *Replay) at() string {
	return fmt.Sprintf("at %s of %s", clock(r.anchor), clock(r.rec.Length()))
}

// step changes the speed a notch, keeping the position. The caller holds r.mu.
func (r *Replay) step(pos time.Duration, faster bool) (string, error) {
	next := r.speed - 1
	if faster {
		next = r.speed + 1
	}
	if next < 0 || next >= len(speeds) {
		return "", fmt.Errorf("the replay is already at %s, the %s", speedName(speeds[r.speed]), map[bool]string{true: "fastest", false: "slowest"}[faster])
	}
	r.seek(pos)
	r.speed = next
	return "replay speed " + speedName(speeds[next]), nil
}

// jump seeks to the view where the next (or previous) event first showed. The caller holds r.mu.
func (r *Replay) jump(pos time.Duration, next bool) (string, error) {
	shown := r.rec.frames[r.rec.frameAt(pos)].now
	i := sort.Search(len(r.events), func(i int) bool { return r.events[i] > shown })
	if next {
		if i == len(r.events) {
			return "", fmt.Errorf("no event after %s", clock(shown))
		}
		r.seek(r.events[i])
		return "next event: " + r.at(), nil
	}
	j := sort.Search(len(r.events), func(i int) bool { return r.events[i] >= shown }) - 1
	if j < 0 {
		return "", fmt.Errorf("no event before %s", clock(shown))
	}
	r.seek(r.events[j])
	return "previous event: " + r.at(), nil
}

// Report writes the recording's summary (WriteSummary).
func (r *Replay) Report(w io.Writer) error { return WriteSummary(w, r.rec) }

// Close closes the recording.
func (r *Replay) Close() error { return r.rec.Close() }

func speedName(s float64) string { return strconv.FormatFloat(s, 'g', -1, 64) + "x" }
