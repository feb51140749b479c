package tui

import (
	"io"
	"strings"
	"testing"

	"github.com/NimbleMarkets/ntcharts/canvas"
	"github.com/charmbracelet/lipgloss"
	"github.com/charmbracelet/x/ansi"
	"github.com/muesli/termenv"
)

// canvasString draws the same cells as ntcharts' own View, with fewer style runs.
func TestCanvasString(t *testing.T) {
	r := lipgloss.NewRenderer(io.Discard)
	r.SetColorProfile(termenv.TrueColor)
	red, blue := r.NewStyle().Foreground(lipgloss.Color("#ff0000")), r.NewStyle().Foreground(lipgloss.Color("#0000ff")).Bold(true)
	cv := canvas.New(12, 3)
	cv.SetStringWithStyle(canvas.Point{X: 1, Y: 0}, "abc", red)
	cv.SetStringWithStyle(canvas.Point{X: 4, Y: 0}, "de", blue)
	cv.SetRunesWithStyle(canvas.Point{X: 0, Y: 2}, []rune("⣿⣀┊"), red)
	got, want := canvasString(&cv), cv.View()
	if ansi.Strip(got) != ansi.Strip(want) {
		t.Fatalf("text differs:\n%q\n%q", ansi.Strip(got), ansi.Strip(want))
	}
	if n := strings.Count(got, "\x1b[38;2;255;0;0m"); n != 2 {
		t.Fatalf("red runs = %d, want 2 (one per row that has red): %q", n, got)
	}
	clearCanvas(&cv)
	if s := canvasString(&cv); s != strings.Repeat(" ", 12)+"\n"+strings.Repeat(" ", 12)+"\n"+strings.Repeat(" ", 12) {
		t.Fatalf("cleared canvas = %q", s)
	}
}
