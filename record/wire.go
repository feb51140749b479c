package record

import (
	"encoding/binary"
	"errors"
	"math"
	"math/bits"
	"strings"
	"time"
	"unicode"
)

// errShort is a field cut off inside a frame whose checksum was good: a writer bug or a file
// crafted to pass the checksum. Decoders turn it into ErrCorrupt.
var errShort = errors.New("field runs past the end of its record")

// errTooLarge is a frame whose lists decode to more than its budget (frameBudget).
var errTooLarge = errors.New("lists larger than a view holds")

// enc appends the wire's primitives to a byte slice.
type enc struct{ b []byte }

func (e *enc) uvarint(v uint64) { e.b = binary.AppendUvarint(e.b, v) }
func (e *enc) varint(v int64)   { e.b = binary.AppendVarint(e.b, v) }
func (e *enc) int(v int)        { e.varint(int64(v)) }
func (e *enc) byte(v byte)      { e.b = append(e.b, v) }

func (e *enc) bool(v bool) {
	if v {
		e.byte(1)
	} else {
		e.byte(0)
	}
}

// float writes the IEEE bits byte-reversed as a uvarint: values with short mantissas (0, 1.5,
// 64) take one to three bytes, any other at most ten; NaN and infinities keep their bits.
func (e *enc) float(v float64) { e.uvarint(bits.ReverseBytes64(math.Float64bits(v))) }

func (e *enc) dur(d time.Duration) { e.varint(int64(d)) }

func (e *enc) string(s string) {
	e.uvarint(uint64(len(s)))
	e.b = append(e.b, s...)
}

// time writes t as Unix nanoseconds; the zero time as a flag alone (its UnixNano overflows).
func (e *enc) time(t time.Time) {
	if t.IsZero() {
		e.byte(0)
		return
	}
	e.byte(1)
	e.varint(t.UnixNano())
}

// record writes a length-prefixed record: fill appends its fields. Records are how the format
// grows: a later version appends fields at a record's end, which an older reader skips and a
// newer reader reading an older file finds absent (zero).
func (e *enc) record(fill func(e *enc)) {
	// Reserve one length byte; move the body when it needs more (records over 127 bytes).
	at := len(e.b)
	e.b = append(e.b, 0)
	fill(e)
	n := len(e.b) - at - 1
	if n < 0x80 {
		e.b[at] = byte(n)
		return
	}
	var lb [binary.MaxVarintLen64]byte
	k := binary.PutUvarint(lb[:], uint64(n))
	e.b = append(e.b, lb[:k-1]...) // grow by k-1
	copy(e.b[at+k:], e.b[at+1:at+1+n])
	copy(e.b[at:], lb[:k])
}

// dec reads what enc wrote from one record (or frame payload). Reading past its end gives zero
// values and no error: a field a record from an older writer does not have. A malformed field
// sets err, after which every read gives zero values.
type dec struct {
	b   []byte
	err error
	// budget is what is left of the frame's budget of bytes its lists may take decoded
	// (frameBudget), shared by the decoders of its records; nil: no list may be read.
	budget *int
}

func (d *dec) more() bool { return d.err == nil && len(d.b) > 0 }

func (d *dec) fail(err error) {
	if d.err == nil {
		d.err = err
	}
	d.b = nil
}

func (d *dec) uvarint() uint64 {
	if len(d.b) == 0 {
		return 0
	}
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.fail(errShort)
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *dec) varint() int64 {
	if len(d.b) == 0 {
		return 0
	}
	v, n := binary.Varint(d.b)
	if n <= 0 {
		d.fail(errShort)
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *dec) int() int           { return int(d.varint()) }
func (d *dec) dur() time.Duration { return time.Duration(d.varint()) }
func (d *dec) float() float64     { return math.Float64frombits(bits.ReverseBytes64(d.uvarint())) }
func (d *dec) bool() bool         { return d.byte() != 0 }

func (d *dec) time() time.Time {
	if d.byte() == 0 {
		return time.Time{}
	}
	return time.Unix(0, d.varint())
}

func (d *dec) byte() byte {
	if len(d.b) == 0 {
		return 0
	}
	v := d.b[0]
	d.b = d.b[1:]
	return v
}

// bytes takes the next n bytes; n beyond what is left is malformed.
func (d *dec) bytes(n uint64) []byte {
	if n > uint64(len(d.b)) {
		d.fail(errShort)
		return nil
	}
	v := d.b[:n:n]
	d.b = d.b[n:]
	return v
}

func (d *dec) string() string { return printable(d.bytes(d.uvarint())) }

// printable is b as a string with its control characters (C0, DEL, C1) and bidirectional
// controls as spaces and invalid UTF-8 as U+FFFD: a recording's text is drawn on a terminal,
// where an escape in it would act (clear the screen, set the title, write the clipboard).
func printable(b []byte) string {
	for _, c := range b {
		if c < 0x20 || c >= 0x7f {
			return strings.Map(func(r rune) rune {
				if unicode.IsControl(r) || unicode.Is(unicode.Bidi_Control, r) {
					return ' '
				}
				return r
			}, strings.ToValidUTF8(string(b), "\uFFFD"))
		}
	}
	return string(b)
}

// record returns a decoder over the next record.
func (d *dec) record() dec {
	if len(d.b) == 0 {
		return dec{}
	}
	r := dec{b: d.bytes(d.uvarint()), budget: d.budget}
	if d.err != nil {
		r.err = d.err
	}
	return r
}

// count reads a list length, bounded by what is left (every item takes at least one byte), and
// charges the list, n items of size bytes each, to the frame's budget: an item of one byte may
// decode to hundreds, so the bytes left alone do not bound what the list takes.
func (d *dec) count(size uintptr) int {
	n := d.uvarint()
	if n > uint64(len(d.b)) {
		d.fail(errShort)
		return 0
	}
	if !d.charge(n, size) {
		return 0
	}
	return int(n)
}

// charge takes n items of size bytes from the frame's budget; false, and the decoder failed,
// when it has not that much left.
func (d *dec) charge(n uint64, size uintptr) bool {
	if d.budget == nil || n > uint64(*d.budget)/uint64(max(size, 1)) {
		d.fail(errTooLarge)
		return false
	}
	*d.budget -= int(n * uint64(max(size, 1)))
	return true
}

// done folds a record decoder's error into its parent's.
func (d *dec) done(r *dec) {
	if r.err != nil {
		d.fail(r.err)
	}
}
