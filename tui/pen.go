package tui

import (
	"strings"

	"github.com/charmbracelet/lipgloss"

	"rosetop/themes"
)

// pen styles one line of text exactly as its lipgloss.Style would, from an escape prefix and
// suffix worked out once per theme. Style.Render re-reads every property, rebuilds the termenv
// style and formats the colour sequence on every call, for every styled fragment of a frame;
// that was most of a truecolor redraw. The prefix and suffix come from Render itself (one probe
// render, then checked on a second string), so the bytes are the same by construction; a style
// for which they are not (width, padding, borders...) keeps using Render.
type pen struct {
	style    lipgloss.Style
	pre, suf string
	exact    bool // Render(s) == pre+s+suf for one line of text without tabs or CRs
}

// probe is a private-use rune no style escapes contain: Render(probe) = prefix + probe + suffix.
const probe = "\uE000"

func newPen(s lipgloss.Style) pen {
	p := pen{style: s}
	out := s.Render(probe)
	i := strings.Index(out, probe)
	if i < 0 {
		return p
	}
	p.pre, p.suf = out[:i], out[i+len(probe):]
	const check = "ab 1·…"
	p.exact = s.Render(check) == p.pre+check+p.suf && s.Render("") == p.pre+p.suf
	return p
}

// Render is Style.Render(s).
func (p pen) Render(s string) string {
	if !p.exact || strings.ContainsAny(s, "\n\t\r") {
		return p.style.Render(s)
	}
	if p.pre == "" && p.suf == "" {
		return s
	}
	return p.pre + s + p.suf
}

// write appends Render(s) to b without building the styled string first.
func (p pen) write(b *strings.Builder, s string) {
	if !p.exact || strings.ContainsAny(s, "\n\t\r") {
		b.WriteString(p.style.Render(s))
		return
	}
	b.WriteString(p.pre)
	b.WriteString(s)
	b.WriteString(p.suf)
}

// paint is a theme's Styles as pens, field for field, and the chart grids' pens by ink. Built
// when the theme changes (a new theme is a new paint), never modified after.
type paint struct {
	Name string

	Text, Muted, Strong, Accent, Good, Warn, Bad pen
	AppName, Title, Border                       pen
	Axis, Label, Marker                          pen
	Series                                       [themes.NumSeries]pen

	Pane lipgloss.Style // the pane frame: only its sizes and border runes are read

	inks  [nInk]pen // the grid's pens by ink
	class [nInk]ink // the first ink that looks the same (fg colour and bold) as each: one run
}

func newPaint(st themes.Styles) *paint {
	p := &paint{
		Name: st.Name,
		Text: newPen(st.Text), Muted: newPen(st.Muted), Strong: newPen(st.Strong), Accent: newPen(st.Accent),
		Good: newPen(st.Good), Warn: newPen(st.Warn), Bad: newPen(st.Bad),
		AppName: newPen(st.AppName), Title: newPen(st.Title), Border: newPen(st.Border),
		Axis: newPen(st.Axis), Label: newPen(st.Label), Marker: newPen(st.Marker),
		Pane: st.Pane,
	}
	for i := range p.Series {
		p.Series[i] = newPen(st.Series[i])
	}
	p.inks = [nInk]pen{inkNone: newPen(lipgloss.Style{}), inkAxis: p.Axis, inkLabel: p.Label, inkMarker: p.Marker, inkWarn: p.Warn}
	for i, s := range p.Series {
		p.inks[inkSeries+ink(i)] = s
	}
	for k := range p.inks {
		p.class[k] = ink(k)
		for j := range k {
			if keyOf(p.inks[j].style) == keyOf(p.inks[k].style) {
				p.class[k] = ink(j)
				break
			}
		}
	}
	return p
}

// styleKey is what a chart style sets: a foreground colour and bold. Two inks with the same key
// render the same, so the grid styles their neighbouring cells as one run.
type styleKey struct {
	fg   lipgloss.TerminalColor
	bold bool
}

func keyOf(s lipgloss.Style) styleKey { return styleKey{fg: s.GetForeground(), bold: s.GetBold()} }
