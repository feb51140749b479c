package tui

import (
	"math"
	"strings"

	"github.com/NimbleMarkets/ntcharts/canvas/runes"

	"rosetop/themes"
)

// ink names one of the chart pens of a paint. A grid cell stores an ink (one byte) where an
// ntcharts canvas cell stores a whole lipgloss.Style (~500 bytes with pointers): clearing,
// drawing and reading ~6k chart cells a frame through Styles was a third of a redraw.
type ink uint8

const (
	inkNone   ink = iota // an empty cell or unstyled text
	inkAxis              // chart axes
	inkLabel             // axis labels
	inkMarker            // marker lines and labels
	inkWarn              // saturated bars, the admission limit line
	inkSeries            // inkSeries+i is series i
	nInk      = inkSeries + themes.NumSeries
)

// grid is a chart's cells, w x h, kept between frames and redrawn in place. The drawing
// primitives below are those of ntcharts' canvas/graph packages, cell for cell (runes, clipping,
// braille and block rules), on this compact form.
type grid struct {
	w, h  int
	cells []rune // (h, w); 0 is empty (drawn as a space)
	inks  []ink  // (h, w)
}

// resize makes the grid w x h and empty.
func (g *grid) resize(w, h int) {
	w, h = max(w, 0), max(h, 0)
	if g.w != w || g.h != h {
		g.w, g.h = w, h
		g.cells, g.inks = make([]rune, w*h), make([]ink, w*h)
	}
	g.clear()
}

func (g *grid) clear() {
	clear(g.cells)
	clear(g.inks)
}

func (g *grid) in(x, y int) bool { return x >= 0 && x < g.w && y >= 0 && y < g.h }

// at is the rune at (x, y); 0 when empty or outside.
func (g *grid) at(x, y int) rune {
	if !g.in(x, y) {
		return 0
	}
	return g.cells[y*g.w+x]
}

// set draws r at (x, y); outside the grid it does nothing (as canvas.SetCell).
func (g *grid) set(x, y int, r rune, k ink) {
	if g.in(x, y) {
		g.cells[y*g.w+x], g.inks[y*g.w+x] = r, k
	}
}

// text draws s from (x, y) rightwards, one rune a cell, clipped (as canvas.SetStringWithStyle).
func (g *grid) text(x, y int, s string, k ink) {
	for _, r := range s {
		g.set(x, y, r, k)
		x++
	}
}

// column draws a bar of v rows up from (x, y): full blocks, then the lower block nearest the
// fraction (as graph.DrawColumnBottomToTop on an empty column).
func (g *grid) column(x, y int, v float64, k ink) {
	if !(v > 0) { // NaN too: a value a corrupt recording can hold
		return
	}
	v = min(v, float64(g.h)) // +Inf: the whole column
	n := math.Floor(v)
	for i := range int(n) {
		g.set(x, y-i, runes.FullBlock, k)
	}
	if r := runes.LowerBlockElementFromFloat64(v - n); r != runes.Null && runes.IsLowerBlockElement(r) {
		g.set(x, y-int(n), r, k)
	}
}

// braille draws the dots of d into the cells from (x0, y0), combining with braille already there
// and replacing anything else (as graph.DrawBraillePatterns).
func (g *grid) braille(x0, y0 int, d *dots, k ink) {
	for cy := range d.ch {
		for cx := range d.cw {
			bits := d.bits[cy*d.cw+cx]
			if bits == 0 {
				continue
			}
			r := runes.BrailleBlockOffset | rune(bits)
			if old := g.at(x0+cx, y0+cy); old != 0 {
				r = runes.CombineBraillePatterns(old, r)
			}
			g.set(x0+cx, y0+cy, r, k)
		}
	}
}

// render is the grid as text: a run of neighbouring cells whose pens look the same is styled
// once, which is byte for byte what rendering an ntcharts canvas by such runs gives.
func (g *grid) render(p *paint) string {
	var b, slow strings.Builder // slow: a run whose pen is not exact, rendered by its style
	b.Grow(g.w * g.h * 4)
	for y := range g.h {
		if y > 0 {
			b.WriteByte('\n')
		}
		row, inks := g.cells[y*g.w:(y+1)*g.w], g.inks[y*g.w:(y+1)*g.w]
		var cur pen
		class, open := inkNone, false
		end := func() {
			switch {
			case !open:
			case cur.exact:
				b.WriteString(cur.suf)
			default:
				b.WriteString(cur.style.Render(slow.String()))
				slow.Reset()
			}
		}
		for x, r := range row {
			if c := p.class[inks[x]]; !open || c != class {
				end()
				class, cur, open = c, p.inks[inks[x]], true
				if cur.exact {
					b.WriteString(cur.pre)
				}
			}
			if r == 0 {
				r = ' '
			}
			if cur.exact {
				b.WriteRune(r)
			} else {
				slow.WriteRune(r)
			}
		}
		end()
	}
	return b.String()
}

// dots is a braille dot grid of cw x ch cells (2 x 4 dots each), kept between frames: it does
// graph.BrailleGrid's job (points to dots, dots to patterns) without allocating per frame.
type dots struct {
	cw, ch         int
	x0, x1, y0, y1 float64 // the data range the dots span
	bits           []uint8 // (ch, cw) braille dot bits
}

// reset sizes the grid to cw x ch cells over the data range and clears it.
func (d *dots) reset(cw, ch int, x0, x1, y0, y1 float64) {
	if d.cw != cw || d.ch != ch {
		d.cw, d.ch = cw, ch
		d.bits = make([]uint8, max(cw*ch, 0))
	}
	clear(d.bits)
	d.x0, d.x1, d.y0, d.y1 = x0, x1, y0, y1
}

// point maps a data point to dot coordinates, (0, 0) top left (as BrailleGrid.GridPoint).
func (d *dots) point(x, y float64) (int, int) {
	gw, gh := d.cw*2, d.ch*4
	var sx, sy float64
	if dx := d.x1 - d.x0; dx > 0 {
		sx = (x - d.x0) * (float64(gw-1) / dx)
	}
	if dy := d.y1 - d.y0; dy > 0 {
		sy = (y - d.y0) * (float64(gh-1) / dy)
	}
	return int(math.Round(sx)), gh - 1 - int(math.Round(sy))
}

// set turns on the dot at (x, y); outside the grid it does nothing.
func (d *dots) set(x, y int) {
	if x < 0 || y < 0 || x >= d.cw*2 || y >= d.ch*4 {
		return
	}
	// Unicode's dot order: dots 1-3 down the left column, 4-6 down the right, then 7 and 8.
	bit := uint8(0x40) << (x % 2)
	if r := y % 4; r < 3 {
		bit = 1 << (r + 3*(x%2))
	}
	d.bits[(y/4)*d.cw+x/2] |= bit
}
