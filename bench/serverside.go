package bench

import (
	"errors"
	"fmt"
	"math"
	"net/url"
	"slices"
	"strings"
	"time"

	"rosetop/internal/oneline"
)

// RemoteInfo describes the server outside this process that a Server stands for.
type RemoteInfo struct {
	Endpoint string // the API root, e.g. http://host:8000/v1
	API      string // "completions" | "chat"
	// Kind is the server as its /metrics tell: "vllm", "sglang", "tgi", "llama.cpp", "rosetop", "dynamo", "sgl-router", "vllm-router";
	// "unknown" when they name nothing known, or there are none.
	Kind string
	// ServerFirsts: the admissions are the first tokens the server's TTFT histogram counted,
	// else (a server without one, or no /metrics) the first chunks the client received.
	ServerFirsts bool
	// Watch: the session only reads the server's /metrics and sends it no request (--watch).
	Watch bool
	// Fleet is every watched server's API root when the session watches several (--endpoint
	// given more than once: Watch is then set), Endpoint first; nil for one server.
	Fleet []string
}

// Gauge is a value a server may or may not report.
type Gauge struct {
	V     float64
	Known bool
}

// Usable reports whether g is known and a finite number: one to print or compute with.
func (g Gauge) Usable() bool { return g.Known && finite(g.V) }

// ServerLatency is one of a server's own latency histograms over the rolling window.
type ServerLatency struct {
	Name  string // "TTFT", "ITL", "E2E latency", "Queue", "Prefill"
	Known bool   // the server exposes the histogram
	// Dist is in ms, estimated from the histogram's bucket deltas over the window (Prometheus'
	// histogram_quantile); N is the observations in the window. Mean and Max are NaN.
	Dist Dist
	// FirstBound is the histogram's first bucket's upper bound in ms (0: unknown); a fleet's is
	// the largest of its servers' with an observation in that bucket. A percentile at or below it
	// was interpolated from an assumed 0 and says only "at most FirstBound".
	FirstBound float64
	// Target is the --goodput target on this latency in ms (ttft on TTFT, e2el on E2E latency;
	// watch mode), 0: none. Within is the share (0..1) of Dist's observations at most Target,
	// estimated from the buckets as Prometheus' histogram_fraction (exact at a bucket bound);
	// WithinFloor says it is only a lower bound (Target past the last finite bound).
	Target      float64
	Within      Gauge
	WithinFloor bool
}

// SLOLatency is the server latency a --goodput target applies to in watch mode ("TTFT" for
// ttft, "E2E latency" for e2el); "" for one no server histogram measures per request (tpot).
func SLOLatency(metric string) string {
	switch metric {
	case "ttft":
		return "TTFT"
	case "e2el":
		return "E2E latency"
	}
	return ""
}

// Bounded reports whether v, one of Dist's percentiles, says only that the percentile is at
// most FirstBound.
func (l ServerLatency) Bounded(v float64) bool { return l.FirstBound > 0 && v <= l.FirstBound }

// ServerMetrics is what a server says about itself (a remote server's /metrics), as its Server
// computed it. An immutable value.
type ServerMetrics struct {
	Kind    string        // as RemoteInfo.Kind
	Source  string        // the /metrics URL
	Note    string        // why figures are missing ("HTTP 404: the server has no /metrics"); "" when none are
	At      time.Duration // the last good scrape, on the session clock; 0: none yet
	Waiting Gauge         // requests queued
	Running Gauge         // requests in the running batch
	KVUsage Gauge         // share of the KV cache in use, 0..1
	Window  time.Duration // the span of the latency deltas
	Latency []ServerLatency
	// GenRate and PromptRate are the server's generated and prompt tokens per second over its
	// scrapes of the last few seconds, from its token counters; not Known where it has none, or
	// while its newest scrape failed.
	GenRate, PromptRate Gauge
	// ReqRate is the requests the server finished per second over the same scrapes, from its
	// end-to-end latency histogram's count; not Known where it has none, or as the two above.
	ReqRate Gauge
	// Total is the server's figures since the session's first good scrape; nil before it.
	Total *ServerTotals
	// Members, when the session watches a fleet (RemoteInfo.Fleet), are its servers each as
	// itself, in Fleet's order (their own Members nil); the fields above are then the fleet's:
	// queues, rates and window histograms over the servers whose newest scrape worked, totals
	// over every server; counts summed, histograms merged bucket by bucket, KV usage the mean.
	// nil for one server.
	Members []ServerMetrics
	// DP is the server's queue and KV gauges per data-parallel rank (vLLM's engine label,
	// SGLang's dp_rank) from its newest scrape, where it worked and the page has two or more
	// ranks; nil otherwise, and for a fleet's own figures (each member has its own).
	DP *DPRanks
}

// DPRank is one data-parallel rank's gauges, as the series labelled with it say.
type DPRank struct {
	ID                        string // the rank's label value ("0", "1", ...)
	Running, Waiting, KVUsage Gauge
}

// DPRanks are a server's data-parallel ranks in rank order; More counts ranks past Ranks, whose
// figures were not kept. Immutable once published: copies of a ServerMetrics share it.
type DPRanks struct {
	Ranks []DPRank
	More  int
}

// ServerTotals is what a server reported over a whole session, from its counters' and
// histograms' increase since the session's first good scrape.
type ServerTotals struct {
	Span         time.Duration // from the first good scrape to the last
	Scrapes      int           // scrapes that worked
	Failed       int           // scrapes that failed
	Requests     Gauge         // requests the server finished (its end-to-end histogram's count)
	GenTokens    Gauge         // tokens it generated
	PromptTokens Gauge         // prompt tokens it processed
	Latency      []ServerLatency
}

// Mean is g, one of t's totals, per second over t's span; unknown where g is, or for no span.
func (t *ServerTotals) Mean(g Gauge) Gauge {
	if !g.Usable() || t.Span <= 0 {
		return Gauge{}
	}
	return Gauge{V: g.V / t.Span.Seconds(), Known: true}
}

// metricsReporter is a Server that reports the metrics of the server it stands for.
type metricsReporter interface {
	ServerMetrics() *ServerMetrics // the latest; nil before there are any
}

// ServerRestarts is what a Server saw of the restarts of a remote server it stands for: how many
// since it began, and the newest: between the good scrapes at After and At (session clock) the
// server's page came from a new process.
type ServerRestarts struct {
	Count     int
	After, At time.Duration // the newest restart's; valid with Count > 0
	How       string        // what told it: "a new process start time", or "its counts went down"
}

// restartReporter is a Server that sees the restarts of the servers it stands for.
type restartReporter interface {
	// ServerRestarts are each server's restarts: a fleet's in RemoteInfo.Fleet's order, else
	// the one's.
	ServerRestarts() []ServerRestarts
}

// ServerPanel sets a server's own figures beside rosetop's client-side ones over the same
// rolling window; the two are never mixed.
type ServerPanel struct {
	ServerMetrics
	Rows []ServerRow
}

// ServerRow is one latency as the server measured it and as rosetop, its client, did.
type ServerRow struct {
	Name   string
	Server ServerLatency
	// Client is rosetop's own measurement over the window: TTFT, the gaps between stream
	// chunks for ITL, end-to-end latency. N == 0: none, or none a client can see (queue, prefill).
	Client Dist
	// DiffP50 and DiffP99 are Client - Server in ms: the network, the HTTP server and the
	// stream's framing, plus the histogram's bucket resolution. NaN when either is missing or
	// the server's is only a bound (ServerLatency.Bounded).
	DiffP50, DiffP99 float64
}

// serverPanel pairs m's latencies with the client-side windows at now; nil without m.
func (l *liveState) serverPanel(now time.Duration, m *ServerMetrics) *ServerPanel {
	if m == nil {
		return nil
	}
	client := map[string]Dist{
		"TTFT":        makeDist(l.windows[winTTFT].values(now)),
		"ITL":         makeDist(l.windows[winITL].values(now)),
		"E2E latency": makeDist(l.e2e.values(now)),
	}
	p := &ServerPanel{ServerMetrics: *m}
	for _, sl := range m.Latency {
		c, ok := client[sl.Name]
		if !ok {
			c = makeDist(nil)
		}
		row := ServerRow{Name: sl.Name, Server: sl, Client: c, DiffP50: math.NaN(), DiffP99: math.NaN()}
		if sl.Known && sl.Dist.N > 0 && c.N > 0 {
			row.DiffP50, row.DiffP99 = c.P50-sl.Dist.P50, c.P99-sl.Dist.P99
			if sl.Bounded(sl.Dist.P50) { // a bound, not a figure to subtract
				row.DiffP50 = math.NaN()
			}
			if sl.Bounded(sl.Dist.P99) {
				row.DiffP99 = math.NaN()
			}
		}
		p.Rows = append(p.Rows, row)
	}
	return p
}

// ErrRemoteServer is returned by the controls that need rosetop's own engine when the session
// drives a server outside this process.
var ErrRemoteServer = errors.New("the engine is the server's, not this process's")

// ErrWatchMode is returned by every control of a session that only watches a server.
var ErrWatchMode = errors.New("watch mode sends no requests")

// refuseRemote explains why a control does nothing against the remote server r; nil for the
// controls that work there (arrivals). The caller holds s.mu.
func refuseRemote(a Action, r *RemoteInfo) error {
	if r.Watch {
		return fmt.Errorf("%w (%s at %s): the load and the engine keys do nothing; run without --watch to drive the server", ErrWatchMode, r.Kind, r.Endpoint)
	}
	var what string
	switch a {
	case ActTogglePaged:
		what = "paged attention is the server's own KV cache layout"
	case ActToggleGraph:
		what = "CUDA Graphs are the server's own setting"
	case ActRestart:
		what = "rosetop cannot restart a server it does not run"
	case ActPrefillBatchDown, ActPrefillBatchUp, ActMaxBatchDown, ActMaxBatchUp:
		what = "batch sizes are set on the server (vLLM --max-num-seqs, SGLang --max-running-requests)"
	default:
		return nil
	}
	return fmt.Errorf("%w (%s at %s): %s; the load keys work", ErrRemoteServer, r.Kind, r.Endpoint, what)
}

// ServerNames are the servers at endpoints (API roots) as the dashboard's servers table names
// them, each its own and short: host:port; where several share a host and port, with what tells
// those apart: the path, and a scheme other than http (https://h:8000 beside h:8000), or both;
// the endpoint whole where it is not a URL with a host; and " #2", " #3" after a name that is
// still an earlier one's (one endpoint twice, in a damaged recording). clean makes text from
// outside safe to show; it is applied to each endpoint and to each name made from one (a URL's
// path is unescaped).
func ServerNames(endpoints []string, clean func(string) string) []string {
	type ep struct{ whole, scheme, host, path string }
	parsed := make([]ep, len(endpoints))
	hosts := map[string][]int{} // the endpoints of each host:port
	for i, raw := range endpoints {
		e := ep{whole: clean(raw)}
		if u, err := url.Parse(e.whole); err == nil && u.Host != "" {
			e.scheme, e.host, e.path = u.Scheme, u.Host, strings.TrimSuffix(u.Path, "/")
			hosts[e.host] = append(hosts[e.host], i)
		}
		parsed[i] = e
	}
	names := make([]string, len(endpoints))
	for i, e := range parsed {
		names[i] = e.whole
		if e.host == "" {
			continue
		}
		names[i] = e.host
		if share := hosts[e.host]; len(share) > 1 {
			differ := func(of func(ep) string) bool {
				return slices.ContainsFunc(share, func(j int) bool { return of(parsed[j]) != of(e) })
			}
			if differ(func(e ep) string { return e.path }) {
				names[i] += e.path
			}
			if e.scheme != "http" && differ(func(e ep) string { return e.scheme }) {
				names[i] = e.scheme + "://" + names[i]
			}
		}
		names[i] = clean(names[i])
	}
	return numbered(names)
}

// numbered is names with " #2", " #3"... after each name an earlier one has, the first number
// that no name has.
func numbered(names []string) []string {
	taken := make(map[string]bool, len(names)) // every name so far, numbered ones too
	for _, n := range names {
		taken[n] = true
	}
	for i, n := range names {
		if !slices.Contains(names[:i], n) {
			continue
		}
		k := 2
		for ; taken[fmt.Sprintf("%s #%d", n, k)]; k++ {
		}
		names[i] = fmt.Sprintf("%s #%d", n, k)
		taken[names[i]] = true
	}
	return names
}

// noteRestarts files an event and a chart marker (restartLabel) for each restart of a remote
// server that rs shows and the events do not yet tell: of the one server, or of each of a
// fleet's, named as the servers table names it. The caller holds s.mu.
func (s *Session) noteRestarts(rs []ServerRestarts) {
	r := s.info.Remote
	if r == nil {
		return
	}
	for len(s.restarts) < len(rs) {
		s.restarts = append(s.restarts, 0)
	}
	var names []string
	for i, sr := range rs {
		seen := sr.Count - s.restarts[i]
		s.restarts[i] = sr.Count // fewer than told: another Server's count, from zero
		if seen <= 0 {
			continue
		}
		if names == nil {
			names = serverNames(r)
		}
		name := fmt.Sprintf("server %d", i+1)
		if i < len(names) {
			name = names[i]
		}
		when := fmt.Sprintf("between the scrapes at %s and %s: %s", clockText(sr.After), clockText(sr.At), sr.How)
		text := name + " restarted " + when
		if seen > 1 {
			text = fmt.Sprintf("%s restarted %d times, the last %s", name, seen, when)
		}
		s.live.log(sr.At, LogRestart, text)
		s.live.mark(sr.At, restartLabel(name))
	}
}

// serverNames are r's servers (its fleet, else the one) as the servers table names them.
func serverNames(r *RemoteInfo) []string {
	eps := r.Fleet
	if len(eps) == 0 {
		eps = []string{r.Endpoint}
	}
	return ServerNames(eps, oneline.Fold)
}

// restartLabel is the chart marker of a restart of the server named name.
func restartLabel(name string) string { return "restart " + name }

// LastRestarts are when each remote server of v (its fleet's in RemoteInfo.Fleet's order, else
// the one) was last seen to restart, from the chart markers; -1 where none is among them. nil
// for rosetop's own engine.
func (v *View) LastRestarts() []time.Duration {
	r := v.Header.Remote
	if r == nil {
		return nil
	}
	names := serverNames(r)
	out := make([]time.Duration, len(names))
	for i, name := range names {
		out[i] = -1
		label := restartLabel(name)
		for _, m := range v.Markers {
			if m.Label == label {
				out[i] = max(out[i], m.At)
			}
		}
	}
	return out
}

// clockText is d as the events pane writes times: m:ss, h:mm:ss past an hour.
func clockText(d time.Duration) string {
	sec := int(max(d, 0) / time.Second)
	if sec >= 3600 {
		return fmt.Sprintf("%d:%02d:%02d", sec/3600, sec/60%60, sec%60)
	}
	return fmt.Sprintf("%d:%02d", sec/60, sec%60)
}
