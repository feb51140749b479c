package tui

import (
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/charmbracelet/lipgloss"
	"github.com/charmbracelet/x/ansi"

	"rosetop/themes"
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
	}
	return fmt.Sprintf("%.0fM", v/1e6)
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

// fit pads or truncates s (which may carry ANSI styles) to exactly w cells.
func fit(s string, w int) string {
	if w <= 0 {
		return ""
	}
	if sw := lipgloss.Width(s); sw > w {
		return ansi.Truncate(s, w, "…")
	} else if sw < w {
		return s + strings.Repeat(" ", w-sw)
	}
	return s
}

// fitLines makes a block exactly w x h: every line fitted, missing lines blank, extra dropped.
func fitLines(s string, w, h int) string {
	var lines []string
	if s != "" {
		lines = strings.Split(s, "\n")
	}
	out := make([]string, h)
	for i := range out {
		l := ""
		if i < len(lines) {
			l = lines[i]
		}
		out[i] = fit(l, w)
	}
	return strings.Join(out, "\n")
}

// spread puts left and right on one line of width w, right-aligned, left truncated if need be.
func spread(left, right string, w int) string {
	rw := lipgloss.Width(right)
	if rw >= w {
		return fit(right, w)
	}
	if lipgloss.Width(left) > w-rw {
		return fit(fit(left, w-rw-1)+" ", w-rw) + right
	}
	return fit(left, w-rw) + right
}

// onOff renders a boolean setting.
func onOff(st themes.Styles, b bool) string {
	if b {
		return st.Good.Render("on ")
	}
	return st.Muted.Render("off")
}

// secs converts chart x values (seconds) back to a duration.
func secs(v float64) time.Duration { return time.Duration(v * float64(time.Second)) }

func widthOf(s string) int { return lipgloss.Width(s) }

func spaces(n int) string { return strings.Repeat(" ", max(0, n)) }

// splitN splits s into exactly n lines (blank lines added or extra dropped).
func splitN(s string, n int) []string {
	lines := strings.Split(s, "\n")
	for len(lines) < n {
		lines = append(lines, "")
	}
	return lines[:n]
}
