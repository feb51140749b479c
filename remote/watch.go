package remote

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"rosetop/bench"
	"rosetop/sched"
)

// watcher reads a server's /metrics every interval and keeps what the dashboard needs: the
// latest gauges, the new first tokens since the last step, and the latency histograms' deltas
// over the rolling window, published as an immutable bench.ServerMetrics.
type watcher struct {
	sc     *Scraper      // safe for concurrent use
	clock  bench.Clock   // the session's, safe for concurrent use: waits out a Retry-After
	url    string        // immutable
	every  time.Duration // immutable
	window time.Duration // immutable
	// serverFirsts (immutable): the admissions are the server's TTFT count, as the provider's
	// first scrape found the server (bench.RemoteInfo.ServerFirsts); else the client's.
	serverFirsts bool
	watch        bool        // immutable: the session sends no requests, so there are no client-side counts to fall back on
	slos         []bench.SLO // immutable: --goodput's targets, the share of observations within each told

	pub atomic.Pointer[bench.ServerMetrics] // the latest view; written by the scrape loop

	mu sync.Mutex // guards the fields below; taken after remoteServer.mu when both are
	// base is the baseline of the server's counters: the provider's first scrape, or where that
	// failed, this watcher's first good one. The snapshot itself is never written.
	base *Snapshot
	// hist is this watcher's good scrapes spanning the window and one before it (at most
	// maxBehind past it, never the far side of an outage), oldest first.
	hist []scrape
	// win is the latency histograms' gains over hist (windowGains), made anew at each good
	// scrape and never written after: a fleet's view merges it from another goroutine.
	win    []gain
	firsts int // first tokens (TTFT observations) the server counted since the last step took them
	// note says why figures are missing: the newest scrape failed (hist's last is then the
	// server as it was, not as it is), or named no known server. "" when it worked.
	note   string
	gaveUp bool  // the page is absent or forbidden (see pageGone): no more scrapes
	tally  tally // the whole session's scrapes and token counts
	// held is the server as last seen (see hold): each counter and histogram as the newest good
	// scrape that had it since the server last restarted. Each scrape's increase is from it.
	held Snapshot
	// preempt is the server's preemptions since base, each good scrape's increase added as the
	// tally adds its counters (across restarts); preemptFrom is the last scrape added, its
	// Preemptions and Started alone (Preemptions unknown before one).
	preempt     float64
	preemptFrom Snapshot
	// restarts are the server's restarts seen between good scrapes (see restartOf): how many,
	// and the newest.
	restarts bench.ServerRestarts
}

// scrape is a good scrape as a watcher keeps it.
type scrape struct {
	Snapshot // the page as it was
	// lat are the latency histograms (latencyOf's order) as the watcher held them after this
	// scrape: the page's, or where it lacks one, the newest earlier page's (see hold).
	lat [len(latencyOf)]Histogram
	// fresh has bit i set where the i-th latency histogram (latencyOf) counts from zero since
	// the server as last seen: it restarted, or the series appeared (see since).
	fresh uint8
	// gen, prompt and done are the tally's generated and prompt tokens and finished requests
	// after this scrape: the rates are their increase.
	gen, prompt, done float64
}

// maxHistory bounds the scrapes kept, whatever the window and interval.
const maxHistory = 4096

func newWatcher(p *Provider, spec bench.ServerSpec) (*watcher, error) {
	sc, err := NewScraper(ScraperConfig{URL: p.opts.MetricsURL, APIKey: p.metricsKey(), Clock: spec.Clock})
	if err != nil {
		return nil, err
	}
	w := &watcher{sc: sc, clock: spec.Clock, url: p.opts.MetricsURL, every: p.opts.ScrapeEvery, window: spec.Window, base: p.first,
		note: p.note, serverFirsts: p.kind.countsFirstTokens(), gaveUp: pageGone(p.firstErr), watch: p.opts.Watch, slos: spec.SLOs}
	if w.window <= 0 {
		w.window = 30 * time.Second
	}
	w.publish()
	return w, nil
}

// pageGone reports whether a scrape's error says the page is absent or forbidden, for good:
// 401, 403, 404, 405, 410, or 501 (llama-server started without --metrics answers it). Any other
// status (408, 429, the other 5xx) may pass, and scraping goes on.
func pageGone(err error) bool {
	var f *Failure
	if !errors.As(err, &f) || f.Reason != ReasonStatus {
		return false
	}
	switch f.Status {
	case http.StatusUnauthorized, http.StatusForbidden, http.StatusNotFound, http.StatusMethodNotAllowed, http.StatusGone,
		http.StatusNotImplemented:
		return true
	}
	return false
}

// loop scrapes at once and then every interval until ctx is done or the page is gone, calling
// landed after each scrape (the server's Run then sends a step with the new figures). A failed
// scrape whose answer had a Retry-After waits that long before the next.
func (w *watcher) loop(ctx context.Context, landed func()) {
	t := time.NewTicker(w.every)
	defer t.Stop()
	for {
		w.mu.Lock()
		stop := w.gaveUp
		w.mu.Unlock()
		if stop {
			return
		}
		snap, err := w.sc.Scrape(ctx)
		if ctx.Err() != nil {
			return
		}
		w.add(snap, err)
		landed()
		var f *Failure
		if errors.As(err, &f) && f.RetryAfter > 0 && !pageGone(err) && w.clock.Sleep(ctx, f.RetryAfter) != nil {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// add files one scrape's outcome and publishes the new view.
func (w *watcher) add(snap Snapshot, err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if err != nil {
		w.tally.failed++
		w.note, w.gaveUp = fmt.Sprintf("last scrape failed: %v", err), pageGone(err)
		if w.gaveUp {
			w.note = fmt.Sprintf("no server metrics (%v)", err)
		}
		w.publishLocked()
		return
	}
	w.note = ""
	if snap.Kind == KindUnknown {
		w.note = "the server's /metrics name nothing rosetop knows"
	}
	if w.base == nil {
		w.base = &snap
	}
	now := scrape{Snapshot: snap}
	var then *Snapshot // the server as last seen; nil before the first good scrape
	restart := false
	if n := len(w.hist); n > 0 {
		then = &w.held
		var how string
		if how, restart = restartOf(&snap, then); restart {
			w.restarts = bench.ServerRestarts{Count: w.restarts.Count + 1, After: w.hist[n-1].At, At: snap.At, How: how}
		}
	}
	w.countPreemptionsLocked(&snap, restart)
	// from is what each count's increase is measured from: the server as last seen, or after a
	// restart nothing of the process before (every count on the page is the new process's, those
	// that did not go down too).
	from := then
	if restart {
		from = &Snapshot{At: then.At, Kind: snap.Kind}
	}
	var step []gain // the latency histograms' gains since from
	if from != nil {
		step, now.fresh = gains(&snap, from)
	}
	w.tally.add(&snap, from, step)
	if from != nil && w.serverFirsts {
		if d, _ := since(&snap, from, (*Snapshot).ttft); d.Known {
			w.firsts += int(math.Round(d.Count))
		}
	}
	w.held = hold(&snap, then, restart)
	for i, l := range latencyOf {
		now.lat[i] = l.of(&w.held)
	}
	now.gen, now.prompt, now.done = w.tally.gen.V, w.tally.prompt.V, w.tally.requests().V
	w.hist = append(w.hist, now)
	// The window's baseline is the last scrape before it, unless that is more than maxBehind
	// older: after an outage the window starts after it and covers less, never more.
	oldest := snap.At - w.window - maxBehind*w.every
	for len(w.hist) > 1 && (w.hist[1].At <= snap.At-w.window || w.hist[0].At < oldest || len(w.hist) > maxHistory) {
		w.hist = w.hist[1:]
	}
	w.win = windowGains(w.hist)
	w.publishLocked()
}

// maxBehind is how many scrape intervals before the window its baseline may be: one, and one
// more for a tick missed to a slow scrape.
const maxBehind = 2

// countPreemptionsLocked adds the preemptions now counted since the last good scrape that
// counted them (base before any; base is now for the first good scrape without a provider's).
// The caller holds w.mu.
func (w *watcher) countPreemptionsLocked(now *Snapshot, restart bool) {
	if !usable(now.Preemptions) {
		return
	}
	from := &w.preemptFrom
	if !usable(from.Preemptions) {
		from = w.base
	}
	w.preempt = grow(bench.Gauge{V: w.preempt}, now.Preemptions, from.Preemptions, restart || restarted(now, from)).V
	w.preemptFrom = Snapshot{Started: now.Started, Preemptions: now.Preemptions}
}

func (w *watcher) publish() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.publishLocked()
}

// publishLocked stores the view of the scrapes so far; the caller holds w.mu.
func (w *watcher) publishLocked() {
	m := &bench.ServerMetrics{Kind: KindUnknown.String(), Source: w.url, Note: w.note}
	if _, _, why, _ := w.queueLocked(); why != "" && w.watch {
		m.Note = "queue not known: " + why
	} else if why != "" {
		m.Note = "queue: client-side counts; " + why
	}
	if w.base != nil {
		m.Kind = w.base.Kind.String()
	}
	n := len(w.hist)
	if n == 0 {
		w.pub.Store(m)
		return
	}
	last, first := &w.hist[n-1].Snapshot, &w.hist[0]
	m.Kind, m.At, m.Window = last.Kind.String(), last.At, last.At-first.At
	m.Waiting, m.Running, m.KVUsage = gauge(last.Waiting), gauge(last.Running), gauge(last.KVUsage)
	m.Latency = summarize(w.win, w.slos)
	if w.note == "" { // a rate from scrapes before a failure would be stale, and ranks too
		m.GenRate, m.PromptRate, m.ReqRate = rates(w.hist)
		m.DP = dpView(last.DP)
	}
	m.Total = w.tally.totals(last, w.slos)
	w.pub.Store(m)
}

func (w *watcher) latest() *bench.ServerMetrics { return w.pub.Load() }

// dpView is a page's data-parallel ranks for the view, their gauges as the totals' (gauge);
// nil for none.
func dpView(r *DPRanks) *bench.DPRanks {
	if r == nil {
		return nil
	}
	out := &bench.DPRanks{Ranks: make([]bench.DPRank, len(r.Ranks)), More: r.More}
	for i, x := range r.Ranks {
		out.Ranks[i] = bench.DPRank{ID: x.ID, Running: gauge(x.Running), Waiting: gauge(x.Waiting), KVUsage: gauge(x.KVUsage)}
	}
	return out
}

// restartsSoFar is the server's restarts seen so far (see restartOf).
func (w *watcher) restartsSoFar() bench.ServerRestarts {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.restarts
}

// serverRestarts is the one server's restarts.
func (w *watcher) serverRestarts() []bench.ServerRestarts {
	return []bench.ServerRestarts{w.restartsSoFar()}
}

// queueLocked is the server's waiting and running counts from its newest scrape (ok), else
// why the queue pane shows the client's own counts ("" before the first scrape). The caller
// holds w.mu.
func (w *watcher) queueLocked() (waiting, running int, why string, ok bool) {
	n := len(w.hist)
	if n == 0 || w.note != "" {
		return 0, 0, w.note, false
	}
	last := &w.hist[n-1].Snapshot
	waiting, okW := count(last.Waiting)
	running, okR := count(last.Running)
	switch {
	case !okW:
		return 0, 0, "the server's waiting is " + badCount(last.Waiting), false
	case !okR:
		return 0, 0, "the server's running is " + badCount(last.Running), false
	}
	return waiting, running, "", true
}

// badCount says what a value that count refused is: "absent", or the value, "not a count".
func badCount(v Value) string {
	if !v.Known {
		return "absent"
	}
	return strconv.FormatFloat(v.V, 'g', 4, 64) + ", not a count"
}

// fill puts the server's own queue and preemption counts into a step's snapshot where the
// server gives them, and, where it counts first tokens, those it counted since the last step as
// the step's admissions (else the client's count stays). The queue is the server's only while
// its newest scrape worked and counted both waiting and running, else the client's, never a
// mix; the panel's note says which (see queueLocked). It reports whether the queue is the
// server's. Watching, a step without the server's queue is not sent (remoteServer.Run): its
// first tokens are left for the next step. The caller holds remoteServer.mu.
func (w *watcher) fill(snap *sched.Snapshot) (serverQueue bool) { return w.take(!w.watch).apply(snap) }

// apply puts r's known figures into snap and reports whether the queue is the server's.
func (r reading) apply(snap *sched.Snapshot) (serverQueue bool) {
	if r.firstsKnown {
		snap.Admitted = r.firsts
	}
	if r.queueKnown {
		snap.Waiting, snap.Running = r.waiting, r.running
	}
	if r.preemptKnown {
		snap.Preemptions = uint64(r.preemptions)
	}
	return r.queueKnown
}

// reading is what a step takes from a watcher's scrapes (see fill): each figure with whether
// the server gave it.
type reading struct {
	firsts                  int // first tokens counted since the last take
	waiting, running        int
	preemptions             int // since the session's baseline
	firstsKnown, queueKnown bool
	preemptKnown            bool
}

// take reads the server's queue and preemptions, and takes the first tokens counted since the
// last take where the queue is known or withoutQueue (else they stay for the next take).
func (w *watcher) take(withoutQueue bool) (r reading) {
	w.mu.Lock()
	defer w.mu.Unlock()
	r.waiting, r.running, _, r.queueKnown = w.queueLocked()
	if w.serverFirsts && (r.queueKnown || withoutQueue) {
		r.firsts, r.firstsKnown, w.firsts = w.firsts, true, 0
	}
	n := len(w.hist)
	if n == 0 {
		return r
	}
	// Preemptions are a total so far: the last known one stands while scrapes fail (a drop to
	// the client's 0 would read as a burst of preemptions when they work again).
	if _, ok := count(w.hist[n-1].Preemptions); ok {
		r.preemptions, r.preemptKnown = count(Value{V: w.preempt, Known: true})
	}
	return r
}

// hold is the server as last seen after now's page, then as last seen before it (nil for
// none): now's page, with each counter and histogram it lacks as then had it (a series missing
// from one page is no count from zero), and then's Kind and Started where it names none. After
// a restart, or where another kind of server answers, it is now's page alone: what that lacks
// counts from zero when it appears.
func hold(now, then *Snapshot, restart bool) Snapshot {
	h := *now
	if then != nil && h.Kind == KindUnknown { // a page naming nothing: the server is still then's kind
		h.Kind = then.Kind
	}
	if then == nil || restart || h.Kind != then.Kind {
		return h
	}
	if !h.Started.Known {
		h.Started = then.Started
	}
	for f := fPreemptions; f <= fGenerationTokens; f++ {
		if !h.value(f).Known {
			*h.value(f) = *then.value(f)
		}
	}
	for f := fTTFT; f <= fIterationTokens; f++ {
		if !h.histogram(f).Known {
			*h.histogram(f) = *then.histogram(f)
		}
	}
	return h
}

// since is what histogram of gained from then to now, the server as last seen (see hold; after
// a restart, nothing of the process before) and its next page, and whether that is now's whole:
// it counts from zero where then, from the same server, lacks it (not seen since the server
// started: SGLang's and TGI's series appear with their first observation), or where a count
// went down (see Histogram.sub).
func since(now, then *Snapshot, of func(*Snapshot) Histogram) (h Histogram, whole bool) {
	h, prev := of(now), of(then)
	if h.Known && !prev.Known && then.Kind == now.Kind && then.Kind != KindUnknown {
		return h, true
	}
	return h.sub(prev)
}

func (s *Snapshot) ttft() Histogram    { return s.TTFT }
func (s *Snapshot) itl() Histogram     { return s.ITL }
func (s *Snapshot) e2e() Histogram     { return s.E2E }
func (s *Snapshot) queue() Histogram   { return s.Queue }
func (s *Snapshot) prefill() Histogram { return s.Prefill }

// maxCount bounds a count taken from a server's page: larger is not a count but a broken page.
const maxCount = 1 << 40

// count is a gauge or counter as a whole number; ok is false when it is unknown, not finite,
// negative or past maxCount.
func count(v Value) (int, bool) {
	if !v.Known || !(v.V >= 0 && v.V <= maxCount) {
		return 0, false
	}
	return int(math.Round(v.V)), true
}

func (w *watcher) close() { w.sc.Close() }

// gauge is v for the panel (queue counts, a usage fraction); a value that is negative or not
// finite is not known.
func gauge(v Value) bench.Gauge {
	return bench.Gauge{V: v.V, Known: v.Known && v.V >= 0 && !math.IsInf(v.V, 0)}
}

// msDist summarizes a histogram delta of seconds in ms; N == 0 when it has no observations.
func msDist(h Histogram) bench.Dist {
	nan := math.NaN()
	d := bench.Dist{P50: nan, P95: nan, P99: nan, Mean: nan, Max: nan}
	p50, ok50 := h.Quantile(0.50)
	p95, ok95 := h.Quantile(0.95)
	p99, ok99 := h.Quantile(0.99)
	mean, okMean := h.Mean()
	if !ok50 || !ok95 || !ok99 || !okMean {
		return d
	}
	d.P50, d.P95, d.P99, d.Mean = p50*1000, p95*1000, p99*1000, mean*1000
	d.N = int(math.Round(h.Count))
	return d
}
