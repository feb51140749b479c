package bench

import (
	"math"
	"slices"
	"sort"
	"strconv"
	"time"

	"rosetop/sched"
)

// Bounds of the dashboard's series: memory is flat however long the session runs.
const (
	admitCap     = 256  // prefill admissions
	windowCap    = 4096 // samples per rolling latency window
	itlWindowCap = 16384
	itlRecentCap = 512 // pooled recent ITL samples for the sparkline
	slowCap      = 32  // recent requests considered for "slowest"
	slowShown    = 5
	eventCap     = 256
	markerCap    = 128
	steadyCap    = 32
	tpsSpan      = 5 * time.Second
	p99Every     = 250 * time.Millisecond // how often the p99 timelines take a sample
)

// queueTracks are the resolutions of the queue-depth timelines (one sample a step): 2 minutes
// at 100 ms, 10 minutes at 1 s, and the whole session in at most 512 buckets.
func queueTracks() []trackSpec {
	return []trackSpec{{width: 100 * time.Millisecond, keep: 1200}, {width: time.Second, keep: 600}, {width: time.Second, keep: 512, adaptive: true}}
}

// p99Tracks are the resolutions of the p99 timelines (one sample every p99Every).
func p99Tracks() []trackSpec {
	return []trackSpec{{width: p99Every, keep: 480}, {width: 2 * time.Second, keep: 300}, {width: 2 * time.Second, keep: 512, adaptive: true}}
}

// latencyNames are the rolling metrics, in the order the dashboard's table shows them.
var latencyNames = [...]string{"TTFT", "Queue wait", "Prefill->first", "TPOT", "ITL"}

// Indexes of latencyNames and liveState.windows.
const (
	winTTFT = iota
	winQueueWait
	winPrefillFirst
	winTPOT
	winITL
)

// liveState is what the dashboard sees, accumulated from step outputs and finished runs. It is
// guarded by Session.mu.
type liveState struct {
	span       time.Duration // of the rolling latency windows
	queue      [2]*timeline  // waiting, running
	lastQueue  QueuePoint
	admissions *ring[Admission]
	windows    [len(latencyNames)]*window
	e2e        *window // completed requests' latency, for the server panel's client column
	p99        [len(latencyNames)]*timeline
	lastP99    time.Duration // when the p99 timelines last got a sample
	server     serverTrend   // watch mode: the server's own p99 over time
	itl        *ring[float64]
	slow       *ring[slowReq]
	stepTokens *ring[sample] // tokens produced per step, for tokens/s
	events     *ring[LogEvent]
	markers    *ring[Marker]
	kvUsed     int
	kvTotal    int
	preempts   uint64         // scheduler's preemption total last seen
	attain     *attainment    // --goodput: the rolling SLO attainment; nil without targets
	cold       *Summary       // the current engine's first run
	steady     *ring[Summary] // later complete runs of the current engine
	counts     LiveCounts     // live windows filed, folded into counters instead of events
	// open holds the current engine's requests whose first token is in the windows and which
	// have not finished: what of them the windows already hold. At most the requests in flight;
	// cleared when an engine starts (request ids are per engine).
	open map[sched.RequestID]inflight
}

// inflight is what the rolling windows hold of an unfinished request: its TTFT, queue wait and
// prefill->first samples, added at its first token, and its first gaps ITL samples.
type inflight struct {
	last    time.Duration // the newest token's sample time
	gaps    int           // ITL samples added: the record's ITL[:gaps]
	stopped bool          // a token event did not carry exactly one timed token: the rest of its gaps come from the record
}

type slowReq struct {
	tpot float64
	itl  RequestITL
}

func newLiveState(span time.Duration) *liveState {
	l := &liveState{
		span:       span,
		queue:      [2]*timeline{newTimeline("waiting", queueTracks()), newTimeline("running", queueTracks())},
		admissions: newRing[Admission](admitCap),
		itl:        newRing[float64](itlRecentCap), slow: newRing[slowReq](slowCap),
		stepTokens: newRing[sample](4096), events: newRing[LogEvent](eventCap),
		markers: newRing[Marker](markerCap), steady: newRing[Summary](steadyCap),
		open: map[sched.RequestID]inflight{}, e2e: newWindow(span, windowCap),
		server: serverTrend{at: -1},
	}
	for i, name := range latencyNames {
		c := windowCap
		if name == "ITL" {
			c = itlWindowCap
		}
		l.windows[i] = newWindow(span, c)
		l.p99[i] = newTimeline(name+" p99", p99Tracks())
	}
	return l
}

// addStep records one scheduler step; tokens is how many output tokens it produced.
func (l *liveState) addStep(s sched.Snapshot, tokens int) {
	l.lastQueue = QueuePoint{At: s.At, Waiting: s.Waiting, Running: s.Running}
	l.queue[0].add(s.At, float64(s.Waiting))
	l.queue[1].add(s.At, float64(s.Running))
	if s.Admitted > 0 {
		l.admissions.push(Admission{Step: s.Step, At: s.At, Size: s.Admitted, Limit: s.Config.PrefillMaxBatch})
	}
	l.stepTokens.push(sample{s.At, float64(tokens)})
	l.kvUsed, l.kvTotal = s.KVUsed, s.KVTotal
	if s.Preemptions > l.preempts {
		l.log(s.At, LogPreempt, "preempted "+strconv.FormatUint(s.Preemptions-l.preempts, 10)+" sequence(s): KV cache full")
	}
	l.preempts = s.Preemptions
}

// addEvent files one event of a step that ended at at into the rolling windows.
func (l *liveState) addEvent(at time.Duration, e *sched.Event) {
	switch e.Kind {
	case sched.EventTokens:
		l.addTokens(e)
	case sched.EventFinished:
		if e.Record != nil {
			l.addRequest(at, &RequestResult{Record: e.Record})
		}
	}
}

// addTokens records a token event as it arrives, so that the windows show a request's first
// token latencies while it is still decoding (in a batch that finishes together, seconds
// before its record): on a request's first token (Event.First) its TTFT, queue wait and
// prefill->first samples, on each later one its inter-token gap, each at the token's time.
// The values are those its record will give (see firstTokenMetrics). A request whose events
// carry no First is measured when it finishes instead.
func (l *liveState) addTokens(e *sched.Event) {
	if e.First != nil {
		m := firstTokenMetrics(e.First)
		at := e.First.FirstToken
		l.addFirst(at, &m)
		l.open[e.ID] = inflight{last: at, stopped: len(e.Tokens) != 1 || e.At != at}
		return
	}
	o, ok := l.open[e.ID]
	if !ok || o.stopped {
		return
	}
	if len(e.Tokens) != 1 || e.At < o.last {
		o.stopped = true // several tokens share one time: their gaps are unknown until the record
	} else {
		gap := ms(e.At - o.last)
		l.windows[winITL].add(e.At, gap)
		l.itl.push(gap)
		o.last, o.gaps = e.At, o.gaps+1
	}
	l.open[e.ID] = o
}

// addRequest records a finished request at its finish step's time at: a completed one's TPOT,
// and whatever addTokens has not added already (all of it for a request whose events carried
// no First). Samples already added stay, whatever the request's end.
func (l *liveState) addRequest(at time.Duration, r *RequestResult) {
	o, early := l.open[r.Record.ID]
	delete(l.open, r.Record.ID)
	if r.Record.Reason != sched.FinishCancelled {
		l.attain.add(at, r)
	}
	if !r.completed() {
		return
	}
	m := metricsOf(r)
	if !early {
		l.addFirst(at, &m)
	}
	l.e2e.add(at, m.Latency)
	if m.HasTPOT {
		l.windows[winTPOT].add(at, m.TPOT)
		l.slow.push(slowReq{tpot: m.TPOT, itl: RequestITL{ID: uint64(r.Record.ID), ITL: m.ITL}})
	}
	for _, v := range m.ITL[min(o.gaps, len(m.ITL)):] {
		l.windows[winITL].add(at, v)
		l.itl.push(v)
	}
}

// addFirst adds a request's first-token samples at time at: its TTFT, and its queue wait and
// prefill->first where the server showed them.
func (l *liveState) addFirst(at time.Duration, m *requestMetrics) {
	l.windows[winTTFT].add(at, m.TTFT)
	if m.HasAdmit {
		l.windows[winQueueWait].add(at, m.QueueWait)
		l.windows[winPrefillFirst].add(at, m.PrefillFirst)
	}
}

// resetRequests forgets the open requests of a stopped engine.
func (l *liveState) resetRequests() { clear(l.open) }

func (l *liveState) log(at time.Duration, kind LogKind, text string) {
	l.events.push(LogEvent{At: at, Kind: kind, Text: text})
}

func (l *liveState) mark(at time.Duration, label string) {
	l.markers.push(Marker{At: at, Label: label})
}

// rolling computes the latency rows and, at most every p99Every, samples their p99 into the
// timelines.
func (l *liveState) rolling(now time.Duration) []LatencyRow {
	rows := make([]LatencyRow, len(latencyNames))
	due := now-l.lastP99 >= p99Every
	for i, name := range latencyNames {
		d := l.windows[i].dist(now)
		rows[i] = LatencyRow{Name: name, Dist: d}
		if due && d.N > 0 {
			l.p99[i].add(now, d.P99)
		}
	}
	if due {
		l.lastP99 = now
	}
	return rows
}

// tokensPerSec is the completion rate over the last tpsSpan.
func (l *liveState) tokensPerSec(now time.Duration) float64 {
	var sum float64
	oldest := now
	for i := 0; i < l.stepTokens.len(); i++ {
		if s := l.stepTokens.at(i); s.at >= now-tpsSpan {
			sum += s.v
			oldest = min(oldest, s.at)
		}
	}
	span := min(tpsSpan, now-oldest)
	if span <= 0 {
		return 0
	}
	return sum / span.Seconds()
}

// slowest returns the recent requests with the highest TPOT, slowest first.
func (l *liveState) slowest() []RequestITL {
	all := l.slow.slice()
	sort.SliceStable(all, func(i, j int) bool { return all[i].tpot > all[j].tpot })
	var out []RequestITL
	for i := 0; i < len(all) && len(out) < slowShown; i++ {
		if sameITLAsAny(all[i].itl.ITL, out) {
			continue // decoded in lockstep with one already shown: its row would be identical
		}
		out = append(out, RequestITL{ID: all[i].itl.ID, ITL: append([]float64(nil), all[i].itl.ITL...)})
	}
	return out
}

// compare builds the cold-vs-steady rows (steady = median over the steady runs).
func (l *liveState) compare() []Comparison {
	steady := l.steady.slice()
	// get's second result says the run has the figure: a latency some request measured, a
	// throughput over some span (a window may end in the step that ended the one before).
	metrics := []struct {
		name   string
		get    func(s *Summary) (float64, bool)
		higher bool
	}{
		{"TTFT p99 (ms)", func(s *Summary) (float64, bool) { return s.TTFT.P99, s.TTFT.N > 0 }, false},
		{"Queue wait p99 (ms)", func(s *Summary) (float64, bool) { return s.QueueWait.P99, s.QueueWait.N > 0 }, false},
		{"TPOT p50 (ms)", func(s *Summary) (float64, bool) { return s.TPOT.P50, s.TPOT.N > 0 }, false},
		{"Throughput (tok/s)", func(s *Summary) (float64, bool) { return s.Throughput, s.Wall > 0 }, true},
	}
	out := make([]Comparison, 0, len(metrics))
	for _, m := range metrics {
		c := Comparison{Metric: m.name, Cold: math.NaN(), Steady: math.NaN(), Ratio: math.NaN(), HigherIsBetter: m.higher}
		if l.cold != nil {
			if v, ok := m.get(l.cold); ok {
				c.Cold = v
			}
		}
		var vals []float64
		for i := range steady {
			if v, ok := m.get(&steady[i]); ok {
				vals = append(vals, v)
			}
		}
		if len(vals) > 0 {
			c.Steady = median(vals)
		}
		if !math.IsNaN(c.Cold) && !math.IsNaN(c.Steady) && c.Steady != 0 {
			c.Ratio = c.Cold / c.Steady
		}
		out = append(out, c)
	}
	return out
}

// view assembles the immutable View; every slice is a fresh copy.
func (l *liveState) view(start time.Time, now time.Duration, h Header, ledger []LedgerEntry) *View {
	v := &View{
		Start: start, Now: now, Header: h, Queue: []Timeline{l.queue[0].view(), l.queue[1].view()}, QueueLast: l.lastQueue,
		Admissions: l.admissions.slice(), Latency: l.rolling(now), LatencyWindow: l.span, Live: l.counts,
		ITL: l.itl.slice(), SlowITL: l.slowest(), KVUsed: l.kvUsed, KVTotal: l.kvTotal,
		Steady: l.steady.slice(), Compare: l.compare(), Ledger: ledger,
		Events: l.events.slice(), Markers: l.markers.slice(), ServerP99: l.server.view(),
	}
	v.Header.TokensPerSec = l.tokensPerSec(now)
	v.Header.Attainment, v.Header.AttainmentN = l.attain.percent(now)
	if l.cold != nil {
		c := *l.cold
		v.Cold = &c
	}
	for i := range latencyNames {
		v.P99 = append(v.P99, l.p99[i].view())
	}
	return v
}

// sameITLAsAny reports whether itl equals the inter-token latencies of a request already chosen.
func sameITLAsAny(itl []float64, chosen []RequestITL) bool {
	for _, c := range chosen {
		if slices.Equal(itl, c.ITL) {
			return true
		}
	}
	return false
}
