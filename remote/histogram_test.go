package remote

import (
	"math"
	"testing"
	"time"

	"rosetop/bench"
)

func hist(pairs ...float64) Histogram {
	h := Histogram{Known: true}
	for i := 0; i+1 < len(pairs); i += 2 {
		h.Buckets = append(h.Buckets, Bucket{UpperBound: pairs[i], Count: pairs[i+1]})
	}
	if n := len(h.Buckets); n > 0 {
		h.Count = h.Buckets[n-1].Count
	}
	return h
}

var inf = math.Inf(1)

// TestQuantile follows Prometheus's bucketQuantile (promql/quantile.go) case by case.
func TestQuantile(t *testing.T) {
	tests := []struct {
		name string
		h    Histogram
		q    float64
		want float64
		ok   bool
	}{
		{"median inside a bucket", hist(0.1, 10, 0.5, 30, 1, 40, inf, 40), 0.5, 0.3, true},
		{"p99 in the last finite bucket", hist(0.1, 10, 0.5, 30, 1, 40, inf, 40), 0.99, 0.98, true},
		{"first bucket from zero", hist(0.1, 10, 0.5, 30, inf, 30), 0.25, 0.075, true},
		{"rank in the +Inf bucket", hist(0.1, 10, 1, 40, inf, 45), 0.99, 1, true},
		{"q = 1 in the +Inf bucket", hist(0.1, 10, 1, 40, inf, 45), 1, 1, true},
		{"q = 0", hist(0.1, 10, 1, 40, inf, 40), 0, 0, true},
		{"q = 0 over an empty first bucket", hist(0.1, 0, 1, 40, inf, 40), 0, 0, false},
		{"negative first bound", hist(-1, 5, 1, 10, inf, 10), 0.2, -1, true},
		{"non-monotone buckets are lifted", hist(0.1, 10, 0.5, 8, 1, 20, inf, 20), 0.75, 0.75, true},
		{"no observations", hist(0.1, 0, inf, 0), 0.5, 0, false},
		{"no +Inf bucket", hist(0.1, 1, 0.5, 2), 0.5, 0, false},
		{"one bucket", hist(inf, 3), 0.5, 0, false},
		{"q above 1", hist(0.1, 10, inf, 10), 1.5, 0, false},
		{"q NaN", hist(0.1, 10, inf, 10), math.NaN(), 0, false},
		{"unknown", Histogram{}, 0.5, 0, false},
		{"-Inf first bound", hist(-inf, 5, inf, 10), 0.25, 0, false},
		{"rank in the +Inf bucket after a -Inf bound", hist(-inf, 5, inf, 10), 0.9, 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := tt.h.Quantile(tt.q)
			if ok != tt.ok || math.Abs(got-tt.want) > 1e-12 {
				t.Fatalf("Quantile(%v) = %v, %v; want %v, %v", tt.q, got, ok, tt.want, tt.ok)
			}
		})
	}
}

func TestHistogramSub(t *testing.T) {
	prev := hist(0.1, 10, 0.5, 30, inf, 40)
	prev.Sum = 12
	cur := hist(0.1, 12, 0.5, 50, inf, 70)
	cur.Sum = 20
	d := cur.Sub(prev)
	want := hist(0.1, 2, 0.5, 20, inf, 30)
	if !d.Known || d.Count != 30 || d.Sum != 8 || len(d.Buckets) != 3 {
		t.Fatalf("delta %+v", d)
	}
	for i, b := range d.Buckets {
		if b != want.Buckets[i] {
			t.Errorf("bucket %d: %+v, want %+v", i, b, want.Buckets[i])
		}
	}
	// Over the window only the new observations count: its median is inside (0.1, 0.5].
	if q, ok := d.Quantile(0.5); !ok || math.Abs(q-(0.1+0.4*(13.0/18))) > 1e-12 {
		t.Errorf("window median %v %v", q, ok)
	}
	// A restart (counts went down) leaves the new histogram alone.
	restarted := hist(0.1, 1, 0.5, 2, inf, 3)
	if r := restarted.Sub(cur); r.Count != 3 || r.Buckets[2].Count != 3 {
		t.Errorf("after a restart: %+v", r)
	}
	// So does a restart followed by more observations than before: only the sum went down.
	busy := hist(0.1, 20, 0.5, 60, inf, 80)
	busy.Sum = 5
	if r := busy.Sub(cur); r.Count != 80 || r.Sum != 5 || r.Buckets[0].Count != 20 {
		t.Errorf("after a restart and 80 observations: %+v", r)
	}
	if u := cur.Sub(Histogram{}); u.Known {
		t.Error("delta against an unknown histogram is known")
	}
	if m, ok := d.Mean(); !ok || m != 8.0/30 {
		t.Errorf("mean %v %v", m, ok)
	}
}

// TestMeanOverflow: series whose sums add past float64's range have no mean, not +Inf.
func TestMeanOverflow(t *testing.T) {
	one := hist(1, 2, inf, 2)
	one.Sum = math.MaxFloat64
	var h Histogram
	h.add(one)
	h.add(one)
	if m, ok := h.Mean(); ok {
		t.Fatalf("mean %v of a sum past float64", m)
	}
}

// TestHistogramAdd: series with different layouts sum over the union of their bounds.
func TestHistogramAdd(t *testing.T) {
	var h Histogram
	h.add(hist(0.1, 1, 1, 3, inf, 4))
	h.add(hist(0.5, 2, 1, 5, inf, 6))
	want := []Bucket{{0.1, 1}, {0.5, 1 + 2}, {1, 3 + 5}, {inf, 10}}
	if h.Count != 10 || len(h.Buckets) != len(want) {
		t.Fatalf("%+v", h)
	}
	for i, b := range h.Buckets {
		if b != want[i] {
			t.Errorf("bucket %d: %+v, want %+v", i, b, want[i])
		}
	}
}

// TestFirstBound: the first bucket's upper bound, where quantiles interpolated from 0 end; none
// when it is 0 or below (histogram_quantile then returns it as it is) or there are no buckets.
func TestFirstBound(t *testing.T) {
	vllmQueue := Histogram{Known: true, Count: 4, Buckets: []Bucket{{0.3, 4}, {0.5, 4}, {math.Inf(1), 4}}}
	if b, ok := vllmQueue.FirstBound(); !ok || b != 0.3 {
		t.Errorf("FirstBound = %v, %v; want 0.3", b, ok)
	}
	if q, _ := vllmQueue.Quantile(0.5); q != 0.15 { // what it qualifies: a queue of a few ms reads 150 ms
		t.Errorf("p50 = %v, want 0.15", q)
	}
	for _, h := range []Histogram{
		{Known: true, Buckets: []Bucket{{0, 1}, {1, 2}, {math.Inf(1), 2}}},
		{Known: true, Buckets: []Bucket{{math.Inf(1), 2}}},
		{Known: true},
		{Buckets: []Bucket{{0.3, 1}, {math.Inf(1), 1}}},
	} {
		if b, ok := h.FirstBound(); ok {
			t.Errorf("%+v: FirstBound = %v, want none", h, b)
		}
	}
}

// TestWithin: the share of observations at most x, as Prometheus' histogram_fraction estimates it
// from cumulative buckets: exact at a bound, linear inside a bucket (from 0 in the first), a
// lower bound past the last finite bound when the +Inf bucket holds observations.
func TestWithin(t *testing.T) {
	h := hist(0.1, 20, 0.5, 60, 1, 90, inf, 100) // 20 at most 0.1 s, 40 more to 0.5, 30 to 1, 10 past 1
	for _, tc := range []struct {
		x            float64
		share        float64
		floor, valid bool
	}{
		{0.1, 0.2, false, true},        // a bound: exact
		{0.05, 0.1, false, true},       // half the first bucket, from 0
		{0.3, 0.4, false, true},        // 20 + 40 * (0.2 / 0.4)
		{0.5, 0.6, false, true},        // a bound
		{1, 0.9, false, true},          // the last finite bound
		{2, 0.9, true, true},           // past it: at least 0.9
		{-1, 0, false, true},           // below 0
		{inf, 1, false, true},          // every observation
		{math.Inf(-1), 0, false, true}, // none
		{math.NaN(), 0, false, false},  // not a number
	} {
		share, floor, ok := h.Within(tc.x)
		if ok != tc.valid || floor != tc.floor || math.Abs(share-tc.share) > 1e-12 {
			t.Errorf("Within(%v) = %v, %v, %v; want %v, %v, %v", tc.x, share, floor, ok, tc.share, tc.floor, tc.valid)
		}
	}
	if share, floor, ok := hist(1, 5, inf, 5).Within(2); !ok || floor || share != 1 {
		t.Errorf("past the last bound with an empty +Inf bucket: %v, %v, %v; want exactly 1", share, floor, ok)
	}
	// A first bound at or under 0 has no lower edge to interpolate from: histogram_fraction
	// (BucketFraction) counts its bucket whole, at its bound and under it.
	for _, x := range []float64{0, -0.5} {
		if share, floor, ok := hist(0, 4, 1, 6, inf, 8).Within(x); !ok || floor || share != 0.5 {
			t.Errorf("Within(%v) with a first bound of 0: %v, %v, %v; want the first bucket's 4 of 8", x, share, floor, ok)
		}
	}
	if share, _, _ := hist(0, 4, 1, 6, inf, 8).Within(0.5); share != 0.625 { // 4 + 2 * (0.5 / 1) of 8
		t.Errorf("Within(0.5) past a first bound of 0: %v; want 0.625", share)
	}
	for _, h := range []Histogram{hist(0.1, 0, inf, 0), hist(0.1, 3), {}} {
		if _, _, ok := h.Within(0.1); ok {
			t.Errorf("%+v: a share without observations or a +Inf bucket", h)
		}
	}
}

// TestSLOShares: a --goodput target on TTFT or end-to-end latency gives that latency the share
// of its observations within it, in the window and since the start; tpot has no histogram of
// its own here and marks none.
func TestSLOShares(t *testing.T) {
	then := Snapshot{Kind: KindVLLM, TTFT: hist(0.1, 0, 0.5, 0, inf, 0), E2E: hist(1, 0, 5, 0, inf, 0)}
	now := Snapshot{At: time.Second, Kind: KindVLLM, TTFT: hist(0.1, 50, 0.5, 90, inf, 100), E2E: hist(1, 10, 5, 40, inf, 40)}
	slos := []bench.SLO{{Metric: "ttft", Ms: 100}, {Metric: "tpot", Ms: 20}, {Metric: "e2el", Ms: 3000}}
	by := map[string]bench.ServerLatency{}
	gs, _ := gains(&now, &then)
	for _, l := range summarize(gs, slos) {
		by[l.Name] = l
	}
	if l := by["TTFT"]; l.Target != 100 || !l.Within.Known || l.Within.V != 0.5 || l.WithinFloor {
		t.Errorf("TTFT: %+v; want target 100 ms, half within", l)
	}
	if l := by["E2E latency"]; l.Target != 3000 || math.Abs(l.Within.V-0.625) > 1e-12 { // 10 + 30 * (2 / 4) of 40
		t.Errorf("E2E latency: %+v; want target 3000 ms, 0.625 within", l)
	}
	if l := by["ITL"]; l.Target != 0 || l.Within.Known {
		t.Errorf("ITL carries a target: %+v", l)
	}
}
