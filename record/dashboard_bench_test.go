package record_test

import (
	"testing"

	"rosetop/bench"
	"rosetop/record"
)

// BenchmarkDashboardTick is the dashboard's own work per view, at 200x60 in truecolor on views
// ten minutes into a session: a tick that finds a new view and draws every changed pane. The
// recording's cost per view (BenchmarkRecordView) is set against it.
func BenchmarkDashboardTick(b *testing.B) {
	s := record.NewSynth(1)
	for range 6000 {
		s.Next()
	}
	views := make([]*bench.View, 600)
	for i := range views {
		views[i] = s.Next()
	}
	sess := &stepSession{}
	sess.set(views[0])
	d := newDashboard(nil, sess, 200, 60)
	d.frame()
	i := 1
	for b.Loop() {
		sess.set(views[i%len(views)])
		d.frame()
		i++
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)*10/1e9*100, "%core@10Hz")
}
