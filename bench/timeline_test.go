package bench

import (
	"math"
	"testing"
	"time"
)

// TestTrackBucketsAnyRate: a ring track holds the same span of time whatever the sample rate
// (2048 samples a second, as a GPU steps, or one every 3 s), each point the mean of its
// bucket, and its last point at most the open bucket and one sample gap behind the newest
// sample: the chart's axis and its data agree.
func TestTrackBucketsAnyRate(t *testing.T) {
	tests := []struct {
		name  string
		every time.Duration
	}{
		{"gpu steps", time.Second / 2048},
		{"cpu steps", 180 * time.Millisecond},
		{"slow steps", 3 * time.Second},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tr := newTrack(trackSpec{width: time.Second, keep: 120})
			end := 10 * time.Minute
			for at := time.Duration(0); at <= end; at += tc.every {
				tr.add(at, float64(at/time.Second%2)) // alternates 0 and 1 each second
			}
			v := tr.view()
			if v.Span != 120*time.Second || v.Width != time.Second {
				t.Fatalf("span %v width %v", v.Span, v.Width)
			}
			first, last := v.Points[0].At, v.Points[len(v.Points)-1].At
			if last < end-2*v.Width-tc.every || first > end-v.Span {
				t.Errorf("points cover %v..%v, want at least the last %v before %v", first, last, v.Span, end)
			}
			for _, p := range v.Points {
				if want := float64(p.At / time.Second % 2); p.Value != want {
					t.Fatalf("bucket at %v = %v, want the mean of its samples %v", p.At, p.Value, want)
				}
			}
		})
	}
}

// TestAdaptiveTrackKeepsAll: an adaptive track covers the whole session in at most keep points,
// its buckets doubling as they fill, every merge a sample-weighted mean.
func TestAdaptiveTrackKeepsAll(t *testing.T) {
	tr := newTrack(trackSpec{width: time.Second, keep: 16, adaptive: true})
	end := 1000 * time.Second
	for at := time.Duration(0); at < end; at += 100 * time.Millisecond {
		tr.add(at, 1)
		if at%(10*time.Second) == 0 {
			tr.add(at, 4) // one more sample every 10 s: means stay weighted
		}
	}
	v := tr.view()
	if len(v.Points) > 16 || v.Span != 0 || v.Width != 64*time.Second {
		t.Fatalf("%d points of %v (span %v), want at most 16 of 64 s", len(v.Points), v.Width, v.Span)
	}
	if v.Points[0].At != 0 || v.Points[len(v.Points)-1].At < end-2*v.Width {
		t.Errorf("points cover %v..%v, want 0..%v", v.Points[0].At, v.Points[len(v.Points)-1].At, end)
	}
	// A full 64 s bucket holds 640 samples of 1 and 6 or 7 of 4.
	for _, p := range v.Points[:len(v.Points)-1] {
		lo, hi := (640+6*4)/646.0, (640+7*4)/647.0
		if p.Value < lo-1e-9 || p.Value > hi+1e-9 {
			t.Errorf("bucket at %v = %v, want the weighted mean (%.4f..%.4f)", p.At, p.Value, lo, hi)
		}
	}
}

// TestTrackViewIsImmutable: a published track never changes, however many samples follow.
func TestTrackViewIsImmutable(t *testing.T) {
	for _, spec := range []trackSpec{{width: time.Second, keep: 8}, {width: time.Second, keep: 8, adaptive: true}} {
		tr := newTrack(spec)
		for i := range 20 {
			tr.add(time.Duration(i)*time.Second, float64(i))
		}
		v := tr.view()
		before := append([]Point(nil), v.Points...)
		for i := 20; i < 200; i++ {
			tr.add(time.Duration(i)*time.Second, math.NaN())
		}
		for i := range before {
			if v.Points[i] != before[i] {
				t.Fatalf("adaptive %v: point %d changed from %v to %v", spec.adaptive, i, before[i], v.Points[i])
			}
		}
	}
}
