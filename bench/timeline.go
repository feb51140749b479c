package bench

import "time"

// Track is a time series at one resolution: each point is the mean of the samples that fell in
// one bucket of Width, At the bucket's start; a bucket without samples has no point. Points are
// closed buckets, oldest first; they cover the last Span (0: the whole session).
type Track struct {
	Width  time.Duration
	Span   time.Duration
	Points []Point
}

// Timeline is one chart series at every resolution the dashboard's windows use, finest first:
// a chart draws the finest track whose Span covers its window.
type Timeline struct {
	Name   string
	Tracks []Track
}

// trackSpec is one resolution of a timeline: buckets of width, the newest keep of them; an
// adaptive track keeps everything since the start in at most keep buckets, doubling their width
// (merging neighbours) whenever they fill.
type trackSpec struct {
	width    time.Duration
	keep     int
	adaptive bool
}

// track samples values into buckets with fixed memory, whatever the sample rate. Its closed
// points live in an append-only slice: a published Track shares it (a full slice expression,
// so nothing appends into a view), and compaction moves the kept points to a new array, so a
// published view is never written again. Guarded by its owner's lock.
type track struct {
	trackSpec
	pts  []Point // closed buckets; cap 2*keep (ring tracks) or keep (adaptive)
	ns   []int   // adaptive: samples per point, the weights of a merge
	sum  float64 // the open bucket's samples
	n    int
	open int64 // the open bucket's index (at / width); valid when n > 0
}

func newTrack(s trackSpec) *track {
	t := &track{trackSpec: s}
	if s.adaptive {
		t.pts, t.ns = make([]Point, 0, s.keep), make([]int, 0, s.keep)
	} else {
		t.pts = make([]Point, 0, 2*s.keep)
	}
	return t
}

// add files v, sampled at at. Samples come in time order; one older than the open bucket joins it.
func (t *track) add(at time.Duration, v float64) {
	if t.n > 0 && int64(at/t.width) > t.open {
		t.close() // may double an adaptive track's width: the index is taken after
	}
	if t.n == 0 {
		t.open = max(int64(at/t.width), t.open)
	}
	t.sum += v
	t.n++
}

// close appends the open bucket as a point.
func (t *track) close() {
	if t.n == 0 {
		return
	}
	if len(t.pts) == cap(t.pts) {
		t.compact()
	}
	t.pts = append(t.pts, Point{At: time.Duration(t.open) * t.width, Value: t.sum / float64(t.n)})
	if t.adaptive {
		t.ns = append(t.ns, t.n)
	}
	t.sum, t.n = 0, 0
}

// compact makes room: a ring track keeps its newest keep points, an adaptive one merges its
// points into buckets twice as wide. Either way into new arrays.
func (t *track) compact() {
	if !t.adaptive {
		t.pts = append(make([]Point, 0, 2*t.keep), t.pts[len(t.pts)-t.keep:]...)
		return
	}
	t.width *= 2
	pts, ns := make([]Point, 0, t.keep), make([]int, 0, t.keep)
	for i, p := range t.pts {
		at := p.At / t.width * t.width
		if k := len(pts) - 1; k >= 0 && pts[k].At == at {
			w := ns[k] + t.ns[i]
			pts[k].Value = (pts[k].Value*float64(ns[k]) + p.Value*float64(t.ns[i])) / float64(w)
			ns[k] = w
			continue
		}
		pts, ns = append(pts, Point{At: at, Value: p.Value}), append(ns, t.ns[i])
	}
	t.pts, t.ns = pts, ns
	t.open /= 2
	// The open bucket may now share its (wider) bucket with the last point: fold that point in.
	if k := len(t.pts) - 1; k >= 0 && t.pts[k].At == time.Duration(t.open)*t.width {
		t.sum += t.pts[k].Value * float64(t.ns[k])
		t.n += t.ns[k]
		t.pts, t.ns = t.pts[:k], t.ns[:k]
	}
}

// view is the track as published: it shares the closed points.
func (t *track) view() Track {
	pts := t.pts
	span := time.Duration(0)
	if !t.adaptive {
		pts = pts[max(0, len(pts)-t.keep):]
		span = time.Duration(t.keep) * t.width
	}
	return Track{Width: t.width, Span: span, Points: pts[:len(pts):len(pts)]}
}

// timeline is one series at several resolutions.
type timeline struct {
	name   string
	tracks []*track
}

func newTimeline(name string, specs []trackSpec) *timeline {
	tl := &timeline{name: name}
	for _, s := range specs {
		tl.tracks = append(tl.tracks, newTrack(s))
	}
	return tl
}

func (tl *timeline) add(at time.Duration, v float64) {
	for _, t := range tl.tracks {
		t.add(at, v)
	}
}

func (tl *timeline) view() Timeline {
	out := Timeline{Name: tl.name, Tracks: make([]Track, len(tl.tracks))}
	for i, t := range tl.tracks {
		out.Tracks[i] = t.view()
	}
	return out
}
