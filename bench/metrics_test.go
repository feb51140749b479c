package bench

import (
	"math"
	"testing"
	"time"

	"rosetop/sched"
)

func recordAt(start time.Duration) *sched.Record {
	return &sched.Record{Reason: sched.FinishLength, Output: []int32{1},
		Times: sched.Times{SubmitStart: start, SubmitEnd: start, Tokenized: start, Admitted: start, FirstToken: start, Tokens: []time.Duration{start}, Finished: start}}
}

func TestPercentileMatchesNumpyLinear(t *testing.T) {
	// Values from numpy.percentile(x, p) with the default method="linear".
	x := []float64{1, 2, 3, 4, 10}
	cases := []struct{ p, want float64 }{{0, 1}, {50, 3}, {95, 8.8}, {99, 9.76}, {100, 10}, {25, 2}}
	for _, c := range cases {
		if got := percentile(x, c.p); math.Abs(got-c.want) > 1e-12 {
			t.Errorf("percentile(%v, %v) = %v, want %v", x, c.p, got, c.want)
		}
	}
	if got := percentile([]float64{7}, 99); got != 7 {
		t.Errorf("one sample: %v", got)
	}
	if d := makeDist(nil); d.N != 0 || !math.IsNaN(d.P99) {
		t.Errorf("empty dist = %+v", d)
	}
}

func TestMetricsDefinitions(t *testing.T) {
	msd := func(x float64) time.Duration { return time.Duration(x * 1e6) }
	rec := &sched.Record{Reason: sched.FinishLength, Output: []int32{5, 6, 7}, PromptTokens: 4, Times: sched.Times{
		SubmitStart: msd(10), SubmitEnd: msd(10.5), Tokenized: msd(11), Admitted: msd(14), FirstToken: msd(20),
		Tokens: []time.Duration{msd(20), msd(23), msd(30)}, Finished: msd(30),
	}}
	m := metricsOf(&RequestResult{Record: rec, HasTarget: true, Target: msd(9.75)})
	want := requestMetrics{AddRequest: 0.5, Tokenize: 0.5, QueueWait: 3, PrefillFirst: 6, TTFT: 10, Latency: 20,
		TPOT: 5, HasTPOT: true, ITL: []float64{3, 7}, Lag: 0.25, HasLag: true}
	if m.AddRequest != want.AddRequest || m.Tokenize != want.Tokenize || m.QueueWait != want.QueueWait ||
		m.PrefillFirst != want.PrefillFirst || m.TTFT != want.TTFT || m.Latency != want.Latency ||
		m.TPOT != want.TPOT || !m.HasTPOT || len(m.ITL) != 2 || m.ITL[0] != 3 || m.ITL[1] != 7 || m.Lag != 0.25 {
		t.Errorf("metrics = %+v\nwant     %+v", m, want)
	}
	one := &sched.Record{Reason: sched.FinishLength, Output: []int32{5}, Times: rec.Times}
	if m := metricsOf(&RequestResult{Record: one}); m.HasTPOT {
		t.Error("a request with one output token must be left out of TPOT")
	}
}

func TestSummarizeThroughputAndCounts(t *testing.T) {
	msd := func(x float64) time.Duration { return time.Duration(x * 1e6) }
	mk := func(start, finish float64, out int) *sched.Record {
		r := recordAt(msd(start))
		r.Output, r.PromptTokens, r.Times.Finished = make([]int32, out), 3, msd(finish)
		return r
	}
	cancelled := &sched.Record{Reason: sched.FinishCancelled, Output: []int32{1}}
	reqs := []RequestResult{{Record: mk(100, 600, 10)}, {Record: mk(200, 1100, 20)}, {Record: cancelled}, {Record: nil}}
	s := summarize(runInfo{Label: "run 1/1", Partial: true}, reqs)
	if s.Requests != 2 || s.Cancelled != 2 || s.CompletionTokens != 30 || s.PromptTokens != 6 || !s.Partial {
		t.Errorf("counts = %+v", s)
	}
	// 30 completion tokens over 1100 - 100 ms; 36 tokens in total.
	if s.Wall != time.Second || s.Throughput != 30 || s.TotalThroughput != 36 {
		t.Errorf("wall %v throughput %v total %v, want 1s 30 36", s.Wall, s.Throughput, s.TotalThroughput)
	}
	// A failed request (a timeout) spans the run's wall clock as vLLM's duration does: 100 ms to
	// its failure at 1600; a run of failures alone has one too.
	failed := mk(150, 1600, 0)
	failed.Reason = sched.FinishError
	s = summarize(runInfo{Label: "run 1/1"}, append(reqs[:2:2], RequestResult{Record: failed}))
	if s.Requests != 2 || s.Failed != 1 || s.Wall != 1500*time.Millisecond || s.Throughput != 20 {
		t.Errorf("with a failure: %d requests, %d failed, wall %v, %v tokens/s; want 2, 1, 1.5s, 20", s.Requests, s.Failed, s.Wall, s.Throughput)
	}
	s = summarize(runInfo{Label: "run 1/1"}, []RequestResult{{Record: failed}})
	if s.Wall != 1450*time.Millisecond || s.Throughput != 0 {
		t.Errorf("failures alone: wall %v, %v tokens/s; want 1.45s, 0", s.Wall, s.Throughput)
	}
}
