package record

import (
	"fmt"
	"math"
	"math/rand/v2"
	"time"

	"rosetop/bench"
)

// Synth is a deterministic stand-in for a bench.Session's views, 100 ms apart, shaped as bench
// publishes them: time series in tracks of three resolutions (two rings and an adaptive one)
// whose points are shared between views and never written again; rings of admissions, events,
// markers and ITL samples; a run filed every two seconds; an engine restart every minute
// (cold run again, steady runs cleared); each engine's ledger after the model's, growing and
// then summing its tail.
type Synth struct {
	rng     *rand.Rand
	i       int
	start   time.Time
	queue   [2][]*synthTrack
	p99     [5][]*synthTrack
	adm     []bench.Admission
	itl     []float64
	events  []bench.LogEvent
	markers []bench.Marker
	ledger  []bench.LedgerEntry
	cold    *bench.Summary
	steady  []bench.Summary
	slow    []bench.RequestITL
	engine  int
	step    uint64
	prev    *bench.View
}

// NewSynth starts a synthetic session with bench's track sizes.
func NewSynth(seed uint64) *Synth { return newSynth(seed, 512) }

// newSynth starts one whose whole-session tracks keep at most adaptive points before merging.
func newSynth(seed uint64, adaptive int) *Synth {
	s := &Synth{rng: rand.New(rand.NewPCG(seed, 7)), start: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), engine: 1}
	for i := range s.queue {
		s.queue[i] = []*synthTrack{{width: 100 * time.Millisecond, keep: 1200}, {width: time.Second, keep: 600}, {width: time.Second, keep: adaptive, adaptive: true}}
	}
	for i := range s.p99 {
		s.p99[i] = []*synthTrack{{width: 250 * time.Millisecond, keep: 480}, {width: 2 * time.Second, keep: 300}, {width: 2 * time.Second, keep: adaptive, adaptive: true}}
	}
	s.ledger = []bench.LedgerEntry{{What: "model load", Detail: "148 tensors, 498 MB", Took: 1234 * time.Millisecond, At: s.start}}
	return s
}

// Next returns the next view.
func (s *Synth) Next() *bench.View {
	now := time.Duration(s.i) * 100 * time.Millisecond
	s.i++
	r := s.rng
	if s.i%600 == 0 { // a new engine every minute: its own ledger after the model's
		s.engine++
		s.cold, s.steady = nil, nil
		s.ledger = s.ledger[:1:1]
		s.markers = ringPush(s.markers, 128, bench.Marker{At: now, Label: fmt.Sprintf("cold start (engine %d)", s.engine)})
		s.events = ringPush(s.events, 256, bench.LogEvent{At: now, Kind: bench.LogConfig, Text: "CUDA Graph on: restarting engine"})
	}
	waiting, running := r.IntN(40), 1+r.IntN(64)
	for k := 0; k < 5; k++ { // steps in 100 ms
		at := now + time.Duration(k)*20*time.Millisecond
		s.queue[0][0].add(at, float64(waiting+k))
		s.queue[1][0].add(at, float64(running))
		for _, t := range s.queue[0][1:] {
			t.add(at, float64(waiting+k))
		}
		for _, t := range s.queue[1][1:] {
			t.add(at, float64(running))
		}
		s.step++
		if r.IntN(3) == 0 {
			s.adm = ringPush(s.adm, 256, bench.Admission{Step: s.step, At: at, Size: 1 + r.IntN(8), Limit: 8})
		}
	}
	if s.i%3 == 0 {
		for j, tl := range s.p99 {
			v := 10*float64(j+1) + r.Float64()*5
			for _, t := range tl {
				t.add(now, v)
			}
		}
	}
	for range 5 { // lockstep: a batch's tokens share their gap, measured as bench does (ms of a Duration)
		v := float64(time.Duration(5e6+r.IntN(1e6))) / 1e6
		for range 8 {
			s.itl = ringPush(s.itl, 512, v)
		}
	}
	if s.i%10 == 0 {
		s.events = ringPush(s.events, 256, bench.LogEvent{At: now, Kind: bench.LogRun, Text: fmt.Sprintf("live %d finished: 64 requests", s.i/10)})
	}
	engineAge := s.i % 600
	if engineAge == 100 {
		c := s.summary(fmt.Sprintf("cold run (engine %d)", s.engine), true)
		s.cold = &c
	}
	if engineAge > 100 && engineAge%20 == 0 {
		s.steady = ringPush(s.steady, 32, s.summary(fmt.Sprintf("live %d", engineAge/20), false))
		s.slow = nil
		for k := range 5 {
			q := bench.RequestITL{ID: uint64(s.i*10 + k)}
			for range 16 {
				v := 5 + r.Float64() // not a Duration's ms: written as a float
				q.ITL = append(q.ITL, v, v, v, v)
			}
			s.slow = append(s.slow, q)
		}
	}
	if engineAge < 300 && engineAge%7 == 0 {
		s.ledger = append(s.ledger[:len(s.ledger):len(s.ledger)], bench.LedgerEntry{What: "graph capture", Detail: fmt.Sprintf("batch %d", engineAge), Took: time.Duration(r.IntN(1e7)), At: s.start.Add(now)})
	} else if engineAge%50 == 0 { // the tail sums later captures: rewritten in place of the last
		l := append([]bench.LedgerEntry(nil), s.ledger...)
		l[len(l)-1].Took += time.Millisecond
		s.ledger = l
	}
	v := &bench.View{
		Start: s.start, Now: now,
		Header: bench.Header{
			Model: "gpt2", RandomWeights: true, Device: "cuda: NVIDIA H200", Job: "decode-heavy", Paged: s.engine%2 == 0,
			CUDAGraph: true, Schedule: "relative", MaxBatch: 64, PrefillMaxBatch: 8 + s.i/3000, Phase: bench.PhaseLive, RunLabel: fmt.Sprintf("live %d", s.i/20),
			Paused: s.i%900 > 850, Elapsed: now, TokensPerSec: 3000 + 100*r.Float64(), Attainment: math.NaN(),
		},
		Queue:         []bench.Timeline{tl("waiting", s.queue[0]), tl("running", s.queue[1])},
		QueueLast:     bench.QueuePoint{At: now, Waiting: waiting, Running: running},
		Admissions:    seal(s.adm),
		LatencyWindow: 30 * time.Second,
		ITL:           seal(s.itl),
		SlowITL:       s.slow,
		KVUsed:        r.IntN(1000), KVTotal: 1000,
		Cold:    s.cold,
		Steady:  seal(s.steady),
		Ledger:  seal(s.ledger),
		Events:  seal(s.events),
		Markers: seal(s.markers),
		Live:    bench.LiveCounts{Windows: s.i / 20, Requests: s.i / 20 * 64, Costs: s.i / 50, CostTook: time.Duration(s.i/50) * 900 * time.Microsecond},
	}
	if engineAge < 100 {
		v.Header.Phase, v.Header.RunLabel = bench.PhaseCold, "cold run"
		v.Header.Run = &bench.RunProgress{Finished: engineAge / 2, Requests: 64, Tokens: engineAge * 30, MaxTokens: 64 * 256, Elapsed: time.Duration(engineAge) * 100 * time.Millisecond}
	}
	for j, name := range [...]string{"TTFT", "Queue wait", "Prefill->first", "TPOT", "ITL"} {
		d := s.dist(10 * float64(j+1))
		v.Latency = append(v.Latency, bench.LatencyRow{Name: name, Dist: d})
		v.P99 = append(v.P99, tl(name+" p99", s.p99[j]))
	}
	if s.cold != nil {
		for _, m := range [...]string{"TTFT p99 (ms)", "Queue wait p99 (ms)", "TPOT p50 (ms)", "Throughput (tok/s)"} {
			v.Compare = append(v.Compare, bench.Comparison{Metric: m, Cold: s.cold.TTFT.P99, Steady: math.NaN(), Ratio: math.NaN(), HigherIsBetter: m[0] == 'T' && m[1] == 'h'})
		}
	}
	if s.prev != nil && s.i%50 == 7 { // an idle spell: the session republishes what it had
		cp := *s.prev
		cp.Now, cp.Header.Elapsed = now, now
		v = &cp
	}
	s.prev = v
	return v
}

func (s *Synth) dist(base float64) bench.Dist {
	r := s.rng
	p50 := base + r.Float64()
	return bench.Dist{P50: p50, P95: p50 * 1.5, P99: p50 * 2, Mean: p50 * 1.1, Max: p50 * 3, N: 1 + r.IntN(4000)}
}

func (s *Synth) summary(label string, warmup bool) bench.Summary {
	return bench.Summary{
		Index: s.i, Warmup: warmup, Label: label, Requests: 64, PromptTokens: 640, CompletionTokens: 16384,
		SubmitWall: time.Millisecond, AddRequest: s.dist(0.01), Tokenize: s.dist(0.02), QueueWait: s.dist(1), PrefillFirst: s.dist(2),
		TTFT: s.dist(20), TPOT: s.dist(5), ITL: s.dist(5), Latency: s.dist(1000), Throughput: 3000 + s.rng.Float64(),
		TotalThroughput: 3100, Wall: 5 * time.Second, RequestThroughput: 12.8, Attainment: math.NaN(),
	}
}

// ringPush appends v to a ring of at most keep items: in place while there is room after the
// published part, else into a new array (published slices are never written again).
func ringPush[T any](ring []T, keep int, v T) []T {
	if len(ring) == cap(ring) {
		ring = append(make([]T, 0, 2*keep), ring[max(0, len(ring)-keep+1):]...)
	}
	ring = append(ring, v)
	if len(ring) > keep {
		return ring[len(ring)-keep:]
	}
	return ring
}

func seal[T any](s []T) []T {
	if len(s) == 0 {
		return nil
	}
	return s[:len(s):len(s)]
}

// synthTrack buckets samples as bench's tracks do (closed buckets only, shared when published).
type synthTrack struct {
	width    time.Duration
	keep     int
	adaptive bool
	pts      []bench.Point
	ns       []int
	sum      float64
	n        int
	open     int64
}

func (t *synthTrack) add(at time.Duration, v float64) {
	if t.n > 0 && int64(at/t.width) > t.open {
		t.close()
	}
	if t.n == 0 {
		t.open = max(int64(at/t.width), t.open)
	}
	t.sum += v
	t.n++
}

func (t *synthTrack) close() {
	if t.pts == nil {
		t.pts = make([]bench.Point, 0, 2*t.keep)
	}
	if len(t.pts) == cap(t.pts) {
		if t.adaptive {
			t.merge()
		} else {
			t.pts = append(make([]bench.Point, 0, 2*t.keep), t.pts[len(t.pts)-t.keep:]...)
		}
	}
	t.pts = append(t.pts, bench.Point{At: time.Duration(t.open) * t.width, Value: t.sum / float64(t.n)})
	t.ns = append(t.ns, t.n)
	t.sum, t.n = 0, 0
}

// merge doubles an adaptive track's width, into new arrays.
func (t *synthTrack) merge() {
	t.width *= 2
	pts, ns := make([]bench.Point, 0, 2*t.keep), []int(nil)
	for i, p := range t.pts {
		at := p.At / t.width * t.width
		if k := len(pts) - 1; k >= 0 && pts[k].At == at {
			w := ns[k] + t.ns[i]
			pts[k].Value = (pts[k].Value*float64(ns[k]) + p.Value*float64(t.ns[i])) / float64(w)
			ns[k] = w
			continue
		}
		pts, ns = append(pts, bench.Point{At: at, Value: p.Value}), append(ns, t.ns[i])
	}
	t.pts, t.ns = pts, ns
	t.open /= 2
}

func (t *synthTrack) view() bench.Track {
	pts := t.pts
	span := time.Duration(0)
	if !t.adaptive {
		pts = pts[max(0, len(pts)-t.keep):]
		span = time.Duration(t.keep) * t.width
	}
	return bench.Track{Width: t.width, Span: span, Points: seal(pts)}
}

func tl(name string, tracks []*synthTrack) bench.Timeline {
	out := bench.Timeline{Name: name}
	for _, t := range tracks {
		out.Tracks = append(out.Tracks, t.view())
	}
	return out
}
