package record

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"rosetop/bench"
)

// fakeClock is a wall clock the test moves.
type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time      { return c.t }
func (c *fakeClock) add(d time.Duration) { c.t = c.t.Add(d) }
func newReplayAt(t *testing.T, n int) (*Replay, *fakeClock, []*bench.View) {
	t.Helper()
	path, views := writeSynth(t, t.TempDir(), n, 5)
	rec, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	c := &fakeClock{t: time.Unix(1000, 0)}
	rp, err := NewReplay(rec, ReplayOptions{Now: c.now})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rp.Close() })
	return rp, c, views
}

// Playback follows the wall clock times the speed, stops at the end, and every key does what
// the status line says, in one scripted session.
func TestReplayControls(t *testing.T) {
	rp, c, views := newReplayAt(t, 600) // 60 s of views, 0:00 to 0:59.9
	last := views[len(views)-1].Now
	pos := func() time.Duration { return rp.View().Replay.Position }
	steps := []struct {
		name    string
		wall    time.Duration // the wall clock moves this much first
		act     *bench.Action // then this key (nil: none)
		wantMsg string        // "" for an error
		wantErr string
		wantPos time.Duration
		paused  bool
	}{
		{name: "plays at 1x", wall: 3 * time.Second, wantPos: 3 * time.Second},
		{name: "pause", wall: 250 * time.Millisecond, act: ptr(bench.ActTogglePause), wantMsg: "paused at 0:03", wantPos: 3200 * time.Millisecond, paused: true},
		{name: "paused stays", wall: 10 * time.Second, wantPos: 3200 * time.Millisecond, paused: true},
		{name: "forward 5 s", act: ptr(bench.ActReplayForward), wantMsg: "at 0:08 of 0:59", wantPos: 8200 * time.Millisecond, paused: true},
		{name: "back 5 s", act: ptr(bench.ActReplayBack), wantMsg: "at 0:03 of 0:59", wantPos: 3200 * time.Millisecond, paused: true},
		{name: "back past the start", act: ptr(bench.ActReplayBack), wantMsg: "at 0:00 of 0:59", wantPos: 0, paused: true},
		{name: "faster", act: ptr(bench.ActReplayFaster), wantMsg: "replay speed 2x", paused: true},
		{name: "resume", act: ptr(bench.ActTogglePause), wantMsg: "playing at 2x from 0:00"},
		{name: "2x", wall: 2 * time.Second, wantPos: 4 * time.Second},
		{name: "slower", act: ptr(bench.ActReplaySlower), wantMsg: "replay speed 1x", wantPos: 4 * time.Second},
		{name: "1x again", wall: time.Second, wantPos: 5 * time.Second},
		{name: "engine key", act: ptr(bench.ActToggleGraph), wantErr: ErrEngineKey.Error(), wantPos: 5 * time.Second},
		{name: "next event", act: ptr(bench.ActReplayNextEvent), wantMsg: "next event: at 0:05 of 0:59", wantPos: 5900 * time.Millisecond},
		{name: "previous event", act: ptr(bench.ActReplayPrevEvent), wantMsg: "previous event: at 0:04 of 0:59", wantPos: 4900 * time.Millisecond},
		{name: "end", act: ptr(bench.ActReplayEnd), wantMsg: "at 0:59 of 0:59", wantPos: last, paused: true},
		{name: "stops at the end", wall: time.Second, wantPos: last, paused: true},
		{name: "no event after the end", act: ptr(bench.ActReplayNextEvent), wantErr: "no event after 0:59", wantPos: last, paused: true},
		{name: "space at the end plays from the start", act: ptr(bench.ActTogglePause), wantMsg: "playing at 1x from 0:00", wantPos: 0},
		{name: "home", wall: 30 * time.Second, act: ptr(bench.ActReplayStart), wantMsg: "at 0:00 of 0:59", wantPos: 0},
	}
	for _, st := range steps {
		c.add(st.wall)
		if st.act != nil {
			msg, err := rp.Do(*st.act)
			switch {
			case st.wantErr != "" && (err == nil || err.Error() != st.wantErr):
				t.Fatalf("%s: got %q, %v; want the error %q", st.name, msg, err, st.wantErr)
			case st.wantErr == "" && (err != nil || msg != st.wantMsg):
				t.Fatalf("%s: got %q, %v; want %q", st.name, msg, err, st.wantMsg)
			}
		}
		if st.wantMsg == "replay speed 2x" {
			continue // the position is not what this step checks
		}
		if got := pos(); got != st.wantPos {
			t.Fatalf("%s: position %v, want %v", st.name, got, st.wantPos)
		}
		if got := rp.View().Replay.Paused; got != st.paused {
			t.Fatalf("%s: paused %v, want %v", st.name, got, st.paused)
		}
	}
}

func ptr(a bench.Action) *bench.Action { return &a }

// The speed steps from 0.25x to 16x and refuses beyond; the view shows the speed and the
// recorded key press at or before the position.
func TestReplaySpeedsAndKeys(t *testing.T) {
	rp, c, views := newReplayAt(t, 300)
	for _, want := range []string{"0.5x", "0.25x"} {
		if msg, err := rp.Do(bench.ActReplaySlower); err != nil || msg != "replay speed "+want {
			t.Fatalf("slower: %q, %v; want speed %s", msg, err, want)
		}
	}
	if _, err := rp.Do(bench.ActReplaySlower); err == nil {
		t.Fatal("slower than 0.25x was not refused")
	}
	for range 6 {
		if _, err := rp.Do(bench.ActReplayFaster); err != nil {
			t.Fatal(err)
		}
	}
	if v := rp.View(); v.Replay.Speed != 16 {
		t.Fatalf("speed %v after six steps up from 0.25x, want 16", v.Replay.Speed)
	}
	if _, err := rp.Do(bench.ActReplayFaster); err == nil {
		t.Fatal("faster than 16x was not refused")
	}
	c.add(500 * time.Millisecond) // 8 s of recording at 16x: past the key press at view 50
	v := rp.View()
	if v.Replay.Position != 8*time.Second || v.Replay.Key != "prefill max batch 9" || v.Replay.KeyAt != views[50].Now || v.Replay.KeyRefused {
		t.Fatalf("at 8 s: %+v, want the key press of view 50", *v.Replay)
	}
	if rp.View() != v {
		t.Fatal("View returned a new view while nothing changed: the dashboard would redraw for nothing")
	}
}

// A recording with no view (a header alone: cut before its first view frame) cannot be
// replayed; a speed outside the steps is refused.
func TestNewReplayRefuses(t *testing.T) {
	rec, err := Open(craftedRecording(t))
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Close()
	if _, err := NewReplay(rec, ReplayOptions{}); !errors.Is(err, ErrNoViews) {
		t.Fatalf("no views: %v", err)
	}
	path, _ := writeSynth(t, t.TempDir(), 10, 1)
	rec, err = Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Close()
	if _, err := NewReplay(rec, ReplayOptions{Speed: 3}); err == nil {
		t.Fatal("speed 3 was accepted")
	}
}

// A recording cut short says so in the playback's note, briefly: where it ends and why.
func TestReplayNote(t *testing.T) {
	path, _ := writeSynth(t, t.TempDir(), 100, 5)
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		data []byte
		want string
	}{
		{"whole", data, ""},
		{"killed", data[:len(data)-6], "ends at 0:09: the session was killed"},
		{"cut mid-frame", data[:len(data)-20], "ends at 0:09: cut off at byte "},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "r.rec")
			if err := os.WriteFile(p, tc.data, 0o644); err != nil {
				t.Fatal(err)
			}
			rec, err := Open(p)
			if err != nil {
				t.Fatal(err)
			}
			rp, err := NewReplay(rec, ReplayOptions{})
			if err != nil {
				t.Fatal(err)
			}
			defer rp.Close()
			if got := rp.View().Replay.Note; !strings.HasPrefix(got, tc.want) || (tc.want == "") != (got == "") {
				t.Fatalf("note %q, want %q", got, tc.want)
			}
		})
	}
}
