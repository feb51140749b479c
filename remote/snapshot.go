package remote

import (
	"fmt"
	"io"
	"math"
	"slices"
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
)

var kindNames = [...]string{"unknown", "vllm", "sglang", "tgi", "llama.cpp", "rosetop"}

func (k ServerKind) String() string {
	if k >= 0 && int(k) < len(kindNames) {
		return kindNames[k]
	}
	return fmt.Sprintf("kind(%d)", int(k))
}

// Value is a gauge or counter summed over its label sets (averaged, for a usage fraction).
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

	Running Value // requests in the running batch
	Waiting Value // requests queued
	KVUsage Value // KV cache in use, 0..1

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
	specs  []spec
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

// servers are tried in order: the first whose prefix a metric name has is the server.
var servers = []server{
	{KindRosetop, "rosetop_", vllmSpecs},
	{KindVLLM, "vllm:", vllmSpecs},
	{KindSGLang, "sglang:", []spec{ // python/sglang/srt/metrics/collector.py
		{fRunning, bySum, []string{"num_running_reqs"}},
		{fWaiting, bySum, []string{"num_queue_reqs"}},
		{fKVUsage, byMean, []string{"token_usage"}},
		{fPromptTokens, bySum, []string{"prompt_tokens_total"}},
		{fGenerationTokens, bySum, []string{"generation_tokens_total"}},
		{fTTFT, asHist, []string{"time_to_first_token_seconds"}},
		{fITL, asHist, []string{"inter_token_latency_seconds"}},
		{fE2E, asHist, []string{"e2e_request_latency_seconds"}},
		{fQueue, asHist, []string{"queue_time_seconds"}}, // SchedulerMetricsCollector: its first bucket is 0
	}},
	{KindTGI, "tgi_", []spec{ // router/src/server.rs, backends/v3/src/{queue,backend}.rs
		{fRunning, bySum, []string{"batch_current_size"}},
		{fWaiting, bySum, []string{"queue_size"}},
		{fPromptTokens, byHistSum, []string{"request_input_length"}},
		{fGenerationTokens, byHistSum, []string{"request_generated_tokens"}},
		{fE2E, asHist, []string{"request_duration"}},
		{fQueue, asHist, []string{"request_queue_duration"}},
	}},
	{KindLlamaCpp, "llamacpp:", []spec{ // tools/server/server-context.cpp (metrics)
		{fRunning, bySum, []string{"requests_processing"}},
		{fWaiting, bySum, []string{"requests_deferred"}},
		{fKVUsage, byMean, []string{"kv_cache_usage_ratio"}}, // older servers only (dropped in llama.cpp #13660): else not reported
		{fPromptTokens, bySum, []string{"prompt_tokens_total"}},
		{fGenerationTokens, bySum, []string{"tokens_predicted_total"}},
	}},
}

// countsFirstTokens reports whether k's /metrics have a time-to-first-token histogram, whose
// count is the first tokens the server produced.
func (k ServerKind) countsFirstTokens() bool {
	for _, srv := range servers {
		if srv.kind == k {
			return slices.ContainsFunc(srv.specs, func(sp spec) bool { return sp.field == fTTFT })
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
	s := Snapshot{At: at}
	srv, ok := serverOf(fams)
	if !ok {
		return s
	}
	s.Kind = srv.kind
	for _, sp := range srv.specs {
		for _, name := range sp.names {
			fam := fams[srv.prefix+name]
			if fam == nil {
				continue
			}
			if sp.how == asHist {
				*s.histogram(sp.field) = histogramOf(fam)
			} else {
				*s.value(sp.field) = valueOf(fam, sp.how)
			}
			break
		}
	}
	return s
}

// serverOf finds the server whose prefix a family name has.
func serverOf(fams map[string]*dto.MetricFamily) (server, bool) {
	for _, srv := range servers {
		for name := range fams {
			if strings.HasPrefix(name, srv.prefix) {
				return srv, true
			}
		}
	}
	return server{}, false
}

// valueOf combines a family's samples. Samples that are not finite are left out.
func valueOf(fam *dto.MetricFamily, how combine) Value {
	var v Value
	n := 0
	for _, m := range fam.GetMetric() {
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
func histogramOf(fam *dto.MetricFamily) Histogram {
	var h Histogram
	for _, m := range fam.GetMetric() {
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
