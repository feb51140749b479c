package themes

import (
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/charmbracelet/lipgloss"
	"github.com/muesli/termenv"
)

func renderer(p termenv.Profile) *lipgloss.Renderer {
	r := lipgloss.NewRenderer(io.Discard)
	r.SetColorProfile(p)
	return r
}

func TestNewKnownThemes(t *testing.T) {
	tests := []struct {
		name      string
		wantColor bool
	}{
		{Dark, true},
		{Light, true},
		{None, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, err := NewFor(renderer(termenv.TrueColor), tc.name)
			if err != nil {
				t.Fatal(err)
			}
			if s.Name != tc.name {
				t.Fatalf("Name = %q", s.Name)
			}
			out := s.Bad.Render("x") + s.Series[4].Render("y") + s.Pane.Render("z")
			hasColor := strings.Contains(out, "\x1b[38;")
			if hasColor != tc.wantColor {
				t.Fatalf("colour escapes present = %v, want %v: %q", hasColor, tc.wantColor, out)
			}
		})
	}
}

func TestUnknownTheme(t *testing.T) {
	_, err := New("solarized")
	if !errors.Is(err, ErrUnknownTheme) {
		t.Fatalf("err = %v, want ErrUnknownTheme", err)
	}
	if !strings.Contains(err.Error(), "solarized") {
		t.Fatalf("error does not name the input: %v", err)
	}
}

// The series colours must be distinct in both coloured themes or the p99 lines blur together.
func TestSeriesDistinct(t *testing.T) {
	for _, p := range []Palette{DarkPalette(), LightPalette()} {
		seen := map[lipgloss.TerminalColor]bool{}
		for i, c := range p.Series {
			if c == nil || seen[c] {
				t.Fatalf("series %d colour %v missing or repeated", i, c)
			}
			seen[c] = true
		}
	}
}

// The pane's frame sizes are what the dashboard's layout subtracts; pin them.
func TestPaneFrame(t *testing.T) {
	s, err := NewFor(renderer(termenv.Ascii), Dark)
	if err != nil {
		t.Fatal(err)
	}
	if h, v := s.Pane.GetHorizontalFrameSize(), s.Pane.GetVerticalFrameSize(); h != 4 || v != 1 {
		t.Fatalf("frame = %d x %d, want 4 x 1 (side borders + padding, bottom border)", h, v)
	}
}
