package record

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"sort"
	"time"

	"rosetop/bench"
	"rosetop/internal/regular"
)

// checkpointEvery is how many view frames apart Open keeps a decoder to seek from: a seek
// decodes at most this many frames.
const checkpointEvery = 128

// maxCheckpointBytes bounds what the views of the kept decoders take in all (viewBytes): past
// it a checkpoint repeats the one before (a seek decodes further), so that a recording of many
// large views cannot make Open hold gigabytes.
const maxCheckpointBytes = 512 << 20

// ErrNoEnd is a recording without its end frame: the session that wrote it was killed or
// crashed. Everything before is whole.
var ErrNoEnd = errors.New("no end mark: the recording was not closed (the session was killed or crashed)")

// Recording is an opened recording: its header, an index of its view frames and what Open
// learnt reading them all once. Immutable after Open; its views come from a Cursor.
type Recording struct {
	Meta    Meta
	Version int
	// Stop is why the recording ends where it does: nil when it was closed cleanly, ErrNoEnd,
	// or an error giving the byte where a frame is cut off or damaged (errors.Is ErrTruncated,
	// ErrChecksum, ErrCorrupt). Frames before it are whole and replay.
	Stop   error
	Engine []EngineRuns // the runs each engine finished, in order (Summary)

	f       *os.File
	frames  []frameRef      // view frames, in order
	keys    []KeyPress      // in order
	events  []time.Duration // the times of the view frames where events first showed, ascending
	checks  []checkpoint    // checks[i] is at or before frame i*checkpointEvery
	lastNow time.Duration
}

// checkpoint is a decoder that has decoded frames[:at].
type checkpoint struct {
	at int
	vd viewDecoder
}

// frameRef locates a view frame's payload.
type frameRef struct {
	off int64
	n   int
	now time.Duration
}

// KeyPress is a key pressed on the recorded dashboard and what the session answered.
type KeyPress struct {
	At   time.Duration // the session's time when it answered
	OK   bool          // false: refused, Text says why
	Text string        // what happened ("CUDA Graph off: restarting engine"), or why not
}

// Open reads a recording's header and every frame once, indexing the view frames, and keeps the
// file open for the views (Close). A file that is not a recording, or from a newer version,
// is an error; a recording cut short or damaged after its header opens, with Stop saying where.
func Open(path string) (*Recording, error) {
	f, _, err := regular.Open(path) // a FIFO or a device would block or never end: replay seeks
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err) // regular's errors carry no path
	}
	rec, err := read(f, maxCheckpointBytes)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return rec, nil
}

// Close closes the file.
func (r *Recording) Close() error { return r.f.Close() }

// Frames is how many views the recording holds.
func (r *Recording) Frames() int { return len(r.frames) }

// Length is the time of its last view; 0 without views.
func (r *Recording) Length() time.Duration { return r.lastNow }

// Keys are the key presses recorded, in order.
func (r *Recording) Keys() []KeyPress { return r.keys }

// read opens a recording from f, its checkpoints' views taking at most keep bytes.
func read(f *os.File, keep int) (*Recording, error) {
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if st.Size() == 0 {
		return nil, fmt.Errorf("%w, not a rosetop recording", ErrEmpty)
	}
	fr := newFrameReader(f, st.Size())
	ver, err := fr.start()
	if err != nil {
		return nil, err
	}
	rec := &Recording{Version: int(ver), f: f}
	kind, payload, err := fr.next()
	switch {
	case errors.Is(err, io.EOF):
		return nil, fmt.Errorf("%w before its header: the session stopped as it started", ErrTruncated)
	case err != nil:
		return nil, fmt.Errorf("its header: %w", err)
	case kind != kindMeta:
		return nil, fmt.Errorf("%w: its first frame is not a header", ErrNotRecording)
	}
	if err := json.Unmarshal(payload, &rec.Meta); err != nil {
		return nil, fmt.Errorf("%w: its header does not decode: %v", ErrCorrupt, err)
	}
	rec.Meta.printable()
	rec.Stop = rec.scan(fr, keep)
	return rec, nil
}

// scan reads the frames after the header, keeping checkpoints whose views take at most keep
// bytes in all; it returns why the frames stop (see Recording.Stop).
func (r *Recording) scan(fr *frameReader, keep int) error {
	var vd viewDecoder
	var runs runLog
	var maxEvent time.Duration = -1
	ended := false
	kept := 0
	for {
		off := fr.off
		kind, payload, err := fr.next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			r.Engine = runs.engines
			return err
		}
		switch kind {
		case kindView:
			if len(r.frames)%checkpointEvery == 0 {
				size := 0
				if vd.prev != nil {
					size = viewBytes(vd.prev)
				}
				if n := len(r.checks); n > 0 && kept+size > keep {
					r.checks = append(r.checks, r.checks[n-1])
				} else {
					kept += size
					r.checks = append(r.checks, checkpoint{at: len(r.frames), vd: vd.checkpoint()})
				}
			}
			v, err := vd.decode(payload)
			if err != nil {
				r.Engine = runs.engines
				return &frameError{Offset: off, Err: err}
			}
			// Seeking searches the views by time: a view before the one before it (written by
			// an older rosetop from two goroutines' views) is indexed at that one's time.
			now := v.Now
			if len(r.frames) > 0 {
				now = max(now, r.lastNow)
			}
			r.frames = append(r.frames, frameRef{off: fr.off - int64(len(payload)) - 4, n: len(payload), now: now})
			r.lastNow = now
			for _, ev := range v.Events {
				if ev.At > maxEvent {
					maxEvent = ev.At
					if n := len(r.events); n == 0 || r.events[n-1] != now {
						r.events = append(r.events, now)
					}
				}
			}
			runs.add(v)
		case kindKey:
			d := dec{b: payload}
			rd := d.record()
			k := KeyPress{At: rd.dur(), OK: rd.bool(), Text: rd.string()}
			d.done(&rd)
			if d.err != nil {
				r.Engine = runs.engines
				return &frameError{Offset: off, Err: fmt.Errorf("%w: a key press does not decode", ErrCorrupt)}
			}
			r.keys = append(r.keys, k)
		case kindEnd:
			ended = true
		}
	}
	r.Engine = runs.engines
	if !ended {
		return ErrNoEnd
	}
	return nil
}

// frameAt returns the index of the last view frame at or before t (0 before the first).
func (r *Recording) frameAt(t time.Duration) int {
	i := sort.Search(len(r.frames), func(i int) bool { return r.frames[i].now > t })
	return max(0, i-1)
}

// Cursor decodes a recording's views by index, forward frame by frame and from the nearest
// checkpoint when it must go back or far ahead. Not safe for concurrent use.
type Cursor struct {
	r   *Recording
	vd  viewDecoder
	at  int // frames decoded: vd.prev is frame at-1
	buf []byte
}

// NewCursor returns a cursor before r's first view.
func (r *Recording) NewCursor() *Cursor { return &Cursor{r: r} }

// View returns view i (0 <= i < Frames()).
func (c *Cursor) View(i int) (*bench.View, error) {
	if i < 0 || i >= len(c.r.frames) {
		return nil, fmt.Errorf("record: view %d of %d", i, len(c.r.frames))
	}
	if c.at == i+1 {
		return c.vd.prev, nil
	}
	if cp := &c.r.checks[i/checkpointEvery]; i+1 < c.at || cp.at > c.at {
		c.vd, c.at = cp.vd.checkpoint(), cp.at
	}
	for c.at <= i {
		fr := c.r.frames[c.at]
		if cap(c.buf) < fr.n {
			c.buf = make([]byte, fr.n)
		}
		buf := c.buf[:fr.n]
		if _, err := c.r.f.ReadAt(buf, fr.off); err != nil {
			return nil, fmt.Errorf("record: reading view %d: %w", c.at, err)
		}
		if _, err := c.vd.decode(buf); err != nil {
			return nil, fmt.Errorf("record: view %d: %w", c.at, err)
		}
		c.at++
	}
	return c.vd.prev, nil
}

// frameReader reads frames in order, tracking the offset of the next one.
type frameReader struct {
	r    *bufio.Reader
	off  int64 // where the next frame starts
	size int64
	buf  []byte
	raw  []byte // the last uvarint read, as written
}

func newFrameReader(r io.ReaderAt, size int64) *frameReader {
	return &frameReader{r: bufio.NewReaderSize(io.NewSectionReader(r, 0, size), 1<<16), size: size}
}

// start reads the magic and the version.
func (fr *frameReader) start() (uint64, error) {
	head := make([]byte, len(magic))
	n, _ := io.ReadFull(fr.r, head)
	fr.off += int64(n)
	if !bytes.Equal(head[:n], []byte(magic)[:n]) {
		return 0, ErrNotRecording
	}
	if n < len(magic) {
		return 0, fmt.Errorf("%w in its first bytes", ErrTruncated)
	}
	ver, raw, err := fr.uvarint()
	if errors.Is(err, ErrCorrupt) {
		return 0, fmt.Errorf("its version: %w", err)
	} else if err != nil {
		return 0, fmt.Errorf("%w in its first bytes", ErrTruncated)
	}
	fr.off += int64(len(raw))
	switch {
	case ver == 0:
		return 0, fmt.Errorf("%w: version 0", ErrNotRecording)
	case ver > Version:
		return 0, fmt.Errorf("%w: format version %d, this rosetop reads up to %d (upgrade rosetop to replay it)", ErrNewerVersion, ver, Version)
	}
	return ver, nil
}

// next reads one frame: io.EOF at the end of the file on a frame boundary, a *frameError when
// the frame is cut off, its length overflows or its checksum does not match. payload is valid
// until the next call.
func (fr *frameReader) next() (kind byte, payload []byte, err error) {
	start := fr.off
	cut := func() (byte, []byte, error) {
		return 0, nil, &frameError{Offset: start, Err: ErrTruncated}
	}
	kind, err = fr.r.ReadByte()
	if err != nil {
		return 0, nil, io.EOF
	}
	n, raw, err := fr.uvarint()
	if errors.Is(err, ErrCorrupt) {
		return 0, nil, &frameError{Offset: start, Err: err}
	} else if err != nil {
		return cut()
	}
	head := 1 + len(raw)
	if n > maxPayload {
		return 0, nil, &frameError{Offset: start, Err: fmt.Errorf("%w: a frame of %d bytes", ErrCorrupt, n)}
	}
	if int64(n) > fr.size-start-int64(head) {
		return cut()
	}
	need := head + int(n) + 4
	if cap(fr.buf) < need {
		fr.buf = make([]byte, need)
	}
	b := fr.buf[:need]
	b[0] = kind
	copy(b[1:], raw) // the checksum covers the length as written
	if _, err := io.ReadFull(fr.r, b[head:]); err != nil {
		return cut()
	}
	fr.off += int64(need)
	if crc32.Checksum(b[:need-4], crcTable) != binary.LittleEndian.Uint32(b[need-4:]) {
		return 0, nil, &frameError{Offset: start, Err: ErrChecksum}
	}
	return kind, b[head : need-4], nil
}

// uvarint reads a uvarint and returns the bytes it was read from (valid until the next call):
// the offset advances by them, since a longer encoding than the shortest one also reads.
func (fr *frameReader) uvarint() (uint64, []byte, error) {
	fr.raw = fr.raw[:0]
	for len(fr.raw) < binary.MaxVarintLen64 {
		c, err := fr.r.ReadByte()
		if err != nil {
			return 0, nil, err
		}
		fr.raw = append(fr.raw, c)
		if c < 0x80 {
			v, n := binary.Uvarint(fr.raw)
			if n <= 0 {
				break
			}
			return v, fr.raw, nil
		}
	}
	return 0, nil, fmt.Errorf("%w: a varint overflows 64 bits", ErrCorrupt)
}
