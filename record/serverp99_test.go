package record

import (
	"slices"
	"testing"
	"time"

	"rosetop/bench"
)

// sections lists a view frame's sections by id, with the frame's bytes without each.
func sections(t *testing.T, payload []byte) (ids []sectionID, without map[sectionID][]byte) {
	t.Helper()
	d := dec{b: payload, budget: new(int)}
	d.varint()
	head := len(payload) - len(d.b)
	without = map[sectionID][]byte{}
	for d.more() {
		start := len(payload) - len(d.b)
		id := sectionID(d.uvarint())
		d.bytes(d.uvarint())
		end := len(payload) - len(d.b)
		ids = append(ids, id)
		without[id] = append(slices.Clone(payload[:start]), payload[end:]...)
	}
	if d.err != nil || head == 0 {
		t.Fatalf("frame does not parse: %v", d.err)
	}
	return ids, without
}

// TestServerP99Recorded: a watch session's server p99 timelines go through a recording as
// they grow; a view without them (every session but a watching one) writes no section for
// them, so its frames are as before; and a frame of a recording made before them (without the
// section) reads with none.
func TestServerP99Recorded(t *testing.T) {
	pts := func(vals ...float64) []bench.Point {
		var out []bench.Point
		for i, v := range vals {
			out = append(out, bench.Point{At: time.Duration(i) * 500 * time.Millisecond, Value: v})
		}
		return out
	}
	trend := func(ttft, itl []bench.Point) []bench.Timeline {
		tl := func(name string, p []bench.Point) bench.Timeline {
			return bench.Timeline{Name: name, Tracks: []bench.Track{{Width: 250 * time.Millisecond, Span: 2 * time.Minute, Points: p}, {Width: 2 * time.Second, Points: p[:1]}}}
		}
		return []bench.Timeline{tl("TTFT p99", ttft), tl("ITL p99", itl)}
	}
	plain := filledView(0)
	plain.ServerP99 = nil
	first, second := filledView(10), filledView(10)
	first.ServerP99 = trend(pts(240, 250), pts(5))
	second.ServerP99 = trend(pts(240, 250, 2480), pts(5, 12))

	var ve viewEncoder
	var vd viewDecoder
	var frames [][]byte
	for i, v := range []*bench.View{plain, first, second} {
		var e enc
		ve.encode(&e, v)
		frames = append(frames, e.b)
		got, err := vd.decode(e.b)
		if err != nil {
			t.Fatalf("frame %d: %v", i, err)
		}
		if d := viewDiff(v, got); d != "" {
			t.Fatalf("frame %d: %s", i, d)
		}
	}
	if ids, _ := sections(t, frames[0]); slices.Contains(ids, secServerP99) {
		t.Errorf("a view without server p99 wrote its section: %v", ids)
	}
	ids, without := sections(t, frames[1])
	if !slices.Contains(ids, secServerP99) {
		t.Fatalf("a view with server p99 wrote no section for it: %v", ids)
	}
	var old viewDecoder // a recording made before the section: the rest of the view as written
	if _, err := old.decode(frames[0]); err != nil {
		t.Fatal(err)
	}
	got, err := old.decode(without[secServerP99])
	if err != nil {
		t.Fatal(err)
	}
	want := *first
	want.ServerP99 = nil
	if d := viewDiff(&want, got); d != "" {
		t.Errorf("a frame without the section: %s", d)
	}
}
