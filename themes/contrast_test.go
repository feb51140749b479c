package themes

import (
	"math"
	"strconv"
	"testing"

	"github.com/charmbracelet/lipgloss"
)

// luminance is the WCAG 2 relative luminance of a "#rrggbb" colour.
func luminance(t *testing.T, c lipgloss.TerminalColor) float64 {
	t.Helper()
	hex, ok := c.(lipgloss.Color)
	if !ok || len(hex) != 7 || hex[0] != '#' {
		t.Fatalf("colour %v is not #rrggbb", c)
	}
	lin := func(s string) float64 {
		v, err := strconv.ParseUint(s, 16, 8)
		if err != nil {
			t.Fatal(err)
		}
		x := float64(v) / 255
		if x <= 0.03928 {
			return x / 12.92
		}
		return math.Pow((x+0.055)/1.055, 2.4)
	}
	return 0.2126*lin(string(hex[1:3])) + 0.7152*lin(string(hex[3:5])) + 0.0722*lin(string(hex[5:7]))
}

func contrast(a, b float64) float64 { return (math.Max(a, b) + 0.05) / (math.Min(a, b) + 0.05) }

// Readable on the backgrounds people actually run: text tokens reach WCAG AA for normal text
// (4.5:1), chart series and markers the 3:1 of graphics, the border stays visible (1.5:1).
func TestContrast(t *testing.T) {
	tests := []struct {
		name string
		p    Palette
		bgs  []lipgloss.Color
	}{
		{"dark", DarkPalette(), []lipgloss.Color{"#000000", "#1c1c1c", "#282c34"}},
		{"light", LightPalette(), []lipgloss.Color{"#ffffff", "#fafafa", "#eeeeee"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := tc.p
			checks := []struct {
				token string
				c     lipgloss.TerminalColor
				min   float64
			}{
				{"Fg", p.Fg, 4.5}, {"Muted", p.Muted, 4.5}, {"Accent", p.Accent, 4.5}, {"Good", p.Good, 4.5},
				{"Warn", p.Warn, 4.5}, {"Bad", p.Bad, 4.5}, {"Title", p.Title, 4.5},
				{"Marker", p.Marker, 3}, {"Border", p.Border, 1.5},
			}
			for i, c := range p.Series {
				checks = append(checks, struct {
					token string
					c     lipgloss.TerminalColor
					min   float64
				}{"Series" + strconv.Itoa(i+1), c, 3})
			}
			for _, bg := range tc.bgs {
				lb := luminance(t, bg)
				for _, c := range checks {
					if r := contrast(luminance(t, c.c), lb); r < c.min {
						t.Errorf("%s %v on %s: contrast %.2f < %.1f", c.token, c.c, bg, r, c.min)
					}
				}
			}
		})
	}
}
