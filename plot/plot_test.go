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
