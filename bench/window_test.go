package bench

import (
	"math"
	"testing"
	"time"
)

// TestWindowCoversItsSpanAtAnyRate: at a GPU's rate (50,000 samples a second, ITL on a fast
// engine) the rolling window still speaks for its whole span in fixed memory: 3/4 of the span
// at 1 ms then 1/4 at 100 ms has a median of 1 and a p99 of 100 (a window of the newest few
// thousand samples would say 100 for both), the count of every sample and the exact max.
func TestWindowCoversItsSpanAtAnyRate(t *testing.T) {
	w := newWindow(30*time.Second, 16384)
	const rate = 50_000
	start, end := 10*time.Second, 40*time.Second
	n := 0
	for at := start; at < end; at += time.Second / rate {
		v := 1.0
		if at >= start+22*time.Second+500*time.Millisecond {
			v = 100
		}
		if n == 1_000_000 {
			v = 250 // the largest, almost surely not among the kept samples
		}
		w.add(at, v)
		n++
	}
	d := w.dist(end)
	if d.P50 != 1 || d.P99 != 100 || d.Max != 250 || math.Abs(float64(d.N-n)) > float64(n)/100 {
		t.Errorf("dist = %+v, want p50 1, p99 100, max 250, N about %d", d, n)
	}
	kept := 0
	for _, s := range w.slots {
		kept += len(s.samples)
	}
	if kept > 16384 {
		t.Errorf("%d samples kept, more than the window's capacity", kept)
	}
}

// TestWindowExactWhenItFits: while no slot overflows, the window's distribution is makeDist of
// its samples, the report's own figures.
func TestWindowExactWhenItFits(t *testing.T) {
	w := newWindow(30*time.Second, 4096)
	var want []float64
	for i := range 2000 {
		at := time.Duration(i) * 20 * time.Millisecond // 50 a second: under a slot's share
		v := float64((i * 37) % 101)
		w.add(at, v)
		if at >= 40*time.Second-30*time.Second {
			want = append(want, v)
		}
	}
	if got, exp := w.dist(40*time.Second), makeDist(want); got != exp {
		t.Errorf("dist = %+v, want %+v", got, exp)
	}
}
