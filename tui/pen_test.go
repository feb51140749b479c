package tui

import (
	"io"
	"strings"
	"testing"

	"github.com/charmbracelet/lipgloss"
	"github.com/muesli/termenv"

	"rosetop/themes"
)

// A pen renders exactly what its style renders, in every theme and colour profile, for the text
// the dashboard draws and for the text it hands back to lipgloss (newlines, tabs).
func TestPenMatchesRender(t *testing.T) {
	texts := []string{"", "x", "queue depth · last 60s", "⣿⡇┊ ╭─╮", "  12.5 ", "a\nbc", "a\tb", "a\r\nb"}
	profiles := []struct {
		name string
		p    termenv.Profile
	}{{"ascii", termenv.Ascii}, {"ansi", termenv.ANSI}, {"ansi256", termenv.ANSI256}, {"truecolor", termenv.TrueColor}}
	for _, pr := range profiles {
		for _, name := range themes.Names() {
			t.Run(pr.name+"/"+name, func(t *testing.T) {
				r := lipgloss.NewRenderer(io.Discard)
				r.SetColorProfile(pr.p)
				st, err := themes.NewFor(r, name)
				if err != nil {
					t.Fatal(err)
				}
				styles := append([]lipgloss.Style{st.Text, st.Muted, st.Strong, st.Accent, st.Good, st.Warn, st.Bad,
					st.AppName, st.Title, st.Border, st.Axis, st.Label, st.Marker, st.Pane}, st.Series[:]...)
				for i, s := range styles {
					p := newPen(s)
					for _, text := range texts {
						if got, want := p.Render(text), s.Render(text); got != want {
							t.Fatalf("style %d, %q: pen %q, Render %q", i, text, got, want)
						}
						var b strings.Builder
						p.write(&b, text)
						if got, want := b.String(), s.Render(text); got != want {
							t.Fatalf("style %d, %q: write %q, Render %q", i, text, got, want)
						}
					}
				}
			})
		}
	}
}

// The pane style (padding and a border) is not a plain wrap: its pen must say so and fall back.
func TestPenNotExactForFramedStyle(t *testing.T) {
	r := lipgloss.NewRenderer(io.Discard)
	r.SetColorProfile(termenv.TrueColor)
	st, err := themes.NewFor(r, themes.Dark)
	if err != nil {
		t.Fatal(err)
	}
	if newPen(st.Pane).exact {
		t.Fatal("pen of the pane style claims to be a plain wrap")
	}
	if !newPen(st.Strong).exact {
		t.Fatal("pen of a colour+bold style is not exact")
	}
}
