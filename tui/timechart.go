package tui

import (
	"fmt"
	"math"
	"sort"

	"github.com/NimbleMarkets/ntcharts/canvas"
	"github.com/NimbleMarkets/ntcharts/canvas/graph"
	"github.com/NimbleMarkets/ntcharts/canvas/runes"
	"github.com/NimbleMarkets/ntcharts/linechart"

	"rosetop/bench"
)

// yLabelW is the fixed width of y-axis labels, so the plot area never shifts as values grow.
const yLabelW = 5

// xLabelStep is the least spacing in columns of x-axis time labels ("12:34" plus a gap).
const xLabelStep = 12

// tseries is one line of a time chart: x in seconds since the session start, and the letter
// that labels its end (so lines can be told apart without colour).
type tseries struct {
	pts    []bench.Point
	ink    ink
	letter rune
}

// timeChart is an ntcharts linechart with braille lines, fixed-width axis labels and vertical
// markers. It is owned by the dashboard Model and touched only inside Update. The linechart
// model lays the chart out (origin, plot size, label width); the axes, labels, lines and markers
// are drawn as its DrawXYAxisAndLabel and braille drawing do, into a grid kept between frames.
type timeChart struct {
	lc           linechart.Model
	w, h         int
	xStep, yStep int  // the linechart's label steps (0: no axis)
	log          bool // y is log10 of the value (latencies spanning decades)
	yLabel       func(v float64) string
	xLabel       func(v float64) string
	g            grid // the drawn chart, w x h: the linechart's canvas and a column for end labels
	d            dots // one series' braille dots over the plot area
	sum          []float64
	cnt          []int // per dot column: the sum and count of a series' points in it
}

func newTimeChart(log bool) *timeChart { return &timeChart{log: log} }

// SetSize resizes the chart canvas (axes and labels included).
func (c *timeChart) SetSize(w, h int) {
	if w == c.w && h == c.h {
		return
	}
	c.w, c.h = w, h
	if c.yLabel == nil {
		c.yLabel, c.xLabel = linLabel(1, 1), timeLabel(0, 1, 1)
	}
	xStep := 1 // every column is asked; only columns holding a round time get a label
	if h < 6 { // too short for a time axis: the plot gets its two rows instead
		xStep = 0
	}
	yStep := 1 // every row is asked; only rows holding a round value get a label
	c.xStep, c.yStep = xStep, yStep
	c.lc = linechart.New(max(w-1, 1), max(h, 1), 0, 1, 0, 1,
		linechart.WithXYSteps(xStep, yStep),
		linechart.WithXLabelFormatter(func(_ int, v float64) string { return c.xLabel(v) }),
		linechart.WithYLabelFormatter(func(_ int, v float64) string { return c.yText(v) }),
	)
}

// yText is the y label of v right-aligned in yLabelW cells ("" rows are blank, not absent: the
// linechart reserves the label column from these widths).
func (c *timeChart) yText(v float64) string { return fmt.Sprintf("%*s", yLabelW, c.yLabel(v)) }

// draw renders the series over [x0, x1] seconds and [ymin, ymax] (ymin is used on a log
// scale only; linear charts start at 0), with markers; the canvas is exactly w x h cells.
func (c *timeChart) draw(st *paint, x0, x1, ymin, ymax float64, series []tseries, markers []bench.Marker) string {
	if c.w < yLabelW+4 || c.h < 2 {
		return ""
	}
	if x1 <= x0 {
		x1 = x0 + 1
	}
	if !(ymax > 0) {
		ymax = 1
	}
	tr := func(y float64) float64 { return y }
	c.yLabel = linLabel(ymax, c.lc.GraphHeight())
	c.xLabel = timeLabel(x0, x1, c.lc.GraphWidth())
	if c.log {
		ymin = math.Max(ymin, 1e-3)
		if ymax <= ymin {
			ymax = ymin * 10
		}
		tr = math.Log10
		ymin, ymax = math.Log10(ymin), math.Log10(ymax)
		c.yLabel = logLabel(ymin, ymax, c.lc.GraphHeight())
	} else {
		ymin = 0
	}
	lc := &c.lc
	lc.SetXYRange(x0, x1, ymin, ymax)
	lc.SetViewXYRange(x0, x1, ymin, ymax)
	g := &c.g
	g.resize(lc.Canvas.Width()+1, lc.Canvas.Height())
	c.drawAxes(x0, x1, ymin, ymax)

	gw, gh := lc.GraphWidth(), lc.GraphHeight()
	if gw < 2 || gh < 1 {
		return g.render(st)
	}
	plot0 := canvas.Point{X: lc.Origin().X + 1, Y: 0}
	ends := make([]canvas.Point, len(series))
	for i, s := range series {
		ends[i] = c.drawSeries(s, gw, gh, x0, x1, ymin, ymax, tr)
		g.braille(plot0.X, plot0.Y, &c.d, s.ink)
	}
	c.drawMarkers(plot0, gw, gh, x0, x1, markers)
	c.drawEndLabels(plot0, gh, series, ends)
	return g.render(st)
}

// drawSeries draws one series into c.d: its points averaged per dot column (a window holds
// more points than the chart has columns), consecutive columns joined by lines. It returns the
// cell of the newest point ((-1, -1) without one).
func (c *timeChart) drawSeries(s tseries, gw, gh int, x0, x1, ymin, ymax float64, tr func(float64) float64) canvas.Point {
	c.d.reset(gw, gh, x0, x1, ymin, ymax)
	cols := 2 * gw
	if len(c.sum) != cols {
		c.sum, c.cnt = make([]float64, cols), make([]int, cols)
	}
	clear(c.sum)
	clear(c.cnt)
	for _, p := range s.pts {
		x := p.At.Seconds()
		if x < x0 || x > x1 || math.IsNaN(p.Value) || (c.log && p.Value <= 0) {
			continue
		}
		dx, _ := c.d.point(x, ymin)
		if dx >= 0 && dx < cols {
			c.sum[dx] += math.Min(math.Max(tr(p.Value), ymin), ymax)
			c.cnt[dx]++
		}
	}
	end := canvas.Point{X: -1, Y: -1}
	var prev canvas.Point
	have := false
	for dx := range cols {
		if c.cnt[dx] == 0 {
			continue
		}
		_, dy := c.d.point(x0, c.sum[dx]/float64(c.cnt[dx]))
		gp := canvas.Point{X: dx, Y: dy}
		if have {
			for _, q := range graph.GetLinePoints(prev, gp) {
				c.d.set(q.X, q.Y)
			}
		} else {
			c.d.set(gp.X, gp.Y)
		}
		prev, have = gp, true
		end = canvas.Point{X: dx / 2, Y: dy / 4}
	}
	return end
}

// drawEndLabels writes each series' letter just right of its newest point (in the column kept
// for them when the line reaches the right edge), moving it up or down a row when another
// label took the cell.
func (c *timeChart) drawEndLabels(plot0 canvas.Point, gh int, series []tseries, ends []canvas.Point) {
	g := &c.g
	taken := map[canvas.Point]bool{}
	for i, s := range series {
		e := ends[i]
		if e.X < 0 || s.letter == 0 {
			continue
		}
		x := plot0.X + e.X + 1
		for k := range 2 * gh { // the nearest free row: 0, -1, +1, -2, +2, ...
			dy := (k + 1) / 2
			if k%2 == 1 {
				dy = -dy
			}
			p := canvas.Point{X: x, Y: e.Y + dy}
			if p.Y < 0 || p.Y >= gh || taken[p] {
				continue
			}
			taken[p] = true
			g.set(p.X, p.Y, s.letter, s.ink)
			break
		}
	}
}

// drawAxes draws the axes and their labels as linechart.DrawXYAxisAndLabel does: the y labels
// right-aligned left of the axis where the label changes, the x labels under it where the cell
// left of them is free and they fit.
func (c *timeChart) drawAxes(x0, x1, ymin, ymax float64) {
	g, o := &c.g, c.lc.Origin()
	gw, gh := c.lc.GraphWidth(), c.lc.GraphHeight()
	up := func(y int) {
		for ; y >= 0; y-- {
			g.set(o.X, y, runes.LineVertical, inkAxis)
		}
	}
	right := func(x int) {
		for ; x < g.w; x++ {
			g.set(x, o.Y, runes.LineHorizontal, inkAxis)
		}
	}
	switch {
	case c.yStep > 0 && c.xStep > 0:
		g.set(o.X, o.Y, runes.LineUpRight, inkAxis)
		up(o.Y - 1)
		right(o.X + 1)
	case c.yStep > 0:
		up(o.Y)
	case c.xStep > 0:
		right(o.X)
	}
	if c.yStep > 0 {
		last, inc := "", (ymax-ymin)/float64(gh)
		for i := 0; i <= gh; i += c.yStep {
			if s := c.yText(ymin + inc*float64(i)); s != last {
				g.text(o.X-len(s), o.Y-i, s, inkLabel)
				last = s
			}
		}
	}
	if c.xStep > 0 {
		last, inc := "", (x1-x0)/float64(gw)
		for i := 0; i < gw; i += c.xStep {
			if g.at(o.X+i-1, o.Y+1) != 0 {
				continue
			}
			if s := c.xLabel(x0 + inc*float64(i)); s != last && len(s)+o.X+i <= g.w {
				g.text(o.X+i, o.Y+1, s, inkLabel)
				last = s
			}
		}
	}
}

// drawMarkers draws each marker as a dotted vertical line through the empty cells of its column
// (data stays on top) and, on the top row, its label: ending a cell before the next marker,
// truncated only when at least 8 cells are free, left out when data is in the way.
func (c *timeChart) drawMarkers(plot0 canvas.Point, gw, gh int, x0, x1 float64, ms []bench.Marker) {
	g := &c.g
	type mark struct {
		col   int
		label string
	}
	var marks []mark
	for _, m := range ms {
		if x := m.At.Seconds(); x >= x0 && x <= x1 {
			marks = append(marks, mark{plot0.X + int(math.Round((x-x0)/(x1-x0)*float64(gw-1))), m.Label})
		}
	}
	sort.SliceStable(marks, func(a, b int) bool { return marks[a].col < marks[b].col })
	for i, m := range marks {
		for y := 0; y < gh; y++ {
			if g.at(m.col, y) == 0 {
				g.set(m.col, y, '┊', inkMarker)
			}
		}
		end := plot0.X + gw // first column past the label's room
		if i+1 < len(marks) {
			end = min(end, marks[i+1].col-1)
		}
		room, lw := end-(m.col+1), widthOf(m.label)
		if lw > room && room < 8 { // "run …" says nothing: whole labels, or at least 7 cells of one
			continue
		}
		label := fit(m.label, min(room, lw))
		free := true
		for k := range []rune(label) {
			if g.at(m.col+1+k, 0) != 0 {
				free = false
				break
			}
		}
		if free {
			g.text(m.col+1, 0, label, inkMarker)
		}
	}
}

// niceMax rounds v up to 1, 2 or 5 times a power of ten, so the y axis changes rarely.
func niceMax(v float64) float64 {
	if !(v > 0) || math.IsInf(v, 0) {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 5, 10} {
		if v <= m*p {
			return m * p
		}
	}
	return 10 * p
}

// timeLabel labels the columns of the time axis [x0, x1] (seconds) holding a multiple of a round
// step (1, 2, 5, 10, 15, 30 s, 1, 2, 5, 10 min) chosen so labels are at least xLabelStep columns apart.
func timeLabel(x0, x1 float64, cols int) func(float64) string {
	cols = max(cols, 1)
	perCol := (x1 - x0) / float64(cols)
	step := 600.0
	for _, s := range []float64{1, 2, 5, 10, 15, 30, 60, 120, 300, 600} {
		if s >= perCol*xLabelStep {
			step = s
			break
		}
	}
	return func(v float64) string {
		m := math.Round(v/step) * step
		if math.Abs(m-v) <= perCol/2*(1+1e-9) && m >= 0 { // a label halfway between two columns takes the first
			return clock(secs(m))
		}
		return ""
	}
}

// linLabel labels the rows of a linear axis [0, ymax] that hold a multiple of a 1-2-5 step
// chosen so labels are at least two rows apart; other rows get no label.
func linLabel(ymax float64, rows int) func(float64) string {
	rows = max(rows, 1)
	half := ymax / float64(rows) / 2
	step := niceMax(ymax / math.Max(1, float64(rows)/2))
	return func(v float64) string {
		m := math.Round(v/step) * step
		if math.Abs(m-v) <= half && m <= ymax+half {
			return roundLabel(m)
		}
		return ""
	}
}

// logLabel labels the rows of a log axis that hold a round value: decades when the range spans
// two or more, else 1-2-5 steps; other rows get no label. lmin, lmax are log10 bounds.
func logLabel(lmin, lmax float64, rows int) func(float64) string {
	half := (lmax - lmin) / float64(max(rows, 1)) / 2
	steps := []float64{1, 2, 5}
	if lmax-lmin >= 2 {
		steps = []float64{1}
	}
	return func(v float64) string {
		k := math.Floor(v)
		for _, e := range []float64{k - 1, k, k + 1} {
			for _, s := range steps {
				if l := e + math.Log10(s); math.Abs(l-v) <= half {
					return roundLabel(math.Pow(10, l))
				}
			}
		}
		return ""
	}
}

// roundLabel prints a 1-2-5 value without trailing zeros: 0.5, 20, 1000, 20k.
func roundLabel(v float64) string {
	if v >= 1e4 {
		return fmt.Sprintf("%.4gk", v/1e3)
	}
	return fmt.Sprintf("%.4g", v)
}

// logRange returns decade-ish bounds around [lo, hi] for a log axis: 1, 2 or 5 times a power of ten.
func logRange(lo, hi float64) (float64, float64) {
	if !(hi > 0) {
		return 1, 10
	}
	if !(lo > 0) || lo > hi {
		lo = hi
	}
	p := math.Pow(10, math.Floor(math.Log10(lo)))
	min := p
	for _, m := range []float64{5, 2} {
		if m*p <= lo {
			min = m * p
			break
		}
	}
	max := niceMax(hi)
	if max <= min {
		max = min * 10
	}
	return min, max
}
