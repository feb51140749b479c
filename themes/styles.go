package themes

import "github.com/charmbracelet/lipgloss"

// Styles is every style the dashboard uses, built from one Palette by one renderer.
type Styles struct {
	Name string

	Text   lipgloss.Style // body text
	Muted  lipgloss.Style // labels, units
	Strong lipgloss.Style // values that matter (bold body text)
	Accent lipgloss.Style
	Good   lipgloss.Style
	Warn   lipgloss.Style
	Bad    lipgloss.Style

	AppName lipgloss.Style // "rosetop" in the header
	Title   lipgloss.Style // pane titles (drawn into the top border)
	Border  lipgloss.Style // the border runes of the pane top line
	Pane    lipgloss.Style // a pane: rounded border with no top edge (the title line is drawn apart), padding 0 1

	Axis   lipgloss.Style // chart axes
	Label  lipgloss.Style // chart axis labels
	Marker lipgloss.Style // vertical marks on time charts
	Series [NumSeries]lipgloss.Style

	HelpKey  lipgloss.Style
	HelpDesc lipgloss.Style
	HelpSep  lipgloss.Style
}

// New builds the named theme's Styles with lipgloss' default renderer (stdout).
func New(name string) (Styles, error) {
	return NewFor(lipgloss.DefaultRenderer(), name)
}

// NewFor builds the named theme's Styles with r, the renderer of the program's own output.
func NewFor(r *lipgloss.Renderer, name string) (Styles, error) {
	p, err := PaletteFor(name)
	if err != nil {
		return Styles{}, err
	}
	return FromPalette(r, name, p), nil
}

// FromPalette builds Styles from a palette. Nil colours are left unset (terminal default).
func FromPalette(r *lipgloss.Renderer, name string, p Palette) Styles {
	fg := func(c lipgloss.TerminalColor) lipgloss.Style {
		s := r.NewStyle()
		if c != nil {
			s = s.Foreground(c)
		}
		return s
	}
	s := Styles{
		Name:     name,
		Text:     fg(p.Fg),
		Muted:    fg(p.Muted),
		Strong:   fg(p.Fg).Bold(true),
		Accent:   fg(p.Accent),
		Good:     fg(p.Good).Bold(true),
		Warn:     fg(p.Warn).Bold(true),
		Bad:      fg(p.Bad).Bold(true),
		AppName:  fg(p.Accent).Bold(true),
		Title:    fg(p.Title).Bold(true),
		Border:   fg(p.Border),
		Axis:     fg(p.Border),
		Label:    fg(p.Muted),
		Marker:   fg(p.Marker),
		HelpKey:  fg(p.Accent).Bold(true),
		HelpDesc: fg(p.Muted),
		HelpSep:  fg(p.Border),
	}
	pane := r.NewStyle().Border(lipgloss.RoundedBorder(), false, true, true, true).Padding(0, 1)
	if p.Border != nil {
		pane = pane.BorderForeground(p.Border)
	}
	s.Pane = pane
	for i := range s.Series {
		s.Series[i] = fg(p.Series[i])
	}
	return s
}
