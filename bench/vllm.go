package bench

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"sort"
	"strconv"
	"time"
)

// ToolInfo is what built the results, recorded in the JSON exports.
type ToolInfo struct {
	Version string // the module version ("(devel)" for a source build)
	Commit  string // the VCS revision, "-dirty" when modified; "" when unknown
}

// vllmContext is what a vLLM result needs beside a run: the settings and where it ran.
type vllmContext struct {
	cfg      Config
	tool     ToolInfo
	epoch    time.Time // wall time of the session clock's zero
	detailed bool
	stats    VLLMStats
}

// VLLMStats are the statistics a vLLM result holds, as `vllm bench serve --percentile-metrics`
// and `--metric-percentiles` choose them.
type VLLMStats struct {
	// Metrics are the metrics with statistics, among VLLMMetricNames (nil: vLLM's default,
	// ttft, tpot and itl); the result writes them in VLLMMetricNames' order.
	Metrics []string
	// Percentiles, each in [0, 100] (else writing the result fails), become p{P}_{metric}_ms
	// keys in this order, a repeat once (nil: 99).
	Percentiles []float64
}

// VLLMMetricNames are the metrics vLLM's --percentile-metrics takes, in the order its result
// writes them. The client-side queue's two exist only with --max-concurrency (the second also
// needs a request rate), as in vLLM.
func VLLMMetricNames() []string {
	return []string{"ttft", "tpot", "itl", "e2el", "client_queue_time", "e2el_including_client_queue"}
}

func (s VLLMStats) metrics() []string {
	if s.Metrics == nil {
		return []string{"ttft", "tpot", "itl"}
	}
	return s.Metrics
}

func (s VLLMStats) percentiles() []float64 {
	if s.Percentiles == nil {
		return []float64{99}
	}
	return s.Percentiles
}

// percentileWord is how vLLM names percentile p in a key: Python's str(int(p)) when whole, else
// str(p) (repr's shortest digits; for p in [0, 100] Go's shortest 'g' form is the same text).
func percentileWord(p float64) string {
	if p == math.Trunc(p) {
		return strconv.Itoa(int(p))
	}
	return strconv.FormatFloat(p, 'g', -1, 64)
}

// kv is one key of an ordered JSON object.
type kv struct {
	k string
	v any
}

// ordered is a JSON object that keeps its keys in order, as vLLM's json.dump of a dict does.
type ordered []kv

func (o ordered) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, e := range o {
		if i > 0 {
			b.WriteByte(',')
		}
		k, _ := json.Marshal(e.k)
		v, err := pyJSON(e.v)
		if err != nil {
			return nil, err
		}
		b.Write(k)
		b.WriteByte(':')
		b.Write(v)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// pyJSON marshals v as Python's json.dump writes it where the two differ: a float64, also in a
// list or a list of lists, keeps a fraction or an exponent when whole (1.0, not 1), so that a
// reader gets the float vLLM writes and not an int; an empty list is [], not null.
func pyJSON(v any) ([]byte, error) {
	switch x := v.(type) {
	case float64:
		b, err := json.Marshal(x)
		if err == nil && !bytes.ContainsAny(b, ".eE") {
			b = append(b, ".0"...)
		}
		return b, err
	case []float64:
		return pyList(x)
	case [][]float64:
		return pyList(x)
	case []int:
		return pyList(x)
	case []string:
		return pyList(x)
	}
	return json.Marshal(v)
}

// pyList is a JSON array of xs, each as pyJSON writes it.
func pyList[T any](xs []T) ([]byte, error) {
	b := []byte{'['}
	for i, x := range xs {
		if i > 0 {
			b = append(b, ',')
		}
		e, err := pyJSON(x)
		if err != nil {
			return nil, err
		}
		b = append(b, e...)
	}
	return append(b, ']'), nil
}

// vllmStats are vLLM's statistics of samples in seconds, in ms as it writes them: numpy's mean,
// median, std (population) and each of ps (linear), times 1000; 0 for no samples (vLLM's
// `np.mean(xs or 0)`). The samples stay in request order, as numpy sums them.
func vllmStats(name string, xs, ps []float64) []kv {
	mean, med, std := 0.0, 0.0, 0.0
	var s []float64
	if n := float64(len(xs)); n > 0 {
		mean = numpySum(xs) / n
		dev := make([]float64, len(xs))
		for i, x := range xs {
			d := x - mean
			dev[i] = d * d
		}
		std = math.Sqrt(numpySum(dev) / n)
		s = append([]float64(nil), xs...)
		sort.Float64s(s)
		med = sortedMedian(s)
	}
	out := []kv{{"mean_" + name + "_ms", mean * 1000}, {"median_" + name + "_ms", med * 1000}, {"std_" + name + "_ms", std * 1000}}
	for i, p := range ps {
		if slices.Contains(ps[:i], p) { // one key, as vLLM's dict keeps one (99 and 99.0 too)
			continue
		}
		v := 0.0
		if len(s) > 0 {
			v = percentile(s, p)
		}
		out = append(out, kv{"p" + percentileWord(p) + "_" + name + "_ms", v * 1000})
	}
	return out
}

// vllmResult is one run as `vllm bench serve --save-result` writes it (vllm/benchmarks/serve.py:
// the keys of result_json and of benchmark()'s result), times of the *_ms keys in ms and of the
// per-request arrays in seconds as there; then rosetop's own keys: the tool, the host, when the
// run started, and the wall-clock epoch that start_times count from.
func vllmResult(c vllmContext, r *runResult) ordered {
	s, w := r.sum, c.cfg.Workload
	var ttft, tpot, itl, e2el, okQueues, okE2ELQueued []float64
	var inLens, outLens []int
	var ttfts, lats, starts, queues []float64
	var itls [][]float64
	var texts, errs []string
	var first time.Duration = -1
	for i := range r.reqs {
		q := &r.reqs[i]
		in, out, tt, lat, start, gaps, text, errText := 0, 0, 0.0, 0.0, 0.0, []float64{}, "", ""
		queue, _ := lagOf(q) // vLLM's client_queue_time: from the request's due time to its send
		queue /= 1000
		if rec := q.Record; rec != nil {
			in, start, text = rec.PromptTokens, rec.Times.SubmitStart.Seconds(), rec.Text
			if first < 0 || rec.Times.SubmitStart < first {
				first = rec.Times.SubmitStart
			}
			if rec.Err != nil {
				errText = rec.Err.Error()
			} else if !q.completed() {
				errText = string(rec.Reason)
			}
		} else {
			errText = "lost"
		}
		if q.completed() {
			// In seconds, and TPOT from them, as vLLM's calculate_metrics has them: its statistics
			// then recompute to the bit from the arrays written.
			t := &q.Record.Times
			out, tt, lat = len(q.Record.Output), (t.FirstToken - t.SubmitStart).Seconds(), (t.Finished - t.SubmitStart).Seconds()
			ttft, e2el = append(ttft, tt), append(e2el, lat)
			if out > 1 {
				tpot = append(tpot, (lat-tt)/float64(out-1))
			}
			for k := 1; k < len(t.Tokens); k++ {
				gaps = append(gaps, (t.Tokens[k] - t.Tokens[k-1]).Seconds())
			}
			itl = append(itl, gaps...)
			okQueues, okE2ELQueued = append(okQueues, queue), append(okE2ELQueued, lat+queue)
		}
		inLens, outLens, ttfts, lats, starts = append(inLens, in), append(outLens, out), append(ttfts, tt), append(lats, lat), append(starts, start)
		queues = append(queues, queue)
		itls, texts, errs = append(itls, gaps), append(texts, text), append(errs, errText)
	}
	dur := s.Wall.Seconds()
	per := func(x float64) float64 {
		if dur <= 0 {
			return 0
		}
		return x / dur
	}
	// vLLM's "inf" rate is a burst (every request due at once). An interval schedule is its
	// constant-gap schedule (burstiness inf) at 1/interval; a replayed trace keeps "inf", as vLLM's
	// self-timed traces keep the --request-rate default.
	var rate, burst any = "inf", 1.0
	switch a := c.cfg.Arrivals; {
	case a.Schedule == "poisson":
		rate = a.Rate
		if a.Burstiness != 0 {
			burst = a.Burstiness
		}
	case (a.Schedule == "absolute" || a.Schedule == "relative") && a.Interval > 0:
		rate, burst = 1/a.Interval.Seconds(), "inf"
	}
	var maxConc any
	if n := c.cfg.Arrivals.MaxConcurrency; n > 0 {
		maxConc = n
	}
	var goodput any
	if len(s.SLOs) > 0 {
		goodput = s.Goodput
	}
	o := ordered{
		{"date", c.epoch.Add(max(first, 0)).Format("20060102-150405")},
		{"endpoint_type", r.hdr.Backend}, {"backend", r.hdr.Backend}, {"label", nil},
		{"model_id", r.hdr.Model}, {"tokenizer_id", r.hdr.Model}, {"num_prompts", w.NumRequests},
		{"request_rate", rate}, {"burstiness", burst}, {"max_concurrency", maxConc},
	}
	if a := c.cfg.Arrivals; a.RampUp > 0 {
		o = append(o, kv{"ramp_up_s", a.RampUp.Seconds()})
	}
	o = append(o,
		kv{"duration", dur}, kv{"completed", s.Requests}, kv{"failed", s.Failed + s.Cancelled},
		kv{"total_input_tokens", s.PromptTokens}, kv{"total_output_tokens", s.CompletionTokens},
		kv{"request_throughput", per(float64(s.Requests))}, kv{"request_goodput", goodput},
		kv{"output_throughput", per(float64(s.CompletionTokens))},
		kv{"total_token_throughput", per(float64(s.PromptTokens + s.CompletionTokens))},
	)
	if c.detailed {
		o = append(o, kv{"input_lens", inLens}, kv{"output_lens", outLens}, kv{"ttfts", ttfts}, kv{"itls", itls},
			kv{"latencies", lats}, kv{"start_times", starts}, kv{"queue_times", queues}, kv{"generated_texts", texts}, kv{"errors", errs})
	} else {
		o = append(o, kv{"latencies", lats}, kv{"queue_times", queues}) // vLLM drops the other arrays without --save-detailed, not these
	}
	peakTok, peakConc := vllmPeaks(r.reqs)
	o = append(o, kv{"max_output_tokens_per_s", peakTok}, kv{"max_concurrent_requests", peakConc}, kv{"rtfx", 0.0})
	// vLLM has the client-side queue's times only under --max-concurrency, and the latency with
	// them only at a finite request rate too; a metric without its times is left out.
	capped := c.cfg.Arrivals.MaxConcurrency > 0
	samples := map[string][]float64{"ttft": ttft, "tpot": tpot, "itl": itl, "e2el": e2el}
	if capped {
		samples["client_queue_time"] = okQueues
	}
	if capped && rate != "inf" {
		samples["e2el_including_client_queue"] = okE2ELQueued
	}
	chosen := c.stats.metrics()
	for _, name := range VLLMMetricNames() {
		if xs, ok := samples[name]; ok && slices.Contains(chosen, name) {
			o = append(o, vllmStats(name, xs, c.stats.percentiles())...)
		}
	}
	host, _ := os.Hostname()
	return append(o,
		kv{"goodput_targets_ms", sloMap(s.SLOs)}, kv{"run", s.Label},
		kv{"tool", "rosetop"}, kv{"tool_version", c.tool.Version}, kv{"tool_commit", c.tool.Commit}, kv{"host", host},
		kv{"start_time", c.epoch.Add(max(first, 0)).Format(time.RFC3339Nano)},
		kv{"epoch", c.epoch.Format(time.RFC3339Nano)},
	)
}

// vllmPeaks are vLLM's peak figures over the completed requests: the most output tokens (stream
// chunks, for a server's stream) in one whole second counted from the first submit, and the most
// requests in flight at once, each over [submit start, finish).
func vllmPeaks(reqs []RequestResult) (tokensPerS float64, concurrent int) {
	type event struct {
		at    time.Duration
		delta int
	}
	var events []event
	var first time.Duration = -1
	for i := range reqs {
		if q := &reqs[i]; q.completed() {
			t := q.Record.Times
			events = append(events, event{t.SubmitStart, 1}, event{t.Finished, -1})
			if first < 0 || t.SubmitStart < first {
				first = t.SubmitStart
			}
		}
	}
	perSecond := map[int64]int{}
	for i := range reqs {
		if q := &reqs[i]; q.completed() {
			for _, at := range q.Record.Times.Tokens {
				k := int64((at - first) / time.Second)
				perSecond[k]++
				tokensPerS = max(tokensPerS, float64(perSecond[k]))
			}
		}
	}
	sort.Slice(events, func(i, j int) bool { // a finish before a start at the same instant
		return events[i].at < events[j].at || events[i].at == events[j].at && events[i].delta < events[j].delta
	})
	n := 0
	for _, e := range events {
		n += e.delta
		concurrent = max(concurrent, n)
	}
	return tokensPerS, concurrent
}

func sloMap(slos []SLO) map[string]float64 {
	if len(slos) == 0 {
		return nil
	}
	m := map[string]float64{}
	for _, o := range slos {
		m[o.Metric] = o.Ms
	}
	return m
}

// writeVLLM writes one vLLM result per measured run, a JSON object a line (as vLLM's
// --append-result appends them); one run makes a plain JSON document.
func writeVLLM(w io.Writer, c vllmContext, runs []*runResult) error {
	for _, p := range c.stats.percentiles() {
		if !(p >= 0 && p <= 100) { // numpy refuses them too ("Percentiles must be in the range [0, 100]")
			return fmt.Errorf("vLLM result: percentile %v is not from 0 to 100", p)
		}
	}
	for _, r := range runs {
		if r.sum.Warmup {
			continue
		}
		b, err := json.Marshal(vllmResult(c, r))
		if err != nil {
			return err
		}
		if _, err := w.Write(append(b, '\n')); err != nil {
			return err
		}
	}
	return nil
}
