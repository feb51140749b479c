package remote

import (
	"math"
	"slices"
	"sort"
)

// Bucket is one cumulative histogram bucket: Count observations were <= UpperBound.
type Bucket struct {
	UpperBound float64
	Count      float64
}

// Histogram is a Prometheus histogram summed over its label sets. Buckets ascend by upper
// bound and end with +Inf; counts are cumulative.
type Histogram struct {
	Known   bool // the server exposes this histogram
	Buckets []Bucket
	Count   float64
	Sum     float64
}

// countAt is the cumulative count at bound b: that of the largest upper bound <= b (buckets
// whose layouts differ are summed this way; equal layouts are exact).
func (h *Histogram) countAt(b float64) float64 {
	i := sort.Search(len(h.Buckets), func(i int) bool { return h.Buckets[i].UpperBound > b })
	if i == 0 {
		return 0
	}
	return h.Buckets[i-1].Count
}

// add sums another series into h, over the union of both layouts. h's buckets are replaced,
// never written in place: they may be another histogram's too.
func (h *Histogram) add(o Histogram) {
	if !h.Known {
		*h = Histogram{Known: true, Buckets: append([]Bucket(nil), o.Buckets...), Count: o.Count, Sum: o.Sum}
		return
	}
	if sameLayout(*h, o) { // a fleet's servers of one kind, a window's stretches: bucket by bucket
		merged := make([]Bucket, len(h.Buckets))
		for i, b := range h.Buckets {
			merged[i] = Bucket{UpperBound: b.UpperBound, Count: b.Count + o.Buckets[i].Count}
		}
		h.Buckets, h.Count, h.Sum = merged, h.Count+o.Count, h.Sum+o.Sum
		return
	}
	bounds := make([]float64, 0, len(h.Buckets)+len(o.Buckets))
	for _, b := range h.Buckets {
		bounds = append(bounds, b.UpperBound)
	}
	for _, b := range o.Buckets {
		bounds = append(bounds, b.UpperBound)
	}
	sort.Float64s(bounds)
	merged := make([]Bucket, 0, len(bounds))
	for i, b := range bounds {
		if i > 0 && b == bounds[i-1] {
			continue
		}
		merged = append(merged, Bucket{UpperBound: b, Count: h.countAt(b) + o.countAt(b)})
	}
	h.Buckets, h.Count, h.Sum = merged, h.Count+o.Count, h.Sum+o.Sum
}

// addSame adds o, of h's layout, into h's buckets in place: they must be h's alone.
func (h *Histogram) addSame(o Histogram) {
	for i := range h.Buckets {
		h.Buckets[i].Count += o.Buckets[i].Count
	}
	h.Count, h.Sum = h.Count+o.Count, h.Sum+o.Sum
}

// Sub is the observations made between prev and h, two scrapes of the same histogram: bucket
// by bucket, h minus prev. If the server restarted in between (see sub), it is h alone,
// as Prometheus's increase() treats a counter reset. Unknown if either is.
func (h Histogram) Sub(prev Histogram) Histogram {
	d, _ := h.sub(prev)
	return d
}

// sub is Sub, and whether the server restarted between prev and h: a count or the sum went
// down (the histograms read observe durations and token counts, never negative), so h counts
// from zero and is taken whole.
func (h Histogram) sub(prev Histogram) (d Histogram, restarted bool) {
	if !h.Known || !prev.Known {
		return Histogram{}, false
	}
	if h.Count < prev.Count || h.Sum < prev.Sum {
		return h, true
	}
	out := Histogram{Known: true, Buckets: make([]Bucket, len(h.Buckets)), Count: h.Count - prev.Count, Sum: h.Sum - prev.Sum}
	for i, b := range h.Buckets {
		d := b.Count - prev.countAt(b.UpperBound)
		if d < 0 {
			return h, true
		}
		out.Buckets[i] = Bucket{UpperBound: b.UpperBound, Count: d}
	}
	return out, false
}

// Quantile estimates the q-quantile (0 <= q <= 1) as Prometheus's histogram_quantile does:
// linear interpolation inside the bucket holding the rank, a lower bound of 0 for the first
// bucket (its upper bound if that is <= 0), and the highest finite bound when the rank falls
// in the +Inf bucket. ok is false where histogram_quantile gives NaN or an infinity: no
// observations, fewer than two buckets, no +Inf bucket, q outside [0, 1], or q = 0 when the
// first bucket is empty.
func (h Histogram) Quantile(q float64) (float64, bool) {
	v, ok := h.quantile(q)
	if !ok || math.IsNaN(v) || math.IsInf(v, 0) { // a bound of -Inf
		return 0, false
	}
	return v, true
}

func (h Histogram) quantile(q float64) (float64, bool) {
	n := len(h.Buckets)
	if !h.Known || !(q >= 0 && q <= 1) || n < 2 || !math.IsInf(h.Buckets[n-1].UpperBound, 1) {
		return 0, false
	}
	// A monotone copy: a scrape taken mid-update can have a bucket below the one before.
	b := make([]Bucket, n)
	copy(b, h.Buckets)
	for i := 1; i < n; i++ {
		b[i].Count = max(b[i].Count, b[i-1].Count)
	}
	total := b[n-1].Count
	if total == 0 {
		return 0, false
	}
	rank := q * total
	i := sort.Search(n-1, func(i int) bool { return b[i].Count >= rank })
	switch {
	case i == n-1:
		return b[n-2].UpperBound, true
	case i == 0 && b[0].UpperBound <= 0:
		return b[0].UpperBound, true
	}
	start, end, count := 0.0, b[i].UpperBound, b[i].Count
	if i > 0 {
		start = b[i-1].UpperBound
		count -= b[i-1].Count
		rank -= b[i-1].Count
	}
	if count == 0 {
		return 0, false // q = 0 over an empty first bucket: 0/0, NaN in Prometheus
	}
	return start + (end-start)*(rank/count), true
}

// FirstBound is the first bucket's upper bound when it is finite and above 0. A Quantile at or
// below it was interpolated from a lower edge of 0 that the histogram does not record, so it
// says only "at most FirstBound" (vLLM's queue-time buckets start at 0.3 s: a queue of 1 ms has
// a p50 of 0.15 s). ok is false otherwise.
func (h Histogram) FirstBound() (float64, bool) {
	if !h.Known || len(h.Buckets) == 0 {
		return 0, false
	}
	b := h.Buckets[0].UpperBound
	return b, b > 0 && !math.IsInf(b, 1)
}

// Mean is Sum/Count; ok is false with no observations or a sum past float64's range.
func (h Histogram) Mean() (float64, bool) {
	if !h.Known || h.Count <= 0 {
		return 0, false
	}
	m := h.Sum / h.Count
	if math.IsNaN(m) || math.IsInf(m, 0) {
		return 0, false
	}
	return m, true
}

// sortBuckets orders buckets by upper bound and merges buckets with the same bound by adding
// their counts, as histogram_quantile does.
func sortBuckets(b []Bucket) []Bucket {
	sort.Slice(b, func(i, j int) bool { return b[i].UpperBound < b[j].UpperBound })
	out := b[:0]
	for _, x := range b {
		if n := len(out); n > 0 && out[n-1].UpperBound == x.UpperBound {
			out[n-1].Count += x.Count
			continue
		}
		out = append(out, x)
	}
	return out
}

// Within estimates the share of the observations at most x (0..1), as Prometheus's
// histogram_fraction does: the cumulative count at the bucket bounds, interpolated linearly
// inside the bucket that holds x (from 0 in the first; a first bound at or under 0 has no lower
// edge, and its bucket counts whole). floor says the share is only a lower bound: x lies past the
// highest finite bound, where the +Inf bucket's observations may or may not be at most x. ok is
// false with no observations, no +Inf bucket, or x not a number.
func (h Histogram) Within(x float64) (share float64, floor, ok bool) {
	in, total, floor, ok := h.within(x)
	if !ok {
		return 0, false, false
	}
	return in / total, floor, true
}

// within is Within as the observations at most x and the total they are a share of.
func (h Histogram) within(x float64) (in, total float64, floor, ok bool) {
	n := len(h.Buckets)
	if !h.Known || n < 2 || !math.IsInf(h.Buckets[n-1].UpperBound, 1) || math.IsNaN(x) {
		return 0, 0, false, false
	}
	b := make([]Bucket, n) // monotone, as quantile makes it
	copy(b, h.Buckets)
	for i := 1; i < n; i++ {
		b[i].Count = max(b[i].Count, b[i-1].Count)
	}
	total = b[n-1].Count
	if total == 0 {
		return 0, 0, false, false
	}
	last := b[n-2] // the highest finite bound
	switch {
	case math.IsInf(x, 1): // every observation
		return total, total, false, true
	case math.IsInf(x, -1): // none: histogram_fraction(-Inf, -Inf) is 0
		return 0, total, false, true
	case x >= last.UpperBound:
		return last.Count, total, x > last.UpperBound && total > last.Count, true
	}
	i := sort.Search(n-1, func(i int) bool { return b[i].UpperBound >= x })
	lo, below := 0.0, 0.0
	if i > 0 {
		lo, below = b[i-1].UpperBound, b[i-1].Count
	}
	hi := b[i].UpperBound
	switch {
	case i == 0 && hi <= 0: // the first bucket reaches down to -Inf: histogram_fraction counts it whole
		return b[0].Count, total, false, true
	case x <= lo || hi <= lo: // at or under 0 in the first bucket, or a degenerate bound
		return below, total, false, true
	}
	return below + (b[i].Count-below)*(x-lo)/(hi-lo), total, false, true
}

// withinEach is Within over hs, one latency's histograms in different bucket layouts (a fleet's
// servers, or one server's before and after an upgrade): the observations each estimates at most
// x, added up. Merged over the union of their bounds first, a coarser layout's observations
// would count only at their bucket's upper bound. floor where any one's share is a floor.
func withinEach(hs []Histogram, x float64) (share float64, floor, ok bool) {
	var in, total float64
	for _, h := range hs {
		if i, t, f, ok := h.within(x); ok {
			in, total, floor = in+i, total+t, floor || f
		}
	}
	if total == 0 {
		return 0, false, false
	}
	return in / total, floor, true
}

// sameLayout reports whether a and b have the same bucket bounds.
func sameLayout(a, b Histogram) bool {
	return slices.EqualFunc(a.Buckets, b.Buckets, func(x, y Bucket) bool { return x.UpperBound == y.UpperBound })
}

// addLayouts is acc with each of hs added into the histogram of its layout, or appended where
// acc has none of it; neither acc nor a histogram's buckets are written in place.
func addLayouts(acc, hs []Histogram) []Histogram {
	out := slices.Clone(acc)
	for _, h := range hs {
		if k := slices.IndexFunc(out, func(o Histogram) bool { return sameLayout(o, h) }); k >= 0 {
			out[k].add(h)
		} else {
			out = append(out, h)
		}
	}
	return out
}
