package remote

import (
	"fmt"
	"strings"
	"testing"
)

// sglangRank is one SGLang scheduler process as its metrics label it: SchedulerMetricsMixin.
// init_metrics (python/sglang/srt/observability/scheduler_metrics_mixin.py) gives model_name,
// engine_type, tp_rank, pp_rank, moe_ep_rank, and dp_rank where the server has data parallel
// replicas (data_parallel_controller.py passes each replica's, or with --enable-dp-attention
// the one compute_dp_attention_world_info derives from the tp_rank).
type sglangRank struct {
	dp         string // "" for no dp_rank label
	tp, pp, ep int
	// gauges: this scheduler logs the queue and token usage (log_stats runs where
	// current_scheduler_metrics_enabled: attn_tp_rank 0, or every rank with
	// --enable-metrics-for-all-schedulers).
	gauges           bool
	running, waiting int
	usage            float64
	// queue is its queue_time_seconds histogram's cumulative counts over sglangQueueBounds:
	// every scheduler of a replica observes each of the replica's requests (a Req carries its
	// scheduler's collector wherever --enable-metrics is on).
	queue    []float64
	queueSum float64
}

// sglangQueueBounds are the first of SchedulerMetricsCollector.queue_time's buckets, then +Inf.
var sglangQueueBounds = []string{"0.0", "0.1", "0.2", "0.5", "+Inf"}

// labels are r's labels as prometheus_client's multiprocess collector writes them (SGLang serves
// /metrics from a registry of that collector alone): sorted by name.
func (r sglangRank) labels() string {
	l := fmt.Sprintf(`engine_type="unified",model_name="Qwen/Qwen2.5-7B-Instruct",moe_ep_rank="%d",pp_rank="%d",tp_rank="%d"`, r.ep, r.pp, r.tp)
	if r.dp != "" {
		l = `dp_rank="` + r.dp + `",` + l
	}
	return l
}

// sglangPage is the page of an SGLang server of these scheduler processes, as the multiprocess
// collector writes it: gauges as their most recent value per label set, a histogram's _sum
// samples then each label set's cumulative buckets (le last) and _count; no _created samples.
// The tokenizer's TTFT histogram and token counters carry no rank: one series each.
func sglangPage(ranks []sglangRank) string {
	var b strings.Builder
	for _, g := range []struct {
		name, help string
		of         func(sglangRank) float64
	}{
		{"sglang:num_running_reqs", "The number of running requests.", func(r sglangRank) float64 { return float64(r.running) }},
		{"sglang:num_queue_reqs", "The number of requests in the waiting queue.", func(r sglangRank) float64 { return float64(r.waiting) }},
		{"sglang:token_usage", "The token usage.", func(r sglangRank) float64 { return r.usage }},
	} {
		fmt.Fprintf(&b, "# HELP %s %s\n# TYPE %s gauge\n", g.name, g.help, g.name)
		for _, r := range ranks {
			if r.gauges {
				fmt.Fprintf(&b, "%s{%s} %s\n", g.name, r.labels(), pyFloat(g.of(r)))
			}
		}
	}
	const q = "sglang:queue_time_seconds"
	fmt.Fprintf(&b, "# HELP %s Histogram of queueing time in seconds.\n# TYPE %s histogram\n", q, q)
	for _, r := range ranks {
		fmt.Fprintf(&b, "%s_sum{%s} %s\n", q, r.labels(), pyFloat(r.queueSum))
	}
	for _, r := range ranks {
		for i, le := range sglangQueueBounds {
			fmt.Fprintf(&b, "%s_bucket{%s,le=\"%s\"} %s\n", q, r.labels(), le, pyFloat(r.queue[i]))
		}
		fmt.Fprintf(&b, "%s_count{%s} %s\n", q, r.labels(), pyFloat(r.queue[len(r.queue)-1]))
	}
	const tok = `engine_type="unified",model_name="Qwen/Qwen2.5-7B-Instruct"`
	fmt.Fprintf(&b, "# HELP sglang:generation_tokens_total Number of generation tokens processed.\n"+
		"# TYPE sglang:generation_tokens_total counter\nsglang:generation_tokens_total{%s} 3000.0\n", tok)
	const ttft = "sglang:time_to_first_token_seconds"
	fmt.Fprintf(&b, "# HELP %s Histogram of time to first token in seconds.\n# TYPE %s histogram\n%s_sum{%s} 2.7\n", ttft, ttft, ttft, tok)
	for i, le := range []string{"0.1", "0.2", "0.4", "+Inf"} {
		fmt.Fprintf(&b, "%s_bucket{%s,le=\"%s\"} %s\n", ttft, tok, le, pyFloat([]float64{1, 5, 9, 11}[i]))
	}
	fmt.Fprintf(&b, "%s_count{%s} 11.0\n", ttft, tok)
	return b.String()
}

// pyFloat writes v as prometheus_client's floatToGoString does for these values: 12.0, 0.42.
func pyFloat(v float64) string {
	s := fmt.Sprintf("%g", v)
	if !strings.ContainsAny(s, ".e") {
		s += ".0"
	}
	return s
}

// TestSnapshotSGLangRanks: the series of one SGLang metric that differ only by tp_rank, pp_rank
// or moe_ep_rank are processes of one replica, which count the same requests: one is read. Those
// of different dp_rank are replicas serving different requests: they add up, and the KV use is
// their mean. Pages as SGLang's scheduler processes write them under each launch option.
func TestSnapshotSGLangRanks(t *testing.T) {
	q := func(n, sum float64) ([]float64, float64) { return []float64{n / 2, n, n, n, n}, sum }
	ten, tenSum := q(10, 1.2)
	six, sixSum := q(6, 0.7)
	tests := []struct {
		name             string
		ranks            []sglangRank
		running, waiting float64
		kv               float64
		queue            float64
	}{
		{
			name: "--tp 4: the gauges of tp_rank 0, the queue time of every rank",
			ranks: []sglangRank{
				{tp: 0, gauges: true, running: 12, waiting: 3, usage: 0.42, queue: ten, queueSum: tenSum},
				{tp: 1, queue: ten, queueSum: tenSum + 0.01},
				{tp: 2, queue: ten, queueSum: tenSum + 0.02},
				{tp: 3, queue: ten, queueSum: tenSum - 0.01},
			},
			running: 12, waiting: 3, kv: 0.42, queue: 10,
		},
		{
			name: "--tp 2 --enable-metrics-for-all-schedulers",
			ranks: []sglangRank{
				{tp: 0, gauges: true, running: 12, waiting: 3, usage: 0.42, queue: ten, queueSum: tenSum},
				{tp: 1, gauges: true, running: 12, waiting: 3, usage: 0.42, queue: ten, queueSum: tenSum},
			},
			running: 12, waiting: 3, kv: 0.42, queue: 10,
		},
		{
			name: "--dp 2 --tp 2: two replicas, each of tp_rank 0 and 1",
			ranks: []sglangRank{
				{dp: "0", tp: 0, gauges: true, running: 5, waiting: 1, usage: 0.5, queue: ten, queueSum: tenSum},
				{dp: "0", tp: 1, queue: ten, queueSum: tenSum},
				{dp: "1", tp: 0, gauges: true, running: 7, waiting: 2, usage: 0.3, queue: six, queueSum: sixSum},
				{dp: "1", tp: 1, queue: six, queueSum: sixSum},
			},
			running: 12, waiting: 3, kv: 0.4, queue: 16,
		},
		{
			name: "--tp 4 --dp 2 --ep 4 --enable-dp-attention: dp_rank from the global tp_rank",
			ranks: []sglangRank{
				{dp: "0", tp: 0, ep: 0, gauges: true, running: 5, waiting: 1, usage: 0.5, queue: ten, queueSum: tenSum},
				{dp: "0", tp: 1, ep: 1, queue: ten, queueSum: tenSum},
				{dp: "1", tp: 2, ep: 2, gauges: true, running: 7, waiting: 2, usage: 0.3, queue: six, queueSum: sixSum},
				{dp: "1", tp: 3, ep: 3, queue: six, queueSum: sixSum},
			},
			running: 12, waiting: 3, kv: 0.4, queue: 16,
		},
		{
			name: "--tp 2 --pp 2: each stage's tp_rank 0 logs the gauges",
			ranks: []sglangRank{
				{pp: 0, tp: 0, gauges: true, running: 12, waiting: 3, usage: 0.42, queue: ten, queueSum: tenSum},
				{pp: 0, tp: 1, queue: ten, queueSum: tenSum},
				{pp: 1, tp: 0, gauges: true, running: 12, waiting: 3, usage: 0.42, queue: ten, queueSum: tenSum},
				{pp: 1, tp: 1, queue: ten, queueSum: tenSum},
			},
			running: 12, waiting: 3, kv: 0.42, queue: 10,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, err := ParseSnapshot(strings.NewReader(sglangPage(tc.ranks)), 0)
			if err != nil {
				t.Fatal(err)
			}
			if s.Kind != KindSGLang {
				t.Fatalf("kind %v", s.Kind)
			}
			checkValues(t, s, map[string]Value{"running": {tc.running, true}, "waiting": {tc.waiting, true}, "kv": {tc.kv, true}, "generation": {3000, true}})
			if !s.Queue.Known || s.Queue.Count != tc.queue || s.Queue.Buckets[len(s.Queue.Buckets)-1].Count != tc.queue {
				t.Errorf("queue time: %v observations, want %v", s.Queue.Count, tc.queue)
			}
			if s.TTFT.Count != 11 {
				t.Errorf("TTFT: %v observations, want the tokenizer's 11", s.TTFT.Count)
			}
		})
	}
}
