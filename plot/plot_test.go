package plot

import (
	"bytes"
	"encoding/xml"
	"errors"
	"image/png"
	"io"
	"math"
	"strings"
	"testing"
)

func sample() Sweep {
	return Sweep{
		Axis: "prefill max batch size",
		Points: []Point{
			{X: 1, Label: "1", Throughput: 1000, TTFTP99: 900, TPOTP50: 10, RequestRate: 15, Goodput: 3},
			{X: 4, Label: "4", Throughput: 3000, TTFTP99: 400, TPOTP50: 11, RequestRate: 45, Goodput: 30},
			{X: 16, Label: "16", Throughput: 4000, TTFTP99: 300, TPOTP50: 14, RequestRate: 60, Goodput: 50},
			{X: 64, Label: "64", Throughput: 3900, TTFTP99: 350, TPOTP50: 20, RequestRate: 59, Goodput: math.NaN()},
		},
		Caption: "tiny-gpt2 on cpu (2 threads), commit abc123",
	}
}

func TestParetoFront(t *testing.T) {
	s := sample()
	front := paretoFront(s.Points, func(p Point) float64 { return p.TTFTP99 })
	// 64 is beaten by 16 (more throughput, less latency); 1 and 4 are beaten by 16 too.
	if len(front) != 1 || front[0].X != 4000 {
		t.Errorf("TTFT front %v, want only the 16 point", front)
	}
	front = paretoFront(s.Points, func(p Point) float64 { return p.TPOTP50 })
	// By TPOT each point trades throughput for latency, except 64 (beaten by 16).
	if len(front) != 3 || front[0].X != 1000 || front[2].X != 4000 {
		t.Errorf("TPOT front %v, want 1, 4, 16", front)
	}
}

// TestWritePNGAndSVG: both files decode (image/png; an XML parse of the SVG), and the SVG holds
// the titles, the axis labels and the caption as text.
func TestWritePNGAndSVG(t *testing.T) {
	var pngBuf, svgBuf bytes.Buffer
	if err := WritePNG(&pngBuf, sample()); err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(&pngBuf)
	if err != nil {
		t.Fatalf("PNG does not decode: %v", err)
	}
	if b := img.Bounds(); b.Dx() < 1000 || b.Dy() < 300 {
		t.Errorf("PNG is %v", b)
	}
	if err := WriteSVG(&svgBuf, sample()); err != nil {
		t.Fatal(err)
	}
	texts := svgTexts(t, svgBuf.Bytes())
	for _, want := range []string{"output throughput (tokens/s)", "TTFT p99 (ms)", "TPOT p50 (ms)", "requests/s",
		"prefill max batch size", "Pareto front", "goodput (met every target)", "tiny-gpt2 on cpu (2 threads), commit abc123"} {
		if !strings.Contains(texts, want) {
			t.Errorf("SVG has no text %q", want)
		}
	}
}

// svgTexts parses an SVG as XML and returns its text content.
func svgTexts(t *testing.T, data []byte) string {
	t.Helper()
	dec := xml.NewDecoder(bytes.NewReader(data))
	var b strings.Builder
	root := ""
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("SVG is not XML: %v", err)
		}
		switch tk := tok.(type) {
		case xml.StartElement:
			if root == "" {
				root = tk.Name.Local
			}
		case xml.CharData:
			b.Write(tk)
			b.WriteByte('\n')
		}
	}
	if root != "svg" {
		t.Fatalf("root element %q, want svg", root)
	}
	return b.String()
}

func TestNoPoints(t *testing.T) {
	s := Sweep{Axis: "x", Points: []Point{{X: 1, Label: "1", Throughput: math.NaN(), TTFTP99: 1, TPOTP50: 1, RequestRate: 1}}}
	if err := WritePNG(io.Discard, s); !errors.Is(err, ErrNoPoints) {
		t.Errorf("err %v, want ErrNoPoints", err)
	}
}

// TestAxisPlaces: +Inf goes one step past the largest finite setting (the last gap, a ratio on a
// log axis), whatever the order given; NaN goes nowhere.
func TestAxisPlaces(t *testing.T) {
	inf, nan := math.Inf(1), math.NaN()
	for _, c := range []struct {
		xs   []float64
		log  bool
		want []float64
	}{
		{[]float64{1, 2, 4, inf}, false, []float64{1, 2, 4, 6}},
		{[]float64{inf, 4, 1, 2}, false, []float64{6, 4, 1, 2}},
		{[]float64{1, 2, 4, 8, 16, inf}, true, []float64{1, 2, 4, 8, 16, 32}},
		{[]float64{0.5, inf}, false, []float64{0.5, 1}},
		{[]float64{inf}, false, []float64{1}},
		{[]float64{3, nan, inf}, false, []float64{3, nan, 6}},
		{[]float64{1, 4}, false, []float64{1, 4}},
	} {
		got := axisPlaces(c.xs, c.log)
		for i := range c.want {
			if got[i] != c.want[i] && !(math.IsNaN(got[i]) && math.IsNaN(c.want[i])) {
				t.Errorf("axisPlaces(%v, log %v) = %v, want %v", c.xs, c.log, got, c.want)
				break
			}
		}
	}
	for v, want := range map[float64]string{inf: "inf", 16: "16", 0.5: "0.5", 1000.1: "1000.1", 1000.2: "1000.2", 1e20: "1e+20"} {
		if got := Label(v); got != want {
			t.Errorf("Label(%v) = %q, want %q", v, got, want)
		}
	}
}

// TestInfRate: a rate sweep ending in inf has its "inf" tick one step past the largest rate, and a
// sweep of only inf draws; neither chart holds a NaN or an infinity.
func TestInfRate(t *testing.T) {
	pt := func(x float64, thr float64) Point {
		return Point{X: x, Label: Label(x), Throughput: 100 * thr, TTFTP99: 50, TPOTP50: 5, RequestRate: thr, Goodput: math.NaN()}
	}
	for _, c := range []struct {
		name   string
		points []Point
		infAt  float64
	}{
		{"1,2,4,inf", []Point{pt(1, 1), pt(2, 2), pt(4, 3.5), pt(math.Inf(1), 5)}, 6},
		{"log 1..64,inf", []Point{pt(1, 1), pt(8, 7), pt(64, 30), pt(math.Inf(1), 31)}, 512},
		{"inf alone", []Point{pt(math.Inf(1), 5)}, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := Sweep{Axis: "request rate (req/s)", Points: c.points, Caption: "c"}
			p, err := loadPanel(s)
			if err != nil {
				t.Fatal(err)
			}
			found := false
			for _, tk := range p.X.Tick.Marker.Ticks(p.X.Min, p.X.Max) {
				if tk.Label == "inf" {
					found = tk.Value == c.infAt
				}
			}
			if !found || p.X.Max < c.infAt {
				t.Errorf("no tick \"inf\" at %v inside the axis (max %v)", c.infAt, p.X.Max)
			}
			var svg bytes.Buffer
			if err := WriteSVG(&svg, s); err != nil {
				t.Fatal(err)
			}
			if err := WritePNG(io.Discard, s); err != nil {
				t.Fatal(err)
			}
			if b := svg.String(); strings.Contains(b, "NaN") || strings.Contains(b, "Inf") {
				t.Error("the SVG holds NaN or Inf")
			}
			if !strings.Contains(svgTexts(t, svg.Bytes()), "inf") {
				t.Error("the SVG has no text inf")
			}
		})
	}
}

// TestDegenerateSweeps: sweeps that still have something to draw give a PNG that decodes and an
// SVG that parses: no TPOT anywhere (one-token outputs), a single point, all values equal or
// zero, and a point with nothing measured beside others.
func TestDegenerateSweeps(t *testing.T) {
	nan := math.NaN()
	for _, c := range []struct {
		name string
		pts  []Point
		text string // the SVG must hold it
	}{
		{"no tpot", []Point{{X: 1, Label: "1", Throughput: 10, TTFTP99: 2, TPOTP50: nan, RequestRate: 10, Goodput: nan},
			{X: 2, Label: "2", Throughput: 20, TTFTP99: 3, TPOTP50: nan, RequestRate: 20, Goodput: nan}}, "TPOT p50: no point measured it"},
		{"one point", []Point{{X: 4, Label: "4", Throughput: 10, TTFTP99: 2, TPOTP50: 1, RequestRate: 1, Goodput: 1}}, "Pareto front"},
		{"all zero", []Point{{X: 1, Label: "1", RequestRate: 0, Goodput: 0}, {X: 64, Label: "64", RequestRate: 0, Goodput: 0}}, "requests/s"},
		{"nothing at one point", []Point{{X: 1, Label: "1", Throughput: nan, TTFTP99: nan, TPOTP50: nan, RequestRate: nan, Goodput: nan},
			{X: 2, Label: "2", Throughput: 5, TTFTP99: 5, TPOTP50: 5, RequestRate: 5, Goodput: 5}}, "Pareto front"},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := Sweep{Axis: "x", Points: c.pts, Caption: "c"}
			var pngBuf, svgBuf bytes.Buffer
			if err := WritePNG(&pngBuf, s); err != nil {
				t.Fatal(err)
			}
			if _, err := png.Decode(&pngBuf); err != nil {
				t.Fatalf("PNG does not decode: %v", err)
			}
			if err := WriteSVG(&svgBuf, s); err != nil {
				t.Fatal(err)
			}
			if texts := svgTexts(t, svgBuf.Bytes()); !strings.Contains(texts, c.text) {
				t.Errorf("SVG has no text %q", c.text)
			}
		})
	}
}

// TestControlCharsInText: a caption, axis or label with control characters (a model id a server
// reported, a path with a newline) still gives an SVG that parses as XML, the rest of the text
// kept.
func TestControlCharsInText(t *testing.T) {
	s := sample()
	s.Caption = "rosetop sweep: odd\x01model\nname on cpu"
	s.Axis = "setting\x7f"
	s.Points[0].Label = "1\x00"
	var svg bytes.Buffer
	if err := WriteSVG(&svg, s); err != nil {
		t.Fatal(err)
	}
	if texts := svgTexts(t, svg.Bytes()); !strings.Contains(texts, "model") || !strings.Contains(texts, "name on cpu") {
		t.Errorf("SVG lost the caption's text:\n%s", texts)
	}
}

// TestAxisRanges: the axes start at 0 and end finite and above it whatever the numbers: all zero
// (no negative throughput or latency ticks) or near the float range's end.
func TestAxisRanges(t *testing.T) {
	for _, c := range []struct {
		name string
		v    float64
	}{{"zero", 0}, {"huge", 1.5e308}, {"tiny", 1e-300}} {
		pts := []Point{{X: 1, Label: "1", Throughput: c.v, TTFTP99: c.v, TPOTP50: c.v, RequestRate: c.v, Goodput: c.v},
			{X: 2, Label: "2", Throughput: c.v, TTFTP99: c.v, TPOTP50: c.v, RequestRate: c.v, Goodput: c.v}}
		s := Sweep{Axis: "x", Points: pts, Caption: "c"}
		pareto, err := paretoPanel(s, "TTFT p99", func(p Point) float64 { return p.TTFTP99 })
		if err != nil {
			t.Fatal(err)
		}
		load, err := loadPanel(s)
		if err != nil {
			t.Fatal(err)
		}
		for name, ax := range map[string][2]float64{"pareto x": {pareto.X.Min, pareto.X.Max}, "pareto y": {pareto.Y.Min, pareto.Y.Max}, "load y": {load.Y.Min, load.Y.Max}} {
			if ax[0] != 0 || !(ax[1] > 0) || math.IsInf(ax[1], 0) {
				t.Errorf("%s: %s axis from %v to %v, want from 0 to a finite number above it", c.name, name, ax[0], ax[1])
			}
		}
		var svg bytes.Buffer
		if err := WriteSVG(&svg, s); err != nil {
			t.Fatal(err)
		}
		if b := svg.String(); strings.Contains(b, "NaN") || strings.Contains(b, "Inf") {
			t.Errorf("%s: the SVG holds NaN or Inf", c.name)
		}
	}
}
