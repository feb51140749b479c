package remote

import (
	"cmp"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"rosetop/internal/oneline"
)

// ServerKind is the inference server a /metrics page comes from, told by its metric names.
type ServerKind int

// The servers the scraper knows.
const (
	KindUnknown ServerKind = iota
	KindVLLM
	KindSGLang
	KindTGI
	KindLlamaCpp
	KindRosetop
	KindDynamo       // NVIDIA Dynamo's HTTP frontend, in front of its engines
	KindSGLangRouter // SGLang's router (sgl-router; the SGLang Model Gateway before it)
	KindVLLMRouter   // the vLLM production stack's router (vllm_router), whose names share vLLM's prefix
)

var kindNames = [...]string{"unknown", "vllm", "sglang", "tgi", "llama.cpp", "rosetop", "dynamo", "sgl-router", "vllm-router"}

func (k ServerKind) String() string {
	if k >= 0 && int(k) < len(kindNames) {
		return kindNames[k]
	}
	return fmt.Sprintf("kind(%d)", int(k))
}

// Value is a gauge or counter summed over its label sets (averaged, for a usage fraction), one
// series of each replica (see server.ranks).
type Value struct {
	V     float64
	Known bool // the server exposes it
}

// Snapshot is one scrape of a server's /metrics in one vocabulary, whatever the server. A
// field the server does not expose is not Known; Kind is KindUnknown when no name was
// recognised at all.
type Snapshot struct {
	At   time.Duration // when the scrape's response arrived, on the scraper's clock
	Kind ServerKind
	// Started tells the process that wrote the page from another (see restarted): its
	// process_start_time_seconds (prometheus_client's process collector on Linux, as in vLLM with
	// one API server; client_golang's), else the answer's Process-Start-Time-Unix header
	// (llama-server's start in µs on a monotonic clock, not a Unix time). Unknown where neither is
	// given: SGLang (a multiprocess registry), vLLM with several API servers, TGI.
	Started Value

	Running Value // requests in the running batch
	Waiting Value // requests queued
	KVUsage Value // KV cache in use, 0..1
	// DP is Running, Waiting and KVUsage per data-parallel rank, where the page has two or more
	// (see server.dp); nil otherwise. Never written after the page is parsed: copies share it.
	DP *DPRanks

	Preemptions      Value // counter: preempted requests
	PromptTokens     Value // counter: prompt (prefill) tokens processed
	GenerationTokens Value // counter: tokens generated

	TTFT            Histogram // seconds, time to first token
	ITL             Histogram // seconds, inter-token latency
	E2E             Histogram // seconds, end-to-end request latency
	Queue           Histogram // seconds, time queued
	Prefill         Histogram // seconds, time in prefill
	IterationTokens Histogram // tokens per engine step
}

// DPRank is one data-parallel rank's gauges, from the page's series labelled with it.
type DPRank struct {
	ID      string // the label's value: vLLM's engine, SGLang's dp_rank
	Running Value
	Waiting Value
	KVUsage Value // the mean of its series, as the page's
}

// DPRanks are a page's data-parallel ranks apart, ordered by ID (as numbers where they are); the
// Snapshot's own Running, Waiting and KVUsage are their sum and mean. An immutable value.
type DPRanks struct {
	Label string   // "engine" or "dp_rank"
	Ranks []DPRank // the first maxDPRanks in order
	More  int      // ranks past those, counted only
}

// maxDPRanks bounds the ranks kept apart: past it a page is a fleet of its own, not a row each.
const maxDPRanks = 256

// field names a Snapshot member.
type field int

const (
	fRunning field = iota
	fWaiting
	fKVUsage
	fPreemptions
	fPromptTokens
	fGenerationTokens
	fTTFT // the histograms start here
	fITL
	fE2E
	fQueue
	fPrefill
	fIterationTokens
)

func (s *Snapshot) value(f field) *Value {
	return [...]*Value{&s.Running, &s.Waiting, &s.KVUsage, &s.Preemptions, &s.PromptTokens, &s.GenerationTokens}[f]
}

func (s *Snapshot) histogram(f field) *Histogram {
	return [...]*Histogram{&s.TTFT, &s.ITL, &s.E2E, &s.Queue, &s.Prefill, &s.IterationTokens}[f-fTTFT]
}

// combine says how a name's label sets make one value.
type combine int

const (
	bySum     combine = iota // counters, request counts
	byMean                   // fractions, e.g. KV usage per engine
	byHistSum                // a histogram's _sum: a monotone total (TGI's token counts)
	asHist                   // a histogram field
)

// spec reads one field from the first of names that the page has.
type spec struct {
	field field
	how   combine
	names []string
}

// server is one server's names. vLLM's and rosetop serve's differ only in their prefix.
type server struct {
	kind   ServerKind
	prefix string
	specs  []spec // a field is read by its first spec whose names the page has
	// ranks are the labels of the processes of one replica: series that differ only in them count
	// the same requests, and one of them is read (see replicas). Series that differ in another
	// label (a replica's dp_rank, vLLM's engine) count different requests and add up.
	ranks []string
	// dp is the label of a data-parallel rank where the server has one: its running, waiting and
	// KV usage are also kept per rank (Snapshot.DP).
	dp string
	// someFirsts: the TTFT histogram observes only some requests (those streamed), so its count
	// is not the first tokens the server produced (see countsFirstTokens).
	someFirsts bool
	// derive, where set, makes the fields the specs cannot read alone from those they did.
	derive func(*Snapshot)
	// only, where set, are names that tell this server's page, whatever its other names: its
	// prefix is another server's too. A page with none of them is not this server's.
	only []string
}

// vllmSpecs are vLLM's names after the prefix (vllm/v1/metrics/loggers.py), older names after
// newer ones.
var vllmSpecs = []spec{
	{fRunning, bySum, []string{"num_requests_running"}},
	{fWaiting, bySum, []string{"num_requests_waiting"}},
	{fKVUsage, byMean, []string{"kv_cache_usage_perc", "gpu_cache_usage_perc"}},
	{fPreemptions, bySum, []string{"num_preemptions_total"}},
	{fPromptTokens, bySum, []string{"prompt_tokens_total"}},
	{fGenerationTokens, bySum, []string{"generation_tokens_total"}},
	{fTTFT, asHist, []string{"time_to_first_token_seconds"}},
	{fITL, asHist, []string{"inter_token_latency_seconds", "time_per_output_token_seconds"}},
	{fE2E, asHist, []string{"e2e_request_latency_seconds"}},
	{fQueue, asHist, []string{"request_queue_time_seconds"}},
	{fPrefill, asHist, []string{"request_prefill_time_seconds"}},
	{fIterationTokens, asHist, []string{"iteration_tokens_total"}},
}

// servers are tried in order: the first whose prefix a metric name has is the server (see
// serverOf for those with only names). Frontends and routers come after the engines, so that an
// engine's page is the engine's whatever else it carries; vLLM's router, told by its only names,
// before vLLM, whose prefix it shares.
var servers = []server{
	{kind: KindRosetop, prefix: "rosetop_", specs: vllmSpecs, dp: "engine"},
	// The vLLM production stack's router names its own figures as vLLM does
	// (src/vllm_router/services/metrics_service/__init__.py), so it is told first, by names no
	// engine writes: router_cpu_usage_percent, set at every GET /metrics
	// (routers/metrics_router.py); vllm:current_qps, per backend once it routed one a request;
	// vllm:healthy_pods_total, per backend it discovered. Its vllm:num_requests_waiting is declared
	// and never set (a family with no sample); it has no TTFT, ITL or queue histogram, no KV
	// cache use and no preemptions (vllm:avg_latency is a mean over its stats window,
	// vllm:avg_itl always -1).
	{kind: KindVLLMRouter, prefix: "vllm:", only: []string{"router_cpu_usage_percent", "vllm:current_qps", "vllm:healthy_pods_total"},
		derive: routerIdle, specs: []spec{
			// Per backend (label server): the requests it sent there and not yet done, set to its
			// vllm:num_prefill_requests (no byte of the answer yet) + vllm:num_decoding_requests.
			{fRunning, bySum, []string{"num_requests_running"}},
			// Counters (server, model), added to only from a request that was not streamed, from its
			// answer's usage (services/request_service/request.py process_request): a streamed
			// request's tokens are not counted.
			{fPromptTokens, bySum, []string{"input_tokens_total"}},
			{fGenerationTokens, bySum, []string{"output_tokens_total"}},
			// From the request's dispatch to the answer's end, every request whatever its status
			// label (success, error), per server and model.
			{fE2E, asHist, []string{"request_latency_seconds"}},
		}},
	{kind: KindVLLM, prefix: "vllm:", specs: vllmSpecs, dp: "engine"}, // its engine label is a data parallel engine (loggers.py): they add up
	// python/sglang/srt/observability/metrics_collector.py (formerly metrics/collector.py); the
	// ranks are a scheduler's labels (scheduler_metrics_mixin.py init_metrics), the tokenizer's
	// series have none.
	{kind: KindSGLang, prefix: "sglang:", specs: []spec{
		{fRunning, bySum, []string{"num_running_reqs"}},
		{fWaiting, bySum, []string{"num_queue_reqs"}},
		{fKVUsage, byMean, []string{"token_usage"}},
		{fPromptTokens, bySum, []string{"prompt_tokens_total"}},
		{fGenerationTokens, bySum, []string{"generation_tokens_total"}},
		{fTTFT, asHist, []string{"time_to_first_token_seconds"}},
		{fITL, asHist, []string{"inter_token_latency_seconds"}},
		{fE2E, asHist, []string{"e2e_request_latency_seconds"}},
		{fQueue, asHist, []string{"queue_time_seconds"}}, // SchedulerMetricsCollector: its first bucket is 0
	}, ranks: []string{"pp_rank", "tp_rank", "moe_ep_rank"}, dp: "dp_rank"},
	{kind: KindTGI, prefix: "tgi_", specs: []spec{ // router/src/server.rs, backends/v3/src/{queue,backend}.rs
		{fRunning, bySum, []string{"batch_current_size"}},
		{fWaiting, bySum, []string{"queue_size"}},
		{fPromptTokens, byHistSum, []string{"request_input_length"}},
		{fGenerationTokens, byHistSum, []string{"request_generated_tokens"}},
		{fE2E, asHist, []string{"request_duration"}},
		{fQueue, asHist, []string{"request_queue_duration"}},
	}},
	{kind: KindLlamaCpp, prefix: "llamacpp:", specs: []spec{ // tools/server/server-context.cpp (metrics)
		{fRunning, bySum, []string{"requests_processing"}},
		{fWaiting, bySum, []string{"requests_deferred"}},
		{fKVUsage, byMean, []string{"kv_cache_usage_ratio"}}, // older servers only (dropped in llama.cpp #13660): else not reported
		{fPromptTokens, bySum, []string{"prompt_tokens_total"}},
		{fGenerationTokens, bySum, []string{"tokens_predicted_total"}},
	}},
	// Dynamo's frontend names everything {prefix}_name, the prefix dynamo_frontend unless
	// DYN_METRICS_PREFIX says otherwise; NIM sets nv_llm_http_service, the frontend's prefix before.
	{kind: KindDynamo, prefix: "dynamo_frontend_", specs: dynamoSpecs, derive: frontendQueue},
	{kind: KindDynamo, prefix: "nv_llm_http_service_", specs: dynamoSpecs, derive: frontendQueue},
	// sgl-router/src/server/metrics.rs (the router's own /metrics, on its serving port), and
	// sgl-router/src/metrics.rs before it (metrics-exporter-prometheus on --prometheus-port, 29000).
	// Neither page has a waiting count or token counters; the TTFT histogram has the streamed
	// requests only.
	{kind: KindSGLangRouter, prefix: "sgl_router_", someFirsts: true, specs: []spec{
		{fRunning, bySum, []string{
			"worker_inflight_requests", // per worker_url: the requests dispatched to it and not yet done
			"running_requests",         // the older router's per worker load, kept under the cache_aware policy
		}},
		{fTTFT, asHist, []string{"ttft_seconds"}},            // to the first upstream chunk of a streamed request
		{fE2E, asHist, []string{"request_duration_seconds"}}, // to the stream's end; the older router's per route
	}},
	// sgl-model-gateway/src/observability/metrics.rs (the SGLang Model Gateway, smg_ names, on
	// --prometheus-port): its TTFT is gRPC-only and, with buckets set for *duration_seconds alone,
	// written as a summary, which is no histogram to read.
	{kind: KindSGLangRouter, prefix: "smg_", someFirsts: true, specs: []spec{
		{fRunning, bySum, []string{"worker_requests_active"}},
		{fE2E, asHist, []string{"router_request_duration_seconds"}},
	}},
}

// dynamoSpecs are Dynamo's frontend's names after its prefix (lib/llm/src/http/service/metrics.rs,
// names in lib/runtime/src/metrics/prometheus_names.rs frontend_service), each labelled by model.
// Its buckets start at 0 (generate_log_buckets).
var dynamoSpecs = []spec{
	// From the HTTP handler's entry to the response's end, the queued ones among them; the
	// frontend knows no KV cache use and no preemptions (its engines' pages do).
	// active_requests: the same count, inflight_requests' successor; the _total names are
	// 2025's frontends' (lib/llm/tests/http_metrics.rs then), gauges despite the suffix.
	{fRunning, bySum, []string{"inflight_requests", "active_requests", "inflight_requests_total"}},
	{fWaiting, bySum, []string{"queued_requests", "queued_requests_total"}},
	{fPromptTokens, byHistSum, []string{"input_sequence_tokens"}},      // observed at a request's first token
	{fGenerationTokens, bySum, []string{"output_tokens_total"}},        // counted as the tokens stream
	{fGenerationTokens, byHistSum, []string{"output_sequence_tokens"}}, // before output_tokens_total: at a request's end
	{fTTFT, asHist, []string{"time_to_first_token_seconds"}},           // every request's, streamed or not
	{fITL, asHist, []string{"inter_token_latency_seconds"}},
	{fE2E, asHist, []string{"request_duration_seconds"}},
}

// frontendQueue makes Dynamo's frontend's gauges the panes' queue: queued_requests counts a
// request from the handler's entry to its first token (prefill included), and inflight_requests
// to the response's end, so the queued are among the in flight and the running are the rest.
// The frontend writes a model's series at its first request: a page with neither gauge has had
// none in flight. A page with inflight_requests alone is a frontend from before queued_requests:
// its waiting is not known.
func frontendQueue(s *Snapshot) {
	switch {
	case !s.Running.Known && !s.Waiting.Known:
		s.Running, s.Waiting = Value{Known: true}, Value{Known: true}
	case s.Waiting.Known:
		// The two gauges are read one after the other: a request between them can make the
		// queued outnumber the in flight for a moment.
		s.Running = Value{V: max(0, s.Running.V-s.Waiting.V), Known: true}
	}
}

// routerIdle makes the vLLM router's running 0 where its page has no num_requests_running: the
// router writes a backend's series from the first request it sends it on, so none has been sent.
func routerIdle(s *Snapshot) {
	if !s.Running.Known {
		s.Running = Value{Known: true}
	}
}

// countsFirstTokens reports whether k's /metrics have a time-to-first-token histogram that
// observes every request, whose count is then the first tokens the server produced.
func (k ServerKind) countsFirstTokens() bool {
	for _, srv := range servers {
		if srv.kind == k {
			return !srv.someFirsts && slices.ContainsFunc(srv.specs, func(sp spec) bool { return sp.field == fTTFT })
		}
	}
	return false
}

// ParseSnapshot reads a Prometheus text exposition into a Snapshot stamped at.
func ParseSnapshot(r io.Reader, at time.Duration) (Snapshot, error) {
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(r)
	if err != nil {
		return Snapshot{At: at}, fmt.Errorf("%w: metrics page: %v", ErrMalformed, oneline.Fold(err.Error()))
	}
	return snapshotOf(fams, at), nil
}

// snapshotOf maps parsed families onto a Snapshot.
func snapshotOf(fams map[string]*dto.MetricFamily, at time.Duration) Snapshot {
	s := Snapshot{At: at, Started: processStart(fams)}
	srv, ok := serverOf(fams)
	if !ok {
		return s
	}
	s.Kind = srv.kind
	var read uint32 // the fields a spec has read
	var dp dpSet
	for _, sp := range srv.specs {
		if read&(1<<sp.field) != 0 {
			continue
		}
		for _, name := range sp.names {
			fam := fams[srv.prefix+name]
			if fam == nil {
				continue
			}
			series := replicas(fam.GetMetric(), srv.ranks)
			if sp.how == asHist {
				*s.histogram(sp.field) = histogramOf(series)
			} else {
				*s.value(sp.field) = valueOf(series, sp.how)
				if srv.dp != "" && sp.field <= fKVUsage {
					dp.add(series, srv.dp, sp)
				}
			}
			read |= 1 << sp.field
			break
		}
	}
	if srv.derive != nil {
		srv.derive(&s)
	}
	if len(dp.ranks) > 1 {
		s.DP = dpRanksOf(srv.dp, dp.ranks)
	}
	return s
}

// dpSet gathers a page's data-parallel ranks, in the order the page names them.
type dpSet struct {
	ranks []DPRank
	at    map[string]int // a rank's index in ranks; nil before the first
}

// add sets sp's field of each rank among series (the series labelled label with its ID,
// combined as the snapshot combines them). Series without the label are no rank's.
func (d *dpSet) add(series []*dto.Metric, label string, sp spec) {
	var groups [][]*dto.Metric // by index in d.ranks
	for _, m := range series {
		for _, lp := range m.GetLabel() {
			if lp.GetName() != label {
				continue
			}
			i := d.index(lp.GetValue())
			for len(groups) <= i {
				groups = append(groups, nil)
			}
			groups[i] = append(groups[i], m)
			break
		}
	}
	for i, g := range groups {
		if g != nil {
			*d.ranks[i].value(sp.field) = valueOf(g, sp.how)
		}
	}
}

// index is rank id's index in d.ranks, added where it is new.
func (d *dpSet) index(id string) int {
	if d.at == nil {
		d.at = map[string]int{}
	}
	i, ok := d.at[id]
	if !ok {
		i, d.at[id] = len(d.ranks), len(d.ranks)
		d.ranks = append(d.ranks, DPRank{ID: id})
	}
	return i
}

func (r *DPRank) value(f field) *Value {
	return [...]*Value{&r.Running, &r.Waiting, &r.KVUsage}[f]
}

// dpRanksOf orders a page's ranks by ID, numbers first and by value, and keeps the first
// maxDPRanks.
func dpRanksOf(label string, dp []DPRank) *DPRanks {
	slices.SortFunc(dp, func(a, b DPRank) int {
		x, errA := strconv.ParseInt(a.ID, 10, 64)
		y, errB := strconv.ParseInt(b.ID, 10, 64)
		switch {
		case errA == nil && errB == nil:
			return cmp.Or(cmp.Compare(x, y), strings.Compare(a.ID, b.ID)) // "1" and "01"
		case errA == nil:
			return -1
		case errB == nil:
			return 1
		}
		return strings.Compare(a.ID, b.ID)
	})
	out := &DPRanks{Label: label, Ranks: dp}
	if len(dp) > maxDPRanks {
		out.Ranks, out.More = slices.Clip(dp[:maxDPRanks]), len(dp)-maxDPRanks
	}
	return out
}

// serverOf finds the server whose prefix a family name has, or for a server with only names,
// one of which the page has.
func serverOf(fams map[string]*dto.MetricFamily) (server, bool) {
	for _, srv := range servers {
		if srv.only != nil {
			if slices.ContainsFunc(srv.only, func(name string) bool { return fams[name] != nil }) {
				return srv, true
			}
			continue
		}
		for name := range fams {
			if strings.HasPrefix(name, srv.prefix) {
				return srv, true
			}
		}
	}
	return server{}, false
}

// processStart is the page's process_start_time_seconds where it has one, a positive number.
func processStart(fams map[string]*dto.MetricFamily) Value {
	ms := fams["process_start_time_seconds"].GetMetric()
	if len(ms) != 1 { // none, or the pages of several processes in one
		return Value{}
	}
	v, ok := sampleOf(ms[0], bySum)
	if !ok || !(v > 0) || math.IsInf(v, 1) {
		return Value{}
	}
	return Value{V: v, Known: true}
}

// replicas is one series of each replica among ms: of the series whose labels differ only in
// ranks, the one of the lowest ranks (compared in ranks' order), always the same process's, so
// that its counts never step between processes whose clocks put an observation in different
// buckets. The order of ms is kept.
func replicas(ms []*dto.Metric, ranks []string) []*dto.Metric {
	if len(ranks) == 0 || len(ms) < 2 {
		return ms
	}
	type pick struct {
		at   int // in out
		rank []string
	}
	picked := map[string]pick{}
	var out []*dto.Metric
	for _, m := range ms {
		var key strings.Builder
		rank := make([]string, len(ranks))
		for _, lp := range m.GetLabel() {
			if i := slices.Index(ranks, lp.GetName()); i >= 0 {
				rank[i] = lp.GetValue()
				continue
			}
			key.WriteString(lp.GetName())
			key.WriteByte(0)
			key.WriteString(lp.GetValue())
			key.WriteByte(0)
		}
		k := key.String()
		p, ok := picked[k]
		switch {
		case !ok:
			picked[k] = pick{at: len(out), rank: rank}
			out = append(out, m)
		case slices.CompareFunc(rank, p.rank, compareRank) < 0:
			out[p.at] = m
			picked[k] = pick{at: p.at, rank: rank}
		}
	}
	return out
}

// compareRank orders two rank labels' values: as numbers where both are, else as text.
func compareRank(a, b string) int {
	x, errA := strconv.ParseInt(a, 10, 64)
	y, errB := strconv.ParseInt(b, 10, 64)
	if errA == nil && errB == nil {
		return cmp.Compare(x, y)
	}
	return strings.Compare(a, b)
}

// valueOf combines series' samples: their sum, or for byMean their mean (a usage fraction: the
// share of the whole where the replicas' caches are of one size). Samples that are not finite
// are left out.
func valueOf(ms []*dto.Metric, how combine) Value {
	var v Value
	n := 0
	for _, m := range ms {
		x, ok := sampleOf(m, how)
		if !ok || math.IsNaN(x) || math.IsInf(x, 0) {
			continue
		}
		v.V += x
		v.Known = true
		n++
	}
	if how == byMean && n > 0 {
		v.V /= float64(n)
	}
	return v
}

// sampleOf is one metric's value as the spec reads it.
func sampleOf(m *dto.Metric, how combine) (float64, bool) {
	switch {
	case how == byHistSum && m.Histogram != nil:
		return m.Histogram.GetSampleSum(), true
	case how == byHistSum:
		return 0, false
	case m.Gauge != nil:
		return m.Gauge.GetValue(), true
	case m.Counter != nil:
		return m.Counter.GetValue(), true
	case m.Untyped != nil:
		return m.Untyped.GetValue(), true
	}
	return 0, false
}

// histogramOf sums a histogram family's series. A series with a bound that is not a number,
// or a count that is not one of 0..maxCount, is left out.
func histogramOf(ms []*dto.Metric) Histogram {
	var h Histogram
	for _, m := range ms {
		if one, ok := seriesOf(m.GetHistogram()); ok {
			h.add(one)
		}
	}
	return h
}

func seriesOf(dh *dto.Histogram) (Histogram, bool) {
	if dh == nil {
		return Histogram{}, false
	}
	h := Histogram{Known: true, Count: float64(dh.GetSampleCount()), Sum: dh.GetSampleSum()}
	if dh.SampleCountFloat != nil {
		h.Count = dh.GetSampleCountFloat()
	}
	for _, b := range dh.GetBucket() {
		c := float64(b.GetCumulativeCount())
		if b.CumulativeCountFloat != nil {
			c = b.GetCumulativeCountFloat()
		}
		ub := b.GetUpperBound()
		if math.IsNaN(ub) || !isCount(c) {
			return Histogram{}, false
		}
		h.Buckets = append(h.Buckets, Bucket{UpperBound: ub, Count: c})
	}
	if !isCount(h.Count) || math.IsNaN(h.Sum) || math.IsInf(h.Sum, 0) {
		return Histogram{}, false
	}
	h.Buckets = sortBuckets(h.Buckets)
	if n := len(h.Buckets); n == 0 || !math.IsInf(h.Buckets[n-1].UpperBound, 1) {
		h.Buckets = append(h.Buckets, Bucket{UpperBound: math.Inf(1), Count: h.Count})
	}
	return h, true
}

// isCount reports whether c can be a number of observations: 0..maxCount (a text page's count
// past uint64 arrives as whatever the conversion made of it).
func isCount(c float64) bool { return c >= 0 && c <= maxCount }
