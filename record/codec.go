package record

import (
	"math"
	"sort"

	"rosetop/bench"
)

// The encodings of the View's types. Every struct is a record (enc.record): its fields in the
// order written here. A field added to a bench type is appended at the end of its record here,
// never inserted or reordered, so that older recordings still read (the new field is zero) and
// older readers skip it; TestEveryViewFieldRecorded fails until a new field is added.

func encDist(e *enc, d bench.Dist) {
	e.record(func(e *enc) {
		e.float(d.P50)
		e.float(d.P95)
		e.float(d.P99)
		e.float(d.Mean)
		e.float(d.Max)
		e.int(d.N)
	})
}

func decDist(d *dec) (v bench.Dist) {
	r := d.record()
	v.P50, v.P95, v.P99, v.Mean, v.Max = r.float(), r.float(), r.float(), r.float(), r.float()
	v.N = r.int()
	d.done(&r)
	return v
}

func encSLOs(e *enc, s []bench.SLO) {
	e.uvarint(uint64(len(s)))
	for _, x := range s {
		e.record(func(e *enc) {
			e.string(x.Metric)
			e.float(x.Ms)
		})
	}
}

func decSLOs(d *dec) []bench.SLO {
	n := d.count()
	if n == 0 {
		return nil
	}
	out := make([]bench.SLO, n)
	for i := range out {
		r := d.record()
		out[i] = bench.SLO{Metric: r.string(), Ms: r.float()}
		d.done(&r)
	}
	return out
}

// encCounts writes a map of counts sorted by key, so equal maps encode to equal bytes.
func encCounts(e *enc, m map[string]int) {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	e.uvarint(uint64(len(keys)))
	for _, k := range keys {
		e.string(k)
		e.int(m[k])
	}
}

func decCounts(d *dec) map[string]int {
	n := d.count()
	if n == 0 {
		return nil
	}
	m := make(map[string]int, n)
	for range n {
		k := d.string()
		m[k] = d.int()
	}
	return m
}

func encSummary(e *enc, s *bench.Summary) {
	e.record(func(e *enc) {
		e.int(s.Index)
		e.bool(s.Warmup)
		e.string(s.Label)
		e.int(s.Requests)
		e.int(s.PromptTokens)
		e.int(s.CompletionTokens)
		e.dur(s.SubmitWall)
		for _, d := range [...]bench.Dist{s.SubmitLag, s.AddRequest, s.Tokenize, s.QueueWait, s.PrefillFirst, s.TTFT, s.TPOT, s.ITL, s.Latency} {
			encDist(e, d)
		}
		e.float(s.Throughput)
		e.float(s.TotalThroughput)
		e.int(s.Preemptions)
		e.int(s.Cancelled)
		e.int(s.Failed)
		e.bool(s.Partial)
		e.int(s.CutTokens)
		encDist(e, s.CutTTFT)
		e.dur(s.Wall)
		e.float(s.RequestThroughput)
		encSLOs(e, s.SLOs)
		e.int(s.Good)
		e.float(s.Goodput)
		e.float(s.Attainment)
		encDist(e, s.TokenGap)
		encCounts(e, s.Failures)
		encCounts(e, s.TokenSources)
	})
}

func decSummary(d *dec) (s bench.Summary) {
	r := d.record()
	s.Index, s.Warmup, s.Label = r.int(), r.bool(), r.string()
	s.Requests, s.PromptTokens, s.CompletionTokens = r.int(), r.int(), r.int()
	s.SubmitWall = r.dur()
	for _, p := range [...]*bench.Dist{&s.SubmitLag, &s.AddRequest, &s.Tokenize, &s.QueueWait, &s.PrefillFirst, &s.TTFT, &s.TPOT, &s.ITL, &s.Latency} {
		*p = decDist(&r)
	}
	s.Throughput, s.TotalThroughput = r.float(), r.float()
	s.Preemptions, s.Cancelled, s.Failed, s.Partial = r.int(), r.int(), r.int(), r.bool()
	s.CutTokens, s.CutTTFT = r.int(), decDist(&r)
	s.Wall, s.RequestThroughput = r.dur(), r.float()
	s.SLOs, s.Good, s.Goodput, s.Attainment = decSLOs(&r), r.int(), r.float(), r.float()
	s.TokenGap, s.Failures, s.TokenSources = decDist(&r), decCounts(&r), decCounts(&r)
	d.done(&r)
	return s
}

// encHeader writes the header's settings: everything but what moves on every frame (encProgress).
func encHeader(e *enc, h *bench.Header) {
	e.record(func(e *enc) {
		e.string(h.Model)
		e.bool(h.RandomWeights)
		e.string(h.Device)
		e.string(h.DeviceNote)
		e.string(h.Job)
		e.bool(h.Paged)
		e.bool(h.CUDAGraph)
		e.string(h.Schedule)
		e.float(h.IntervalMs)
		e.int(h.MaxBatch)
		e.int(h.PrefillMaxBatch)
		e.int(int(h.Phase))
		e.string(h.RunLabel)
		e.bool(h.Paused)
		encSLOs(e, h.SLOs)
		e.bool(h.Remote != nil)
		if r := h.Remote; r != nil {
			e.record(func(e *enc) {
				e.string(r.Endpoint)
				e.string(r.API)
				e.string(r.Kind)
			})
		}
		e.int(h.Concurrency)
	})
}

func decHeader(d *dec, h *bench.Header) {
	r := d.record()
	h.Model, h.RandomWeights, h.Device, h.DeviceNote, h.Job = r.string(), r.bool(), r.string(), r.string(), r.string()
	h.Paged, h.CUDAGraph, h.Schedule, h.IntervalMs = r.bool(), r.bool(), r.string(), r.float()
	h.MaxBatch, h.PrefillMaxBatch, h.Phase, h.RunLabel, h.Paused = r.int(), r.int(), bench.Phase(r.int()), r.string(), r.bool()
	h.SLOs = decSLOs(&r)
	h.Remote = nil
	if r.bool() {
		rr := r.record()
		h.Remote = &bench.RemoteInfo{Endpoint: rr.string(), API: rr.string(), Kind: rr.string()}
		r.done(&rr)
	}
	h.Concurrency = r.int()
	d.done(&r)
}

// encProgress writes the header's figures that move on every frame.
func encProgress(e *enc, h *bench.Header) {
	e.record(func(e *enc) {
		e.dur(h.Elapsed)
		e.float(h.TokensPerSec)
		e.bool(h.Run != nil)
		if p := h.Run; p != nil {
			e.record(func(e *enc) {
				e.int(p.Finished)
				e.int(p.Requests)
				e.int(p.Tokens)
				e.int(p.MaxTokens)
				e.dur(p.Elapsed)
				e.dur(p.ETA)
			})
		}
		e.float(h.Attainment)
		e.int(h.AttainmentN)
	})
}

func decProgress(d *dec, h *bench.Header) {
	r := d.record()
	h.Elapsed = r.dur()
	h.TokensPerSec = r.float()
	h.Run = nil
	if r.bool() {
		pr := r.record()
		h.Run = &bench.RunProgress{Finished: pr.int(), Requests: pr.int(), Tokens: pr.int(), MaxTokens: pr.int(), Elapsed: pr.dur(), ETA: pr.dur()}
		r.done(&pr)
	}
	h.Attainment, h.AttainmentN = r.float(), r.int()
	d.done(&r)
}

// encScalars writes the view's single values that are not the header's.
func encScalars(e *enc, v *bench.View) {
	e.record(func(e *enc) {
		e.time(v.Start)
		e.record(func(e *enc) {
			e.dur(v.QueueLast.At)
			e.int(v.QueueLast.Waiting)
			e.int(v.QueueLast.Running)
		})
		e.dur(v.LatencyWindow)
		e.record(func(e *enc) {
			e.int(v.Live.Windows)
			e.int(v.Live.Requests)
		})
		e.int(v.KVUsed)
		e.int(v.KVTotal)
	})
}

func decScalars(d *dec, v *bench.View) {
	r := d.record()
	v.Start = r.time()
	q := r.record()
	v.QueueLast = bench.QueuePoint{At: q.dur(), Waiting: q.int(), Running: q.int()}
	r.done(&q)
	v.LatencyWindow = r.dur()
	l := r.record()
	v.Live = bench.LiveCounts{Windows: l.int(), Requests: l.int()}
	r.done(&l)
	v.KVUsed, v.KVTotal = r.int(), r.int()
	d.done(&r)
}

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
	n := d.count()
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
	n := d.count()
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

// encServer writes a remote server's panel: its own metrics and the rows against rosetop's.
func encServer(e *enc, p *bench.ServerPanel) {
	gauge := func(e *enc, g bench.Gauge) {
		e.record(func(e *enc) {
			e.float(g.V)
			e.bool(g.Known)
		})
	}
	latency := func(e *enc, l bench.ServerLatency) {
		e.record(func(e *enc) {
			e.string(l.Name)
			e.bool(l.Known)
			encDist(e, l.Dist)
		})
	}
	e.record(func(e *enc) {
		m := &p.ServerMetrics
		e.string(m.Kind)
		e.string(m.Source)
		e.string(m.Note)
		e.dur(m.At)
		gauge(e, m.Waiting)
		gauge(e, m.Running)
		gauge(e, m.KVUsage)
		e.dur(m.Window)
		e.uvarint(uint64(len(m.Latency)))
		for _, l := range m.Latency {
			latency(e, l)
		}
		e.uvarint(uint64(len(p.Rows)))
		for _, row := range p.Rows {
			e.record(func(e *enc) {
				e.string(row.Name)
				latency(e, row.Server)
				encDist(e, row.Client)
				e.float(row.DiffP50)
				e.float(row.DiffP99)
			})
		}
	})
}

func decServer(d *dec) *bench.ServerPanel {
	gauge := func(d *dec) bench.Gauge {
		r := d.record()
		g := bench.Gauge{V: r.float(), Known: r.bool()}
		d.done(&r)
		return g
	}
	latency := func(d *dec) bench.ServerLatency {
		r := d.record()
		l := bench.ServerLatency{Name: r.string(), Known: r.bool(), Dist: decDist(&r)}
		d.done(&r)
		return l
	}
	r := d.record()
	p := &bench.ServerPanel{}
	m := &p.ServerMetrics
	m.Kind, m.Source, m.Note, m.At = r.string(), r.string(), r.string(), r.dur()
	m.Waiting, m.Running, m.KVUsage, m.Window = gauge(&r), gauge(&r), gauge(&r), r.dur()
	if n := r.count(); n > 0 {
		m.Latency = make([]bench.ServerLatency, n)
		for i := range m.Latency {
			m.Latency[i] = latency(&r)
		}
	}
	if n := r.count(); n > 0 {
		p.Rows = make([]bench.ServerRow, n)
		for i := range p.Rows {
			rr := r.record()
			p.Rows[i] = bench.ServerRow{Name: rr.string(), Server: latency(&rr), Client: decDist(&rr), DiffP50: rr.float(), DiffP99: rr.float()}
			r.done(&rr)
		}
	}
	d.done(&r)
	return p
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

// runBudget is how many values a frame may hold in runs: a run's length is not bounded by the
// bytes it takes, so a frame gets a budget in proportion to its size (lockstep decoding packs
// a batch's values into one run: tens of values a byte).
func runBudget(payload int) int { return 256*payload + 4096 }

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
	if d.runs == nil || n > uint64(*d.runs) {
		d.fail(errShort)
		return nil
	}
	*d.runs -= int(n)
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
