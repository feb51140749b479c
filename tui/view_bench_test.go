package tui

import (
	"testing"
	"time"

	"github.com/muesli/termenv"

	"rosetop/bench"
)

// The frame benchmarks run at 200x60 with every pane full (testView). Bubble Tea calls View
// after every Update, and the dashboard does its drawing in Update when the Session has published
// a new view (~10 Hz), so "one View()" is measured as that tick's Update plus View: a frame
// drawn from a fresh view, not the cached string (see BenchmarkViewCached for that).

// freshViews returns n views as a session publishes them 100 ms apart: new slices every time,
// the clock and every time series moved on, latency percentiles and the ITL window changed. The
// cold-vs-steady rows, the ledger and the events are equal in value (new slices): between run
// boundaries that is what a real session publishes.
func freshViews(n int) []*bench.View {
	vs := make([]*bench.View, n)
	for i := range vs {
		v := testView()
		dt := time.Duration(i) * 100 * time.Millisecond
		v.Now += dt
		v.Header.Elapsed += dt
		v.Header.TokensPerSec += float64(i)
		shift := func(tls []bench.Timeline) {
			for _, tl := range tls {
				for _, tr := range tl.Tracks {
					for j := range tr.Points {
						tr.Points[j].At += dt
					}
				}
			}
		}
		shift(v.Queue)
		shift(v.P99)
		v.QueueLast.Waiting += i % 7
		for j := range v.Admissions {
			v.Admissions[j].At += dt
		}
		for j := range v.Latency {
			v.Latency[j].Dist.P99 += float64(i)
		}
		v.ITL = append(v.ITL[i%len(v.ITL):], v.ITL[:i%len(v.ITL)]...)
		vs[i] = v
	}
	return vs
}

// publish replaces the session's view, as the real session does on each step.
func (f *fakeSession) publish(v *bench.View) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.v = v
}

// benchFrames times one frame per iteration: the session publishes a fresh view, the tick's
// Update reads and draws it, View returns it. full drops the table panes' memos first, so every
// pane is drawn (the cost after a resize or a theme change, and the bound on any frame).
func benchFrames(b *testing.B, profile termenv.Profile, full bool) {
	r := asciiRenderer()
	r.SetColorProfile(profile)
	views := freshViews(32)
	s := newFakeSession(views[0])
	m0, err := New(s, r, "dark")
	if err != nil {
		b.Fatal(err)
	}
	tm, _ := m0.Update(sizeMsg(200, 60))
	m := tm.(Model)
	tick := tickMsg{id: m.id}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		i++
		s.publish(views[i%len(views)])
		if full {
			*m.cache = paneCache{}
		}
		tm, _ = m.Update(tick)
		m = tm.(Model)
		if len(m.View()) == 0 {
			b.Fatal("empty frame")
		}
	}
}

// BenchmarkView is one View() at 200x60 with full charts from a fresh view, in truecolor (what
// users run): the number the dashboard issue's < 3 ms target is about.
func BenchmarkView(b *testing.B) { benchFrames(b, termenv.TrueColor, false) }

// BenchmarkViewASCII is BenchmarkView without colour (NO_COLOR, golden tests).
func BenchmarkViewASCII(b *testing.B) { benchFrames(b, termenv.Ascii, false) }

// BenchmarkRedraw is a frame from a fresh view with every pane drawn (no pane memo), no colour.
func BenchmarkRedraw(b *testing.B) { benchFrames(b, termenv.Ascii, true) }

// BenchmarkRedrawTrueColor is BenchmarkRedraw in truecolor: the most any frame costs.
func BenchmarkRedrawTrueColor(b *testing.B) { benchFrames(b, termenv.TrueColor, true) }

// BenchmarkViewCached is View() when nothing changed since the last Update: Bubble Tea's
// repaint between ticks, a string return.
func BenchmarkViewCached(b *testing.B) {
	m := sized(b, newFakeSession(testView()), "dark", 200, 60)
	b.ReportAllocs()
	for b.Loop() {
		if len(m.View()) == 0 {
			b.Fatal("empty frame")
		}
	}
}
