package record

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"unicode"

	"rosetop/bench"
)

// writeSynth records n views of a Synth (and a key press every 97th view) to a file in dir,
// closed cleanly; it returns the path and the views. Its whole-session tracks merge every
// 64 points, so that a few minutes change their shape.
func writeSynth(t testing.TB, dir string, n int, seed uint64) (string, []*bench.View) {
	t.Helper()
	path := filepath.Join(dir, "synth.rec")
	w, err := newWriter(path, Meta{Tool: "rosetop test", Command: "dashboard", Args: []string{"--model", "random:gpt2"}, Tick: DefaultTick})
	if err != nil {
		t.Fatal(err)
	}
	s := newSynth(seed, 32)
	views := make([]*bench.View, n)
	for i := range views {
		views[i] = s.Next()
		w.view(views[i])
		if i%97 == 50 {
			w.key(KeyPress{At: views[i].Now, OK: i%2 == 0, Text: "prefill max batch 9"})
		}
	}
	if err := w.close(); err != nil {
		t.Fatal(err)
	}
	return path, views
}

// Every view decodes to what was recorded, in order and in any order (seeking back and far
// ahead from checkpoints).
func TestRoundTrip(t *testing.T) {
	n := 1500
	if testing.Short() {
		n = 400
	}
	path, views := writeSynth(t, t.TempDir(), n, 1)
	rec, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Close()
	if rec.Stop != nil {
		t.Fatalf("a cleanly closed recording stops early: %v", rec.Stop)
	}
	if rec.Frames() != n || rec.Length() != views[n-1].Now {
		t.Fatalf("%d frames to %v, want %d to %v", rec.Frames(), rec.Length(), n, views[n-1].Now)
	}
	if rec.Meta.Model != "gpt2" || rec.Meta.Device != "cuda: NVIDIA H200" || !rec.Meta.Start.Equal(views[0].Start) {
		t.Fatalf("the header was not completed from the first view: %+v", rec.Meta)
	}
	if want := (n + 46) / 97; len(rec.Keys()) != want {
		t.Fatalf("%d key presses, want %d", len(rec.Keys()), want)
	}
	c := rec.NewCursor()
	for i, want := range views {
		got, err := c.View(i)
		if err != nil {
			t.Fatal(err)
		}
		if d := viewDiff(want, got); d != "" {
			t.Fatalf("view %d: %s", i, d)
		}
	}
	checkSeeks(t, c, views, 2, 200)
}

// checkSeeks moves c to seeks random views (from a generator seeded with seed) and fails t
// unless each decodes to views' own.
func checkSeeks(t *testing.T, c *Cursor, views []*bench.View, seed uint64, seeks int) {
	t.Helper()
	r := rand.New(rand.NewPCG(seed, seed+1))
	for range seeks {
		i := r.IntN(len(views))
		got, err := c.View(i)
		if err != nil {
			t.Fatal(err)
		}
		if d := viewDiff(views[i], got); d != "" {
			t.Fatalf("view %d after a seek: %s", i, d)
		}
	}
}

// Open's answers to files that are not whole recordings: the bad inputs refuse with their
// sentinel, a recording cut short opens with Stop saying where.
func TestOpenBadInput(t *testing.T) {
	dir := t.TempDir()
	good, _ := writeSynth(t, dir, 30, 1)
	data, err := os.ReadFile(good)
	if err != nil {
		t.Fatal(err)
	}
	newer := append(fileStart(Version+1), data[len(fileStart(Version)):]...)
	flipped := append([]byte(nil), data...)
	flipped[len(flipped)/2] ^= 0x40
	tests := []struct {
		name    string
		data    []byte
		openErr error // nil: opens
		stop    error // with Stop matching this (nil: clean)
	}{
		{"whole", data, nil, nil},
		{"empty", []byte{}, ErrEmpty, nil},
		{"not a recording", []byte("{\"hello\": 1}\n"), ErrNotRecording, nil},
		{"newer version", newer, ErrNewerVersion, nil},
		{"magic cut", data[:5], ErrTruncated, nil},
		{"no header", data[:len(fileStart(Version))], ErrTruncated, nil},
		{"no end frame", data[:len(data)-6], nil, ErrNoEnd},
		{"cut mid-frame", data[:len(data)-9], nil, ErrTruncated},
		{"flipped bit", flipped, nil, ErrChecksum},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(dir, "in.rec")
			if err := os.WriteFile(path, tc.data, 0o644); err != nil {
				t.Fatal(err)
			}
			rec, err := Open(path)
			if tc.openErr != nil {
				if !errors.Is(err, tc.openErr) {
					t.Fatalf("Open: %v, want %v", err, tc.openErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("Open: %v", err)
			}
			defer rec.Close()
			if tc.stop == nil && rec.Stop != nil || tc.stop != nil && !errors.Is(rec.Stop, tc.stop) {
				t.Fatalf("Stop = %v, want %v", rec.Stop, tc.stop)
			}
		})
	}
	if _, err := Open(filepath.Join(dir, "missing.rec")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a missing file: %v", err)
	}
}

// A recording's text reaches the terminal (the replayed dashboard, --summary): control
// characters in it (escapes that would clear the screen, set the title or write the clipboard,
// a carriage return, a newline that would break a line in two) and bidirectional controls
// come out as spaces, from the header's every string and from the views' and key presses'.
func TestControlCharactersNeutralised(t *testing.T) {
	const evil = "a\x1b]52;c;cHduZWQ=\x07b\x1b[2J\r\n\tc\u009b31m\u202ed\x7f"
	var meta Meta
	rm := reflect.ValueOf(&meta).Elem()
	for i := range rm.NumField() {
		switch f := rm.Field(i); f.Kind() {
		case reflect.String:
			f.SetString(evil)
		case reflect.Slice:
			f.Set(reflect.ValueOf([]string{evil, evil}))
		}
	}
	v := filledView(0)
	v.Header.Model, v.Header.RunLabel, v.Events[0].Text, v.Ledger[1].Detail = evil, evil, evil, evil
	path := filepath.Join(t.TempDir(), "evil.rec")
	if err := WriteViews(path, meta, []*bench.View{v}, map[int]KeyPress{0: {At: v.Now, OK: false, Text: evil}}); err != nil {
		t.Fatal(err)
	}
	rec, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Close()
	got, err := rec.NewCursor().View(0)
	if err != nil {
		t.Fatal(err)
	}
	controls := func(s string) bool {
		return strings.ContainsFunc(s, func(r rune) bool { return unicode.IsControl(r) || unicode.Is(unicode.Bidi_Control, r) })
	}
	var b strings.Builder
	if err := WriteSummary(&b, rec); err != nil {
		t.Fatal(err)
	}
	for what, s := range map[string]string{
		"the header": fmt.Sprintf("%+v", rec.Meta), "the model": got.Header.Model, "a run label": got.Header.RunLabel,
		"an event": got.Events[0].Text, "a ledger entry": got.Ledger[1].Detail, "a key press": rec.Keys()[0].Text,
		"the summary": strings.ReplaceAll(b.String(), "\n", ""),
	} {
		if controls(s) {
			t.Errorf("%s keeps control characters: %q", what, s)
		}
	}
	if want := "a ]52;c;cHduZWQ= b [2J   c 31m d "; got.Header.Model != want {
		t.Errorf("the model reads %q, want %q (each control a space, the rest kept)", got.Header.Model, want)
	}
}
