package serve

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"rosetop/sched"
)

// MetricNames picks the names /metrics publishes.
type MetricNames string

const (
	RosetopNames MetricNames = "rosetop" // rosetop_num_requests_running, ... (the default)
	VLLMNames    MetricNames = "vllm"    // vllm:num_requests_running, ...: vLLM's current names (not those it deprecated)
)

// MetricsOptions configure Metrics.
type MetricsOptions struct {
	Names MetricNames // "" is RosetopNames
	Model string      // the model_name label: the served model's id
	// MaxModelLen bounds the per-request token-count histograms (vLLM's 1-2-5 buckets up to it).
	MaxModelLen int
	// Ledger returns the engine's cold-start costs, read at each scrape (any goroutine); nil: no
	// cold-start gauges.
	Ledger func() []LedgerEntry
}

// Metrics is vLLM's Prometheus metric set over rosetop's scheduler, on a registry of its own.
// The definitions follow vLLM's vllm/v1/metrics/loggers.py and stats.py (times from the
// scheduler's clock, sched.Times):
//
//   - num_requests_running, num_requests_waiting, kv_cache_usage_perc (0..1): the latest step's.
//   - num_preemptions_total; generation_tokens_total: every token sampled; prompt_tokens_total:
//     the prompt tokens each step prefilled (cached ones included), counted with that step, as
//     vLLM counts a prompt with its first token (not when the request finishes).
//   - iteration_tokens_total: per engine step, the prompt tokens it prefilled (cached ones
//     included) plus the tokens it sampled.
//   - time_to_first_token_seconds: first token - submit; inter_token_latency_seconds: each gap
//     between a request's consecutive tokens.
//   - per finished request: e2e_request_latency_seconds (finished - submit), request_queue_time
//     (admitted - tokenized), request_prefill_time (first token - admitted), request_decode_time
//     (last token - first token), request_inference_time (last token - admitted),
//     request_time_per_output_token (decode time / (tokens - 1), 0 for one token),
//     request_prompt_tokens, request_generation_tokens, request_success_total{finished_reason}
//     (stop, length, abort: cancelled, error). A histogram skips a request whose interval does
//     not exist (a request cancelled before its first token has no prefill time).
//
// Labels: model_name and engine ("0"), as vLLM's. A request ended by a stop string or a stop
// token id counts as "stop" in request_success_total, as one ended by EOS does. The cold-start
// ledger is cold_start_seconds{what, detail} under the same prefix (no vLLM metric; one prefix
// per page, so a scraper tells the naming from any name). The process collector's process_*
// series (Linux) carry no prefix, as on vLLM's page.
type Metrics struct {
	// Set by NewMetrics, read-only afterwards (the metrics themselves are safe for concurrent use).
	reg *prometheus.Registry

	running, waiting, kvUsage                                    prometheus.Gauge
	preemptions, promptTokens, generationTokens                  prometheus.Counter
	success                                                      map[sched.FinishReason]prometheus.Counter // request_success_total's series
	iteration, ttft, itl, e2e, queue, prefill, decode, inference prometheus.Histogram
	tpot, promptHist, generationHist                             prometheus.Histogram

	// Owned by the goroutine calling ObserveStep.
	lastToken   map[sched.RequestID]time.Duration // each running request's latest token time
	preemptSeen uint64                            // Snapshot.Preemptions counted so far
}

// NewMetrics builds the metric set on a registry of its own.
func NewMetrics(o MetricsOptions) (*Metrics, error) {
	switch o.Names {
	case "":
		o.Names = RosetopNames
	case RosetopNames, VLLMNames:
	default:
		return nil, fmt.Errorf("%w: --metrics-names %q, want rosetop or vllm", ErrBadOptions, o.Names)
	}
	if o.MaxModelLen < 1 {
		return nil, fmt.Errorf("%w: max model length %d, want >= 1", ErrBadOptions, o.MaxModelLen)
	}
	b := metricBuilder{names: o.Names, labels: prometheus.Labels{"model_name": o.Model, "engine": "0"}}
	m := &Metrics{reg: prometheus.NewRegistry(), lastToken: make(map[sched.RequestID]time.Duration)}
	m.running = b.gauge("num_requests_running", "Number of requests in model execution batches.")
	m.waiting = b.gauge("num_requests_waiting", "Number of requests waiting to be processed.")
	m.kvUsage = b.gauge("kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage.")
	m.preemptions = b.counter("num_preemptions_total", "Cumulative number of preemption from the engine.")
	m.promptTokens = b.counter("prompt_tokens_total", "Number of prefill tokens processed.")
	m.generationTokens = b.counter("generation_tokens_total", "Number of generation tokens processed.")
	success := prometheus.NewCounterVec(prometheus.CounterOpts{Name: b.name("request_success_total"),
		Help: "Count of successfully processed requests.", ConstLabels: b.labels}, []string{"finished_reason"})
	m.success = map[sched.FinishReason]prometheus.Counter{}
	for _, r := range []sched.FinishReason{sched.FinishEOS, sched.FinishStop, sched.FinishLength, sched.FinishCancelled, sched.FinishError, sched.FinishTooLong} {
		m.success[r] = success.WithLabelValues(finishedReason(r)) // every series exists from the start, as in vLLM
	}
	m.iteration = b.histogram("iteration_tokens_total", "Histogram of number of tokens per engine_step.", iterationBuckets())
	m.ttft = b.histogram("time_to_first_token_seconds", "Histogram of time to first token in seconds.", ttftBuckets())
	m.itl = b.histogram("inter_token_latency_seconds", "Histogram of inter-token latency in seconds.", tokenLatencyBuckets())
	m.tpot = b.histogram("request_time_per_output_token_seconds", "Histogram of time_per_output_token_seconds per request.", tokenLatencyBuckets())
	m.e2e = b.histogram("e2e_request_latency_seconds", "Histogram of e2e request latency in seconds.", requestLatencyBuckets())
	m.queue = b.histogram("request_queue_time_seconds", "Histogram of time spent in WAITING phase for request.", requestLatencyBuckets())
	m.inference = b.histogram("request_inference_time_seconds", "Histogram of time spent in RUNNING phase for request.", requestLatencyBuckets())
	m.prefill = b.histogram("request_prefill_time_seconds", "Histogram of time spent in PREFILL phase for request.", requestLatencyBuckets())
	m.decode = b.histogram("request_decode_time_seconds", "Histogram of time spent in DECODE phase for request.", requestLatencyBuckets())
	m.promptHist = b.histogram("request_prompt_tokens", "Number of prefill tokens processed.", buckets125(o.MaxModelLen))
	m.generationHist = b.histogram("request_generation_tokens", "Number of generation tokens processed.", buckets125(o.MaxModelLen))
	// The process collector's process_start_time_seconds (Linux), as vLLM's page has it, tells a
	// watcher a restarted server from one whose counts only grew.
	cs := append(b.made, success, collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	if o.Ledger != nil {
		cs = append(cs, &ledgerCollector{entries: o.Ledger, desc: prometheus.NewDesc(b.name("cold_start_seconds"),
			"One-time cost of the engine's cold start (model load, kernel load, graph capture, ...) in seconds.",
			[]string{"what", "detail"}, b.labels)})
	}
	for _, c := range cs {
		if err := m.reg.Register(c); err != nil {
			return nil, fmt.Errorf("metrics: %w", err)
		}
	}
	return m, nil
}

// Handler serves the metrics in Prometheus' text format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{})
}

// ObserveStep records one scheduler step. It is called on the goroutine that reads the
// scheduler's outputs, for every step, in order; it never blocks, and keeps nothing of so.
func (m *Metrics) ObserveStep(so *sched.StepOutput) {
	snap := &so.Snapshot
	m.running.Set(float64(snap.Running))
	m.waiting.Set(float64(snap.Waiting))
	if snap.KVTotal > 0 {
		m.kvUsage.Set(float64(snap.KVUsed) / float64(snap.KVTotal))
	}
	if snap.Preemptions < m.preemptSeen { // a new scheduler (the engine was rebuilt): its own count
		m.preemptSeen = 0
	}
	m.preemptions.Add(float64(snap.Preemptions - m.preemptSeen))
	m.preemptSeen = snap.Preemptions
	sampled := 0
	for i := range so.Events {
		e := &so.Events[i]
		if e.Kind == sched.EventFinished {
			delete(m.lastToken, e.ID)
			m.finished(e.Record)
			continue
		}
		sampled += len(e.Tokens)
		if e.First != nil {
			m.ttft.Observe(seconds(e.First.FirstToken - e.First.SubmitStart))
		} else if last, ok := m.lastToken[e.ID]; ok {
			m.itl.Observe(seconds(e.At - last))
		}
		m.lastToken[e.ID] = e.At
	}
	m.generationTokens.Add(float64(sampled))
	m.promptTokens.Add(float64(snap.PrefillTokens + snap.CachedTokens))
	if snap.Kind != sched.StepIdle {
		m.iteration.Observe(float64(snap.PrefillTokens + snap.CachedTokens + sampled))
	}
}

// finished records a finished request.
func (m *Metrics) finished(r *sched.Record) {
	t := &r.Times
	if c := m.success[r.Reason]; c != nil {
		c.Inc()
	}
	m.e2e.Observe(seconds(t.Finished - t.SubmitStart))
	m.promptHist.Observe(float64(r.PromptTokens))
	m.generationHist.Observe(float64(len(r.Output)))
	if t.Admitted > 0 {
		m.queue.Observe(seconds(t.Admitted - t.Tokenized))
	}
	if t.FirstToken == 0 {
		return
	}
	last := t.Tokens[len(t.Tokens)-1]
	m.prefill.Observe(seconds(t.FirstToken - t.Admitted))
	m.decode.Observe(seconds(last - t.FirstToken))
	m.inference.Observe(seconds(last - t.Admitted))
	tpot := 0.0
	if n := len(t.Tokens); n > 1 {
		tpot = seconds(last-t.FirstToken) / float64(n-1)
	}
	m.tpot.Observe(tpot)
}

// finishedReason is vLLM's finished_reason label for a scheduler's finish reason.
func finishedReason(r sched.FinishReason) string {
	switch r {
	case sched.FinishEOS, sched.FinishStop:
		return "stop"
	case sched.FinishLength:
		return "length"
	case sched.FinishCancelled:
		return "abort"
	}
	return "error"
}

func seconds(d time.Duration) float64 { return d.Seconds() }

// metricBuilder makes the metrics under the chosen names, remembering them for registration.
type metricBuilder struct {
	names  MetricNames
	labels prometheus.Labels
	made   []prometheus.Collector
}

// name is base under the chosen names: rosetop_base or vllm:base.
func (b *metricBuilder) name(base string) string {
	if b.names == VLLMNames {
		return "vllm:" + base
	}
	return "rosetop_" + base
}

func (b *metricBuilder) gauge(base, help string) prometheus.Gauge {
	g := prometheus.NewGauge(prometheus.GaugeOpts{Name: b.name(base), Help: help, ConstLabels: b.labels})
	b.made = append(b.made, g)
	return g
}

func (b *metricBuilder) counter(base, help string) prometheus.Counter {
	c := prometheus.NewCounter(prometheus.CounterOpts{Name: b.name(base), Help: help, ConstLabels: b.labels})
	b.made = append(b.made, c)
	return c
}

func (b *metricBuilder) histogram(base, help string, buckets []float64) prometheus.Histogram {
	h := prometheus.NewHistogram(prometheus.HistogramOpts{Name: b.name(base), Help: help, ConstLabels: b.labels, Buckets: buckets})
	b.made = append(b.made, h)
	return h
}

// vLLM's bucket bounds (vllm/v1/metrics/loggers.py).

func ttftBuckets() []float64 {
	return []float64{0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0,
		20.0, 40.0, 80.0, 160.0, 640.0, 2560.0}
}

func tokenLatencyBuckets() []float64 {
	return []float64{0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0}
}

func requestLatencyBuckets() []float64 {
	return []float64{0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0, 240.0,
		480.0, 960.0, 1920.0, 7680.0}
}

func iterationBuckets() []float64 {
	return []float64{1, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384}
}

// buckets125 is vLLM's build_1_2_5_buckets: 1, 2, 5, 10, 20, 50, ... up to maxValue.
func buckets125(maxValue int) []float64 {
	var out []float64
	for scale := 1; ; scale *= 10 {
		for _, m := range []int{1, 2, 5} {
			if m*scale > maxValue {
				return out
			}
			out = append(out, float64(m*scale))
		}
	}
}

// ledgerCollector publishes the cold-start ledger at each scrape, one gauge per (what, detail):
// entries with the same pair are summed.
type ledgerCollector struct {
	desc    *prometheus.Desc
	entries func() []LedgerEntry
}

func (c *ledgerCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c *ledgerCollector) Collect(ch chan<- prometheus.Metric) {
	type key struct{ what, detail string }
	var order []key
	sums := map[key]time.Duration{}
	for _, e := range c.entries() {
		k := key{strings.ToValidUTF8(e.What, "\uFFFD"), strings.ToValidUTF8(e.Detail, "\uFFFD")} // a label must be UTF-8 (a path may not be)
		if _, ok := sums[k]; !ok {
			order = append(order, k)
		}
		sums[k] += e.Took
	}
	for _, k := range order {
		m, err := prometheus.NewConstMetric(c.desc, prometheus.GaugeValue, sums[k].Seconds(), k.what, k.detail)
		if err != nil {
			m = prometheus.NewInvalidMetric(c.desc, errors.Join(errors.New("cold-start ledger"), err))
		}
		ch <- m
	}
}
