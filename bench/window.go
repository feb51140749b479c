package bench

import (
	"math"
	"math/rand/v2"
	"sort"
	"time"
)

// sample is one timestamped value of a rolling window.
type sample struct {
	at time.Duration
	v  float64
}

// window is a rolling window over the last span of time in fixed memory at any sample rate: the
// span is cut into slots of a second, and a slot keeps at most perSlot of the samples that came
// in it, a uniform sample of them (reservoir sampling), each kept one standing for n/kept. While
// no slot overflows its percentiles are exact; past that they are estimates from a uniform sample
// of the whole span, not exact figures over its last few thousand samples. Not safe for
// concurrent use: its owner's lock guards it.
type window struct {
	span    time.Duration
	perSlot int
	slots   []slot // ring by slot index: span/slotWidth + 1 of them
	rng     *rand.Rand
}

// slotWidth is the time a window slot covers.
const slotWidth = time.Second

// slot is one second of a window's samples.
type slot struct {
	idx     int64    // at / slotWidth of its samples; -1: unused
	n       int      // samples that came in it
	max     float64  // the largest of them (kept or not)
	samples []sample // at most perSlot of them
}

// newWindow holds up to capacity samples over span.
func newWindow(span time.Duration, capacity int) *window {
	n := int(span/slotWidth) + 1
	w := &window{span: span, perSlot: max(1, capacity/n), slots: make([]slot, n), rng: rand.New(rand.NewPCG(1, 2))}
	for i := range w.slots {
		w.slots[i].idx = -1
	}
	return w
}

// add files v, sampled at at. A sample older than the slot in its place is older than the span.
func (w *window) add(at time.Duration, v float64) {
	idx := int64(at / slotWidth)
	s := &w.slots[idx%int64(len(w.slots))]
	switch {
	case idx < s.idx:
		return
	case idx > s.idx:
		s.idx, s.n, s.max, s.samples = idx, 0, math.Inf(-1), s.samples[:0]
	}
	s.n++
	s.max = math.Max(s.max, v)
	if len(s.samples) < w.perSlot {
		s.samples = append(s.samples, sample{at, v})
	} else if j := w.rng.IntN(s.n); j < w.perSlot {
		s.samples[j] = sample{at, v}
	}
}

// values returns the kept samples newer than now - span, oldest slot first.
func (w *window) values(now time.Duration) []float64 {
	var out []float64
	w.each(now, func(s *slot, x sample) { out = append(out, x.v) })
	return out
}

// each calls f for every kept sample newer than now - span, oldest slot first.
func (w *window) each(now time.Duration, f func(s *slot, x sample)) {
	first := int64((now - w.span) / slotWidth)
	for k := range w.slots {
		idx := first + int64(k)
		if idx < 0 {
			continue
		}
		s := &w.slots[idx%int64(len(w.slots))]
		if s.idx != idx {
			continue
		}
		for _, x := range s.samples {
			if x.at >= now-w.span {
				f(s, x)
			}
		}
	}
}

// dist is the window's distribution at now: exact while every slot kept all its samples,
// else weighted by what each kept sample stands for (N is then the estimated count).
func (w *window) dist(now time.Duration) Dist {
	var xs []weighted
	exact := true
	mx := math.Inf(-1)
	w.each(now, func(s *slot, x sample) {
		wt := float64(s.n) / float64(len(s.samples))
		exact = exact && s.n == len(s.samples)
		xs = append(xs, weighted{x.v, wt})
		mx = math.Max(mx, s.max)
	})
	if exact {
		vals := make([]float64, len(xs))
		for i, x := range xs {
			vals[i] = x.v
		}
		return makeDist(vals)
	}
	d := weightedDist(xs)
	d.Max = math.Max(d.Max, mx)
	return d
}

// weighted is a sample standing for w samples.
type weighted struct{ v, w float64 }

// weightedDist is makeDist over samples each standing for w copies: numpy's linear
// interpolation between closest ranks, ranks counted over the copies.
func weightedDist(xs []weighted) Dist {
	if len(xs) == 0 {
		return makeDist(nil)
	}
	sort.Slice(xs, func(i, j int) bool { return xs[i].v < xs[j].v })
	total, sum := 0.0, 0.0
	for _, x := range xs {
		total += x.w
		sum += x.v * x.w
	}
	at := func(p float64) float64 {
		rank := p / 100 * (total - 1)
		lo, frac := math.Floor(rank), rank-math.Floor(rank)
		return lerp(valueAtRank(xs, lo), valueAtRank(xs, lo+1), frac)
	}
	return Dist{P50: at(50), P95: at(95), P99: at(99), Mean: sum / total, Max: xs[len(xs)-1].v, N: int(math.Round(total))}
}

// valueAtRank is the value of the copy at rank r (0-based) among the samples' copies.
func valueAtRank(xs []weighted, r float64) float64 {
	c := 0.0
	for _, x := range xs {
		if c += x.w; r < c {
			return x.v
		}
	}
	return xs[len(xs)-1].v
}

// lerp interpolates from a to b by f as numpy's percentile does (_lerp): from b for f >= 0.5, so
// that its result is numpy's to the bit. The conversions keep each product rounded on its own.
func lerp(a, b, f float64) float64 {
	d := b - a
	if f >= 0.5 {
		return b - float64(d*(1-f))
	}
	return a + float64(d*f)
}
