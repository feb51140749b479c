package remote

import (
	"math"
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

// add sums another series into h, over the union of both layouts.
func (h *Histogram) add(o Histogram) {
	if !h.Known {
		*h = Histogram{Known: true, Buckets: append([]Bucket(nil), o.Buckets...), Count: o.Count, Sum: o.Sum}
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

// Sub is the observations made between prev and h, two scrapes of the same histogram: bucket
// by bucket, h minus prev. If the server restarted in between (a count or the sum went down:
// the histograms read observe durations and token counts, never negative), it is h alone, as
// Prometheus's increase() treats a counter reset. Unknown if either is.
func (h Histogram) Sub(prev Histogram) Histogram {
	if !h.Known || !prev.Known {
		return Histogram{}
	}
	if h.Count < prev.Count || h.Sum < prev.Sum {
		return h
	}
	out := Histogram{Known: true, Buckets: make([]Bucket, len(h.Buckets)), Count: h.Count - prev.Count, Sum: h.Sum - prev.Sum}
	for i, b := range h.Buckets {
		d := b.Count - prev.countAt(b.UpperBound)
		if d < 0 {
			return h
		}
		out.Buckets[i] = Bucket{UpperBound: b.UpperBound, Count: d}
	}
	return out
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
// inside the bucket that holds x (from 0 in the first). floor says the share is only a lower
// bound: x lies past the highest finite bound, where the +Inf bucket's observations may or may
// not be at most x. ok is false with no observations, no +Inf bucket, or x not a number.
func (h Histogram) Within(x float64) (share float64, floor, ok bool) {
	n := len(h.Buckets)
	if !h.Known || n < 2 || !math.IsInf(h.Buckets[n-1].UpperBound, 1) || math.IsNaN(x) {
		return 0, false, false
	}
	b := make([]Bucket, n) // monotone, as quantile makes it
	copy(b, h.Buckets)
	for i := 1; i < n; i++ {
		b[i].Count = max(b[i].Count, b[i-1].Count)
	}
	total := b[n-1].Count
	if total == 0 {
		return 0, false, false
	}
	if x >= b[n-2].UpperBound {
		return b[n-2].Count / total, x > b[n-2].UpperBound && b[n-1].Count > b[n-2].Count, true
	}
	i := sort.Search(n-1, func(i int) bool { return b[i].UpperBound >= x })
	lo, below := 0.0, 0.0
	if i > 0 {
		lo, below = b[i-1].UpperBound, b[i-1].Count
	}
	hi := b[i].UpperBound
	if x <= lo || hi <= lo { // at or under 0 in the first bucket, or a degenerate bound
		return below / total, false, true
	}
	return (below + (b[i].Count-below)*(x-lo)/(hi-lo)) / total, false, true
}
