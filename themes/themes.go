// Package themes turns a small set of semantic colour tokens into the lipgloss styles the
// dashboard draws with. A theme is a Palette (what each colour means) and New/NewFor build one
// Styles value from it; nothing here is package-level mutable state, so two programs writing to
// two terminals can each have their own renderer and theme.
package themes

import (
	"errors"
	"fmt"

	"github.com/charmbracelet/lipgloss"
)

// ErrUnknownTheme is returned for a theme name that is not one of Names().
var ErrUnknownTheme = errors.New("unknown theme")

// Theme names.
const (
	Dark  = "dark"
	Light = "light"
	None  = "none" // no colour at all: NO_COLOR, or a terminal without colour
)

// Names lists the themes in the order the dashboard's `t` key cycles through them.
func Names() []string { return []string{Dark, Light, None} }

// NumSeries is how many distinct series colours a palette carries (the p99 chart draws five).
const NumSeries = 5

// Palette is a theme's semantic colour tokens. A nil colour means "the terminal's default".
type Palette struct {
	Fg     lipgloss.TerminalColor // body text
	Muted  lipgloss.TerminalColor // labels, units, secondary text
	Accent lipgloss.TerminalColor // highlights: the app name, key names
	Good   lipgloss.TerminalColor // "on", success messages
	Warn   lipgloss.TerminalColor // saturation, paused, random weights
	Bad    lipgloss.TerminalColor // errors, refusals
	Border lipgloss.TerminalColor // pane borders
	Title  lipgloss.TerminalColor // pane titles
	Marker lipgloss.TerminalColor // config-change marks on time charts
	Series [NumSeries]lipgloss.TerminalColor
}

// DarkPalette is tuned for dark backgrounds: mid-bright colours, a grey that stays readable.
func DarkPalette() Palette {
	return Palette{
		Fg: lipgloss.Color("#d0d0d0"), Muted: lipgloss.Color("#9e9e9e"), Accent: lipgloss.Color("#5fafff"),
		Good: lipgloss.Color("#5fd787"), Warn: lipgloss.Color("#ffd75f"), Bad: lipgloss.Color("#ff5f5f"),
		Border: lipgloss.Color("#585858"), Title: lipgloss.Color("#87afff"), Marker: lipgloss.Color("#d7af5f"),
		Series: [NumSeries]lipgloss.TerminalColor{
			lipgloss.Color("#5fafff"), lipgloss.Color("#ffaf5f"), lipgloss.Color("#d787ff"),
			lipgloss.Color("#5fd7af"), lipgloss.Color("#ff87af"),
		},
	}
}

// LightPalette is tuned for light backgrounds: darker, saturated colours (no yellow text).
func LightPalette() Palette {
	return Palette{
		Fg: lipgloss.Color("#262626"), Muted: lipgloss.Color("#6c6c6c"), Accent: lipgloss.Color("#005fd7"),
		Good: lipgloss.Color("#007000"), Warn: lipgloss.Color("#9a4c00"), Bad: lipgloss.Color("#d70000"),
		Border: lipgloss.Color("#a8a8a8"), Title: lipgloss.Color("#005faf"), Marker: lipgloss.Color("#875f00"),
		Series: [NumSeries]lipgloss.TerminalColor{
			lipgloss.Color("#005fd7"), lipgloss.Color("#d75f00"), lipgloss.Color("#8700af"),
			lipgloss.Color("#00875f"), lipgloss.Color("#d7005f"),
		},
	}
}

// PaletteFor returns the named theme's palette; None has every colour nil.
func PaletteFor(name string) (Palette, error) {
	switch name {
	case Dark:
		return DarkPalette(), nil
	case Light:
		return LightPalette(), nil
	case None:
		return Palette{}, nil
	}
	return Palette{}, fmt.Errorf("theme %q: %w (want one of dark, light, none)", name, ErrUnknownTheme)
}
