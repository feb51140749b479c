// Package plot draws a load sweep's charts (rosetop sweep) as PNG and SVG with gonum's plot:
// output throughput against TTFT p99 and against TPOT p50 with the Pareto front marked, and
// request throughput and goodput against the swept setting, under a caption that says what ran
// where. It takes plain numbers; it knows nothing of how they were measured.
package plot

import (
	"errors"
	"image/color"
	"io"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	gplot "gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/text"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
	"gonum.org/v1/plot/vg/vgsvg"
)

// Point is one sweep point's measurements; NaN marks a number that was not measured.
type Point struct {
	X           float64 // the swept setting's value
	Label       string  // how X is printed ("16", "2.5")
	Throughput  float64 // output tokens/s
	TTFTP99     float64 // ms
	TPOTP50     float64 // ms
	RequestRate float64 // completed requests/s
	Goodput     float64 // requests/s meeting every target; NaN without targets
}

// Sweep is what the charts show.
type Sweep struct {
	Axis    string // the swept setting with its unit, "request rate (req/s)"
	Points  []Point
	Caption string // the model, device and commit
}

// ErrNoPoints is returned for a sweep with nothing to draw: no point has a throughput and a
// latency, or none has a request throughput.
var ErrNoPoints = errors.New("plot: no sweep point has a throughput and a latency")

// Figure size: three panels side by side, and a strip for the caption.
const (
	panelW   = 5.5 * vg.Inch
	panelH   = 4.5 * vg.Inch
	captionH = 0.45 * vg.Inch
)

// WritePNG draws s as a PNG.
func WritePNG(w io.Writer, s Sweep) error {
	c := vgimg.New(3*panelW, panelH+captionH)
	if err := draw3(draw.New(c), s); err != nil {
		return err
	}
	_, err := vgimg.PngCanvas{Canvas: c}.WriteTo(w)
	return err
}

// WriteSVG draws s as an SVG.
func WriteSVG(w io.Writer, s Sweep) error {
	c := vgsvg.New(3*panelW, panelH+captionH)
	if err := draw3(draw.New(c), s); err != nil {
		return err
	}
	_, err := c.WriteTo(w)
	return err
}

// draw3 lays out the three panels above the caption.
func draw3(dc draw.Canvas, s Sweep) error {
	s.Caption, s.Axis = printable(s.Caption), printable(s.Axis)
	s.Points = slices.Clone(s.Points) // the caller's labels stay as they are
	for i := range s.Points {
		s.Points[i].Label = printable(s.Points[i].Label)
	}
	lat1, err1 := paretoPanel(s, "TTFT p99", func(p Point) float64 { return p.TTFTP99 })
	lat2, err2 := paretoPanel(s, "TPOT p50", func(p Point) float64 { return p.TPOTP50 })
	switch { // one latency panel may be empty; both empty is a sweep with nothing to draw
	case err1 != nil && !errors.Is(err1, ErrNoPoints):
		return err1
	case err2 != nil && !errors.Is(err2, ErrNoPoints):
		return err2
	case err1 != nil && err2 != nil:
		return ErrNoPoints
	}
	load, err := loadPanel(s)
	if err != nil {
		return err
	}
	body := dc
	body.Min.Y += captionH
	tiles := draw.Tiles{Rows: 1, Cols: 3, PadX: vg.Inch / 4, PadTop: vg.Inch / 8, PadLeft: vg.Inch / 8, PadRight: vg.Inch / 4}
	canvases := gplot.Align([][]*gplot.Plot{{lat1, lat2, load}}, tiles, body)
	for i, p := range []*gplot.Plot{lat1, lat2, load} {
		p.Draw(canvases[0][i])
	}
	sty := text.Style{Color: color.Gray{Y: 60}, Font: font.From(gplot.DefaultFont, 11), XAlign: draw.XCenter, YAlign: draw.YCenter, Handler: gplot.DefaultTextHandler}
	dc.FillText(sty, vg.Point{X: (dc.Min.X + dc.Max.X) / 2, Y: dc.Min.Y + captionH/2}, s.Caption)
	return nil
}

// paretoPanel is output throughput (x) against a latency (y): every point labelled with its
// setting, and the Pareto front (no other point has more throughput at less latency) joined.
// With no point that has both, it is an empty panel that says so (TPOT of one-token outputs),
// and ErrNoPoints.
func paretoPanel(s Sweep, metric string, latency func(Point) float64) (*gplot.Plot, error) {
	var pts plotter.XYs
	var labels []string
	var keep []Point
	for _, p := range s.Points {
		if y := latency(p); finite(p.Throughput) && finite(y) {
			pts = append(pts, plotter.XY{X: p.Throughput, Y: y})
			labels = append(labels, p.Label)
			keep = append(keep, p)
		}
	}
	p := newPanel("Output throughput vs "+metric, "output throughput (tokens/s)", metric+" (ms)")
	if len(pts) == 0 {
		p.Title.Text += ": no point measured it"
		return p, ErrNoPoints
	}
	all, err := plotter.NewScatter(pts)
	if err != nil {
		return nil, err
	}
	all.GlyphStyle = draw.GlyphStyle{Color: color.RGBA{R: 120, G: 120, B: 120, A: 255}, Radius: vg.Points(3.5), Shape: draw.CircleGlyph{}}
	front := paretoFront(keep, latency)
	fl, fs, err := plotter.NewLinePoints(front)
	if err != nil {
		return nil, err
	}
	fl.Color, fl.Width = color.RGBA{R: 200, G: 60, B: 30, A: 255}, vg.Points(1.5)
	fs.GlyphStyle = draw.GlyphStyle{Color: fl.Color, Radius: vg.Points(4.5), Shape: draw.RingGlyph{}}
	lab, err := plotter.NewLabels(plotter.XYLabels{XYs: pts, Labels: labels})
	if err != nil {
		return nil, err
	}
	for i := range lab.TextStyle {
		lab.TextStyle[i].Font.Size = vg.Points(9)
		lab.Offset = vg.Point{X: vg.Points(5), Y: vg.Points(3)}
	}
	p.Add(plotter.NewGrid(), all, fl, fs, lab)
	p.Legend.Add("sweep point ("+s.Axis+")", all)
	p.Legend.Add("Pareto front", fl, fs)
	headroom(p, pts, true)
	return p, nil
}

// headroom starts the y axis (and the x axis, fromZeroX) at 0 and leaves room above the data for
// the legend, which gonum draws inside the plot area, and beside it for the points' labels.
func headroom(p *gplot.Plot, pts plotter.XYs, fromZeroX bool) {
	xmax, ymax := 0.0, 0.0
	for _, q := range pts {
		xmax, ymax = math.Max(xmax, q.X), math.Max(ymax, q.Y)
	}
	p.Legend.Top = true
	p.Y.Min, p.Y.Max = 0, axisEnd(ymax, 1.35)
	if fromZeroX {
		p.X.Min, p.X.Max = 0, axisEnd(xmax, 1.1)
	}
}

// axisEnd is where an axis from 0 ends for data up to hi, room times it: 1 when hi is not above
// 0 (gonum centres an empty range on 0, with negative ticks), and finite near the float range's
// end.
func axisEnd(hi, room float64) float64 {
	switch {
	case !(hi > 0):
		return 1
	case hi*room > math.MaxFloat64:
		return math.MaxFloat64
	}
	return hi * room
}

// paretoFront is the points that no other beats on both throughput (more) and latency (less),
// in order of throughput.
func paretoFront(ps []Point, latency func(Point) float64) plotter.XYs {
	sorted := append([]Point(nil), ps...)
	sort.SliceStable(sorted, func(i, j int) bool {
		if sorted[i].Throughput != sorted[j].Throughput {
			return sorted[i].Throughput > sorted[j].Throughput
		}
		return latency(sorted[i]) < latency(sorted[j])
	})
	var front plotter.XYs
	best := math.Inf(1)
	for _, p := range sorted {
		if y := latency(p); y < best {
			front = append(front, plotter.XY{X: p.Throughput, Y: y})
			best = y
		}
	}
	sort.Slice(front, func(i, j int) bool { return front[i].X < front[j].X })
	return front
}

// loadPanel is request throughput and goodput against the swept setting, on a log axis when the
// finite settings span a factor of 8 or more. A +Inf setting (a rate sweep's "every request at
// once") is drawn one step past the largest finite one with the tick "inf", joined by a dashed
// segment: the axis between them measures nothing.
func loadPanel(s Sweep) (*gplot.Plot, error) {
	p := newPanel("Throughput and goodput vs "+s.Axis, s.Axis, "requests/s")
	lo, hi := math.Inf(1), math.Inf(-1)
	var xs []float64
	for _, pt := range s.Points {
		if finite(pt.X) {
			lo, hi = math.Min(lo, pt.X), math.Max(hi, pt.X)
		}
		xs = append(xs, pt.X)
	}
	logScale := lo > 0 && hi/lo >= 8
	at := axisPlaces(xs, logScale)
	var thr, good plotter.XYs
	var ticks gplot.ConstantTicks
	for i, pt := range s.Points {
		x := at[i]
		if math.IsNaN(x) {
			continue
		}
		ticks = append(ticks, gplot.Tick{Value: x, Label: pt.Label})
		if finite(pt.RequestRate) {
			thr = append(thr, plotter.XY{X: x, Y: pt.RequestRate})
		}
		if finite(pt.Goodput) {
			good = append(good, plotter.XY{X: x, Y: pt.Goodput})
		}
	}
	if len(thr) == 0 {
		return nil, ErrNoPoints
	}
	sort.Slice(thr, func(i, j int) bool { return thr[i].X < thr[j].X })
	sort.Slice(good, func(i, j int) bool { return good[i].X < good[j].X })
	if logScale {
		p.X.Scale = gplot.LogScale{}
	}
	p.X.Tick.Marker = ticks
	p.Add(plotter.NewGrid())
	infAt := math.NaN() // where +Inf is drawn, if a point has it
	for i, pt := range s.Points {
		if math.IsInf(pt.X, 1) {
			infAt = at[i]
		}
	}
	for _, series := range []struct {
		name string
		xys  plotter.XYs
		c    color.RGBA
	}{{"request throughput", thr, color.RGBA{R: 40, G: 90, B: 180, A: 255}}, {"goodput (met every target)", good, color.RGBA{R: 30, G: 150, B: 70, A: 255}}} {
		if len(series.xys) == 0 {
			continue
		}
		solid := series.xys
		if k := slices.IndexFunc(solid, func(q plotter.XY) bool { return q.X == infAt }); k >= 1 {
			solid = solid[:k]
			gap, err := plotter.NewLine(series.xys[k-1 : k+1])
			if err != nil {
				return nil, err
			}
			gap.Color, gap.Width, gap.Dashes = series.c, vg.Points(1.5), []vg.Length{vg.Points(4), vg.Points(3)}
			p.Add(gap)
		}
		l, err := plotter.NewLine(solid)
		if err != nil {
			return nil, err
		}
		sc, err := plotter.NewScatter(series.xys)
		if err != nil {
			return nil, err
		}
		l.Color, l.Width = series.c, vg.Points(1.5)
		sc.GlyphStyle = draw.GlyphStyle{Color: series.c, Radius: vg.Points(3), Shape: draw.CircleGlyph{}}
		p.Add(l, sc)
		p.Legend.Add(series.name, l, sc)
	}
	headroom(p, append(append(plotter.XYs(nil), thr...), good...), false)
	return p, nil
}

// axisPlaces is where each setting goes on the load panel's x axis: a finite one at itself, +Inf
// one step past the largest finite one (the last gap between the distinct finite settings, a
// ratio on a log axis; with one finite setting, as far again; with none, 1), anything else
// nowhere (NaN).
func axisPlaces(xs []float64, logScale bool) []float64 {
	var fin []float64
	for _, x := range xs {
		if finite(x) {
			fin = append(fin, x)
		}
	}
	sort.Float64s(fin)
	fin = slices.Compact(fin)
	inf := 1.0
	switch n := len(fin); {
	case n >= 2 && logScale:
		inf = fin[n-1] * fin[n-1] / fin[n-2]
	case n >= 2:
		inf = 2*fin[n-1] - fin[n-2]
	case n == 1 && fin[0] > 0:
		inf = 2 * fin[0]
	case n == 1:
		inf = fin[0] + 1
	}
	if !finite(inf) {
		inf = math.MaxFloat64 // settings near the float range's end: still past them
	}
	out := make([]float64, len(xs))
	for i, x := range xs {
		switch {
		case finite(x):
			out[i] = x
		case math.IsInf(x, 1):
			out[i] = inf
		default:
			out[i] = math.NaN()
		}
	}
	return out
}

func newPanel(title, x, y string) *gplot.Plot {
	p := gplot.New()
	p.Title.Text = title
	p.X.Label.Text = x
	p.Y.Label.Text = y
	p.Legend.TextStyle.Font.Size = vg.Points(9)
	return p
}

// printable is s with what XML (and so SVG) cannot hold escaped, Go-style (\x01, \n, invalid
// UTF-8): a model id a server reported, a path with a newline.
func printable(s string) string {
	if utf8.ValidString(s) && !strings.ContainsFunc(s, func(r rune) bool { return !unicode.IsPrint(r) }) {
		return s
	}
	q := strconv.Quote(s)
	return q[1 : len(q)-1]
}

func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }

// Label formats a setting's value for the charts and tables: integers without a point, +Inf as
// "inf" (the word --request-rates takes), others in the fewest digits that tell them apart from
// every other float (1000.1 and 1000.2 stay two labels, two file names).
func Label(v float64) string {
	if math.IsInf(v, 1) {
		return "inf"
	}
	if v == math.Trunc(v) && math.Abs(v) < 1e15 {
		return strconv.FormatInt(int64(v), 10)
	}
	return strconv.FormatFloat(v, 'g', -1, 64)
}
