package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// This file checks the printed report against the --json records with its own arithmetic: it
// never calls bench's percentile, metrics or summary code.

type recReq struct {
	Reason         string    `json:"reason"`
	PromptTokens   int       `json:"prompt_tokens"`
	OutputTokens   int       `json:"output_tokens"`
	SubmitTargetMs *float64  `json:"submit_target_ms"`
	SubmitStartMs  float64   `json:"submit_start_ms"`
	SubmitEndMs    float64   `json:"submit_end_ms"`
	TokenizedMs    float64   `json:"tokenized_ms"`
	AdmittedMs     float64   `json:"admitted_ms"`
	FirstTokenMs   float64   `json:"first_token_ms"`
	FinishedMs     float64   `json:"finished_ms"`
	TokenMs        []float64 `json:"token_ms"`
}

type recRun struct {
	Label    string   `json:"label"`
	Warmup   bool     `json:"warmup"`
	Requests []recReq `json:"requests"`
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

// expectedLines recomputes every percentile line and the throughput of one run.
func expectedLines(run recRun, lag bool) map[string][]float64 {
	cols := map[string][]float64{}
	var first, last float64 = math.Inf(1), math.Inf(-1)
	completion := 0
	for _, r := range run.Requests {
		if r.Reason != "length" && r.Reason != "eos" {
			continue
		}
		cols["add_request latency"] = append(cols["add_request latency"], r.SubmitEndMs-r.SubmitStartMs)
		cols["Tokenize"] = append(cols["Tokenize"], r.TokenizedMs-r.SubmitEndMs)
		cols["Queue wait (post-tok)"] = append(cols["Queue wait (post-tok)"], r.AdmittedMs-r.TokenizedMs)
		cols["Prefill->first token"] = append(cols["Prefill->first token"], r.FirstTokenMs-r.AdmittedMs)
		cols["TTFT"] = append(cols["TTFT"], r.FirstTokenMs-r.SubmitStartMs)
		cols["Latency"] = append(cols["Latency"], r.FinishedMs-r.SubmitStartMs)
		if r.OutputTokens > 1 {
			cols["TPOT"] = append(cols["TPOT"], (r.FinishedMs-r.FirstTokenMs)/float64(r.OutputTokens-1))
		}
		for i := 1; i < len(r.TokenMs); i++ {
			cols["ITL"] = append(cols["ITL"], r.TokenMs[i]-r.TokenMs[i-1])
		}
		if lag && r.SubmitTargetMs != nil {
			cols["Submit lag"] = append(cols["Submit lag"], math.Max(0, r.SubmitStartMs-*r.SubmitTargetMs))
		}
		first, last = math.Min(first, r.SubmitStartMs), math.Max(last, r.FinishedMs)
		completion += r.OutputTokens
	}
	out := map[string][]float64{}
	for name, xs := range cols {
		out[name] = []float64{numpyLinear(xs, 50), numpyLinear(xs, 95), numpyLinear(xs, 99)}
	}
	out["Throughput"] = []float64{float64(completion) / ((last - first) / 1000)}
	return out
}

var pctLine = regexp.MustCompile(`^(.+) p50/p95/p99: ([0-9.]+)/([0-9.]+)/([0-9.]+) (ms|ms/token)$`)

// printedBlocks splits stdout into report blocks and parses their percentile lines.
func printedBlocks(t *testing.T, out string) []map[string][]float64 {
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

// checkRecomputation compares every printed number of every measured run to the recomputation
// at the printed precision (half a unit of the last printed digit, plus float noise).
func checkRecomputation(t *testing.T, out string, jsonData []byte) {
	t.Helper()
	var rep struct {
		Runs []recRun `json:"runs"`
	}
	if err := json.Unmarshal(jsonData, &rep); err != nil {
		t.Fatal(err)
	}
	var measured []recRun
	for _, r := range rep.Runs {
		if !r.Warmup {
			measured = append(measured, r)
		}
	}
	blocks := printedBlocks(t, out)
	if len(blocks) != len(measured) || len(blocks) == 0 {
		t.Fatalf("%d printed reports, %d measured runs in the JSON", len(blocks), len(measured))
	}
	lag := strings.Contains(out, "Submit lag p50/p95/p99")
	checked := 0
	for i, run := range measured {
		want := expectedLines(run, lag)
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
}

func TestRecomputeFromJSONFake(t *testing.T) {
	path := filepath.Join(t.TempDir(), "out.json")
	out, _, err := fakeBench(t, context.Background(), newFakeProvider(), testConfig(paced, requests(12, 5), runs(1, 2)), Exports{JSONPath: path, Settings: map[string]int{"num_requests": 12}})
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	checkRecomputation(t, out, data)
	var rep struct {
		Config map[string]int `json:"config"`
		Runs   []recRun       `json:"runs"`
	}
	if err := json.Unmarshal(data, &rep); err != nil {
		t.Fatal(err)
	}
	if rep.Config["num_requests"] != 12 || len(rep.Runs) != 3 || !rep.Runs[0].Warmup || rep.Runs[0].Label != "warmup 1/1" || rep.Runs[1].Warmup {
		t.Fatalf("json config/runs: %+v %d runs", rep.Config, len(rep.Runs))
	}
	for _, run := range rep.Runs {
		for i, r := range run.Requests {
			if len(r.TokenMs) != r.OutputTokens || r.OutputTokens != 5 || r.TokenMs[0] != r.FirstTokenMs || r.SubmitTargetMs == nil {
				t.Errorf("%s request %d: %d token times for %d tokens, target %v", run.Label, i, len(r.TokenMs), r.OutputTokens, r.SubmitTargetMs)
			}
		}
	}
}

// TestRecomputeFromJSONEngine is the acceptance check on the real engine and scheduler (the
// embedded tiny model on the CPU): decode-heavy, warmup 1, repeat 3, then the independent
// recomputation of every printed percentile.
func TestRecomputeFromJSONEngine(t *testing.T) {
	path := filepath.Join(t.TempDir(), "out.json")
	cfg := testConfig(decodeHeavy, requests(4, 8), runs(1, 3))
	var out, errOut bytes.Buffer
	opts := SessionOptions{Provider: cpuEngine(2)}
	if err := RunBench(context.Background(), cfg, opts, Exports{JSONPath: path, Settings: cfg}, &out, &errOut); err != nil {
		t.Fatalf("RunBench: %v\nstderr: %s", err, errOut.String())
	}
	text := out.String()
	if !strings.HasPrefix(text, "=== warmup 1/1 ===\nCold run, not measured: 4 requests in ") || !strings.Contains(text, "\n=== run 1/3 ===\n=== streaming benchmark ===\n") ||
		strings.Count(text, "=== streaming benchmark ===") != 3 || !strings.Contains(text, "=== run 3/3 ===") {
		t.Errorf("report layout:\n%s", text)
	}
	for _, want := range []string{"Requests: 4", "Completion tokens (total): 32", "Device: cpu", "Paged attention: True", "CUDA Graph: False"} {
		if !strings.Contains(text, want) {
			t.Errorf("report lacks %q", want)
		}
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	checkRecomputation(t, text, data)
	if testing.Verbose() {
		fmt.Println(text)
	}
}

// TestRecomputeFiles checks a report and JSON written by `rosetop bench ... --json FILE > TEXT`:
//
//	ROSETOP_REPORT=TEXT ROSETOP_JSON=FILE go test ./bench/ -run RecomputeFiles -v
func TestRecomputeFiles(t *testing.T) {
	textPath, jsonPath := os.Getenv("ROSETOP_REPORT"), os.Getenv("ROSETOP_JSON")
	if textPath == "" || jsonPath == "" {
		t.Skip("set ROSETOP_REPORT and ROSETOP_JSON to check a bench run's files")
	}
	text, err := os.ReadFile(textPath)
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(jsonPath)
	if err != nil {
		t.Fatal(err)
	}
	checkRecomputation(t, string(text), data)
}
