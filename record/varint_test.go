package record

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"os"
	"path/filepath"
	"testing"
)

// longUvarint appends v as a uvarint one byte longer than it needs: its last byte continued,
// then a zero byte. It reads as v.
func longUvarint(b []byte, v uint64) []byte {
	b = binary.AppendUvarint(b, v)
	b[len(b)-1] |= 0x80
	return append(b, 0)
}

// padVarints rewrites a recording with its version, and with lengths every frame's length,
// written one byte longer than they need, each checksum over the frame as written.
func padVarints(t testing.TB, data []byte, lengths bool) []byte {
	t.Helper()
	fr := newFrameReader(bytes.NewReader(data), int64(len(data)))
	ver, err := fr.start()
	if err != nil {
		t.Fatal(err)
	}
	out := longUvarint([]byte(magic), ver)
	for {
		kind, payload, err := fr.next()
		if err != nil {
			break
		}
		start := len(out)
		if lengths {
			out = longUvarint(append(out, kind), uint64(len(payload)))
		} else {
			out = binary.AppendUvarint(append(out, kind), uint64(len(payload)))
		}
		out = append(out, payload...)
		out = binary.LittleEndian.AppendUint32(out, crc32.Checksum(out[start:], crcTable))
	}
	return out
}

// A uvarint written longer than it needs (the version as 81 00, a frame's length padded the
// same way) reads as its value, and the frames after it are found where they are: the recording
// opens whole and every view decodes as it was recorded.
func TestLongVarintsRead(t *testing.T) {
	dir := t.TempDir()
	path, views := writeSynth(t, dir, 300, 5)
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for name, lengths := range map[string]bool{"version": false, "version_and_lengths": true} {
		t.Run(name, func(t *testing.T) {
			padded := padVarints(t, data, lengths)
			if !bytes.Equal(padded[len(magic):len(magic)+2], []byte{0x81, 0}) {
				t.Fatalf("the version reads % x, want 81 00", padded[len(magic):len(magic)+2])
			}
			long := filepath.Join(dir, name+".rec")
			if err := os.WriteFile(long, padded, 0o644); err != nil {
				t.Fatal(err)
			}
			rec, err := Open(long)
			if err != nil {
				t.Fatal(err)
			}
			defer rec.Close()
			if rec.Stop != nil || rec.Version != Version || rec.Frames() != len(views) {
				t.Fatalf("stop %v, version %d, %d views; want a whole version %d recording of %d", rec.Stop, rec.Version, rec.Frames(), Version, len(views))
			}
			c := rec.NewCursor()
			for i, want := range views {
				got, err := c.View(i)
				if err != nil {
					t.Fatalf("view %d: %v", i, err)
				}
				if d := viewDiff(want, got); d != "" {
					t.Fatalf("view %d: %s", i, d)
				}
			}
		})
	}
}

// A frame length of eleven varint bytes is damage, not a cut: Stop says so at the frame.
func TestOverlongVarintCorrupt(t *testing.T) {
	b := appendFrame(fileStart(Version), kindMeta, []byte(`{"tool": "crafted"}`))
	at := int64(len(b))
	b = append(append(b, kindView), bytes.Repeat([]byte{0xff}, 11)...)
	path := filepath.Join(t.TempDir(), "overlong.rec")
	if err := os.WriteFile(path, append(b, make([]byte, 64)...), 0o644); err != nil {
		t.Fatal(err)
	}
	rec, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Close()
	var fe *frameError
	if !errors.As(rec.Stop, &fe) || fe.Offset != at || !errors.Is(fe.Err, ErrCorrupt) {
		t.Fatalf("stop %v; want ErrCorrupt at byte %d", rec.Stop, at)
	}
}
