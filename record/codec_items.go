package record

import (
	"math"
	"unsafe"

	"rosetop/bench"
)

// The encodings of the View's list items and rows (codec.go's rule holds: fields are appended at
// a record's end, never inserted), the latencies written in runs, and a remote server's panel.

func encLatency(e *enc, rows []bench.LatencyRow) {
	e.uvarint(uint64(len(rows)))
	for _, row := range rows {
		e.record(func(e *enc) {
			e.string(row.Name)
			encDist(e, row.Dist)
		})
	}
}

func decLatency(d *dec) []bench.LatencyRow {
	n := d.count(unsafe.Sizeof(bench.LatencyRow{}))
	if n == 0 {
		return nil
	}
	out := make([]bench.LatencyRow, n)
	for i := range out {
		r := d.record()
		out[i] = bench.LatencyRow{Name: r.string(), Dist: decDist(&r)}
		d.done(&r)
	}
	return out
}

func encCompare(e *enc, cs []bench.Comparison) {
	e.uvarint(uint64(len(cs)))
	for _, c := range cs {
		e.record(func(e *enc) {
			e.string(c.Metric)
			e.float(c.Cold)
			e.float(c.Steady)
			e.float(c.Ratio)
			e.bool(c.HigherIsBetter)
		})
	}
}

func decCompare(d *dec) []bench.Comparison {
	n := d.count(unsafe.Sizeof(bench.Comparison{}))
	if n == 0 {
		return nil
	}
	out := make([]bench.Comparison, n)
	for i := range out {
		r := d.record()
		out[i] = bench.Comparison{Metric: r.string(), Cold: r.float(), Steady: r.float(), Ratio: r.float(), HigherIsBetter: r.bool()}
		d.done(&r)
	}
	return out
}

// encServer writes a remote server's panel: its own metrics and the rows against rosetop's,
// then a fleet's members (after the fields of the recordings before fleets, which lack them).
// A member is a record laid out as the panel's, with no rows. A field added to ServerMetrics
// goes after the members here, and after encMetrics in a member's record (encLater).
func encServer(e *enc, p *bench.ServerPanel) {
	e.record(func(e *enc) {
		encMetrics(e, &p.ServerMetrics, p.Rows)
		e.uvarint(uint64(len(p.Members)))
		for i := range p.Members {
			e.record(func(e *enc) {
				encMetrics(e, &p.Members[i], nil)
				encLater(e, &p.Members[i])
			})
		}
		encLater(e, &p.ServerMetrics)
	})
}

// encLater writes the ServerMetrics fields added after fleets, which the recordings before them
// lack: the request rate, then (after the recordings before them) the data-parallel ranks.
func encLater(e *enc, m *bench.ServerMetrics) {
	encGauge(e, m.ReqRate)
	encDP(e, m.DP)
}

// decLater reads what encLater wrote, where the recording has it.
func decLater(r *dec, m *bench.ServerMetrics) {
	if r.more() {
		m.ReqRate = decGauge(r)
	}
	if r.more() {
		m.DP = decDP(r)
	}
}

// encDP writes a server's data-parallel ranks: whether it has them, then a record of the ranks
// and the count of those not kept.
func encDP(e *enc, p *bench.DPRanks) {
	e.bool(p != nil)
	if p == nil {
		return
	}
	e.record(func(e *enc) {
		e.uvarint(uint64(len(p.Ranks)))
		for _, x := range p.Ranks {
			e.record(func(e *enc) {
				e.string(x.ID)
				encGauge(e, x.Running)
				encGauge(e, x.Waiting)
				encGauge(e, x.KVUsage)
			})
		}
		e.int(p.More)
	})
}

// decDP reads what encDP wrote; nil where the server had no ranks apart.
func decDP(d *dec) *bench.DPRanks {
	if !d.bool() {
		return nil
	}
	r := d.record()
	p := &bench.DPRanks{}
	if n := r.count(unsafe.Sizeof(bench.DPRank{})); n > 0 {
		p.Ranks = make([]bench.DPRank, n)
		for i := range p.Ranks {
			xr := r.record()
			p.Ranks[i] = bench.DPRank{ID: xr.string(), Running: decGauge(&xr), Waiting: decGauge(&xr), KVUsage: decGauge(&xr)}
			r.done(&xr)
		}
	}
	p.More = max(0, r.int()) // a damaged recording may hold a negative count
	d.done(&r)
	return p
}

func encGauge(e *enc, g bench.Gauge) {
	e.record(func(e *enc) {
		e.float(g.V)
		e.bool(g.Known)
	})
}

func decGauge(d *dec) bench.Gauge {
	r := d.record()
	g := bench.Gauge{V: r.float(), Known: r.bool()}
	d.done(&r)
	return g
}

// encMetrics writes m's fields but its Members, and rows amid them where the first recordings
// had them, into the record being written.
func encMetrics(e *enc, m *bench.ServerMetrics, rows []bench.ServerRow) {
	latency := func(e *enc, l bench.ServerLatency) {
		e.record(func(e *enc) {
			e.string(l.Name)
			e.bool(l.Known)
			encDist(e, l.Dist)
			e.float(l.FirstBound) // after the fields of the first recordings, which lack it
			e.float(l.Target)     // likewise, after those of the recordings before watch-mode targets
			encGauge(e, l.Within)
			e.bool(l.WithinFloor)
		})
	}
	e.string(m.Kind)
	e.string(m.Source)
	e.string(m.Note)
	e.dur(m.At)
	encGauge(e, m.Waiting)
	encGauge(e, m.Running)
	encGauge(e, m.KVUsage)
	e.dur(m.Window)
	e.uvarint(uint64(len(m.Latency)))
	for _, l := range m.Latency {
		latency(e, l)
	}
	e.uvarint(uint64(len(rows)))
	for _, row := range rows {
		e.record(func(e *enc) {
			e.string(row.Name)
			latency(e, row.Server)
			encDist(e, row.Client)
			e.float(row.DiffP50)
			e.float(row.DiffP99)
		})
	}
	// After the fields of the recordings made before watch mode, which lack them.
	encGauge(e, m.GenRate)
	encGauge(e, m.PromptRate)
	e.bool(m.Total != nil)
	if t := m.Total; t != nil {
		e.record(func(e *enc) {
			e.dur(t.Span)
			e.int(t.Scrapes)
			e.int(t.Failed)
			encGauge(e, t.Requests)
			encGauge(e, t.GenTokens)
			encGauge(e, t.PromptTokens)
			e.uvarint(uint64(len(t.Latency)))
			for _, l := range t.Latency {
				latency(e, l)
			}
		})
	}
}

func decServer(d *dec) *bench.ServerPanel {
	r := d.record()
	p := &bench.ServerPanel{}
	p.Rows = decMetrics(&r, &p.ServerMetrics)
	if r.more() { // recordings before fleets lack the members
		if n := r.count(unsafe.Sizeof(bench.ServerMetrics{})); n > 0 {
			p.Members = make([]bench.ServerMetrics, n)
			for i := range p.Members {
				mr := r.record()
				decMetrics(&mr, &p.Members[i]) // a member has no rows
				decLater(&mr, &p.Members[i])
				r.done(&mr)
			}
		}
		decLater(&r, &p.ServerMetrics)
	}
	d.done(&r)
	return p
}

// decMetrics reads what encMetrics wrote into m, and returns the rows.
func decMetrics(r *dec, m *bench.ServerMetrics) []bench.ServerRow {
	latency := func(d *dec) bench.ServerLatency {
		r := d.record()
		l := bench.ServerLatency{Name: r.string(), Known: r.bool(), Dist: decDist(&r)}
		if r.more() {
			l.FirstBound = r.float()
		}
		if r.more() {
			l.Target, l.Within, l.WithinFloor = r.float(), decGauge(&r), r.bool()
		}
		d.done(&r)
		return l
	}
	m.Kind, m.Source, m.Note, m.At = r.string(), r.string(), r.string(), r.dur()
	m.Waiting, m.Running, m.KVUsage, m.Window = decGauge(r), decGauge(r), decGauge(r), r.dur()
	if n := r.count(unsafe.Sizeof(bench.ServerLatency{})); n > 0 {
		m.Latency = make([]bench.ServerLatency, n)
		for i := range m.Latency {
			m.Latency[i] = latency(r)
		}
	}
	var rows []bench.ServerRow
	if n := r.count(unsafe.Sizeof(bench.ServerRow{})); n > 0 {
		rows = make([]bench.ServerRow, n)
		for i := range rows {
			rr := r.record()
			rows[i] = bench.ServerRow{Name: rr.string(), Server: latency(&rr), Client: decDist(&rr), DiffP50: rr.float(), DiffP99: rr.float()}
			r.done(&rr)
		}
	}
	if r.more() { // recordings before watch mode lack the rates and totals
		m.GenRate, m.PromptRate = decGauge(r), decGauge(r)
		if r.bool() {
			tr := r.record()
			t := &bench.ServerTotals{Span: tr.dur(), Scrapes: tr.int(), Failed: tr.int(), Requests: decGauge(&tr), GenTokens: decGauge(&tr), PromptTokens: decGauge(&tr)}
			if n := tr.count(unsafe.Sizeof(bench.ServerLatency{})); n > 0 {
				t.Latency = make([]bench.ServerLatency, n)
				for i := range t.Latency {
					t.Latency[i] = latency(&tr)
				}
			}
			r.done(&tr)
			m.Total = t
		}
	}
	return rows
}

func encAdmission(e *enc, a bench.Admission) {
	e.record(func(e *enc) {
		e.uvarint(a.Step)
		e.dur(a.At)
		e.int(a.Size)
		e.int(a.Limit)
	})
}

func decAdmission(d *dec) bench.Admission {
	r := d.record()
	a := bench.Admission{Step: r.uvarint(), At: r.dur(), Size: r.int(), Limit: r.int()}
	d.done(&r)
	return a
}

func encEvent(e *enc, ev bench.LogEvent) {
	e.record(func(e *enc) {
		e.dur(ev.At)
		e.int(int(ev.Kind))
		e.string(ev.Text)
	})
}

func decEvent(d *dec) bench.LogEvent {
	r := d.record()
	ev := bench.LogEvent{At: r.dur(), Kind: bench.LogKind(r.int()), Text: r.string()}
	d.done(&r)
	return ev
}

func encMarker(e *enc, m bench.Marker) {
	e.record(func(e *enc) {
		e.dur(m.At)
		e.string(m.Label)
	})
}

func decMarker(d *dec) bench.Marker {
	r := d.record()
	m := bench.Marker{At: r.dur(), Label: r.string()}
	d.done(&r)
	return m
}

func encLedger(e *enc, l bench.LedgerEntry) {
	e.record(func(e *enc) {
		e.string(l.What)
		e.string(l.Detail)
		e.dur(l.Took)
		e.time(l.At)
	})
}

func decLedger(d *dec) bench.LedgerEntry {
	r := d.record()
	l := bench.LedgerEntry{What: r.string(), Detail: r.string(), Took: r.dur(), At: r.time()}
	d.done(&r)
	return l
}

func encRequestITL(e *enc, q *bench.RequestITL) {
	e.record(func(e *enc) {
		e.uvarint(q.ID)
		encRuns(e, q.ITL)
	})
}

func decRequestITL(d *dec) bench.RequestITL {
	r := d.record()
	q := bench.RequestITL{ID: r.uvarint()}
	q.ITL = decRuns(&r)
	d.done(&r)
	return q
}

// frameBudget is how many bytes a frame's lists may take decoded: in proportion to its size,
// as values in runs pack tens to a byte (lockstep decoding puts a batch's values in one run),
// and at most maxViewBytes.
func frameBudget(payload int) int { return min(8*(256*payload+4096), maxViewBytes) }

// encRuns writes values as their count, then runs of equal ones (by their bits): run length,
// value (msValue).
func encRuns(e *enc, vs []float64) {
	e.uvarint(uint64(len(vs)))
	for i := 0; i < len(vs); {
		j := i + 1
		for j < len(vs) && math.Float64bits(vs[j]) == math.Float64bits(vs[i]) {
			j++
		}
		e.uvarint(uint64(j - i))
		e.msValue(vs[i])
		i = j
	}
}

// msValue writes a latency in ms. bench measures them as a Duration over 1e6 (a gap between
// tokens): such a value is written as its nanoseconds (shifted left one, so 4 bytes for
// milliseconds), any other as a flag and the float.
func (e *enc) msValue(v float64) {
	if ns := math.Round(v * 1e6); ns >= 0 && ns < 1<<62 && math.Float64bits(float64(int64(ns))/1e6) == math.Float64bits(v) {
		e.uvarint(uint64(ns) << 1)
		return
	}
	e.uvarint(1)
	e.float(v)
}

func (d *dec) msValue() float64 {
	u := d.uvarint()
	if u&1 == 0 {
		return float64(int64(u>>1)) / 1e6
	}
	return d.float()
}

// decRuns reads what encRuns wrote (nil for no values); a count beyond the frame's budget, or a
// run of zero or past the count, is malformed.
func decRuns(d *dec) []float64 {
	n := d.uvarint()
	if !d.charge(n, 8) {
		return nil
	}
	var out []float64
	for uint64(len(out)) < n && d.err == nil {
		run := d.uvarint()
		if run == 0 || run > n-uint64(len(out)) {
			d.fail(errShort)
			return nil
		}
		v := d.msValue()
		for range run {
			out = append(out, v)
		}
	}
	return out
}
