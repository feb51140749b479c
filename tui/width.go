package tui

import (
	"unicode/utf8"

	"github.com/charmbracelet/lipgloss"
)

// narrowRanges are the runes the dashboard draws that are one cell wide and never join a
// neighbour into a grapheme cluster: Latin-1 punctuation, dashes and the ellipsis, arrows, box
// drawing, blocks and shapes, check marks, braille. TestNarrowRanges holds each to ansi's width.
func narrowRanges() [7][2]rune {
	return [...][2]rune{
		{0xA1, 0xAC}, {0xAE, 0xFF}, {0x2010, 0x2027}, {0x2190, 0x21FF},
		{0x2500, 0x25FC}, {0x2713, 0x2718}, {0x2800, 0x28FF},
	}
}

func narrow(r rune) bool {
	if (r >= 0x2800 && r <= 0x28FF) || (r >= 0x2500 && r <= 0x25FC) { // chart cells: most of a frame
		return true
	}
	for _, rg := range narrowRanges() {
		if r >= rg[0] && r <= rg[1] {
			return true
		}
	}
	return false
}

// widthOf is lipgloss.Width(s): the cells s takes on screen. Every line of every pane is
// measured when it is fitted, and ansi's grapheme segmentation made measuring a tenth of a
// redraw; fastWidth walks the common case itself and hands anything else to lipgloss.
func widthOf(s string) int {
	if w, ok := fastWidth(s); ok {
		return w
	}
	return lipgloss.Width(s)
}

// fastWidth is s's width when s holds only printable ASCII, SGR escapes and narrowRanges (ok),
// which also makes s safe to print as it is; anything else (newlines, other controls or
// escapes, wide or combining runes) is not ok.
func fastWidth(s string) (w int, ok bool) {
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c >= 0x20 && c < 0x7f:
			w++
			i++
		case c == 0x1b && i+1 < len(s) && s[i+1] == '[':
			j := i + 2
			for j < len(s) && s[j] >= 0x20 && s[j] <= 0x3f {
				j++
			}
			if j >= len(s) || s[j] != 'm' {
				return 0, false
			}
			i = j + 1
		case c >= 0x80:
			r, n := utf8.DecodeRuneInString(s[i:])
			if r == utf8.RuneError || !narrow(r) {
				return 0, false
			}
			w++
			i += n
		default:
			return 0, false
		}
	}
	return w, true
}
