// Package benchcheck checks a `rosetop bench` report against its --json records with its own
// arithmetic: it never calls bench's percentile, metrics or summary code, so that a test built
// on it catches a wrong number wherever bench computed it. Tests of package bench and of the
// command use it.
package benchcheck

import (
	"encoding/json"
	"math"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// Req is one request of the --json export, the fields the check reads. A null timestamp (a
// part a remote server does not show) decodes as nil.
type Req struct {
	Reason         string    `json:"reason"`
	PromptTokens   int       `json:"prompt_tokens"`
	OutputTokens   int       `json:"output_tokens"`
	SubmitTargetMs *float64  `json:"submit_target_ms"`
	SubmitStartMs  float64   `json:"submit_start_ms"`
	SubmitEndMs    *float64  `json:"submit_end_ms"`
	TokenizedMs    *float64  `json:"tokenized_ms"`
	AdmittedMs     *float64  `json:"admitted_ms"`
	FirstTokenMs   float64   `json:"first_token_ms"`
	FinishedMs     float64   `json:"finished_ms"`
	TokenMs        []float64 `json:"token_ms"`
	ChunkTokens    []int     `json:"chunk_tokens"`
	TokenSource    string    `json:"token_source"`
	Failure        string    `json:"failure"`
}

// Run is one run of the export.
type Run struct {
	Label    string `json:"label"`
	Warmup   bool   `json:"warmup"`
	Requests []Req  `json:"requests"`
}

// Report is the export's runs.
type Report struct {
	Runs []Run `json:"runs"`
}

// Decode reads a --json export.
func Decode(t testing.TB, data []byte) Report {
	t.Helper()
	var rep Report
	if err := json.Unmarshal(data, &rep); err != nil {
		t.Fatal(err)
	}
	return rep
}

// numpyLinear is numpy.percentile's default method, written out independently: the value at
// fractional index p/100*(n-1) of the sorted samples, interpolated between its neighbours.
func numpyLinear(xs []float64, p float64) float64 {
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	pos := p / 100 * float64(len(s)-1)
	i := int(pos)
	if i+1 >= len(s) {
		return s[len(s)-1]
	}
	w := pos - float64(i)
	return s[i]*(1-w) + s[i+1]*w
}

// expectedLines recomputes every percentile line and the throughput of one run (over the wall
// clock of its completed and failed requests). remote: the report is of a server outside the
// process, whose ITL line is the chunk gap beside a token gap.
func expectedLines(run Run, lag, remote bool) map[string][]float64 {
	cols := map[string][]float64{}
	var first, last float64 = math.Inf(1), math.Inf(-1)
	completion := 0
	itl := "ITL"
	if remote {
		itl = "ITL (chunk gap)"
	}
	for _, r := range run.Requests {
		switch r.Reason {
		case "length", "eos", "stop":
		case "cancelled":
			continue
		default: // failed: its span counts in the run's wall clock, nothing else does
			first, last = math.Min(first, r.SubmitStartMs), math.Max(last, r.FinishedMs)
			continue
		}
		if r.SubmitEndMs != nil && r.TokenizedMs != nil {
			cols["add_request latency"] = append(cols["add_request latency"], *r.SubmitEndMs-r.SubmitStartMs)
			cols["Tokenize"] = append(cols["Tokenize"], *r.TokenizedMs-*r.SubmitEndMs)
		}
		if r.AdmittedMs != nil && r.TokenizedMs != nil {
			cols["Queue wait (post-tok)"] = append(cols["Queue wait (post-tok)"], *r.AdmittedMs-*r.TokenizedMs)
			cols["Prefill->first token"] = append(cols["Prefill->first token"], r.FirstTokenMs-*r.AdmittedMs)
		}
		cols["TTFT"] = append(cols["TTFT"], r.FirstTokenMs-r.SubmitStartMs)
		cols["Latency"] = append(cols["Latency"], r.FinishedMs-r.SubmitStartMs)
		if r.OutputTokens > 1 {
			cols["TPOT"] = append(cols["TPOT"], (r.FinishedMs-r.FirstTokenMs)/float64(r.OutputTokens-1))
		}
		for i := 1; i < len(r.TokenMs); i++ {
			cols[itl] = append(cols[itl], r.TokenMs[i]-r.TokenMs[i-1])
		}
		if remote {
			cols["Token gap"] = append(cols["Token gap"], tokenGaps(r)...)
		}
		if lag && r.SubmitTargetMs != nil {
			cols["Submit lag"] = append(cols["Submit lag"], math.Max(0, r.SubmitStartMs-*r.SubmitTargetMs))
		}
		first, last = math.Min(first, r.SubmitStartMs), math.Max(last, r.FinishedMs)
		completion += r.OutputTokens
	}
	out := map[string][]float64{}
	for name, xs := range cols {
		if len(xs) > 0 {
			out[name] = []float64{numpyLinear(xs, 50), numpyLinear(xs, 95), numpyLinear(xs, 99)}
		}
	}
	out["Throughput"] = []float64{float64(completion) / ((last - first) / 1000)}
	return out
}

// tokenGaps spreads each chunk's gap evenly over the tokens it carried (none for the first
// chunk with tokens); nil when some chunk's count is unknown.
func tokenGaps(r Req) []float64 {
	var gaps []float64
	prev := -1
	for i, k := range r.ChunkTokens {
		if k < 0 {
			return nil
		}
		if k == 0 {
			continue
		}
		if prev >= 0 {
			for range k {
				gaps = append(gaps, (r.TokenMs[i]-r.TokenMs[prev])/float64(k))
			}
		}
		prev = i
	}
	return gaps
}

var pctLine = regexp.MustCompile(`^(.+) p50/p95/p99: ([0-9.]+)/([0-9.]+)/([0-9.]+) (ms|ms/token)$`)

// printedBlocks splits stdout into report blocks and parses their percentile lines.
func printedBlocks(t testing.TB, out string) []map[string][]float64 {
	var blocks []map[string][]float64
	for _, line := range strings.Split(out, "\n") {
		if line == "=== streaming benchmark ===" {
			blocks = append(blocks, map[string][]float64{})
			continue
		}
		if len(blocks) == 0 {
			continue
		}
		b := blocks[len(blocks)-1]
		if m := pctLine.FindStringSubmatch(line); m != nil {
			for _, s := range m[2:5] {
				v, err := strconv.ParseFloat(s, 64)
				if err != nil {
					t.Fatal(err)
				}
				b[m[1]] = append(b[m[1]], v)
			}
		}
		if rest, ok := strings.CutPrefix(line, "Throughput (completion,total): "); ok {
			completion, _, _ := strings.Cut(strings.TrimSuffix(rest, " tokens/s"), ",") // "completion, total"
			v, err := strconv.ParseFloat(completion, 64)
			if err != nil {
				t.Fatal(err)
			}
			b["Throughput"] = []float64{v}
		}
	}
	return blocks
}

// Check compares every printed number of every measured run of report to the recomputation
// from jsonData at the printed precision (half a unit of the last printed digit, plus float
// noise), and that a metric printed n/a has no samples to recompute. It returns how many
// numbers it compared.
func Check(t testing.TB, report string, jsonData []byte) int {
	t.Helper()
	rep := Decode(t, jsonData)
	var measured []Run
	for _, r := range rep.Runs {
		if !r.Warmup {
			measured = append(measured, r)
		}
	}
	blocks := printedBlocks(t, report)
	if len(blocks) != len(measured) || len(blocks) == 0 {
		t.Fatalf("%d printed reports, %d measured runs in the JSON", len(blocks), len(measured))
	}
	lag := strings.Contains(report, "Submit lag p50/p95/p99")
	remote := strings.Contains(report, "\nEndpoint: ")
	checked := 0
	for i, run := range measured {
		want := expectedLines(run, lag, remote)
		for name, printed := range blocks[i] {
			exp, ok := want[name]
			if !ok || len(exp) != len(printed) {
				t.Errorf("run %s: printed %q has no recomputation", run.Label, name)
				continue
			}
			for j := range printed {
				if d := math.Abs(printed[j] - exp[j]); d > 0.005+1e-9 {
					t.Errorf("run %s: %s[%d] printed %.2f, recomputed %.6f", run.Label, name, j, printed[j], exp[j])
				}
				checked++
			}
		}
		if len(blocks[i]) != len(want) {
			t.Errorf("run %s: printed %d metric lines, recomputed %d", run.Label, len(blocks[i]), len(want))
		}
	}
	t.Logf("%d printed numbers match the recomputation", checked)
	return checked
}
