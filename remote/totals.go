package remote

import (
	"math"
	"time"

	"rosetop/bench"
)

// rateSpan is how far back the server's token rates look: its scrapes of the last 5 s, so that
// a rate follows the load within seconds yet spans several scrapes.
const rateSpan = 5 * time.Second

// tally is what a watcher adds up over a whole session: its scrapes, and the server's token
// counters and latency histograms, each scrape's increase over the server as last seen (see
// hold: a series missing from a page is no reset; after a server restart the watcher passes
// nothing of the process before, so every count of the new one is the increase, as Prometheus'
// increase() takes a reset).
type tally struct {
	start       *Snapshot   // the first good scrape: the session's baseline; never written
	gen, prompt bench.Gauge // tokens since start
	lat         []gain      // the latency histograms' gains since start; their buckets never written in place
	ok, failed  int         // scrapes that worked, that failed
}

// add files a good scrape now; prev is the server as last seen before it (the watcher's held
// values, see hold; nil for the first good scrape), and step the latency histograms' gains from
// prev to now (gains(now, prev)).
func (t *tally) add(now, prev *Snapshot, step []gain) {
	t.ok++
	if t.start == nil || prev == nil {
		first := *now
		t.start = &first
		t.gen = bench.Gauge{Known: usable(now.GenerationTokens)}
		t.prompt = bench.Gauge{Known: usable(now.PromptTokens)}
		t.lat, _ = gains(now, now)
		return
	}
	t.gen = grow(t.gen, now.GenerationTokens, counterBefore(now, prev, now.GenerationTokens, prev.GenerationTokens), false)
	t.prompt = grow(t.prompt, now.PromptTokens, counterBefore(now, prev, now.PromptTokens, prev.PromptTokens), false)
	t.lat = mergeGains(t.lat, step) // since takes a restart's histogram whole
}

// counterBefore is a counter's value before now for its increase to now's (was, as prev has
// it): 0 where prev, from the same server, lacks it (not seen since the server started), as
// since takes a histogram that appeared (Dynamo's frontend and SGLang write a series at its
// first increment).
func counterBefore(now, prev *Snapshot, is, was Value) Value {
	if !was.Known && is.Known && now.Kind == prev.Kind && now.Kind != KindUnknown {
		return Value{Known: true}
	}
	return was
}

// startSlack is how far one process's Started may move between scrapes: client_golang's process
// collector adds /proc/stat's boot time, whole seconds that step by one as the clock is slewed.
const startSlack = 1.5

// restarted reports whether now's page is another process's than then's: both say when their
// process started (Snapshot.Started), and not the same time. Every counter and histogram of now
// then counts from zero, as after a count that went down, whether or not one did (a restart
// during an outage, after which the new process has counted more than the old one had).
func restarted(now, then *Snapshot) bool {
	a, b := now.Started, then.Started
	return a.Known && b.Known && math.Abs(a.V-b.V) > startSlack
}

// restartOf reports whether the server restarted between then (the server as last seen) and
// now's page, and what told it: another kind of server answers, another process wrote the page
// (restarted), or a counter or a histogram went down, which only a count from zero makes. The
// watcher then takes every count on now's page as the new process's.
func restartOf(now, then *Snapshot) (how string, ok bool) {
	if now.Kind != then.Kind && now.Kind != KindUnknown && then.Kind != KindUnknown {
		return "another kind of server answers", true
	}
	if restarted(now, then) {
		return "a new process start time", true
	}
	for _, of := range [...]func(*Snapshot) Value{
		func(s *Snapshot) Value { return s.Preemptions }, func(s *Snapshot) Value { return s.PromptTokens },
		func(s *Snapshot) Value { return s.GenerationTokens },
	} {
		if is, was := of(now), of(then); usable(is) && usable(was) && is.V < was.V {
			return "its counts went down", true
		}
	}
	for _, of := range [...]func(*Snapshot) Histogram{
		(*Snapshot).ttft, (*Snapshot).itl, (*Snapshot).e2e, (*Snapshot).queue, (*Snapshot).prefill,
		func(s *Snapshot) Histogram { return s.IterationTokens },
	} {
		if _, down := of(now).sub(of(then)); down {
			return "its counts went down", true
		}
	}
	return "", false
}

// usable reports whether a counter's value can be added up.
func usable(v Value) bool { return v.Known && v.V >= 0 && !math.IsInf(v.V, 0) }

// grow adds a counter's increase from prev to now to acc: now whole where it went down or the
// server restarted in between (restart).
func grow(acc bench.Gauge, now, prev Value, restart bool) bench.Gauge {
	if !usable(now) || !usable(prev) {
		return acc
	}
	d := now.V - prev.V
	if d < 0 || restart {
		d = now.V
	}
	return bench.Gauge{V: acc.V + d, Known: true}
}

// totals is the session's figures from the tally up to last.
func (t *tally) totals(last *Snapshot, slos []bench.SLO) *bench.ServerTotals {
	if t.start == nil {
		return nil
	}
	return &bench.ServerTotals{Span: last.At - t.start.At, Scrapes: t.ok, Failed: t.failed, GenTokens: t.gen, PromptTokens: t.prompt,
		Requests: t.requests(), Latency: summarize(t.lat, slos)}
}

// requests are the finished requests so far: the observations of the E2E latency histogram.
func (t *tally) requests() bench.Gauge {
	for _, g := range t.lat {
		if g.name == "E2E latency" && g.h.Known {
			return bench.Gauge{V: g.h.Count, Known: true}
		}
	}
	return bench.Gauge{}
}

// rates are the server's generated and prompt tokens and finished requests per second between
// the newest of hist and the oldest within rateSpan before it (at least the one before it): the
// tally's increase between the two, so that the rates and the totals agree across a restart (as
// Prometheus' rate() takes a reset) or a gap; unknown where the oldest or the newest page lacks
// the counter.
func rates(hist []scrape) (gen, prompt, finished bench.Gauge) {
	n := len(hist)
	if n < 2 {
		return bench.Gauge{}, bench.Gauge{}, bench.Gauge{}
	}
	last := &hist[n-1]
	i := n - 2
	for i > 0 && hist[i-1].At >= last.At-rateSpan {
		i--
	}
	first := &hist[i]
	dt := (last.At - first.At).Seconds()
	rate := func(of func(*Snapshot) Value, inc float64) bench.Gauge {
		if !usable(of(&first.Snapshot)) || !usable(of(&last.Snapshot)) || dt <= 0 {
			return bench.Gauge{}
		}
		return bench.Gauge{V: inc / dt, Known: true}
	}
	return rate(func(s *Snapshot) Value { return s.GenerationTokens }, last.gen-first.gen),
		rate(func(s *Snapshot) Value { return s.PromptTokens }, last.prompt-first.prompt),
		rate(func(s *Snapshot) Value { return Value{V: s.E2E.Count, Known: s.E2E.Known} }, last.done-first.done)
}

// gain is what one latency histogram gained over a span, before it is summarized: a fleet's
// servers' gains are merged bucket by bucket first.
type gain struct {
	name  string
	known bool // the server exposes the histogram
	h     Histogram
	// bound is the largest first-bucket bound (FirstBound) of the histograms in h with an
	// observation in that bucket: merged over the union of the layouts, such an observation is
	// only known to be at most its bound, and so is a percentile at or below it.
	bound float64
	// layouts are h as its histograms of each bucket layout, each the sum of those with it (nil:
	// h alone): a share within a target is estimated in each (withinEach).
	layouts []Histogram
}

// byLayout is g.h as the histograms of each bucket layout merged into it.
func (g *gain) byLayout() []Histogram {
	switch {
	case g.layouts != nil:
		return g.layouts
	case g.h.Known:
		return []Histogram{g.h}
	}
	return nil
}

// latencyOf are the latency histograms the panes show, in the order of every []gain and of
// a scrape's fresh bits.
var latencyOf = [...]struct {
	name string
	of   func(*Snapshot) Histogram
}{
	{"TTFT", (*Snapshot).ttft}, {"ITL", (*Snapshot).itl}, {"E2E latency", (*Snapshot).e2e},
	{"Queue", (*Snapshot).queue}, {"Prefill", (*Snapshot).prefill},
}

// gains are the latency histograms' gains from then to now, always the same names in order,
// and fresh: bit i set where the i-th counts from zero since then (see since).
func gains(now, then *Snapshot) (out []gain, fresh uint8) {
	out = make([]gain, len(latencyOf))
	for i, l := range latencyOf {
		h, whole := since(now, then, l.of)
		out[i] = newGain(l.name, l.of(now).Known, h)
		if whole {
			fresh |= 1 << i
		}
	}
	return out, fresh
}

// newGain is h as the gain named name.
func newGain(name string, known bool, h Histogram) gain {
	g := gain{name: name, known: known, h: h}
	if b, ok := h.FirstBound(); ok && h.Buckets[0].Count > 0 {
		g.bound = b
	}
	return g
}

// windowGains are the latency histograms' gains over hist, good scrapes oldest first, taken
// across a server's restarts as Prometheus' increase() takes a counter reset: hist splits into
// stretches at the restarts (the scrapes' fresh bits); the first stretch counts from its oldest
// scrape that held the histogram, each later one from zero (its newest held histogram whole),
// and the stretches add up; never a newest count less one from before a restart. The held
// histograms (scrape.lat) carry a series across a page that lacked it, so the window adds what
// the totals add over the same scrapes. Unknown where the newest page lacks the histogram.
func windowGains(hist []scrape) []gain {
	n := len(hist)
	out := make([]gain, len(latencyOf))
	for i, l := range latencyOf {
		out[i] = gain{name: l.name}
		if !l.of(&hist[n-1].Snapshot).Known {
			continue
		}
		out[i].known = true
		bit := uint8(1) << i
		for s := 0; s < n; {
			e := s + 1 // the stretch is hist[s:e]
			for e < n && hist[e].fresh&bit == 0 {
				e++
			}
			var from, to Histogram // its oldest and newest held histograms
			for j := s; j < e; j++ {
				if h := hist[j].lat[i]; h.Known {
					if !from.Known {
						from = h
					}
					to = h
				}
			}
			h := to
			if s == 0 {
				h, _ = to.sub(from)
			}
			if h.Known {
				out[i].merge(newGain(l.name, true, h))
			}
			s = e
		}
	}
	return out
}

// summarize is each gain's percentiles in ms, and the share of its observations within the
// --goodput target on it, if any.
func summarize(gs []gain, slos []bench.SLO) []bench.ServerLatency {
	out := make([]bench.ServerLatency, 0, len(gs))
	for _, g := range gs {
		l := bench.ServerLatency{Name: g.name, Known: g.known, Dist: msDist(g.h), FirstBound: g.bound * 1000}
		if b, ok := g.h.FirstBound(); ok {
			l.FirstBound = max(b, g.bound) * 1000
		}
		for _, o := range slos {
			if bench.SLOLatency(o.Metric) != g.name {
				continue
			}
			l.Target = o.Ms
			if share, floor, ok := withinEach(g.byLayout(), o.Ms/1000); ok {
				l.Within, l.WithinFloor = bench.Gauge{V: share, Known: true}, floor
			}
		}
		out = append(out, l)
	}
	return out
}
