package record

import (
	"sort"
	"unsafe"

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
	n := d.count(unsafe.Sizeof(bench.SLO{}))
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
	n := d.count(2 * unsafe.Sizeof(struct { // a map takes about twice its entries
		k string
		v int
	}{}))
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
		e.string(s.FirstFailure) // after the fields of the first recordings, which lack it
		e.int(s.NotSent)         // likewise, after those of the recordings before it
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
	if r.more() {
		s.FirstFailure = r.string()
	}
	if r.more() {
		s.NotSent = r.int()
	}
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
				e.bool(r.ServerFirsts)
				e.bool(r.Watch) // after the fields of the recordings before watch mode, which lack it
				// Likewise the fleet, after the fields of the recordings before fleets.
				e.uvarint(uint64(len(r.Fleet)))
				for _, ep := range r.Fleet {
					e.string(ep)
				}
			})
		}
		e.int(h.Concurrency)
		e.string(h.Stopped) // after the fields of the first recordings, which lack it
		encPlan(e, h.Building)
		encPlan(e, h.Pending)
	})
}

// encPlan writes an engine being built or asked for (nil: none).
func encPlan(e *enc, p *bench.EnginePlan) {
	e.bool(p != nil)
	if p != nil {
		e.record(func(e *enc) {
			e.int(p.Engine)
			e.bool(p.Paged)
			e.bool(p.CUDAGraph)
			e.bool(p.Restart)
		})
	}
}

func decPlan(r *dec) *bench.EnginePlan {
	if !r.bool() {
		return nil
	}
	pr := r.record()
	p := &bench.EnginePlan{Engine: pr.int(), Paged: pr.bool(), CUDAGraph: pr.bool(), Restart: pr.bool()}
	r.done(&pr)
	return p
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
		h.Remote = &bench.RemoteInfo{Endpoint: rr.string(), API: rr.string(), Kind: rr.string(), ServerFirsts: true}
		if rr.more() { // earlier recordings lack it: their admissions were always the server's count
			h.Remote.ServerFirsts = rr.bool()
		}
		if rr.more() {
			h.Remote.Watch = rr.bool()
		}
		if rr.more() {
			if n := rr.count(unsafe.Sizeof("")); n > 0 {
				h.Remote.Fleet = make([]string, n)
				for i := range h.Remote.Fleet {
					h.Remote.Fleet[i] = rr.string()
				}
			}
		}
		r.done(&rr)
	}
	h.Concurrency, h.Stopped, h.Building, h.Pending = r.int(), "", nil, nil
	if r.more() {
		h.Stopped = r.string()
	}
	if r.more() { // recordings before engine plans lack them
		h.Building, h.Pending = decPlan(&r), decPlan(&r)
	}
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
			e.int(v.Live.Costs)
			e.dur(v.Live.CostTook)
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
	v.Live = bench.LiveCounts{Windows: l.int(), Requests: l.int(), Costs: l.int(), CostTook: l.dur()}
	r.done(&l)
	v.KVUsed, v.KVTotal = r.int(), r.int()
	d.done(&r)
}
