package record

import (
	"path/filepath"
	"testing"

	"rosetop/bench"
)

// tenMinutesIn returns n views of a Synth that has run ten minutes: every track and ring full.
func tenMinutesIn(n int) []*bench.View {
	s := NewSynth(1)
	for range 6000 {
		s.Next()
	}
	views := make([]*bench.View, n)
	for i := range views {
		views[i] = s.Next()
	}
	return views
}

// BenchmarkRecordView is what recording costs a dashboard per view it reads: the change from
// the previous view encoded and appended to the file (one write). The dashboard reads 10 views
// a second; %core is that rate's share of one core. Compare with BenchmarkDashboardTick, the
// dashboard's own work per view.
func BenchmarkRecordView(b *testing.B) {
	benchRecord(b, tenMinutesIn(3000))
}

// BenchmarkOpenHour is Open's one pass over an hour of views: the wait before a replay starts.
func BenchmarkOpenHour(b *testing.B) {
	path := filepath.Join(b.TempDir(), "hour.rec")
	if err := WriteSynth(path, 36_000, 7); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		rec, err := Open(path)
		if err != nil {
			b.Fatal(err)
		}
		rec.Close()
	}
}

// BenchmarkRecordRealView is BenchmarkRecordView over the views of a real session: the
// committed CPU recording's, decoded (consecutive views share their tracks as bench's do).
func BenchmarkRecordRealView(b *testing.B) {
	rec, err := Open("../testdata/recordings/cpu-tiny-v1.rec")
	if err != nil {
		b.Fatal(err)
	}
	defer rec.Close()
	c := rec.NewCursor()
	views := make([]*bench.View, rec.Frames())
	for i := range views {
		if views[i], err = c.View(i); err != nil {
			b.Fatal(err)
		}
	}
	benchRecord(b, views)
}

// benchRecord times writing views in turn (after the first): per view, its share of a core at
// 10 views a second, and the bytes it added.
func benchRecord(b *testing.B, views []*bench.View) {
	w, err := newWriter(filepath.Join(b.TempDir(), "b.rec"), Meta{})
	if err != nil {
		b.Fatal(err)
	}
	defer w.close()
	w.view(views[0])
	start := w.bytes()
	b.ReportAllocs()
	i := 1
	for b.Loop() {
		w.view(views[i%len(views)])
		i++
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)*10/1e9*100, "%core@10Hz")
	b.ReportMetric(float64(w.bytes()-start)/float64(b.N), "bytes/view")
}
