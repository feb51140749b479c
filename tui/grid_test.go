package tui

import (
	"io"
	"strings"
	"testing"

	"github.com/NimbleMarkets/ntcharts/canvas"
	"github.com/NimbleMarkets/ntcharts/canvas/graph"
	"github.com/charmbracelet/lipgloss"
	"github.com/charmbracelet/x/ansi"
	"github.com/muesli/termenv"

	"rosetop/themes"
)

// grid.column draws the runes graph.DrawColumnBottomToTop draws, fractions included.
func TestGridColumnMatchesNtcharts(t *testing.T) {
	const h = 6
	vals := []float64{-1, 0, 0.05, 0.0625, 0.07, 0.5, 0.99, 1, 2.3, 5.97, 6, 7.5}
	cv := canvas.New(len(vals), h)
	var g grid
	g.resize(len(vals), h)
	for x, v := range vals {
		graph.DrawColumnBottomToTop(&cv, canvas.Point{X: x, Y: h - 1}, v, lipgloss.NewStyle())
		g.column(x, h-1, v, inkSeries)
	}
	for y := range h {
		for x := range vals {
			if want, got := cv.Cell(canvas.Point{X: x, Y: y}).Rune, g.at(x, y); got != want {
				t.Fatalf("v=%g row %d: grid %q, ntcharts %q", vals[x], y, got, want)
			}
		}
	}
}

// dots maps points and lines to the braille patterns graph.BrailleGrid makes of them.
func TestDotsMatchBrailleGrid(t *testing.T) {
	const cw, ch = 13, 5
	x0, x1, y0, y1 := 30.0, 90.0, -1.0, 3.0
	pts := [][2]float64{{30, -1}, {31.7, 0.2}, {45, 2.9}, {45.1, 3}, {60, 1.234}, {77.7, -0.5}, {90, 3}, {89.9, 0}}
	bg := graph.NewBrailleGrid(cw, ch, x0, x1, y0, y1)
	var d dots
	d.reset(cw, ch, x0, x1, y0, y1)
	var prev canvas.Point
	for i, p := range pts {
		want := bg.GridPoint(canvas.Float64Point{X: p[0], Y: p[1]})
		var got canvas.Point
		got.X, got.Y = d.point(p[0], p[1])
		if got != want {
			t.Fatalf("point %v: dots %v, BrailleGrid %v", p, got, want)
		}
		if i > 0 {
			for _, q := range graph.GetLinePoints(prev, got) {
				bg.Set(q)
				d.set(q.X, q.Y)
			}
		}
		prev = got
	}
	for y, row := range bg.BraillePatterns() {
		for x, r := range row {
			if got := 0x2800 | rune(d.bits[y*cw+x]); got != r {
				t.Fatalf("cell (%d,%d): dots %q, BrailleGrid %q", x, y, got, r)
			}
		}
	}
}

// render styles neighbouring cells that look the same as one run, and empty cells as spaces.
func TestGridRender(t *testing.T) {
	r := lipgloss.NewRenderer(io.Discard)
	r.SetColorProfile(termenv.TrueColor)
	st, err := themes.NewFor(r, themes.Dark)
	if err != nil {
		t.Fatal(err)
	}
	p := newPaint(st)
	var g grid
	g.resize(12, 3)
	g.text(1, 0, "abc", inkSeries)
	g.text(4, 0, "de", inkWarn)
	g.text(0, 2, "⣿⣀", inkSeries)
	g.set(2, 2, '┊', inkMarker)
	got := g.render(p)
	want := " abcde      \n            \n⣿⣀┊         "
	if ansi.Strip(got) != want {
		t.Fatalf("text = %q, want %q", ansi.Strip(got), want)
	}
	seq := strings.SplitN(p.Series[0].Render("x"), "x", 2)[0]
	if n := strings.Count(got, seq); n != 2 {
		t.Fatalf("series runs = %d, want 2 (one per row that has one): %q", n, got)
	}
	g.clear()
	if s := g.render(p); s != strings.Repeat(" ", 12)+"\n"+strings.Repeat(" ", 12)+"\n"+strings.Repeat(" ", 12) {
		t.Fatalf("cleared grid = %q", s)
	}
	for k := range p.inks {
		if c := p.class[k]; keyOf(p.inks[c].style) != keyOf(p.inks[k].style) {
			t.Fatalf("ink %d in class %d of another look", k, c)
		}
	}
	// Without colour the axis looks like an empty cell: one run, as ntcharts' cells would merge.
	none, err := themes.NewFor(r, themes.None)
	if err != nil {
		t.Fatal(err)
	}
	if c := newPaint(none).class[inkAxis]; c != inkNone {
		t.Fatalf("no-colour axis in class %d, want %d (plain)", c, inkNone)
	}
}
