package tui

import "strings"

// A pane is a rounded box of outer size w x h with its title drawn into the top edge:
//
//	╭─ queue depth ──────╮
//	│ body               │
//	╰────────────────────╯
//
// The frame is the theme's Pane style (side and bottom borders, padding) plus the one title line,
// so inner sizes are computed from the style, never from constants.

// paneInner returns the body size of a pane of outer size w x h.
func paneInner(st *paint, w, h int) (iw, ih int) {
	return max(0, w-st.Pane.GetHorizontalFrameSize()), max(0, h-st.Pane.GetVerticalFrameSize()-1)
}

// paneFrameH is the rows a pane spends on its frame (title line + bottom border).
func paneFrameH(st *paint) int { return st.Pane.GetVerticalFrameSize() + 1 }

// renderPane draws body (fitted to iw x ih) inside a titled box. The box is assembled by hand
// from the Pane style's border runes and padding rather than by Style.Render: the body is already
// exactly iw wide, and lipgloss' measuring of every line again was a third of the redraw time.
func renderPane(st *paint, title, body string, w, h int) string {
	iw, ih := paneInner(st, w, h)
	if w < 4 || h < 2 {
		return ""
	}
	b := st.Pane.GetBorderStyle()
	// Title: "╭─ title ─…─╮", the title truncated to leave at least one rule on each side.
	t := fit(title, min(widthOf(title), max(0, w-6)))
	fill := w - 5 - widthOf(t)
	left := st.Border.Render(b.Left) + spaces(st.Pane.GetPaddingLeft())
	right := spaces(st.Pane.GetPaddingRight()) + st.Border.Render(b.Right)
	var out strings.Builder
	out.Grow(len(body) + ih*(len(left)+len(right)+1) + 2*w*len(b.Top) + 64)
	st.Border.write(&out, b.TopLeft+b.Top+" ")
	st.Title.write(&out, t)
	st.Border.write(&out, " "+strings.Repeat(b.Top, max(0, fill))+b.TopRight)
	eachLine(body, ih, func(_ int, l string) {
		out.WriteByte('\n')
		out.WriteString(left)
		out.WriteString(fit(l, iw))
		out.WriteString(right)
	})
	out.WriteByte('\n')
	st.Border.write(&out, b.BottomLeft+strings.Repeat(b.Bottom, max(0, w-2))+b.BottomRight)
	return out.String()
}
