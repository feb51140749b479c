package remote

import (
	"context"
	"fmt"
	"sync"
	"time"

	"rosetop/bench"
	"rosetop/sched"
)

// metricsSide is how a remoteServer reads /metrics: one server's watcher, or a fleet's.
type metricsSide interface {
	loop(ctx context.Context, landed func()) // scrapes until ctx is done, calling landed after each
	fill(snap *sched.Snapshot) (serverQueue bool)
	latest() *bench.ServerMetrics
	serverRestarts() []bench.ServerRestarts // each server's restarts seen so far
	close()
}

var (
	_ metricsSide = (*watcher)(nil)
	_ metricsSide = (*fleet)(nil)
)

// fleet watches several servers as one (--watch with --endpoint given more than once): each
// watcher scrapes its own server on its own goroutine, and the fleet's view is made from
// theirs when it is read after a scrape landed (at most once a frame, not once a scrape):
// queues, rates and totals summed, latency histograms merged bucket by bucket (a percentile
// of the fleet, not a mean of the servers' percentiles).
type fleet struct {
	ws   []*watcher  // immutable; in RemoteInfo.Fleet's order
	slos []bench.SLO // immutable: --goodput's targets
	// held is first tokens taken by a step that knew no server's queue, which Run does not send:
	// the next step's. Guarded by remoteServer.mu (fill's caller).
	held int

	mu   sync.Mutex             // guards view and from
	view *bench.ServerMetrics   // the latest view made; nil before the first read
	from []*bench.ServerMetrics // each watcher's view (watcher.pub) that view was made from
}

func newFleet(ws []*watcher, slos []bench.SLO) *fleet { return &fleet{ws: ws, slos: slos} }

// loop runs every watcher's scrape loop until ctx is done (a watcher whose page is gone stops
// alone).
func (f *fleet) loop(ctx context.Context, landed func()) {
	var wg sync.WaitGroup
	for _, w := range f.ws {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w.loop(ctx, landed)
		}()
	}
	wg.Wait()
}

// fill sums the servers' queues over those whose newest scrape counted it (the member table
// names the others), their preemptions, and their first tokens where every server counts them
// (else the client's count, none in watch mode, stays). A step that knows no server's queue is
// not sent (remoteServer.Run): its first tokens are held for the next.
func (f *fleet) fill(snap *sched.Snapshot) (serverQueue bool) {
	var sum reading
	sum.firstsKnown = true
	for _, w := range f.ws {
		r := w.take(true)
		sum.firsts += r.firsts
		sum.firstsKnown = sum.firstsKnown && r.firstsKnown
		if r.queueKnown {
			sum.waiting, sum.running, sum.queueKnown = sum.waiting+r.waiting, sum.running+r.running, true
		}
		if r.preemptKnown {
			sum.preemptions, sum.preemptKnown = sum.preemptions+r.preemptions, true
		}
	}
	if sum.firstsKnown {
		sum.firsts, f.held = sum.firsts+f.held, 0
		if !sum.queueKnown {
			sum.firsts, f.held = 0, sum.firsts
		}
	}
	return sum.apply(snap)
}

// latest is the fleet's view, made again where a watcher's view changed since the last.
func (f *fleet) latest() *bench.ServerMetrics {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.view == nil || f.changedLocked() {
		f.buildLocked()
	}
	return f.view
}

// buildLocked makes the fleet's view from its watchers' parts. The caller holds f.mu.
func (f *fleet) buildLocked() {
	parts := make([]part, len(f.ws))
	f.from = make([]*bench.ServerMetrics, len(f.ws))
	for i, w := range f.ws {
		parts[i] = w.part()
		f.from[i] = parts[i].m
	}
	f.view = fleetView(parts, f.slos)
}

// changedLocked reports whether a watcher published a view since f.view was made: every
// scrape, good or failed, publishes one. The caller holds f.mu.
func (f *fleet) changedLocked() bool {
	for i, w := range f.ws {
		if w.pub.Load() != f.from[i] {
			return true
		}
	}
	return false
}

// serverRestarts is each server's restarts seen so far, in fleet order.
func (f *fleet) serverRestarts() []bench.ServerRestarts {
	out := make([]bench.ServerRestarts, len(f.ws))
	for i, w := range f.ws {
		out[i] = w.restartsSoFar()
	}
	return out
}

func (f *fleet) close() {
	for _, w := range f.ws {
		w.close()
	}
}

// part is one watcher's share of the fleet's view, read under its lock.
type part struct {
	m    *bench.ServerMetrics // the server as itself
	note string               // why its newest scrape gave no figures; "" when it worked
	live bool                 // its newest scrape worked: its window figures count
	// window and total are its latency histograms' gains over the window and since its first
	// good scrape; nil before that scrape.
	window, total []gain
	start, last   time.Duration // its first and newest good scrapes (valid with total)
}

func (w *watcher) part() part {
	w.mu.Lock()
	defer w.mu.Unlock()
	p := part{m: w.pub.Load(), note: w.note}
	n := len(w.hist)
	if n == 0 {
		return p
	}
	p.live, p.window, p.last = w.note == "", w.win, w.hist[n-1].At
	if t := w.tally.start; t != nil {
		p.total, p.start = append([]gain(nil), w.tally.lat...), t.At
	}
	return p
}

// fleetView is the fleet's ServerMetrics: its Members are the servers as themselves; the window
// figures (queue, KV, rates, latencies) are over the servers whose newest scrape worked, the
// totals over every server's span.
func fleetView(parts []part, slos []bench.SLO) *bench.ServerMetrics {
	m := &bench.ServerMetrics{Source: fmt.Sprintf("%d /metrics pages", len(parts)), Members: make([]bench.ServerMetrics, len(parts))}
	var window, total []gain
	var kvSum float64 // the answering servers' KV usage, and how many gave one
	kvN := 0
	live, note := 0, ""
	var first, last time.Duration
	spanned := false
	var tot *bench.ServerTotals // non-nil once a server has totals
	for i, p := range parts {
		pm := *p.m
		// A member's note is only why its scrapes fail (the table and the header count those
		// servers as not answering); a gauge its page lacks shows as n/a in its row. Its DP
		// ranks stay its own (its row sums them up); the fleet's figures have none.
		pm.Members, pm.Note = nil, p.note
		m.Members[i] = pm
		switch {
		case i == 0:
			m.Kind = pm.Kind
		case pm.Kind != m.Kind:
			m.Kind = "mixed"
		}
		if note == "" && pm.Note != "" && !p.live {
			note = pm.Note
		}
		m.At = max(m.At, pm.At)
		if p.total != nil {
			total = sumGains(total, p.total)
			if !spanned || p.start < first {
				first = p.start
			}
			last, spanned = max(last, p.last), true
		}
		if t := pm.Total; t != nil {
			if tot == nil {
				tot = &bench.ServerTotals{}
			}
			tot.Span = max(tot.Span, t.Span)
			tot.Scrapes, tot.Failed = tot.Scrapes+t.Scrapes, tot.Failed+t.Failed
			tot.Requests, tot.GenTokens, tot.PromptTokens = addGauge(tot.Requests, t.Requests), addGauge(tot.GenTokens, t.GenTokens), addGauge(tot.PromptTokens, t.PromptTokens)
		}
		if !p.live {
			continue
		}
		live++
		window = sumGains(window, p.window)
		m.Window = max(m.Window, pm.Window)
		m.Waiting, m.Running = addGauge(m.Waiting, pm.Waiting), addGauge(m.Running, pm.Running)
		m.GenRate, m.PromptRate, m.ReqRate = addGauge(m.GenRate, pm.GenRate), addGauge(m.PromptRate, pm.PromptRate), addGauge(m.ReqRate, pm.ReqRate)
		if pm.KVUsage.Usable() {
			kvSum, kvN = kvSum+pm.KVUsage.V, kvN+1
		}
	}
	if kvN > 0 {
		m.KVUsage = bench.Gauge{V: kvSum / float64(kvN), Known: true}
	}
	if window != nil {
		m.Latency = summarize(window, slos)
	}
	if tot != nil && spanned { // from the first server's first good scrape to the newest
		tot.Span, tot.Latency = last-first, summarize(total, slos)
	}
	m.Total = tot
	if live == 0 && note != "" {
		m.Note = "no server answering (" + note + ")"
	}
	return m
}

// mergeGains adds b's histograms into acc, name by name (gains lists them in one order); acc
// nil is a copy of b. A histogram's buckets are never written in place.
func mergeGains(acc, b []gain) []gain {
	if acc == nil {
		return append([]gain(nil), b...)
	}
	for i := range acc {
		acc[i].merge(b[i])
	}
	return acc
}

// sumGains is mergeGains for a sum of its own (a view's): acc nil starts empty, so that each
// histogram in acc has buckets of its own, into which a later b of the same layout is added in
// place (a fleet of one kind allocates no buckets per server).
func sumGains(acc, b []gain) []gain {
	if acc == nil {
		acc = make([]gain, len(b))
		for i := range b {
			acc[i].name = b[i].name
		}
	}
	for i := range acc {
		g, o := &acc[i], &b[i]
		if g.h.Known && o.h.Known && g.layouts == nil && o.layouts == nil && sameLayout(g.h, o.h) {
			g.h.addSame(o.h)
			g.known, g.bound = true, max(g.bound, o.bound)
			continue
		}
		g.merge(*o) // new buckets, g's own
	}
	return acc
}

// merge adds b's histogram into g's.
func (g *gain) merge(b gain) {
	g.known = g.known || b.known
	if !b.h.Known {
		return
	}
	if g.layouts != nil || b.layouts != nil || (g.h.Known && !sameLayout(g.h, b.h)) {
		g.layouts = addLayouts(g.byLayout(), b.byLayout()) // h alone no longer says each layout's share
	}
	g.h.add(b.h)
	g.bound = max(g.bound, b.bound)
}

// addGauge sums two gauges: known where either is usable, counting only the usable ones.
func addGauge(a, b bench.Gauge) bench.Gauge {
	switch {
	case !b.Usable():
		return a
	case !a.Usable():
		return b
	}
	return bench.Gauge{V: a.V + b.V, Known: true}
}
