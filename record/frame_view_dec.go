package record

import (
	"fmt"
	"time"
	"unsafe"

	"rosetop/bench"
)

// maxViewBytes bounds what a view's lists take decoded, far above what bench publishes (rings of
// hundreds of items; a long request's latencies the most): a frame that would make a larger view
// is corrupt, however few bytes it takes.
const maxViewBytes = 64 << 20

// viewDecoder rebuilds views from view frames, each against the previous one. A decoded view
// shares what did not change with the one before it; nothing it holds is written again.
type viewDecoder struct {
	prev       *bench.View // the last view decoded; nil before the first
	queue, p99 [][]series[bench.Point]
	serverP99  [][]series[bench.Point]
	admissions series[bench.Admission]
	itl        series[float64]
	slow       series[bench.RequestITL]
	steady     series[bench.Summary]
	ledger     series[bench.LedgerEntry]
	events     series[bench.LogEvent]
	markers    series[bench.Marker]
}

// decode returns the view of one view frame's payload.
func (vd *viewDecoder) decode(payload []byte) (*bench.View, error) {
	budget := frameBudget(len(payload))
	d := dec{b: payload, budget: &budget}
	v := &bench.View{}
	if vd.prev != nil {
		*v = *vd.prev
	}
	v.Now = d.dur()
	for d.more() {
		id := sectionID(d.uvarint())
		body := dec{b: d.bytes(d.uvarint()), budget: d.budget}
		if d.err != nil {
			break
		}
		ok := true
		switch id {
		case secScalars:
			decScalars(&body, v)
		case secHeader:
			decHeader(&body, &v.Header)
		case secProgress:
			decProgress(&body, &v.Header)
		case secQueue:
			v.Queue, ok = decTimelines(&body, &vd.queue, v.Queue)
		case secP99:
			v.P99, ok = decTimelines(&body, &vd.p99, v.P99)
		case secAdmissions:
			v.Admissions, ok = decList(&body, &vd.admissions, decAdmission)
		case secLatency:
			v.Latency = decLatency(&body)
		case secITL:
			v.ITL, ok = decFloatList(&body, &vd.itl)
		case secSlow:
			v.SlowITL, ok = decList(&body, &vd.slow, decRequestITL)
		case secCold:
			v.Cold = nil
			if body.bool() {
				s := decSummary(&body)
				v.Cold = &s
			}
		case secSteady:
			v.Steady, ok = decList(&body, &vd.steady, decSummary)
		case secCompare:
			v.Compare = decCompare(&body)
		case secLedger:
			v.Ledger, ok = decList(&body, &vd.ledger, decLedger)
		case secEvents:
			v.Events, ok = decList(&body, &vd.events, decEvent)
		case secMarkers:
			v.Markers, ok = decList(&body, &vd.markers, decMarker)
		case secServer:
			v.Server = nil
			if body.bool() {
				v.Server = decServer(&body)
			}
		case secServerP99:
			v.ServerP99, ok = decTimelines(&body, &vd.serverP99, v.ServerP99)
		}
		if !ok || body.err != nil {
			return nil, fmt.Errorf("%w: section %d does not decode", ErrCorrupt, id)
		}
	}
	if d.err != nil {
		return nil, fmt.Errorf("%w: %w", ErrCorrupt, d.err)
	}
	if n := viewBytes(v); n > maxViewBytes {
		return nil, fmt.Errorf("%w: a view whose lists take %d bytes, more than %d", ErrCorrupt, n, maxViewBytes)
	}
	vd.prev = v
	return v, nil
}

// size reads a list position or length; false when it cannot be one.
func (d *dec) size() (int, bool) {
	v := d.uvarint()
	return int(v), v <= 1<<40 && d.err == nil
}

// decList applies a list section to s and returns the new list.
func decList[T any](d *dec, s *series[T], item func(d *dec) T) ([]T, bool) {
	drop, ok1 := d.size()
	keep, ok2 := d.size()
	var zero T
	n := d.count(unsafe.Sizeof(zero))
	if !ok1 || !ok2 {
		return nil, false
	}
	added := make([]T, n)
	for i := range added {
		added[i] = item(d)
	}
	if d.err != nil || !s.apply(drop, keep, added) {
		return nil, false
	}
	return s.list(), true
}

// decFloatList applies a float list section (floatListChange) to s.
func decFloatList(d *dec, s *series[float64]) ([]float64, bool) {
	drop, ok1 := d.size()
	keep, ok2 := d.size()
	added := decRuns(d)
	if !ok1 || !ok2 || d.err != nil || !s.apply(drop, keep, added) {
		return nil, false
	}
	return s.list(), true
}

// decTimelines applies a timeline section to the tracks' series; prev gives the shape when the
// section does not.
func decTimelines(d *dec, state *[][]series[bench.Point], prev []bench.Timeline) ([]bench.Timeline, bool) {
	shape := prev
	if d.bool() {
		shape = decShape(d)
		*state = make([][]series[bench.Point], len(shape))
		for i := range shape {
			(*state)[i] = make([]series[bench.Point], len(shape[i].Tracks))
		}
	}
	if len(*state) != len(shape) {
		return nil, false
	}
	out := make([]bench.Timeline, len(shape))
	for i, tl := range shape {
		if len((*state)[i]) != len(tl.Tracks) {
			return nil, false
		}
		out[i] = bench.Timeline{Name: tl.Name, Tracks: make([]bench.Track, len(tl.Tracks))}
		for j, tr := range tl.Tracks {
			s := &(*state)[i][j]
			drop, ok1 := d.size()
			keep, ok2 := d.size()
			n := d.count(unsafe.Sizeof(bench.Point{}))
			old := s.list()
			if !ok1 || !ok2 || drop > len(old) || keep > len(old)-drop {
				return nil, false
			}
			var at time.Duration
			if keep > 0 {
				at = old[drop+keep-1].At
			}
			added := make([]bench.Point, n)
			for k := range added {
				at += d.dur()
				added[k] = bench.Point{At: at, Value: d.float()}
			}
			if d.err != nil || !s.apply(drop, keep, added) {
				return nil, false
			}
			out[i].Tracks[j] = bench.Track{Width: tr.Width, Span: tr.Span, Points: s.list()}
		}
	}
	return out, true
}

// decShape reads the timelines' names, widths and spans (their points left empty).
func decShape(d *dec) []bench.Timeline {
	n := d.count(unsafe.Sizeof(bench.Timeline{}) + unsafe.Sizeof([]series[bench.Point]{}))
	out := make([]bench.Timeline, n)
	for i := range out {
		r := d.record()
		out[i].Name = r.string()
		tracks := r.count(unsafe.Sizeof(bench.Track{}) + unsafe.Sizeof(series[bench.Point]{}))
		out[i].Tracks = make([]bench.Track, tracks)
		for j := range out[i].Tracks {
			out[i].Tracks[j] = bench.Track{Width: r.dur(), Span: r.dur()}
		}
		d.done(&r)
	}
	return out
}

// checkpoint is a copy of the decoder from which decoding can go on while the original goes
// on too: every series is sealed, so neither appends where the other's views read.
func (vd *viewDecoder) checkpoint() viewDecoder {
	c := *vd
	seal := func(tls [][]series[bench.Point]) [][]series[bench.Point] {
		out := make([][]series[bench.Point], len(tls))
		for i, tl := range tls {
			out[i] = make([]series[bench.Point], len(tl))
			for j, s := range tl {
				out[i][j] = s.sealed()
			}
		}
		return out
	}
	c.queue, c.p99, c.serverP99 = seal(vd.queue), seal(vd.p99), seal(vd.serverP99)
	c.admissions, c.itl, c.slow, c.steady = vd.admissions.sealed(), vd.itl.sealed(), vd.slow.sealed(), vd.steady.sealed()
	c.ledger, c.events, c.markers = vd.ledger.sealed(), vd.events.sealed(), vd.markers.sealed()
	return c
}

// viewBytes is what v's lists take: what maxViewBytes bounds.
func viewBytes(v *bench.View) int {
	n := 0
	list := func(items int, size uintptr) { n += items * int(size) }
	for _, tls := range [...][]bench.Timeline{v.Queue, v.P99, v.ServerP99} {
		list(len(tls), unsafe.Sizeof(bench.Timeline{}))
		for _, tl := range tls {
			list(len(tl.Tracks), unsafe.Sizeof(bench.Track{}))
			for _, tr := range tl.Tracks {
				list(len(tr.Points), unsafe.Sizeof(bench.Point{}))
			}
		}
	}
	list(len(v.Admissions), unsafe.Sizeof(bench.Admission{}))
	list(len(v.Latency), unsafe.Sizeof(bench.LatencyRow{}))
	list(len(v.ITL), 8)
	list(len(v.SlowITL), unsafe.Sizeof(bench.RequestITL{}))
	for _, r := range v.SlowITL {
		list(len(r.ITL), 8)
	}
	list(len(v.Steady), unsafe.Sizeof(bench.Summary{}))
	list(len(v.Compare), unsafe.Sizeof(bench.Comparison{}))
	list(len(v.Ledger), unsafe.Sizeof(bench.LedgerEntry{}))
	list(len(v.Events), unsafe.Sizeof(bench.LogEvent{}))
	list(len(v.Markers), unsafe.Sizeof(bench.Marker{}))
	if r := v.Header.Remote; r != nil {
		list(len(r.Fleet), unsafe.Sizeof(""))
	}
	if v.Server != nil {
		list(len(v.Server.Rows), unsafe.Sizeof(bench.ServerRow{}))
		list(len(v.Server.Members), unsafe.Sizeof(bench.ServerMetrics{}))
		for _, m := range append([]bench.ServerMetrics{v.Server.ServerMetrics}, v.Server.Members...) {
			list(len(m.Latency), unsafe.Sizeof(bench.ServerLatency{}))
			if m.DP != nil {
				list(len(m.DP.Ranks), unsafe.Sizeof(bench.DPRank{}))
			}
			if t := m.Total; t != nil {
				list(len(t.Latency), unsafe.Sizeof(bench.ServerLatency{}))
			}
		}
	}
	return n
}
