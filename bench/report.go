package bench

import (
	"fmt"
	"io"
	"sort"
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
	IntervalMs      float64 `json:"submit_interval_ms"`        // the mean gap for poisson
	Schedule        string  `json:"submit_schedule"`           // relative | absolute | poisson | gamma | trace
	Backend         string  `json:"backend"`                   // "rosetop", or a remote server's (ServerInfo.Backend)
	MaxConcurrency  int     `json:"max_concurrency,omitempty"` // --max-concurrency; 0: no limit
	// A server outside this process (ServerInfo.Remote): its API root, the API spoken, and the
	// server's kind as its /metrics tell it. Empty in-process.
	Endpoint string `json:"endpoint,omitempty"`
	API      string `json:"api,omitempty"`
	Server   string `json:"server,omitempty"`
}

// lagPrinted reports whether the schedule has targets to lag behind (seed 002: absolute with
// interval > 0; rosetop adds rates and traces, whose arrivals are absolute targets too, and any
// schedule under --max-concurrency, whose requests lag by their wait for a slot).
func (h reportHeader) lagPrinted() bool {
	if h.Schedule == "external" {
		return false
	}
	return (h.IntervalMs > 0 && h.Schedule != "relative") || h.MaxConcurrency > 0
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
// Against a remote server the engine's lines give way to the endpoint's, and the inter-token
// latency is labelled as what a client sees: the gap between stream chunks, beside the gap
// between tokens.
func reportLines(h reportHeader, s Summary) []string {
	lines := []string{"=== streaming benchmark ===", "Model: " + h.Model, "Device: " + h.Device}
	if h.Endpoint != "" {
		lines = append(lines,
			fmt.Sprintf("Endpoint: %s (%s API)", h.Endpoint, h.API),
			"Server: "+h.Server,
			"Pretok: "+pyBool(h.Pretok),
		)
	} else {
		lines = append(lines,
			"Pretok: "+pyBool(h.Pretok),
			fmt.Sprintf("Tokenize workers: %d", h.TokenizeWorkers),
			fmt.Sprintf("Stream interval: %d", h.StreamInterval),
			"Paged attention: "+pyBool(h.Paged),
			"CUDA Graph: "+pyBool(h.CUDAGraph),
			"NVTX: "+pyBool(h.NVTX),
		)
	}
	lines = append(lines,
		fmt.Sprintf("Requests: %d", s.Requests),
		fmt.Sprintf("Prompt tokens (total): %d", s.PromptTokens),
		fmt.Sprintf("Completion tokens (total): %d", s.CompletionTokens),
		fmt.Sprintf("Submit wall: %.6f s", s.SubmitWall.Seconds()),
		fmt.Sprintf("Submit interval/schedule: %.3f ms / %s", h.IntervalMs, h.Schedule),
	)
	if h.MaxConcurrency > 0 {
		lines = append(lines, fmt.Sprintf("Max concurrency: %d", h.MaxConcurrency))
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
	)
	if h.Endpoint != "" {
		lines = append(lines, distLine("ITL (chunk gap)", s.ITL, "ms"), distLine("Token gap", s.TokenGap, "ms"))
	} else {
		lines = append(lines, distLine("ITL", s.ITL, "ms"))
	}
	lines = append(lines,
		distLine("Latency", s.Latency, "ms"),
		fmt.Sprintf("Throughput (completion,total): %.2f, %.2f tokens/s", s.Throughput, s.TotalThroughput),
	)
	if len(s.TokenSources) > 0 {
		lines = append(lines, "Output tokens from: "+countsText(s.TokenSources))
	}
	if s.Preemptions > 0 {
		lines = append(lines, fmt.Sprintf("Preemptions: %d", s.Preemptions))
	}
	if s.Failed > 0 {
		lines = append(lines, failedLine(s))
	}
	if s.Partial {
		lines = append(lines, fmt.Sprintf("Interrupted: partial run, %d requests cancelled%s", s.Cancelled, notSentText(s)))
	}
	return append(lines, goodputLines(s)...)
}

// notSentText is ", N not sent" for an interrupted run that had requests left to submit.
func notSentText(s Summary) string {
	if s.NotSent == 0 {
		return ""
	}
	return fmt.Sprintf(", %d not sent", s.NotSent)
}

// failedLine counts the run's failed requests by cause and says what the first one's error
// was: "Failed: 2 (http 404: 2); first: http 404: The model `x` does not exist.".
func failedLine(s Summary) string {
	line := fmt.Sprintf("Failed: %d (%s)", s.Failed, countsText(s.Failures))
	if s.FirstFailure != "" {
		line += "; first: " + s.FirstFailure
	}
	return line
}

// countsText lists counts by name, most first, ties by name: "http 429: 2, timeout (stall): 1".
func countsText(m map[string]int) string {
	names := make([]string, 0, len(m))
	for k := range m {
		names = append(names, k)
	}
	sort.Slice(names, func(i, j int) bool {
		if m[names[i]] != m[names[j]] {
			return m[names[i]] > m[names[j]]
		}
		return names[i] < names[j]
	})
	parts := make([]string, len(names))
	for i, k := range names {
		parts[i] = fmt.Sprintf("%s: %d", k, m[k])
	}
	return strings.Join(parts, ", ")
}

// writeReport writes one run's block.
func writeReport(w io.Writer, h reportHeader, s Summary) error {
	_, err := io.WriteString(w, strings.Join(reportLines(h, s), "\n")+"\n")
	return err
}

// runHeaderLine is the line before a run's block: "=== warmup i/N ===", "=== run i/M ===".
func runHeaderLine(label string) string { return "=== " + label + " ===" }
