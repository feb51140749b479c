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
// counters and latency histograms, each scrape's increase over the one before (after a server
// restart, a counter that went down or any counter of a new process, see restarted, the new
// value is the increase, as Prometheus' increase() takes a reset).
type tally struct {
	start       *Snapshot   // the first good scrape: the session's baseline; never written
	gen, prompt bench.Gauge // tokens since start
	lat         []gain      // the latency histograms' gains since start; their buckets never written in place
	ok, failed  int         // scrapes that worked, that failed
}

// add files a good scrape now; prev is the good scrape before it (nil for the first), and
// step the latency histograms' gains from prev to now (gains(now, prev)).
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
	re := restarted(now, prev)
	t.gen = grow(t.gen, now.GenerationTokens, counterBefore(now, prev, now.GenerationTokens, prev.GenerationTokens), re)
	t.prompt = grow(t.prompt, now.PromptTokens, counterBefore(now, prev, now.PromptTokens, prev.PromptTokens), re)
	t.lat = mergeGains(t.lat, step) // since takes a restart's histogram whole
}

// counterBefore is a counter's value in prev's page for its increase to now's (was, as prev has
// it): 0 where that page, from the same server, lacked it, as since takes a histogram that
// appeared (Dynamo's frontend and SGLang write a series at its first increment).
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

// restartOf reports whether the server restarted between the good scrapes then and now, and
// what told it: another process wrote now's page (restarted), or a counter or a histogram went
// down, which only a count from zero makes (the tally, the window and the rates take it as a
// reset too).
func restartOf(now, then *Snapshot) (how string, ok bool) {
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
	tot := &bench.ServerTotals{Span: last.At - t.start.At, Scrapes: t.ok, Failed: t.failed, GenTokens: t.gen, PromptTokens: t.prompt,
		Latency: summarize(t.lat, slos)}
	for _, g := range t.lat {
		if g.name == "E2E latency" && g.h.Known {
			tot.Requests = bench.Gauge{V: g.h.Count, Known: true}
		}
	}
	return tot
}

// rates are the server's generated and prompt tokens and finished requests per second between
// the newest of hist and the oldest within rateSpan before it (at least the one before it), each
// scrape's increase added up as the tally's are (a restarted server's counter counts from zero,
// as Prometheus' rate() takes a reset); unknown where the oldest or the newest lacks the counter.
func rates(hist []scrape) (gen, prompt, finished bench.Gauge) {
	n := len(hist)
	if n < 2 {
		return bench.Gauge{}, bench.Gauge{}, bench.Gauge{}
	}
	last := &hist[n-1].Snapshot
	i := n - 2
	for i > 0 && hist[i-1].At >= last.At-rateSpan {
		i--
	}
	dt := (last.At - hist[i].At).Seconds()
	rate := func(of func(*Snapshot) Value) bench.Gauge {
		then := &hist[i].Snapshot // the newest scrape so far with the counter
		if !usable(of(then)) || !usable(of(last)) || dt <= 0 {
			return bench.Gauge{}
		}
		var inc float64
		for j := i + 1; j < n; j++ {
			if now := &hist[j].Snapshot; usable(of(now)) {
				inc, then = grow(bench.Gauge{V: inc}, of(now), of(then), restarted(now, then)).V, now
			}
		}
		return bench.Gauge{V: inc / dt, Known: true}
	}
	return rate(func(s *Snapshot) Value { return s.GenerationTokens }), rate(func(s *Snapshot) Value { return s.PromptTokens }),
		rate(func(s *Snapshot) Value { return Value{V: s.E2E.Count, Known: s.E2E.Known} })
}

// latencies are the server's latency histograms' percentiles over what they gained from then
// to now.
func latencies(now, then *Snapshot, slos []bench.SLO) []bench.ServerLatency {
	gs, _ := gains(now, then)
	return summarize(gs, slos)
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
// across a server's restarts as Prometheus' increase() takes a counter reset: the stretch
// before the first restart counts from hist's first scrape, each stretch from a restart on
// counts from zero (its newest scrape whole), and the stretches add up; never a newest count
// minus one from before a restart. The restarts are the scrapes' fresh bits: within a stretch
// the newest minus the first is the gain. Unknown where the newest scrape lacks the histogram.
func windowGains(hist []scrape) []gain {
	n := len(hist)
	last, first := &hist[n-1].Snapshot, &hist[0].Snapshot
	out := make([]gain, len(latencyOf))
	for i, l := range latencyOf {
		bit := uint8(1) << i
		next := func(j int) int { // the next restart after scrape j, or n
			for j++; j < n && hist[j].fresh&bit == 0; j++ {
			}
			return j
		}
		j := next(0)
		if j == n || !l.of(last).Known {
			h, _ := l.of(last).sub(l.of(first))
			out[i] = newGain(l.name, l.of(last).Known, h)
			continue
		}
		h, _ := l.of(&hist[j-1].Snapshot).sub(l.of(first))
		g := newGain(l.name, true, h)
		for ; j < n; j = next(j) {
			for e := next(j) - 1; e >= j; e-- { // the stretch's newest scrape that has it
				if h := l.of(&hist[e].Snapshot); h.Known {
					g.merge(newGain(l.name, true, h))
					break
				}
			}
		}
		out[i] = g
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
