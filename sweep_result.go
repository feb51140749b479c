package main

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"

	"rosetop/bench"
	"rosetop/internal/atomicfile"
	"rosetop/plot"
)

// num is a measurement that may be missing (NaN): null in JSON, "n/a" in the table and CSV.
type num float64

func (n num) MarshalJSON() ([]byte, error) {
	if math.IsNaN(float64(n)) || math.IsInf(float64(n), 0) {
		return []byte("null"), nil
	}
	return json.Marshal(float64(n))
}

func (n *num) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		*n = num(math.NaN())
		return nil
	}
	return json.Unmarshal(b, (*float64)(n))
}

// text is the table's form of n: two decimals.
func (n num) text() string { return n.format(2) }

// field is the CSV's form of n: every digit, as in sweep.json (two decimals made 0.001 req/s 0.00).
func (n num) field() string { return n.format(-1) }

func (n num) format(prec int) string {
	if math.IsNaN(float64(n)) || math.IsInf(float64(n), 0) {
		return "n/a"
	}
	return strconv.FormatFloat(float64(n), 'f', prec, 64)
}

// axisValue is a point's setting. JSON has no infinity: --request-rates' inf is written "inf",
// as vLLM writes an infinite request_rate, and read back as +Inf.
type axisValue float64

func (v axisValue) MarshalJSON() ([]byte, error) { return infJSON(float64(v)) }

func (v *axisValue) UnmarshalJSON(b []byte) error {
	if string(b) == `"inf"` {
		*v = axisValue(math.Inf(1))
		return nil
	}
	return json.Unmarshal(b, (*float64)(v))
}

// sweepPoint is one row of the sweep: the medians over the point's measured runs.
type sweepPoint struct {
	Value       axisValue `json:"value"` // a number, or "inf"
	Label       string    `json:"label"` // as the table prints Value
	File        string    `json:"file"`  // the point's rosetop JSON, beside sweep.json
	Runs        int       `json:"runs"`
	RequestRate num       `json:"request_throughput"` // completed requests/s
	Throughput  num       `json:"output_throughput"`  // output tokens a second
	TTFTP50     num       `json:"ttft_p50_ms"`
	TTFTP99     num       `json:"ttft_p99_ms"`
	TPOTP50     num       `json:"tpot_p50_ms"`
	TPOTP99     num       `json:"tpot_p99_ms"`
	ITLP99      num       `json:"itl_p99_ms"`
	E2ELP99     num       `json:"e2el_p99_ms"`
	Goodput     num       `json:"request_goodput"`    // null without --goodput
	Attainment  num       `json:"slo_attainment_pct"` // null without --goodput
}

// sweepColumns are the table's and the CSV's columns after the value, with their getters.
var sweepColumns = []struct {
	name string
	get  func(p *sweepPoint) num
}{
	{"req/s", func(p *sweepPoint) num { return p.RequestRate }},
	{"tok/s", func(p *sweepPoint) num { return p.Throughput }},
	{"TTFT p50", func(p *sweepPoint) num { return p.TTFTP50 }},
	{"TTFT p99", func(p *sweepPoint) num { return p.TTFTP99 }},
	{"TPOT p50", func(p *sweepPoint) num { return p.TPOTP50 }},
	{"TPOT p99", func(p *sweepPoint) num { return p.TPOTP99 }},
	{"ITL p99", func(p *sweepPoint) num { return p.ITLP99 }},
	{"E2EL p99", func(p *sweepPoint) num { return p.E2ELP99 }},
	{"goodput", func(p *sweepPoint) num { return p.Goodput }},
	{"SLO %", func(p *sweepPoint) num { return p.Attainment }},
}

// newSweepPoint takes the medians of the runs' numbers.
func newSweepPoint(v float64, file string, runs []bench.Summary) sweepPoint {
	med := func(get func(s *bench.Summary) float64) num {
		var xs []float64
		for i := range runs {
			if x := get(&runs[i]); !math.IsNaN(x) {
				xs = append(xs, x)
			}
		}
		return num(medianOf(xs))
	}
	dist := func(get func(s *bench.Summary) bench.Dist, p func(d bench.Dist) float64) num {
		return med(func(s *bench.Summary) float64 {
			if d := get(s); d.N > 0 {
				return p(d)
			}
			return math.NaN()
		})
	}
	p50, p99 := func(d bench.Dist) float64 { return d.P50 }, func(d bench.Dist) float64 { return d.P99 }
	ttft, tpot := func(s *bench.Summary) bench.Dist { return s.TTFT }, func(s *bench.Summary) bench.Dist { return s.TPOT }
	pt := sweepPoint{
		Value: axisValue(v), Label: plot.Label(v), File: file, Runs: len(runs),
		RequestRate: med(func(s *bench.Summary) float64 { return s.RequestThroughput }),
		Throughput:  med(func(s *bench.Summary) float64 { return s.Throughput }),
		TTFTP50:     dist(ttft, p50), TTFTP99: dist(ttft, p99), TPOTP50: dist(tpot, p50), TPOTP99: dist(tpot, p99),
		ITLP99:  dist(func(s *bench.Summary) bench.Dist { return s.ITL }, p99),
		E2ELP99: dist(func(s *bench.Summary) bench.Dist { return s.Latency }, p99),
		Goodput: num(math.NaN()), Attainment: num(math.NaN()),
	}
	if len(runs) > 0 && len(runs[0].SLOs) > 0 {
		pt.Goodput = med(func(s *bench.Summary) float64 { return s.Goodput })
		pt.Attainment = med(func(s *bench.Summary) float64 { return s.Attainment })
	}
	return pt
}

// medianOf is the median of xs (NaN for none), numpy's.
func medianOf(xs []float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	if n := len(s); n%2 == 1 {
		return s[n/2]
	} else {
		return (s[n/2-1] + s[n/2]) / 2
	}
}

// sweepResult is sweep.json.
type sweepResult struct {
	Axis     string       `json:"axis"`      // the list's flag
	AxisName string       `json:"axis_name"` // with its unit
	Model    string       `json:"model"`
	Device   string       `json:"device"`
	Goodput  string       `json:"goodput,omitempty"` // the targets
	Version  string       `json:"version"`
	Commit   string       `json:"commit"`
	Points   []sweepPoint `json:"points"`
}

// caption says what ran where, under the charts.
func (r sweepResult) caption() string {
	commit := r.Commit
	if commit == "" {
		commit = "unknown"
	} else if len(commit) > 12 {
		commit = commit[:12]
	}
	c := fmt.Sprintf("rosetop sweep: %s on %s, commit %s", r.Model, r.Device, commit)
	if r.Goodput != "" {
		c += "; goodput targets (ms) " + r.Goodput
	}
	return c
}

// writeSweepTable prints one row per point, the columns aligned.
func writeSweepTable(w io.Writer, r sweepResult) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	head := []string{r.Axis}
	for _, c := range sweepColumns {
		head = append(head, c.name)
	}
	fmt.Fprintln(tw, strings.Join(head, "\t")+"\t")
	for i := range r.Points {
		row := []string{r.Points[i].Label}
		for _, c := range sweepColumns {
			row = append(row, c.get(&r.Points[i]).text())
		}
		fmt.Fprintln(tw, strings.Join(row, "\t")+"\t")
	}
	return tw.Flush()
}

// write writes sweep.json, sweep.csv, sweep.png and sweep.svg into dir, each atomically.
func (r sweepResult) write(dir string) error {
	put := func(name string, fill func(io.Writer) error) error {
		if err := atomicfile.Write(filepath.Join(dir, name), fill); err != nil {
			return fmt.Errorf("--out-dir %s: %s: %w", dir, name, err)
		}
		return nil
	}
	if err := put("sweep.json", func(w io.Writer) error {
		enc := json.NewEncoder(w)
		enc.SetIndent("", " ")
		return enc.Encode(r)
	}); err != nil {
		return err
	}
	if err := put("sweep.csv", r.writeCSV); err != nil {
		return err
	}
	sw := plot.Sweep{Axis: r.AxisName, Caption: r.caption()}
	for _, p := range r.Points {
		sw.Points = append(sw.Points, plot.Point{X: float64(p.Value), Label: p.Label, Throughput: float64(p.Throughput), TTFTP99: float64(p.TTFTP99),
			TPOTP50: float64(p.TPOTP50), RequestRate: float64(p.RequestRate), Goodput: float64(p.Goodput)})
	}
	if err := put("sweep.png", func(w io.Writer) error { return plot.WritePNG(w, sw) }); err != nil {
		return err
	}
	return put("sweep.svg", func(w io.Writer) error { return plot.WriteSVG(w, sw) })
}

func (r sweepResult) writeCSV(w io.Writer) error {
	cw := csv.NewWriter(w)
	head := []string{r.Axis}
	for _, c := range sweepColumns {
		head = append(head, c.name)
	}
	if err := cw.Write(append(head, "file")); err != nil {
		return err
	}
	for i := range r.Points {
		row := []string{r.Points[i].Label}
		for _, c := range sweepColumns {
			row = append(row, c.get(&r.Points[i]).field())
		}
		if err := cw.Write(append(row, r.Points[i].File)); err != nil {
			return err
		}
	}
	cw.Flush()
	return cw.Error()
}
