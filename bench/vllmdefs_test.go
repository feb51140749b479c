package bench

import (
	"encoding/json"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"rosetop/sched"
)

// The expected values below are numpy's (float64): np.percentile's linear method interpolates
// with _lerp, which for a fraction t >= 0.5 computes b - (b-a)*(1-t); np.median is the mean of the
// two middle values of an even count; np.mean and np.std sum pairwise (eight running sums from
// eight values on) in the array's order.

func TestPercentileNumpyLerp(t *testing.T) {
	cases := []struct {
		x    []float64
		p    float64
		want float64
	}{
		{[]float64{0.2, 1.1}, 99, 1.091},                            // a + (b-a)*t gives 1.0910000000000002
		{[]float64{0.2, 1.1}, 95, 1.055},                            // and 1.0550000000000002
		{[]float64{0.672, 4.237}, 50, 2.4545000000000003},           // np.percentile, not np.median
		{[]float64{1, 2, 3, 4, 10}, 99, 9.76},                       // t = 0.96
		{[]float64{1, 2, 3, 4, 10}, 25, 2},                          // on a rank
		{[]float64{0.1, 0.7}, 50, 0.39999999999999997},              // b - (b-a)*0.5
		{[]float64{7}, 99, 7},                                       // one sample
		{[]float64{0.25, 0.5, 0.75}, 100, 0.75},                     // the last rank
		{[]float64{0.25, 0.5, 0.75}, 0, 0.25},                       // the first
		{[]float64{0.2, 1.1}, 49.99999999999999, 0.65},              // t < 0.5: a + (b-a)*t
		{[]float64{3.4, 23.6}, 50, 13.5},                            // a + (b-a)*0.5 gives 13.500000000000002
		{[]float64{0.672, 4.237, 4.237}, 75, 4.237},                 // equal neighbours
		{[]float64{0.672, 0.672, 0.672, 0.672}, 99, 0.672},          // all equal
		{[]float64{1.15, 1.25, 1.35, 1.45}, 95, 1.4349999999999998}, // prints 1.43, as numpy's does
	}
	for _, c := range cases {
		if got := percentile(c.x, c.p); got != c.want {
			t.Errorf("percentile(%v, %v) = %v, want numpy's %v", c.x, c.p, got, c.want)
		}
	}
}

func TestMedianIsNumpyMedian(t *testing.T) {
	cases := []struct {
		x    []float64
		want float64
	}{
		{[]float64{23.6, 42.9, 2.3, 3.4}, 13.5}, // (3.4+23.6)/2; interpolating gives 13.500000000000002
		{[]float64{0.672, 4.237}, 2.4545},       // np.percentile(x, 50) is 2.4545000000000003
		{[]float64{5, 1, 3}, 3},
	}
	for _, c := range cases {
		if got := median(c.x); got != c.want {
			t.Errorf("median(%v) = %v, want np.median's %v", c.x, got, c.want)
		}
	}
}

// vllmRun is a run of completed requests with the given TTFTs (ns), each with three tokens 7 ms
// and 11.5 ms apart, submitted 1 s into the session.
func vllmRun(ttfts []int64) *runResult {
	r := &runResult{hdr: reportHeader{Backend: "rosetop", Model: "m"}}
	for i, ns := range ttfts {
		start := time.Second
		first := start + time.Duration(ns)
		toks := []time.Duration{first, first + 7*time.Millisecond, first + 18500*time.Microsecond}
		rec := &sched.Record{Reason: sched.FinishLength, Output: make([]int32, len(toks)), PromptTokens: 5,
			Times: sched.Times{SubmitStart: start, FirstToken: first, Tokens: toks, Finished: toks[len(toks)-1]}}
		r.reqs = append(r.reqs, RequestResult{Index: i, Record: rec})
	}
	r.sum = summarize(runInfo{Label: "run 1/1"}, r.reqs)
	return r
}

// TestVLLMStatsNumpy: the vLLM result's statistics are numpy's over the seconds vLLM keeps per
// request, times 1000: np.mean, np.median, np.std, np.percentile(x, 99).
func TestVLLMStatsNumpy(t *testing.T) {
	ttfts := []int64{298337444, 46310712, 830209046, 105953188, 546153748, 486520203, 604152336, 30920624, 817036417, 69041773}
	o := vllmResult(vllmContext{detailed: true}, vllmRun(ttfts))
	got := map[string]any{}
	for _, e := range o {
		got[e.k] = e.v
	}
	want := map[string]float64{
		"mean_ttft_ms":   383.46354909999997,
		"median_ttft_ms": 392.42882349999996,
		"std_ttft_ms":    299.0714535608354,
		"p99_ttft_ms":    829.0235093900001,
	}
	for k, w := range want {
		if got[k] != w {
			t.Errorf("%s = %v, want numpy's %v", k, got[k], w)
		}
	}
}

// TestVLLMStatsFromExportedArrays: every statistic of the vLLM result recomputes, bit for bit,
// from the per-request arrays it exports, as vLLM's calculate_metrics computes them: TTFT from
// ttfts, E2EL from latencies, ITL from itls pooled in request order, TPOT per request from
// (latency - ttft) / (output_len - 1).
func TestVLLMStatsFromExportedArrays(t *testing.T) {
	r := vllmRun([]int64{298337444, 46310712, 830209046, 105953188, 546153748, 486520203, 604152336, 30920624, 817036417})
	b, err := json.Marshal(vllmResult(vllmContext{detailed: true, stats: VLLMStats{Metrics: []string{"ttft", "tpot", "itl", "e2el"}}}, r))
	if err != nil {
		t.Fatal(err)
	}
	var v struct {
		TTFTs   []float64   `json:"ttfts"`
		Lats    []float64   `json:"latencies"`
		ITLs    [][]float64 `json:"itls"`
		OutLens []int       `json:"output_lens"`
	}
	var all map[string]any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &all); err != nil {
		t.Fatal(err)
	}
	var itl, tpot []float64
	for i, g := range v.ITLs {
		itl = append(itl, g...)
		if n := v.OutLens[i]; n > 1 {
			tpot = append(tpot, (v.Lats[i]-v.TTFTs[i])/float64(n-1))
		}
	}
	for name, xs := range map[string][]float64{"ttft": v.TTFTs, "e2el": v.Lats, "itl": itl, "tpot": tpot} {
		for _, e := range vllmStats(name, xs, []float64{99}) {
			if all[e.k] != e.v {
				t.Errorf("%s = %v; recomputed from the exported arrays %v", e.k, all[e.k], e.v)
			}
		}
	}
}

// TestVLLMResultFloats: the keys vLLM writes as Python floats are JSON numbers with a fraction
// or an exponent even when whole (json.dump writes 1.0, not 1); its integers stay integers.
func TestVLLMResultFloats(t *testing.T) {
	r := vllmRun([]int64{2e9, 1e9})
	b, err := json.Marshal(vllmResult(vllmContext{cfg: Config{Arrivals: Arrivals{Schedule: "poisson", Rate: 4, MaxConcurrency: 2}}}, r))
	if err != nil {
		t.Fatal(err)
	}
	text := string(b)
	for _, want := range []string{`"request_rate":4.0,`, `"burstiness":1.0,`, `"max_concurrency":2,`, `"duration":2.0185,`, `"completed":2,`,
		`"total_input_tokens":10,`, `"max_output_tokens_per_s":3.0,`, `"max_concurrent_requests":2,`, `"rtfx":0.0,`,
		`"latencies":[2.0185,1.0185]`, `"queue_times":[0.0,0.0]`} {
		if !strings.Contains(text, want) {
			t.Errorf("vLLM result lacks %s:\n%s", want, text)
		}
	}
}

// TestVLLMResultNoRequests: a run with no request records (a dashboard window whose records were
// dropped) writes vLLM's lists empty, not null, and its statistics 0.0.
func TestVLLMResultNoRequests(t *testing.T) {
	b, err := json.Marshal(vllmResult(vllmContext{detailed: true}, &runResult{}))
	if err != nil {
		t.Fatal(err)
	}
	text := string(b)
	var want []string
	for _, key := range vllmDetailed {
		want = append(want, `"`+key+`":[]`)
	}
	for _, key := range []string{"duration", "request_throughput", "mean_ttft_ms", "p99_itl_ms", "std_tpot_ms"} {
		want = append(want, `"`+key+`":0.0`)
	}
	for _, w := range want {
		if !strings.Contains(text, w) {
			t.Errorf("no requests: lacks %s:\n%s", w, text)
		}
	}
}

// TestGoodputLikeVLLM: vLLM's calculate_metrics counts a completed request good when every target
// is >= its metric (a request at its target is good), with TPOT 0 for a one-token output; failed
// requests are never good; request_goodput is good requests over the duration. Hand-computed:
// three completed requests and one failure over 2 s.
func TestGoodputLikeVLLM(t *testing.T) {
	msd := func(x float64) time.Duration { return time.Duration(x * float64(time.Millisecond)) }
	mk := func(reason sched.FinishReason, start, first, end float64, out int) RequestResult {
		return RequestResult{Record: &sched.Record{Reason: reason, Output: make([]int32, out),
			Times: sched.Times{SubmitStart: msd(start), FirstToken: msd(first), Tokens: []time.Duration{msd(first)}, Finished: msd(end)}}}
	}
	reqs := []RequestResult{
		mk(sched.FinishLength, 0, 200, 400, 11),    // TTFT 200 (at the target), TPOT 20 (at it): good
		mk(sched.FinishLength, 100, 250, 250, 1),   // one token: TPOT counts 0; TTFT 150: good
		mk(sched.FinishEOS, 500, 700.5, 900, 3),    // TTFT 200.5: not good
		mk(sched.FinishError, 1000, 1100, 2000, 0), // failed: not good, in the duration
	}
	slos := []SLO{{"ttft", 200}, {"tpot", 20}}
	s := summarize(runInfo{Label: "run 1/1"}, reqs)
	addGoodput(&s, slos, reqs)
	if s.Wall != 2*time.Second || s.Good != 2 || s.Goodput != 1 || s.RequestThroughput != 1.5 || s.Attainment != 50 {
		t.Errorf("wall %v, good %d, goodput %v, throughput %v, attainment %v; want 2s, 2, 1, 1.5, 50", s.Wall, s.Good, s.Goodput, s.RequestThroughput, s.Attainment)
	}
	if s.TPOT.N != 2 || s.TTFT.N != 3 { // the one-token request is left out of TPOT, the failure out of both
		t.Errorf("TPOT over %d requests, TTFT over %d; want 2 and 3", s.TPOT.N, s.TTFT.N)
	}
}

// TestVLLMStatsChosen: the statistics follow vllm bench serve's --percentile-metrics and
// --metric-percentiles: by default ttft, tpot and itl with p99 only; chosen ones in vLLM's order
// whatever the order given, a key per percentile named as Python's str() names it (p50, p99.9,
// p0.5), each numpy's linear percentile; the client queue's two only under --max-concurrency,
// the second only at a request rate, over the completed requests.
func TestVLLMStatsChosen(t *testing.T) {
	ttfts := []int64{298337444, 46310712, 830209046, 105953188, 546153748, 486520203, 604152336, 30920624, 817036417, 69041773}
	keys := func(c vllmContext) (names []string, vals map[string]any) {
		vals = map[string]any{}
		for _, e := range vllmResult(c, vllmRun(ttfts)) {
			if strings.HasSuffix(e.k, "_ms") && e.k != "goodput_targets_ms" {
				names = append(names, e.k)
				vals[e.k] = e.v
			}
		}
		return names, vals
	}
	names, _ := keys(vllmContext{})
	want := []string{"mean_ttft_ms", "median_ttft_ms", "std_ttft_ms", "p99_ttft_ms", "mean_tpot_ms", "median_tpot_ms", "std_tpot_ms", "p99_tpot_ms",
		"mean_itl_ms", "median_itl_ms", "std_itl_ms", "p99_itl_ms"}
	if strings.Join(names, " ") != strings.Join(want, " ") {
		t.Errorf("default keys %q, want vLLM's %q", names, want)
	}

	stats := VLLMStats{Metrics: []string{"e2el_including_client_queue", "ttft", "client_queue_time"}, Percentiles: []float64{50, 99.9, 0.5}}
	names, vals := keys(vllmContext{stats: stats})
	want = []string{"mean_ttft_ms", "median_ttft_ms", "std_ttft_ms", "p50_ttft_ms", "p99.9_ttft_ms", "p0.5_ttft_ms"}
	if strings.Join(names, " ") != strings.Join(want, " ") {
		t.Errorf("without --max-concurrency: keys %q, want %q (no client queue)", names, want)
	}
	// numpy: np.percentile(ttfts_s, 99.9) * 1000 over the ten TTFTs above.
	if got, w := vals["p99.9_ttft_ms"].(float64), 830.090492339; math.Abs(got-w) > 1e-9 {
		t.Errorf("p99.9_ttft_ms = %v, want %v", got, w)
	}
	capped := vllmContext{stats: stats, cfg: Config{Arrivals: Arrivals{Schedule: "poisson", Rate: 4, MaxConcurrency: 2}}}
	names, vals = keys(capped)
	want = append(want, "mean_client_queue_time_ms", "median_client_queue_time_ms", "std_client_queue_time_ms", "p50_client_queue_time_ms",
		"p99.9_client_queue_time_ms", "p0.5_client_queue_time_ms", "mean_e2el_including_client_queue_ms", "median_e2el_including_client_queue_ms",
		"std_e2el_including_client_queue_ms", "p50_e2el_including_client_queue_ms", "p99.9_e2el_including_client_queue_ms", "p0.5_e2el_including_client_queue_ms")
	if strings.Join(names, " ") != strings.Join(want, " ") {
		t.Errorf("with --max-concurrency and a rate: keys %q, want %q", names, want)
	}
	// No request waited for a slot (every due time is its submit): the latencies with the queue
	// are the latencies, 18.5 ms after each TTFT.
	if vals["mean_client_queue_time_ms"] != 0.0 || math.Abs(vals["p50_e2el_including_client_queue_ms"].(float64)-(392.42882349999996+18.5)) > 1e-9 {
		t.Errorf("client queue mean %v, p50 with it %v", vals["mean_client_queue_time_ms"], vals["p50_e2el_including_client_queue_ms"])
	}
	burst := capped
	burst.cfg.Arrivals = Arrivals{MaxConcurrency: 2}
	if names, _ = keys(burst); slices.Contains(names, "mean_e2el_including_client_queue_ms") || !slices.Contains(names, "mean_client_queue_time_ms") {
		t.Errorf("a burst under --max-concurrency: keys %q, want the client queue's time without the latency with it", names)
	}
}

// TestVLLMStatsPercentileInput: a percentile given twice (99 and 99.0 too) makes one key, at its
// first place, as in vLLM's result dict; one outside [0, 100] (numpy refuses it) is an error of
// the vLLM export, not a panic.
func TestVLLMStatsPercentileInput(t *testing.T) {
	var names []string
	c := vllmContext{stats: VLLMStats{Metrics: []string{"ttft"}, Percentiles: []float64{99, 50, 99.0, 50}}}
	for _, e := range vllmResult(c, vllmRun([]int64{1e6, 2e6, 3e6})) {
		if strings.HasPrefix(e.k, "p") && strings.HasSuffix(e.k, "_ms") {
			names = append(names, e.k)
		}
	}
	if strings.Join(names, " ") != "p99_ttft_ms p50_ttft_ms" {
		t.Errorf("keys %q, want p99_ttft_ms p50_ttft_ms", names)
	}
	for _, p := range []float64{100.5, -1, math.NaN(), math.Inf(1)} {
		c.stats.Percentiles = []float64{50, p}
		var b strings.Builder
		if err := writeVLLM(&b, c, []*runResult{vllmRun([]int64{1e6, 2e6})}); err == nil || !strings.Contains(err.Error(), "not from 0 to 100") || b.Len() != 0 {
			t.Errorf("percentile %v: %v, wrote %q; want an error and nothing written", p, err, b.String())
		}
	}
}
