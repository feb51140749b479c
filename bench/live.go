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
	queueCap     = 2048 // queue-depth points (one per step)
	admitCap     = 256  // prefill admissions
	windowCap    = 4096 // samples per rolling latency window
	itlWindowCap = 16384
	itlRecentCap = 512 // pooled recent ITL samples for the sparkline
	p99Cap       = 600 // p99 series points (one per p99Every)
	slowCap      = 32  // recent requests considered for "slowest"
	slowShown    = 5
	eventCap     = 256
	markerCap    = 128
	steadyCap    = 32
	tpsSpan      = 5 * time.Second
	p99Every     = time.Second
)

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
	queue      *ring[QueuePoint]
	admissions *ring[Admission]
	windows    [len(latencyNames)]*window
	p99        [len(latencyNames)]*ring[Point]
	lastP99    time.Duration // when the p99 series last got a point
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
		queue: newRing[QueuePoint](queueCap), admissions: newRing[Admission](admitCap),
		itl: newRing[float64](itlRecentCap), slow: newRing[slowReq](slowCap),
		stepTokens: newRing[sample](4096), events: newRing[LogEvent](eventCap),
		markers: newRing[Marker](markerCap), steady: newRing[Summary](steadyCap),
		open: map[sched.RequestID]inflight{},
	}
	for i := range l.windows {
		c := windowCap
		if latencyNames[i] == "ITL" {
			c = itlWindowCap
		}
		l.windows[i] = newWindow(span, c)
		l.p99[i] = newRing[Point](p99Cap)
	}
	return l
}

// addStep records one scheduler step; tokens is how many output tokens it produced.
func (l *liveState) addStep(s sched.Snapshot, tokens int) {
	l.queue.push(QueuePoint{At: s.At, Waiting: s.Waiting, Running: s.Running})
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
		l.windows[winTTFT].add(at, m.TTFT)
		l.windows[winQueueWait].add(at, m.QueueWait)
		l.windows[winPrefillFirst].add(at, m.PrefillFirst)
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
		l.windows[winTTFT].add(at, m.TTFT)
		l.windows[winQueueWait].add(at, m.QueueWait)
		l.windows[winPrefillFirst].add(at, m.PrefillFirst)
	}
	if m.HasTPOT {
		l.windows[winTPOT].add(at, m.TPOT)
		l.slow.push(slowReq{tpot: m.TPOT, itl: RequestITL{ID: uint64(r.Record.ID), ITL: m.ITL}})
	}
	for _, v := range m.ITL[min(o.gaps, len(m.ITL)):] {
		l.windows[winITL].add(at, v)
		l.itl.push(v)
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

// rolling computes the latency rows and, at most every p99Every, extends the p99 series.
func (l *liveState) rolling(now time.Duration) []LatencyRow {
	rows := make([]LatencyRow, len(latencyNames))
	due := now-l.lastP99 >= p99Every
	for i, name := range latencyNames {
		d := makeDist(l.windows[i].values(now))
		rows[i] = LatencyRow{Name: name, Dist: d}
		if due && d.N > 0 {
			l.p99[i].push(Point{At: now, Value: d.P99})
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
	metrics := []struct {
		name string
		get  func(s *Summary) float64
	}{
		{"TTFT p99 (ms)", func(s *Summary) float64 { return s.TTFT.P99 }},
		{"Queue wait p99 (ms)", func(s *Summary) float64 { return s.QueueWait.P99 }},
		{"TPOT p50 (ms)", func(s *Summary) float64 { return s.TPOT.P50 }},
		{"Throughput (tok/s)", func(s *Summary) float64 { return s.Throughput }},
	}
	out := make([]Comparison, 0, len(metrics))
	for _, m := range metrics {
		c := Comparison{Metric: m.name, Cold: math.NaN(), Steady: math.NaN(), Ratio: math.NaN()}
		if l.cold != nil {
			c.Cold = m.get(l.cold)
		}
		if len(steady) > 0 {
			vals := make([]float64, len(steady))
			for i := range steady {
				vals[i] = m.get(&steady[i])
			}
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
		Start: start, Now: now, Header: h,
		Queue: l.queue.slice(), Admissions: l.admissions.slice(), Latency: l.rolling(now),
		ITL: l.itl.slice(), SlowITL: l.slowest(), KVUsed: l.kvUsed, KVTotal: l.kvTotal,
		Steady: l.steady.slice(), Compare: l.compare(), Ledger: ledger,
		Events: l.events.slice(), Markers: l.markers.slice(),
	}
	v.Header.TokensPerSec = l.tokensPerSec(now)
	v.Header.Attainment, v.Header.AttainmentN = l.attain.percent(now)
	if l.cold != nil {
		c := *l.cold
		v.Cold = &c
	}
	for i, name := range latencyNames {
		v.P99 = append(v.P99, Series{Name: name + " p99", Points: l.p99[i].slice()})
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
