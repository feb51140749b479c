// Package record writes what a dashboard showed to a file and plays it back: `rosetop --record
// FILE` and `rosetop replay FILE`. A recording holds the stream of immutable bench.Views the
// dashboard read, each as a change to the one before, and the dashboard's key presses with their
// results; a Replay is a dashboard Session over it.
//
// The file (version 1):
//
//	file  = magic version:uvarint frame*
//	frame = kind:byte len:uvarint payload crc:uint32le
//
// magic is "rosetop recording\n". crc is the CRC-32C of kind, len and payload. The first frame is
// the header (kindMeta, JSON: what ran where, when, with which flags); then view frames
// (kindView, frame_view.go) and key presses (kindKey) in the order they happened; a recording
// closed cleanly ends with kindEnd. The file is only ever appended to, one write per frame, so
// after a crash or a kill it reads up to its last whole frame. Readers skip frame kinds and view
// sections they do not know and read records' fields up to those they know: a version adds to
// those without breaking older readers; the version changes only when an older reader could
// not make sense of the file, and a reader refuses a version newer than its own.
package record

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"time"
)

// Version is the format this package writes; a reader reads it and every earlier one.
const Version = 1

const magic = "rosetop recording\n"

// Frame kinds.
const (
	kindMeta = 'H' // the header: Meta as JSON
	kindView = 'V' // a view, as a change to the previous one
	kindKey  = 'K' // a key press and its result
	kindEnd  = 'E' // the recording was closed (empty payload)
)

// maxPayload bounds a frame: a length beyond it is corruption, never an allocation.
const maxPayload = 64 << 20

// Errors that the reader's errors wrap.
var (
	ErrNotRecording = errors.New("not a rosetop recording")
	ErrNewerVersion = errors.New("recorded by a newer rosetop")
	ErrEmpty        = errors.New("empty file")
	// ErrTruncated is a frame cut off by the end of the file: a session killed mid-write.
	ErrTruncated = errors.New("cut off mid-frame")
	// ErrChecksum is a frame whose checksum does not match: the file was damaged.
	ErrChecksum = errors.New("checksum mismatch")
)

// Meta is a recording's header: what ran, where and when.
type Meta struct {
	Tool    string        `json:"tool"`             // rosetop's version line
	Commit  string        `json:"commit,omitempty"` // the VCS revision it was built from
	Command string        `json:"command"`          // "dashboard", "bench", "serve"
	Args    []string      `json:"args"`             // the command line's flags
	Model   string        `json:"model"`            // as the dashboard's header names it
	Device  string        `json:"device"`           // the backend's description ("cuda: NVIDIA H200")
	GPU     string        `json:"gpu,omitempty"`    // the GPU and driver ("NVIDIA H200 (sm_90, driver 12.8)"); "" without one
	Host    string        `json:"host,omitempty"`
	Start   time.Time     `json:"start"`   // wall time of the session's start (View.Now 0)
	Tick    time.Duration `json:"tick_ns"` // how often views were taken
}

// printable makes m's text safe to print (see printable).
func (m *Meta) printable() {
	for _, s := range []*string{&m.Tool, &m.Commit, &m.Command, &m.Model, &m.Device, &m.GPU, &m.Host} {
		*s = printable([]byte(*s))
	}
	for i := range m.Args {
		m.Args[i] = printable([]byte(m.Args[i]))
	}
}

var crcTable = crc32.MakeTable(crc32.Castagnoli)

// appendFrame appends one whole frame to b.
func appendFrame(b []byte, kind byte, payload []byte) []byte {
	start := len(b)
	b = append(b, kind)
	b = binary.AppendUvarint(b, uint64(len(payload)))
	b = append(b, payload...)
	return binary.LittleEndian.AppendUint32(b, crc32.Checksum(b[start:], crcTable))
}

// fileStart is the magic and the version.
func fileStart(version uint64) []byte {
	return binary.AppendUvarint([]byte(magic), version)
}

// frameError says where a recording stops being readable and why.
type frameError struct {
	Offset int64 // the byte where the bad frame starts
	Err    error // ErrTruncated, ErrChecksum, ErrCorrupt (wrapped)
}

func (e *frameError) Error() string { return fmt.Sprintf("at byte %d: %v", e.Offset, e.Err) }
func (e *frameError) Unwrap() error { return e.Err }
