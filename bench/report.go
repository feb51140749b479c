package bench

import (
	"fmt"
	"io"
	"strings"
)

// reportHeader is the configuration part of a report block: what the run ran on.
type reportHeader struct {
	Model           string  `json:"model"`
	Device          string  `json:"device"`        // "cpu" or "cuda", as the seeds print it
	DeviceDetail    string  `json:"device_detail"` // the backend's own description
	Pretok          bool    `json:"pretok"`
	TokenizeWorkers int     `json:"tokenize_workers"`
	StreamInterval  int     `json:"stream_interval"`
	Paged           bool    `json:"paged_attn"`
	CUDAGraph       bool    `json:"cuda_graph"`
	NVTX            bool    `json:"nvtx"`
	IntervalMs      float64 `json:"submit_interval_ms"` // the mean gap for poisson
	Schedule        string  `json:"submit_schedule"`    // relative | absolute | poisson | gamma | trace
	Backend         string  `json:"backend"`            // "rosetop", or a remote server's (ServerInfo.Backend)
}

// lagPrinted reports whether the schedule has targets to lag behind (seed 002: absolute with
// interval > 0; rosetop adds rates and traces, whose arrivals are absolute targets too).
func (h reportHeader) lagPrinted() bool {
	return h.IntervalMs > 0 && h.Schedule != "relative" && h.Schedule != "external"
}

func pyBool(b bool) string {
	if b {
		return "True"
	}
	return "False"
}

// distLine formats "NAME p50/p95/p99: a/b/c UNIT" at the seeds' two decimals; "n/a" without samples.
func distLine(name string, d Dist, unit string) string {
	if d.N == 0 {
		return fmt.Sprintf("%s p50/p95/p99: n/a", name)
	}
	return fmt.Sprintf("%s p50/p95/p99: %.2f/%.2f/%.2f %s", name, d.P50, d.P95, d.P99, unit)
}

// reportLines is one run's "=== streaming benchmark ===" block, line for line as seed 003 prints
// it (the latest and fullest form), plus rosetop-only lines at the end when they are nonzero.
func reportLines(h reportHeader, s Summary) []string {
	lines := []string{
		"=== streaming benchmark ===",
		"Model: " + h.Model,
		"Device: " + h.Device,
		"Pretok: " + pyBool(h.Pretok),
		fmt.Sprintf("Tokenize workers: %d", h.TokenizeWorkers),
		fmt.Sprintf("Stream interval: %d", h.StreamInterval),
		"Paged attention: " + pyBool(h.Paged),
		"CUDA Graph: " + pyBool(h.CUDAGraph),
		"NVTX: " + pyBool(h.NVTX),
		fmt.Sprintf("Requests: %d", s.Requests),
		fmt.Sprintf("Prompt tokens (total): %d", s.PromptTokens),
		fmt.Sprintf("Completion tokens (total): %d", s.CompletionTokens),
		fmt.Sprintf("Submit wall: %.6f s", s.SubmitWall.Seconds()),
		fmt.Sprintf("Submit interval/schedule: %.3f ms / %s", h.IntervalMs, h.Schedule),
	}
	if h.lagPrinted() {
		lines = append(lines, distLine("Submit lag", s.SubmitLag, "ms"))
	}
	lines = append(lines,
		distLine("add_request latency", s.AddRequest, "ms"),
		distLine("Tokenize", s.Tokenize, "ms"),
		distLine("Queue wait (post-tok)", s.QueueWait, "ms"),
		distLine("Prefill->first token", s.PrefillFirst, "ms"),
		distLine("TTFT", s.TTFT, "ms"),
		distLine("TPOT", s.TPOT, "ms/token"),
		distLine("ITL", s.ITL, "ms"),
		distLine("Latency", s.Latency, "ms"),
		fmt.Sprintf("Throughput (completion,total): %.2f, %.2f tokens/s", s.Throughput, s.TotalThroughput),
	)
	if s.Preemptions > 0 {
		lines = append(lines, fmt.Sprintf("Preemptions: %d", s.Preemptions))
	}
	if s.Failed > 0 {
		lines = append(lines, fmt.Sprintf("Failed: %d", s.Failed))
	}
	if s.Partial {
		lines = append(lines, fmt.Sprintf("Interrupted: partial run, %d requests cancelled", s.Cancelled))
	}
	return append(lines, goodputLines(s)...)
}

// writeReport writes one run's block.
func writeReport(w io.Writer, h reportHeader, s Summary) error {
	_, err := io.WriteString(w, strings.Join(reportLines(h, s), "\n")+"\n")
	return err
}

// runHeaderLine is the line before a run's block: "=== warmup i/N ===", "=== run i/M ===".
func runHeaderLine(label string) string { return "=== " + label + " ===" }
