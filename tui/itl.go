package tui

import (
	"fmt"
	"math"
	"strconv"

	"rosetop/bench"
	"rosetop/themes"
)

// itlChart draws inter-token latency sparklines: the pooled recent ITL, then one row per slow
// recent request, all on one scale so a slow request looks slow next to the aggregate. Each row
// is drawn as ntcharts' sparkline draws its columns (graph.DrawColumns) into a grid kept between
// frames: the sparkline model allocates its canvas anew on every draw.
type itlChart struct {
	lines []grid // [0] aggregate, then slow requests
}

func newITLChart() *itlChart { return &itlChart{} }

const itlLabelW = 10 // "req 4100", "#12345678" or "all", and a gap
const itlValueW = 11 // " max 123.4"

// body renders into iw x ih: the aggregate takes what the slow rows leave, up to 3 rows.
func (c *itlChart) body(st *paint, v *bench.View, iw, ih int) string {
	sw := iw - itlLabelW - itlValueW
	if sw < 4 || ih < 1 {
		return ""
	}
	slow := v.SlowITL
	aggH := min(3, max(1, ih-len(slow)))
	slow = slow[:min(len(slow), ih-aggH)]

	tail := func(xs []float64) []float64 { return xs[max(0, len(xs)-sw):] }
	top := 0.0
	grow := func(x float64) {
		if x > top && !math.IsInf(x, 1) { // NaN and +Inf (a damaged recording) leave the scale
			top = x
		}
	}
	for _, x := range tail(v.ITL) {
		grow(x)
	}
	for _, r := range slow {
		for _, x := range tail(r.ITL) {
			grow(x)
		}
	}
	scale := math.Max(top, 1e-9) // no axis here: fill the height

	for len(c.lines) < 1+len(slow) {
		c.lines = append(c.lines, grid{})
	}
	row := func(i, h int, label string, data []float64, style int) string {
		g := &c.lines[i]
		g.resize(sw, h)
		rows := float64(h) / scale // rows per ms
		data = tail(data)
		for j, x := range data { // right-aligned: the newest at the right edge
			g.column(sw-len(data)+j, h-1, math.Max(x, 0)*rows, inkSeries+ink(style))
		}
		mx := math.NaN()
		for _, x := range data {
			if math.IsNaN(mx) || x > mx {
				mx = x
			}
		}
		right := st.Muted.Render(" max") + st.Strong.Render(fmt.Sprintf("%*s", itlValueW-4, numRaw(mx)))
		return joinCols(fit(st.Muted.Render(label), itlLabelW), g.render(st), right, h)
	}
	out := row(0, aggH, "all", v.ITL, 0)
	for i, r := range slow {
		out += "\n" + row(i+1, 1, itlLabel(r.ID), r.ITL, 1+i%(themes.NumSeries-1))
	}
	return out
}

// itlLabel names a slow request in itlLabelW-1 cells, leaving a gap before its sparkline:
// "req 4100", "#12345678", else "…" and the id's last digits (a long session's ids grow).
func itlLabel(id uint64) string {
	for _, s := range []string{fmt.Sprintf("req %d", id), fmt.Sprintf("#%d", id)} {
		if len(s) < itlLabelW {
			return s
		}
	}
	d := strconv.FormatUint(id, 10)
	return "…" + d[len(d)-(itlLabelW-2):]
}

// joinCols places a label (first row only), a block of h rows and a value (last row) side by side.
func joinCols(label, block, value string, h int) string {
	lines := splitN(block, h)
	lw, vw := widthOf(label), widthOf(value)
	out := ""
	for i, l := range lines {
		lab, val := spaces(lw), spaces(vw)
		if i == 0 {
			lab = label
		}
		if i == h-1 {
			val = value
		}
		if i > 0 {
			out += "\n"
		}
		out += lab + l + val
	}
	return out
}
