package record

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// frameEnds are the offsets where a recording's frames end, and for each the view frames whole
// up to there.
func frameEnds(t testing.TB, data []byte) (ends []int64, views []int) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "whole.rec")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rec, err := read(f, maxCheckpointBytes)
	if err != nil {
		t.Fatal(err)
	}
	// Walk the frames again for their ends: the index holds view payloads only.
	fr := newFrameReader(f, int64(len(data)))
	if _, err := fr.start(); err != nil {
		t.Fatal(err)
	}
	n := 0
	for {
		kind, _, err := fr.next()
		if err != nil {
			break
		}
		if kind == kindView {
			n++
		}
		ends, views = append(ends, fr.off), append(views, n)
	}
	if n != rec.Frames() {
		t.Fatalf("%d view frames walked, %d indexed", n, rec.Frames())
	}
	return ends, views
}

// A recording cut at any byte opens (once its header is whole) and replays exactly the views
// whose frames are whole before the cut, the last of them as recorded; Stop says why it ends.
// The corpus under testdata/fuzz/FuzzCut holds cuts inside the magic, the header, a view's
// length, payload and checksum, and on frame boundaries.
func FuzzCut(f *testing.F) {
	data, err := os.ReadFile("../testdata/recordings/cpu-tiny-v1.rec")
	if err != nil {
		f.Fatal(err)
	}
	ends, views := frameEnds(f, data)
	whole, err := Open("../testdata/recordings/cpu-tiny-v1.rec")
	if err != nil {
		f.Fatal(err)
	}
	defer whole.Close()
	for _, cut := range []uint32{0, 5, 19, 100, uint32(ends[0]), uint32(ends[0]) + 1, uint32(ends[1]) - 1, uint32(ends[5]), uint32(len(data)) - 1, uint32(len(data))} {
		f.Add(cut)
	}
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, cut uint32) {
		n := int64(cut) % int64(len(data)+1)
		path := filepath.Join(dir, "cut.rec")
		if err := os.WriteFile(path, data[:n], 0o644); err != nil {
			t.Fatal(err)
		}
		rec, err := Open(path)
		if n < ends[0] { // the header is not whole: nothing to replay, a one-line reason
			if !errors.Is(err, ErrTruncated) && !errors.Is(err, ErrEmpty) {
				t.Fatalf("cut at %d, inside the header: %v", n, err)
			}
			return
		}
		if err != nil {
			t.Fatalf("cut at %d: %v", n, err)
		}
		defer rec.Close()
		want := 0
		for i, e := range ends {
			if e <= n {
				want = views[i]
			}
		}
		if rec.Frames() != want {
			t.Fatalf("cut at %d: %d views, want the %d whole before it", n, rec.Frames(), want)
		}
		switch {
		case n == int64(len(data)) && rec.Stop != nil:
			t.Fatalf("the whole file: stop %v", rec.Stop)
		case n < int64(len(data)) && rec.Stop == nil:
			t.Fatalf("cut at %d: no stop given", n)
		}
		if want == 0 {
			return
		}
		got, err := rec.NewCursor().View(want - 1)
		if err != nil {
			t.Fatal(err)
		}
		wantView, err := whole.NewCursor().View(want - 1)
		if err != nil {
			t.Fatal(err)
		}
		if d := viewDiff(wantView, got); d != "" {
			t.Fatalf("cut at %d: the last whole view differs: %s", n, d)
		}
	})
}

// Any bytes: Open answers with an error or a recording whose every view decodes or errs, never
// a panic, a hang or an allocation beyond the input's size (the fuzzer's memory limit).
func FuzzOpen(f *testing.F) {
	dir := f.TempDir()
	path, _ := writeSynth(f, dir, 12, 3)
	small, err := os.ReadFile(path)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(small)
	f.Add(small[:len(small)/2])
	f.Add(padVarints(f, small, false)) // the version, then every length, longer than needed
	f.Add(padVarints(f, small, true))
	f.Add([]byte(magic))
	f.Add([]byte("rosetop recording\n\x01H\xff\xff\xff\xff\x0f"))
	f.Fuzz(func(t *testing.T, data []byte) {
		path := filepath.Join(dir, "in.rec")
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		rec, err := Open(path)
		if err != nil {
			return
		}
		defer rec.Close()
		c := rec.NewCursor()
		for i := range rec.Frames() {
			if _, err := c.View(i); err != nil {
				t.Fatalf("view %d of an opened recording: %v", i, err)
			}
		}
	})
}
