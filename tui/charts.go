package tui

import (
	"fmt"
	"math"
	"strings"
	"time"

	"rosetop/bench"
	"rosetop/themes"
)

// charts is the dashboard's chart state. ntcharts models hold pointers, so this lives behind a
// pointer shared by the Model's copies; it is touched only inside Update (one goroutine).
type charts struct {
	queue, p99 *timeChart
	admit      *admitChart
	itl        *itlChart
	span       int // index into chartSpans: the time charts' window
}

// chartSpans are the windows the w key cycles through; 0 is the whole session.
var chartSpans = [...]time.Duration{30 * time.Second, time.Minute, 2 * time.Minute, 10 * time.Minute, 0}

// defaultSpan is chartSpans' index of the window a dashboard opens with (the last minute).
const defaultSpan = 1

func newCharts() *charts {
	return &charts{queue: newTimeChart(false), p99: newTimeChart(true), admit: newAdmitChart(), itl: newITLChart(), span: defaultSpan}
}

// nextSpan moves to the next window and names it.
func (c *charts) nextSpan() string {
	c.span = (c.span + 1) % len(chartSpans)
	return "time charts: " + spanName(chartSpans[c.span])
}

// spanName is a window as titles say it: "last 30s", "last 2m", "whole session".
func spanName(d time.Duration) string {
	switch {
	case d == 0:
		return "whole session"
	case d >= 2*time.Minute:
		return fmt.Sprintf("last %dm", int(d/time.Minute))
	}
	return fmt.Sprintf("last %ds", int(d/time.Second))
}

// window is the time range of the charts in seconds: the chosen span scrolling with the clock
// (it fills from the left until the session is that old), or the whole session.
func (c *charts) window(v *bench.View) (x0, x1 float64) {
	now := v.Now.Seconds()
	span := chartSpans[c.span].Seconds()
	if span == 0 {
		return 0, math.Max(now, 10)
	}
	x1 = math.Max(now, span)
	return x1 - span, x1
}

// points is a timeline's finest track that covers the window: its buckets are at most a few
// times finer than the chart's columns, and the axis never claims more time than it holds.
func (c *charts) points(tl bench.Timeline) []bench.Point {
	span := chartSpans[c.span]
	for _, t := range tl.Tracks {
		if t.Span == 0 || (span != 0 && t.Span >= span) {
			return t.Points
		}
	}
	return nil
}

func (m *Model) queueBody(v *bench.View, x0, x1 float64, iw, ih int) string {
	st := m.pt
	var series []tseries
	top := 1.0
	letters := []rune{'W', 'R'}
	for i, tl := range v.Queue {
		pts := m.ch.points(tl)
		for _, p := range pts {
			if x := p.At.Seconds(); x >= x0 && x <= x1 {
				top = math.Max(top, p.Value)
			}
		}
		series = append(series, tseries{pts: pts, ink: inkSeries + ink(i), letter: letters[i%len(letters)]})
	}
	head := st.Muted.Render("no steps yet")
	if q := v.QueueLast; q.At > 0 || q.Waiting+q.Running > 0 {
		head = st.Series[0].Render("W ") + st.Muted.Render("waiting ") + st.Strong.Render(fmt.Sprintf("%-5d", q.Waiting)) +
			st.Series[1].Render(" R ") + st.Muted.Render("running ") + st.Strong.Render(fmt.Sprintf("%-5d", q.Running))
		if kv := st.Muted.Render(" KV blocks ") + st.Text.Render(fmt.Sprintf("%d/%d", v.KVUsed, v.KVTotal)); v.KVTotal > 0 && widthOf(head+kv) <= iw {
			head += kv
		}
	}
	if watching(v) {
		head = watchQueueHead(st, v)
	}
	m.ch.queue.SetSize(iw, ih-1)
	chart := m.ch.queue.draw(st, x0, x1, 0, niceMax(top), series, v.Markers)
	return fit(head, iw) + "\n" + chart
}

// p99Letters label the p99 lines (TTFT, queue wait, prefill->first, TPOT: per Output token, ITL).
var p99Letters = [...]rune{'T', 'Q', 'P', 'O', 'I'}

// p99Key is a p99 line's letter and colour (an index into the series pens), by its legend
// name, so that a metric keeps them on the client-side and the server's chart alike; i (the
// line's place) for a name not listed. The server's E2E latency takes TPOT's colour, which
// that chart has no line for.
func p99Key(name string, i int) (rune, int) {
	switch name {
	case "TTFT":
		return 'T', 0
	case "queue":
		return 'Q', 1
	case "prefill":
		return 'P', 2
	case "TPOT":
		return 'O', 3
	case "E2E":
		return 'E', 3
	case "ITL":
		return 'I', 4
	}
	return p99Letters[i%len(p99Letters)], i % themes.NumSeries
}

func (m *Model) p99Body(v *bench.View, x0, x1 float64, iw, ih int) string {
	st := m.pt
	tls, empty := v.P99, "no finished requests yet"
	value := func(_ string, last float64) string { return numRaw(last) }
	if watching(v) {
		tls, empty, value = v.ServerP99, "server p99: no data yet", boundedValue(v.Server)
	}
	var series []tseries
	var items []legendItem
	lo, hi := math.Inf(1), 0.0
	most := 0 // the most points a line has in the window
	for i, tl := range tls {
		pts := m.ch.points(tl)
		name := shortName(tl.Name)
		letter, c := p99Key(name, i)
		series = append(series, tseries{pts: pts, ink: inkSeries + ink(c), letter: letter})
		last, n := math.NaN(), 0
		for _, p := range pts {
			if x := p.At.Seconds(); x >= x0 && x <= x1 && p.Value > 0 {
				lo, hi = math.Min(lo, p.Value), math.Max(hi, p.Value)
				last, n = p.Value, n+1
			}
		}
		most = max(most, n)
		items = append(items, legendItem{key: st.Series[c].Render(string(letter)), name: st.Muted.Render(name), value: st.Strong.Render(value(tl.Name, last))})
	}
	// --goodput targets of a metric charted here: a flat marker-coloured line at the target.
	for _, o := range v.Header.SLOs {
		if !sloCharted(o.Metric, watching(v)) || !(o.Ms > 0) {
			continue
		}
		at := func(x float64) time.Duration { return time.Duration(x * float64(time.Second)) }
		series = append(series, tseries{pts: []bench.Point{{At: at(x0), Value: o.Ms}, {At: at(x1), Value: o.Ms}}, ink: inkMarker})
		lo, hi = math.Min(lo, o.Ms), math.Max(hi, o.Ms)
		items = append(items, legendItem{key: st.Marker.Render("┈"), name: st.Muted.Render(strings.ToUpper(o.Metric) + " target"), value: st.Strong.Render(numRaw(o.Ms))})
	}
	ymin, ymax := logRange(lo, hi)
	head := st.Muted.Render(empty)
	if len(items) > 0 && (!watching(v) || most >= 2) {
		head = legend(items, iw)
	}
	m.ch.p99.SetSize(iw, ih-1)
	return fit(head, iw) + "\n" + m.ch.p99.draw(st, x0, x1, ymin, ymax, series, v.Markers)
}

// sloCharted reports whether the p99 chart has the metric a --goodput target is about: TTFT,
// and TPOT on rosetop's own chart (where end-to-end latency has no series of its own), the
// server's end-to-end latency in watch mode (where TPOT has none).
func sloCharted(metric string, watch bool) bool {
	switch metric {
	case "ttft":
		return true
	case "tpot":
		return !watch
	case "e2el":
		return watch
	}
	return false
}

// legendItem is one series of a legend: its key (the letter at its line's end), name, value.
type legendItem struct{ key, name, value string }

// legend lists every item in w cells: "T TTFT 843  Q queue 760 …", else without the names,
// else without the gaps, else the keys alone. It never leaves an item out.
func legend(items []legendItem, w int) string {
	forms := []func(it legendItem) string{
		func(it legendItem) string { return it.key + " " + it.name + " " + it.value },
		func(it legendItem) string { return it.key + " " + it.value },
		func(it legendItem) string { return it.key + it.value },
		func(it legendItem) string { return it.key },
	}
	seps := []string{"  ", "  ", " ", " "}
	for i, f := range forms {
		parts := make([]string, len(items))
		for j, it := range items {
			parts[j] = f(it)
		}
		if s := strings.Join(parts, seps[i]); widthOf(s) <= w || i == len(forms)-1 {
			return s
		}
	}
	return ""
}

// shortName turns bench's series names into legend words: "Queue wait p99" -> "queue" (the
// server's "Queue p99" too), "E2E latency p99" -> "E2E".
func shortName(n string) string {
	n = strings.TrimSuffix(n, " p99")
	switch n {
	case "Queue wait", "Queue":
		return "queue"
	case "Prefill->first", "Prefill":
		return "prefill"
	case "E2E latency":
		return "E2E"
	}
	return n
}
