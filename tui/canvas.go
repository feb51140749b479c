package tui

import (
	"strings"

	"github.com/NimbleMarkets/ntcharts/canvas"
	"github.com/charmbracelet/lipgloss"
)

// canvasString renders an ntcharts canvas like canvas.Model.View, but styles runs of cells that
// share a look with one Render call instead of one per cell: a 200x60 dashboard has ~10k chart
// cells, and per-cell rendering was most of the redraw time. Cells here only ever carry a
// foreground colour and bold (that is all the dashboard's chart styles set), so those are the key.
func canvasString(c *canvas.Model) string {
	w, h := c.Width(), c.Height()
	var b strings.Builder
	b.Grow(w * h * 3)
	var run strings.Builder
	for y := range h {
		if y > 0 {
			b.WriteByte('\n')
		}
		var cur lipgloss.Style
		var curKey styleKey
		open := false
		flush := func() {
			switch {
			case !open || run.Len() == 0:
			case curKey.plain(): // unstyled (empty cells): no Render, no renderer involved
				b.WriteString(run.String())
			default:
				b.WriteString(cur.Render(run.String()))
			}
			run.Reset()
		}
		for x := range w {
			cell := c.Cell(canvas.Point{X: x, Y: y})
			k := keyOf(cell.Style)
			if !open || k != curKey {
				flush()
				cur, curKey, open = cell.Style, k, true
			}
			if cell.Rune == 0 {
				run.WriteByte(' ')
			} else {
				run.WriteRune(cell.Rune)
			}
		}
		flush()
	}
	return b.String()
}

type styleKey struct {
	fg   lipgloss.TerminalColor
	bold bool
}

// plain reports a style that sets nothing (GetForeground reports NoColor for "unset").
func (k styleKey) plain() bool {
	_, none := k.fg.(lipgloss.NoColor)
	return none && !k.bold
}

func keyOf(s lipgloss.Style) styleKey { return styleKey{fg: s.GetForeground(), bold: s.GetBold()} }

// clearCanvas empties every cell in place. canvas.Model.Clear allocates the whole grid anew (a
// Cell carries a lipgloss.Style, so ~5 MB per redraw at 200x60); this reuses it.
func clearCanvas(c *canvas.Model) {
	for y := range c.Height() {
		for x := range c.Width() {
			c.SetCell(canvas.Point{X: x, Y: y}, canvas.Cell{})
		}
	}
}
