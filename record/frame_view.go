package record

import (
	"bytes"
	"errors"
	"math"
	"time"

	"rosetop/bench"
)

// A view frame is the view's time, then the sections that changed since the previous view
// frame, each as its id, its length and its body; a section left out is unchanged. A reader
// skips the ids it does not know, so a later version may add sections.
//
//	view frame = now:varint { id:uvarint len:uvarint body }
//
// A section is a record (the header's settings, the latency rows: written whole when they
// changed) or a list change (series.go: drop, keep, the added items; the pooled inter-token
// latencies in runs of equal values, codec_items.go). The first view frame changes everything
// from the empty view.
type sectionID uint64

const (
	secScalars    sectionID = iota + 1 // Start, QueueLast, LatencyWindow, Live, KVUsed, KVTotal
	secHeader                          // the header's settings (encHeader)
	secProgress                        // the header's moving figures (encProgress)
	secQueue                           // Queue timelines
	secP99                             // P99 timelines
	secAdmissions                      // list
	secLatency                         // rows
	secITL                             // list
	secSlow                            // list of SlowITL
	secCold                            // presence and the summary
	secSteady                          // list
	secCompare                         // rows
	secLedger                          // list
	secEvents                          // list
	secMarkers                         // list
	secServer                          // presence and a remote server's panel
	secServerP99                       // ServerP99 timelines (after the sections of the recordings before them)
	numSections
)

// ErrCorrupt is a frame that passed its checksum but does not decode: a file not written by
// rosetop, or a bug.
var ErrCorrupt = errors.New("corrupt frame")

// viewEncoder writes view frames, each against the previous one. Owned by one goroutine.
type viewEncoder struct {
	prev    *bench.View
	last    [numSections][]byte // the last body written of each whole-record section
	steady  []string            // the encodings of prev.Steady's items
	slow    []string            // of prev.SlowITL's
	scratch enc
	body    enc
}

// encode appends v's frame payload to e.
func (ve *viewEncoder) encode(e *enc, v *bench.View) {
	prev := ve.prev
	if prev == nil {
		prev = &bench.View{}
	}
	e.varint(int64(v.Now))
	whole := func(id sectionID, fill func(e *enc)) {
		ve.scratch.b = ve.scratch.b[:0]
		fill(&ve.scratch)
		if ve.prev != nil && bytes.Equal(ve.scratch.b, ve.last[id]) {
			return
		}
		ve.last[id] = append(ve.last[id][:0], ve.scratch.b...)
		section(e, id, ve.scratch.b)
	}
	whole(secScalars, func(e *enc) { encScalars(e, v) })
	whole(secHeader, func(e *enc) { encHeader(e, &v.Header) })
	whole(secProgress, func(e *enc) { encProgress(e, &v.Header) })
	ve.timelines(e, secQueue, prev.Queue, v.Queue)
	ve.timelines(e, secP99, prev.P99, v.P99)
	ve.list(e, secAdmissions, listChange(prev.Admissions, v.Admissions, eqComparable, encAdmission))
	whole(secLatency, func(e *enc) { encLatency(e, v.Latency) })
	ve.list(e, secITL, floatListChange(prev.ITL, v.ITL))
	ve.slow = encodedList(ve, e, secSlow, ve.slow, v.SlowITL, encRequestITL)
	whole(secCold, func(e *enc) {
		e.bool(v.Cold != nil)
		if v.Cold != nil {
			encSummary(e, v.Cold)
		}
	})
	ve.steady = encodedList(ve, e, secSteady, ve.steady, v.Steady, encSummary)
	whole(secCompare, func(e *enc) { encCompare(e, v.Compare) })
	ve.list(e, secLedger, listChange(prev.Ledger, v.Ledger, eqComparable, encLedger))
	ve.list(e, secEvents, listChange(prev.Events, v.Events, eqComparable, encEvent))
	ve.list(e, secMarkers, listChange(prev.Markers, v.Markers, eqComparable, encMarker))
	whole(secServer, func(e *enc) {
		e.bool(v.Server != nil)
		if v.Server != nil {
			encServer(e, v.Server)
		}
	})
	if len(prev.ServerP99)+len(v.ServerP99) > 0 { // none outside watch mode: no section at all
		ve.timelines(e, secServerP99, prev.ServerP99, v.ServerP99)
	}
	ve.prev = v
}

// section appends one section.
func section(e *enc, id sectionID, body []byte) {
	e.uvarint(uint64(id))
	e.uvarint(uint64(len(body)))
	e.b = append(e.b, body...)
}

// listChange returns the body of a list section (nil: unchanged).
func listChange[T any](old, new []T, eq func(a, b *T) bool, item func(e *enc, v T)) func(e *enc) {
	drop, keep := diff(old, new, eq)
	if drop == 0 && keep == len(old) && keep == len(new) {
		return nil
	}
	return func(e *enc) {
		e.uvarint(uint64(drop))
		e.uvarint(uint64(keep))
		e.uvarint(uint64(len(new) - keep))
		for _, x := range new[keep:] {
			item(e, x)
		}
	}
}

// floatListChange is listChange for a list of floats, its added values in runs of equal ones
// (run length, value): tokens decoded in one batch share their inter-token latency.
func floatListChange(old, new []float64) func(e *enc) {
	drop, keep := diff(old, new, eqFloat)
	if drop == 0 && keep == len(old) && keep == len(new) {
		return nil
	}
	return func(e *enc) {
		e.uvarint(uint64(drop))
		e.uvarint(uint64(keep))
		encRuns(e, new[keep:])
	}
}

// eqFloat compares bits: a NaN equals itself, so it is not sent again.
func eqFloat(a, b *float64) bool { return math.Float64bits(*a) == math.Float64bits(*b) }

func (ve *viewEncoder) list(e *enc, id sectionID, body func(e *enc)) {
	if body == nil {
		return
	}
	ve.body.b = ve.body.b[:0]
	body(&ve.body)
	section(e, id, ve.body.b)
}

// encodedList writes a list of items without ==: each item is compared by its encoding, and
// the encodings are kept for the next frame (returned). An item encoded as one of old was
// shares its string, so a list that slides allocates only for its new items.
func encodedList[T any](ve *viewEncoder, e *enc, id sectionID, old []string, new []T, item func(e *enc, v *T)) []string {
	cur := make([]string, len(new))
	off := 0 // new[i] was old[i+off] for the items so far
	for i := range new {
		ve.scratch.b = ve.scratch.b[:0]
		item(&ve.scratch, &new[i])
		if j := i + off; j >= 0 && j < len(old) && old[j] == string(ve.scratch.b) {
			cur[i] = old[j]
			continue
		}
		cur[i] = string(ve.scratch.b)
		for j := range old {
			if old[j] == cur[i] {
				cur[i], off = old[j], j-i
				break
			}
		}
	}
	ve.list(e, id, listChange(old, cur, eqComparable, func(e *enc, s string) { e.b = append(e.b, s...) }))
	return cur
}

// timelines writes a timeline section: the shape (names, widths, spans) when it changed, when
// every track starts over, then each track's points as a list change, each point's At as the
// step from the point before it.
func (ve *viewEncoder) timelines(e *enc, id sectionID, old, new []bench.Timeline) {
	same := ve.prev != nil && sameShape(old, new)
	b := &ve.body
	b.b = b.b[:0]
	b.bool(!same)
	if !same {
		encShape(b, new)
	}
	changed := !same
	for i, tl := range new {
		for j, tr := range tl.Tracks {
			var was []bench.Point
			if same {
				was = old[i].Tracks[j].Points
			}
			drop, keep := diff(was, tr.Points, eqComparable)
			if drop != 0 || keep != len(was) || keep != len(tr.Points) {
				changed = true
			}
			b.uvarint(uint64(drop))
			b.uvarint(uint64(keep))
			b.uvarint(uint64(len(tr.Points) - keep))
			var at time.Duration
			if keep > 0 {
				at = tr.Points[keep-1].At
			}
			for _, p := range tr.Points[keep:] {
				b.dur(p.At - at)
				b.float(p.Value)
				at = p.At
			}
		}
	}
	if changed {
		section(e, id, b.b)
	}
}

func sameShape(a, b []bench.Timeline) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Name != b[i].Name || len(a[i].Tracks) != len(b[i].Tracks) {
			return false
		}
		for j := range a[i].Tracks {
			if a[i].Tracks[j].Width != b[i].Tracks[j].Width || a[i].Tracks[j].Span != b[i].Tracks[j].Span {
				return false
			}
		}
	}
	return true
}

func encShape(e *enc, tls []bench.Timeline) {
	e.uvarint(uint64(len(tls)))
	for _, tl := range tls {
		e.record(func(e *enc) {
			e.string(tl.Name)
			e.uvarint(uint64(len(tl.Tracks)))
			for _, tr := range tl.Tracks {
				e.dur(tr.Width)
				e.dur(tr.Span)
			}
		})
	}
}
