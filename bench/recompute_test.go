package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"rosetop/internal/benchcheck"
)

// The report is checked against its --json records by internal/benchcheck, which recomputes
// every printed number with its own arithmetic.

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
	benchcheck.Check(t, out, data)
	var rep struct {
		Config map[string]int   `json:"config"`
		Runs   []benchcheck.Run `json:"runs"`
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
	benchcheck.Check(t, text, data)
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
	benchcheck.Check(t, string(text), data)
}
