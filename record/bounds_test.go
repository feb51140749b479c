package record

import (
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"unsafe"

	"rosetop/bench"
)

// craftedRecording is a header and one view frame per payload, each with a good checksum.
func craftedRecording(t *testing.T, payloads ...[]byte) string {
	t.Helper()
	b := fileStart(Version)
	b = appendFrame(b, kindMeta, []byte(`{"tool": "crafted"}`))
	for _, p := range payloads {
		b = appendFrame(b, kindView, p)
	}
	path := filepath.Join(t.TempDir(), "crafted.rec")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// steadyFrame is a view frame whose Steady list adds n empty records (a byte each, a whole
// bench.Summary decoded), keeping keep of the previous list.
func steadyFrame(keep, n int) []byte {
	var body enc
	body.uvarint(0) // drop
	body.uvarint(uint64(keep))
	body.uvarint(uint64(n))
	body.b = append(body.b, make([]byte, n)...)
	var e enc
	e.dur(0)
	e.uvarint(uint64(secSteady))
	e.uvarint(uint64(len(body.b)))
	e.b = append(e.b, body.b...)
	return e.b
}

// A list of one-byte items, each decoding to hundreds of bytes, is refused before it is
// allocated: a 200 kB frame asking for 150 MB of summaries stops the recording there with
// ErrCorrupt, and opening it allocates a small part of that.
func TestListAmplificationRefused(t *testing.T) {
	n := 200_000
	if n*int(unsafe.Sizeof(bench.Summary{})) <= maxViewBytes {
		t.Fatalf("%d summaries fit a view: the test needs more", n)
	}
	path := craftedRecording(t, steadyFrame(0, 10), steadyFrame(0, n))
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	rec, err := Open(path)
	runtime.ReadMemStats(&after)
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Close()
	if rec.Frames() != 1 || !errors.Is(rec.Stop, ErrCorrupt) {
		t.Fatalf("%d frames, stop %v; want the first frame and ErrCorrupt at the second", rec.Frames(), rec.Stop)
	}
	if got := after.TotalAlloc - before.TotalAlloc; got > 32<<20 {
		t.Errorf("opening it allocated %d MB", got>>20)
	}
}

// Frames that each fit their budget cannot grow a list past maxViewBytes by keeping what the
// frames before them added.
func TestViewSizeBounded(t *testing.T) {
	per := maxViewBytes/int(unsafe.Sizeof(bench.Summary{}))/2 + 1 // two frames' worth pass the bound
	path := craftedRecording(t, steadyFrame(0, per), steadyFrame(per, per))
	rec, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Close()
	if rec.Frames() != 1 || !errors.Is(rec.Stop, ErrCorrupt) || !strings.Contains(rec.Stop.Error(), "more than") {
		t.Fatalf("%d frames, stop %v; want the first frame and the view's size refused at the second", rec.Frames(), rec.Stop)
	}
}

// With no room for checkpoints beyond the first, every view still decodes as recorded, in
// order and after seeks: a checkpoint left out repeats the one before.
func TestCheckpointsBounded(t *testing.T) {
	n := 700
	path, views := writeSynth(t, t.TempDir(), n, 4)
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	rec, err := read(f, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Close()
	if len(rec.checks) != (n+checkpointEvery-1)/checkpointEvery {
		t.Fatalf("%d checkpoints for %d frames", len(rec.checks), n)
	}
	for i, cp := range rec.checks {
		if cp.at != 0 {
			t.Fatalf("checkpoint %d at frame %d: kept beyond the bound", i, cp.at)
		}
	}
	checkSeeks(t, rec.NewCursor(), views, 5, 40)
}
