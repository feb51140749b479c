package tui

import (
	"testing"

	"github.com/muesli/termenv"
)

// BenchmarkView is one View() of the full dashboard at 200x60: what Bubble Tea calls per frame.
// Update caches the frame, so this is a string return.
func BenchmarkView(b *testing.B) {
	m := sized(b, newFakeSession(testView()), "dark", 200, 60)
	b.ReportAllocs()
	for b.Loop() {
		if len(m.View()) == 0 {
			b.Fatal("empty frame")
		}
	}
}

// BenchmarkRedraw is the real per-tick cost when a new view arrives: every chart re-pushed and
// drawn, every pane rendered, the frame composed, at 200x60 with full charts.
func BenchmarkRedraw(b *testing.B) {
	m := sized(b, newFakeSession(testView()), "dark", 200, 60)
	b.ReportAllocs()
	for b.Loop() {
		m.refresh(true)
	}
}

// BenchmarkRedrawTrueColor is BenchmarkRedraw with colour escapes, as on a real terminal.
func BenchmarkRedrawTrueColor(b *testing.B) {
	r := asciiRenderer()
	r.SetColorProfile(termenv.TrueColor)
	m, err := New(newFakeSession(testView()), r, "dark")
	if err != nil {
		b.Fatal(err)
	}
	tm, _ := m.Update(sizeMsg(200, 60))
	m = tm.(Model)
	b.ReportAllocs()
	for b.Loop() {
		m.refresh(true)
	}
}
