package tui

import (
	"fmt"
	"math"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/charmbracelet/x/ansi"
)

// numW is the width of every number column: wide enough for "12345" or "99.99", so columns
// never change width from one tick to the next (no jitter on a dashboard left running).
const numW = 6

// num formats a value to about three significant digits in at most numW cells, right-aligned.
// NaN and Inf print "–" (no data yet).
func num(v float64) string {
	return fmt.Sprintf("%*s", numW, numRaw(v))
}

func numRaw(v float64) string {
	a := math.Abs(v)
	switch {
	case math.IsNaN(v) || math.IsInf(v, 0):
		return "–"
	case a < 10:
		return fmt.Sprintf("%.2f", v)
	case a < 100:
		return fmt.Sprintf("%.1f", v)
	case a < 99999.5:
		return fmt.Sprintf("%.0f", v)
	case a < 9999.5e3:
		return fmt.Sprintf("%.0fk", v/1e3)
	case a < 9999.5e6:
		return fmt.Sprintf("%.0fM", v/1e6)
	}
	return strings.Replace(fmt.Sprintf("%.0e", v), "e+", "e", 1) // "2e11", "-2e308": at most numW
}

// count formats a count: 999, 12345, 123k, 1.2M.
func count(n int) string {
	switch {
	case n < 100_000:
		return fmt.Sprint(n)
	case n < 10_000_000:
		return fmt.Sprintf("%dk", (n+500)/1000)
	}
	return fmt.Sprintf("%.1fM", float64(n)/1e6)
}

// clock formats an offset as m:ss (h:mm:ss from an hour on), the x axis and event times.
func clock(d time.Duration) string {
	if d < 0 {
		d = 0
	}
	s := int(d / time.Second)
	if s >= 3600 {
		return fmt.Sprintf("%d:%02d:%02d", s/3600, s/60%60, s%60)
	}
	return fmt.Sprintf("%d:%02d", s/60, s%60)
}

// fit pads or truncates s (which may carry ANSI styles) to exactly w cells. Every row of a frame
// passes through it, so it also makes text from outside printable (see printable).
func fit(s string, w int) string {
	if w <= 0 {
		return ""
	}
	sw, ok := fastWidth(s)
	if !ok {
		s = printable(s)
		sw = widthOf(s)
	}
	if sw > w {
		// A wide rune that would straddle the cut is left out: its cell is padded.
		s = ansi.Truncate(s, w, "…")
		sw = widthOf(s)
	}
	if sw < w {
		return s + strings.Repeat(" ", w-sw)
	}
	return s
}

// printable is s with what a terminal would act on instead of drawing (C0 and C1 controls,
// DEL, escapes other than SGR colours, bidirectional controls) as spaces, and invalid UTF-8 as
// U+FFFD: a model name, an error or an event may carry a newline or an erase-screen sequence.
func printable(s string) string {
	var b strings.Builder
	done := 0 // s[:done] is in b (b is unused while s is clean)
	for i := 0; i < len(s); {
		c, n, bad := s[i], 1, false
		switch {
		case c == 0x1b:
			if n = sgrLen(s[i:]); n == 0 {
				n, bad = 1, true
			}
		case c < 0x20 || c == 0x7f:
			bad = true
		case c >= 0x80:
			var r rune
			r, n = utf8.DecodeRuneInString(s[i:])
			bad = r < 0xa0 || r == utf8.RuneError && n == 1 || // C1, invalid UTF-8
				r >= 0x61c && r <= 0x2069 && unicode.Is(unicode.Bidi_Control, r)
		}
		if bad {
			if b.Len() == 0 {
				b.Grow(len(s) + 2)
			}
			b.WriteString(s[done:i])
			if c >= 0x80 && n == 1 {
				b.WriteRune(utf8.RuneError)
			} else {
				b.WriteByte(' ')
			}
			done = i + n
		}
		i += n
	}
	if done == 0 {
		return s
	}
	b.WriteString(s[done:])
	return b.String()
}

// sgrLen is the length of the SGR sequence (ESC [ parameters m) s starts with, else 0: the
// escapes fastWidth lets through.
func sgrLen(s string) int {
	if len(s) < 3 || s[0] != 0x1b || s[1] != '[' {
		return 0
	}
	for j := 2; j < len(s); j++ {
		switch c := s[j]; {
		case c == 'm':
			return j + 1
		case c < 0x20 || c > 0x3f:
			return 0
		}
	}
	return 0
}

// cells is the cells [a, b) of s (which may carry ANSI styles), exactly b-a of them: a wide
// rune cut by either edge is blanked.
func cells(s string, a, b int) string {
	out := ansi.Cut(s, a, b)
	if widthOf(out) > b-a { // ansi.Cut keeps a wide rune whose second cell is a
		out = " " + ansi.Cut(s, a+1, b)
	}
	return fit(out, b-a)
}

// fitLines makes a block exactly w x h: every line fitted, missing lines blank, extra dropped.
func fitLines(s string, w, h int) string {
	var b strings.Builder
	b.Grow(len(s) + h)
	eachLine(s, h, func(i int, l string) {
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(fit(l, w))
	})
	return b.String()
}

// eachLine calls fn with exactly n lines of s: its first n lines, then "" for lines s lacks
// ("" has no lines). It is strings.Split without the slice.
func eachLine(s string, n int, fn func(i int, line string)) {
	c := newLines(s)
	for i := range n {
		fn(i, c.next())
	}
}

// lines reads a string line by line, then "" forever (strings.Split's lines, one at a time).
type lines struct {
	rest string
	done bool
}

func newLines(s string) lines { return lines{rest: s, done: s == ""} }

func (c *lines) next() string {
	if c.done {
		return ""
	}
	if j := strings.IndexByte(c.rest, '\n'); j >= 0 {
		l := c.rest[:j]
		c.rest = c.rest[j+1:]
		return l
	}
	c.done = true
	return c.rest
}

// spread puts left and right on one line of width w, right-aligned, left truncated if need be.
func spread(left, right string, w int) string {
	rw := widthOf(right)
	if rw >= w {
		return fit(right, w)
	}
	if widthOf(left) > w-rw {
		return fit(fit(left, w-rw-1)+" ", w-rw) + right
	}
	return fit(left, w-rw) + right
}

// onOff renders a boolean setting.
func onOff(st *paint, b bool) string {
	if b {
		return st.Good.Render("on ")
	}
	return st.Muted.Render("off")
}

// onOffText is b as a word in running text.
func onOffText(b bool) string {
	if b {
		return "on"
	}
	return "off"
}

// secs converts chart x values (seconds) back to a duration.
func secs(v float64) time.Duration { return time.Duration(v * float64(time.Second)) }

func spaces(n int) string { return strings.Repeat(" ", max(0, n)) }

// splitN splits s into exactly n lines (blank lines added or extra dropped).
func splitN(s string, n int) []string {
	lines := strings.Split(s, "\n")
	for len(lines) < n {
		lines = append(lines, "")
	}
	return lines[:n]
}
