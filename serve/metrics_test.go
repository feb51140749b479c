package serve

import (
	"bytes"
	"context"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"runtime"
	"slices"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"rosetop/remote"
	"rosetop/sched"
)

// scrape reads /metrics with Prometheus' own text parser; it returns the page too.
func (h *harness) scrape() (map[string]*dto.MetricFamily, []byte) {
	h.t.Helper()
	resp := h.do(context.Background(), http.MethodGet, "/metrics", nil)
	defer resp.Body.Close()
	page, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		h.t.Fatalf("/metrics: %d, %v", resp.StatusCode, err)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(bytes.NewReader(page))
	if err != nil {
		h.t.Fatalf("/metrics does not parse: %v", err)
	}
	return fams, page
}

// TestMetrics: after a mix of requests the counters and histogram counts equal what the requests
// did (from the scheduler's records), the gauges are back to idle, the labels and bucket bounds
// are vLLM's, and the cold-start ledger is published (a label not UTF-8 made valid); under both
// naming schemes.
func TestMetrics(t *testing.T) {
	ledger := func() []LedgerEntry {
		// A model's path need not be UTF-8; a label must be.
		return []LedgerEntry{{"model load", "m/t\xffny", 1500 * time.Millisecond}, {"graph capture", "batch 1", 10 * time.Millisecond},
			{"graph capture", "batch 1", 5 * time.Millisecond}}
	}
	for _, names := range []MetricNames{RosetopNames, VLLMNames} {
		t.Run(string(names), func(t *testing.T) {
			m, err := NewMetrics(MetricsOptions{Names: names, Model: "tiny-gpt2", MaxModelLen: 256, Ledger: ledger})
			if err != nil {
				t.Fatal(err)
			}
			h := newHarness(t, engineOpts{metrics: m}, Options{Metrics: m})
			name := func(base string) string {
				if names == VLLMNames {
					return "vllm:" + base
				}
				return "rosetop_" + base
			}
			for i, n := range []int{5, 6, 7} {
				h.post("/v1/completions", map[string]any{"prompt": []int{100 + i, 200}, "max_tokens": n, "ignore_eos": true}, nil)
			}
			for _, n := range []int{3, 4} {
				h.stream("/v1/chat/completions", map[string]any{"messages": []map[string]string{{"role": "user", "content": "Hi"}},
					"max_tokens": n, "ignore_eos": true})
			}
			// A stop string ends one request early: stopped in the scheduler ("stop", never
			// "abort").
			var r gotReply
			h.post("/v1/completions", map[string]any{"prompt": "Hi", "max_tokens": 6, "temperature": 0}, &r)
			h.post("/v1/completions", map[string]any{"prompt": "Hi", "max_tokens": 6, "temperature": 0, "stop": r.text()[:3]}, nil)
			_, recs := h.te.waitIdle()
			var prompt, gen, gaps float64
			reasons := map[string]float64{}
			for _, r := range recs {
				reasons[finishedReason(r.Reason)]++
				prompt += float64(r.PromptTokens)
				gen += float64(len(r.Output))
				gaps += float64(len(r.Output) - 1)
			}
			n := float64(len(recs))
			_, nsteps := h.te.counts()
			steps := float64(nsteps)
			fams, page := h.scrape()
			value := func(base string) float64 {
				t.Helper()
				f := fams[name(base)]
				if f == nil || len(f.Metric) != 1 {
					t.Fatalf("%s: %v", name(base), f)
				}
				mt := f.Metric[0]
				labels := map[string]string{}
				for _, l := range mt.Label {
					labels[l.GetName()] = l.GetValue()
				}
				if labels["model_name"] != "tiny-gpt2" || labels["engine"] != "0" {
					t.Fatalf("%s: labels %v", name(base), labels)
				}
				switch {
				case mt.Counter != nil:
					return mt.Counter.GetValue()
				case mt.Gauge != nil:
					return mt.Gauge.GetValue()
				}
				return float64(mt.Histogram.GetSampleCount())
			}
			cases := []struct {
				base string
				want float64
			}{
				{"generation_tokens_total", gen},
				{"prompt_tokens_total", prompt},
				{"num_preemptions_total", 0},
				{"num_requests_running", 0},
				{"num_requests_waiting", 0},
				{"kv_cache_usage_perc", 0},
				{"iteration_tokens_total", steps},
				{"time_to_first_token_seconds", n},
				{"inter_token_latency_seconds", gaps},
				{"e2e_request_latency_seconds", n},
				{"request_queue_time_seconds", n},
				{"request_prefill_time_seconds", n},
				{"request_decode_time_seconds", n},
				{"request_inference_time_seconds", n},
				{"request_time_per_output_token_seconds", n},
				{"request_prompt_tokens", n},
				{"request_generation_tokens", n},
			}
			for _, c := range cases {
				if got := value(c.base); got != c.want {
					t.Errorf("%s = %v, want %v", name(c.base), got, c.want)
				}
			}
			if h := fams[name("iteration_tokens_total")].Metric[0].Histogram; h.GetSampleSum() != prompt+gen {
				t.Errorf("iteration tokens sum %v, want every prompt and output token: %v", h.GetSampleSum(), prompt+gen)
			}
			if h := fams[name("request_generation_tokens")].Metric[0].Histogram; h.GetSampleSum() != gen {
				t.Errorf("generation tokens per request sum %v, want %v", h.GetSampleSum(), gen)
			}
			if reasons["length"] != n-1 || reasons["stop"] != 1 {
				t.Fatalf("records' reasons %v", reasons)
			}
			checkSuccess(t, fams[name("request_success_total")], reasons)
			checkBuckets(t, fams[name("time_to_first_token_seconds")], ttftBuckets())
			checkBuckets(t, fams[name("inter_token_latency_seconds")], tokenLatencyBuckets())
			checkBuckets(t, fams[name("e2e_request_latency_seconds")], requestLatencyBuckets())
			checkBuckets(t, fams[name("request_prompt_tokens")], []float64{1, 2, 5, 10, 20, 50, 100, 200})
			cold := fams[name("cold_start_seconds")]
			if cold == nil || len(cold.Metric) != 2 {
				t.Fatalf("cold-start gauges: %v", cold)
			}
			// rosetop's own scraper (remote) reads the page as the server it is.
			snap, err := remote.ParseSnapshot(bytes.NewReader(page), 0)
			kind := map[MetricNames]remote.ServerKind{RosetopNames: remote.KindRosetop, VLLMNames: remote.KindVLLM}[names]
			if err != nil || snap.Kind != kind || snap.GenerationTokens.V != gen || snap.PromptTokens.V != prompt ||
				snap.TTFT.Count != n || snap.ITL.Count != gaps || snap.E2E.Count != n {
				t.Fatalf("remote reads %+v (%v); want kind %v, %v generated, %v prompt, %v TTFTs, %v ITLs", snap, err, kind, gen, prompt, n, gaps)
			}
			got := map[string]float64{}
			for _, mt := range cold.Metric {
				var what, detail string
				for _, l := range mt.Label {
					switch l.GetName() {
					case "what":
						what = l.GetValue()
					case "detail":
						detail = l.GetValue()
					}
				}
				got[what+"/"+detail] = mt.Gauge.GetValue()
			}
			if math.Abs(got["graph capture/batch 1"]-0.015) > 1e-12 || got["model load/m/t\uFFFDny"] != 1.5 {
				t.Fatalf("cold-start gauges %v, want model load 1.5 and graph capture 0.015 (two entries summed)", got)
			}
		})
	}
}

func checkSuccess(t *testing.T, f *dto.MetricFamily, want map[string]float64) {
	t.Helper()
	got := map[string]float64{}
	for _, m := range f.GetMetric() {
		for _, l := range m.Label {
			if l.GetName() == "finished_reason" {
				got[l.GetValue()] = m.Counter.GetValue()
			}
		}
	}
	for _, k := range []string{"stop", "length", "abort", "error"} {
		if v, ok := got[k]; !ok || v != want[k] {
			t.Fatalf("request_success_total: %v, want %v (every reason present)", got, want)
		}
	}
}

// checkBuckets checks a histogram's bounds against vLLM's (vllm/v1/metrics/loggers.py).
func checkBuckets(t *testing.T, f *dto.MetricFamily, want []float64) {
	t.Helper()
	var got []float64
	for _, b := range f.GetMetric()[0].Histogram.Bucket {
		if !math.IsInf(b.GetUpperBound(), 1) {
			got = append(got, b.GetUpperBound())
		}
	}
	if !slices.Equal(got, want) {
		t.Fatalf("%s buckets %v, want %v", f.GetName(), got, want)
	}
}

// TestBuckets125: vLLM's build_1_2_5_buckets, e.g. [1, 2, 5, 10, 20, 50, 100] for 100.
func TestBuckets125(t *testing.T) {
	cases := []struct {
		max  int
		want []float64
	}{
		{1, []float64{1}},
		{100, []float64{1, 2, 5, 10, 20, 50, 100}},
		{1024, []float64{1, 2, 5, 10, 20, 50, 100, 200, 500, 1000}},
	}
	for _, c := range cases {
		if got := buckets125(c.max); !slices.Equal(got, c.want) {
			t.Errorf("buckets125(%d) = %v, want %v", c.max, got, c.want)
		}
	}
}

// TestMetricsOptions: bad options are one-line errors.
func TestMetricsOptions(t *testing.T) {
	for _, o := range []MetricsOptions{{Names: "prom", MaxModelLen: 8}, {MaxModelLen: 0}} {
		if _, err := NewMetrics(o); err == nil {
			t.Errorf("NewMetrics(%+v): no error", o)
		}
	}
}

// TestPromptTokensCountedAtPrefill: prompt_tokens_total grows with the step that prefills a
// prompt, before its request finishes (vLLM counts it with the first token), cached tokens
// included.
func TestPromptTokensCountedAtPrefill(t *testing.T) {
	m, err := NewMetrics(MetricsOptions{Names: "vllm", Model: "tiny-gpt2", MaxModelLen: 256})
	if err != nil {
		t.Fatal(err)
	}
	first := &sched.Times{FirstToken: 2 * time.Millisecond, Tokens: []time.Duration{2 * time.Millisecond}}
	m.ObserveStep(&sched.StepOutput{
		Snapshot: sched.Snapshot{Kind: sched.StepPrefill, PrefillTokens: 5, CachedTokens: 3},
		Events:   []sched.Event{{Kind: sched.EventTokens, ID: 1, Tokens: []int32{7}, First: first, At: 2 * time.Millisecond}},
	})
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(rec.Body)
	if err != nil {
		t.Fatal(err)
	}
	f := fams["vllm:prompt_tokens_total"]
	if f == nil || len(f.Metric) != 1 || f.Metric[0].GetCounter().GetValue() != 8 {
		t.Fatalf("vllm:prompt_tokens_total after one prefill step of 5 + 3 cached tokens: %v, want 8", f)
	}
}

// TestMetricsProcessStart: on Linux the page says when the process started
// (process_start_time_seconds, as vLLM's does), which a watcher reads to tell a restarted server
// from one whose counts only grew.
func TestMetricsProcessStart(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the process collector reads /proc")
	}
	m, err := NewMetrics(MetricsOptions{Names: RosetopNames, Model: "tiny-gpt2", MaxModelLen: 256})
	if err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, engineOpts{metrics: m}, Options{Metrics: m})
	_, page := h.scrape()
	snap, err := remote.ParseSnapshot(bytes.NewReader(page), 0)
	now := float64(time.Now().Unix())
	if err != nil || !snap.Started.Known || snap.Started.V > now+1 || snap.Started.V < now-3600 {
		t.Fatalf("process start %+v (err %v), want a Unix time before now (%.0f)", snap.Started, err, now)
	}
}
