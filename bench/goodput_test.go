package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

func TestParseGoodput(t *testing.T) {
	cases := []struct {
		name, in string
		want     []SLO
		err      string // a piece of the error; "" for none
	}{
		{"all three", "ttft:200,tpot:50,e2el:1000", []SLO{{"ttft", 200}, {"tpot", 50}, {"e2el", 1000}}, ""},
		{"one, spaces, case", " TPOT : 12.5 ", []SLO{{"tpot", 12.5}}, ""},
		{"zero target", "e2el:0", []SLO{{"e2el", 0}}, ""},
		{"empty", "", nil, "empty"},
		{"unknown key", "ttft:100,itl:5", nil, `unknown key "itl"`},
		{"negative", "ttft:-1", nil, ">= 0"},
		{"not a number", "ttft:fast", nil, "not a finite number"},
		{"NaN", "ttft:NaN", nil, "not a finite number"},
		{"infinite", "tpot:inf", nil, "not a finite number"},
		{"no colon", "ttft=100", nil, "not KEY:MS"},
		{"twice", "ttft:1,ttft:2", nil, "twice"},
		{"trailing comma", "ttft:1,", nil, "not KEY:MS"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := ParseGoodput(c.in)
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) || !strings.HasPrefix(err.Error(), "--goodput: ") || strings.Contains(err.Error(), "\n") {
					t.Fatalf("ParseGoodput(%q) = %v, want a one-line --goodput error with %q", c.in, err, c.err)
				}
				return
			}
			if err != nil || len(got) != len(c.want) {
				t.Fatalf("ParseGoodput(%q) = %v, %v", c.in, got, err)
			}
			for i := range got {
				if got[i] != c.want[i] {
					t.Errorf("slo %d = %+v, want %+v", i, got[i], c.want[i])
				}
			}
			if again, err := ParseGoodput(FormatGoodput(got)); err != nil || len(again) != len(got) {
				t.Errorf("FormatGoodput does not round-trip: %q", FormatGoodput(got))
			}
		})
	}
}

func FuzzParseGoodput(f *testing.F) {
	for _, s := range []string{"ttft:200,tpot:50,e2el:1000", "tpot:0", "ttft:-1", "x:1", ":", ",,", "ttft:1e400"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		slos, err := ParseGoodput(s)
		if err != nil {
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("multi-line error %q", err)
			}
			return
		}
		if len(slos) == 0 || validateSLOs(slos) != nil {
			t.Fatalf("ParseGoodput(%q) accepted %v", s, slos)
		}
	})
}

// This part recomputes goodput from the --json records with its own arithmetic: it never calls
// bench's metrics, goodput or summary code.

type goodRec struct {
	Reason        string  `json:"reason"`
	OutputTokens  int     `json:"output_tokens"`
	SubmitStartMs float64 `json:"submit_start_ms"`
	FirstTokenMs  float64 `json:"first_token_ms"`
	FinishedMs    float64 `json:"finished_ms"`
}

type goodRun struct {
	Warmup  bool `json:"warmup"`
	Summary struct {
		Goodput *struct {
			Good           int      `json:"good"`
			RequestGoodput float64  `json:"request_goodput"`
			AttainmentPct  *float64 `json:"attainment_pct"`
		} `json:"goodput"`
	} `json:"summary"`
	Requests []goodRec `json:"requests"`
}

// recomputeGoodput counts the records that meet every target (vLLM's rule: a metric at most its
// target; TPOT 0 for a single output token) and divides by the span from the first submit to the
// last finish of the completed requests.
func recomputeGoodput(reqs []goodRec, ttft, tpot, e2el float64) (good, ended int, perSec float64) {
	first, last := math.Inf(1), math.Inf(-1)
	for _, r := range reqs {
		if r.Reason == "cancelled" || r.Reason == "lost" {
			continue
		}
		ended++
		if r.Reason != "length" && r.Reason != "eos" {
			continue
		}
		first, last = math.Min(first, r.SubmitStartMs), math.Max(last, r.FinishedMs)
		perTok := 0.0
		if r.OutputTokens > 1 {
			perTok = (r.FinishedMs - r.FirstTokenMs) / float64(r.OutputTokens-1)
		}
		if r.FirstTokenMs-r.SubmitStartMs <= ttft && perTok <= tpot && r.FinishedMs-r.SubmitStartMs <= e2el {
			good++
		}
	}
	return good, ended, float64(good) / ((last - first) / 1000)
}

var goodputLine = regexp.MustCompile(`(?m)^Request goodput \(req/s\): ([0-9.]+)$`)
var attainLine = regexp.MustCompile(`(?m)^SLO attainment \(%\): ([0-9.]+) \((\d+) of (\d+) requests\)$`)

// checkGoodput compares the JSON's and the report's goodput of every measured run to the
// recomputation, and returns how many requests were good in all.
func checkGoodput(t *testing.T, out string, data []byte, ttft, tpot, e2el float64) int {
	t.Helper()
	var rep struct {
		Runs []goodRun `json:"runs"`
	}
	if err := json.Unmarshal(data, &rep); err != nil {
		t.Fatal(err)
	}
	printedGood, printedAtt := goodputLine.FindAllStringSubmatch(out, -1), attainLine.FindAllStringSubmatch(out, -1)
	k, total := 0, 0
	for _, run := range rep.Runs {
		good, ended, perSec := recomputeGoodput(run.Requests, ttft, tpot, e2el)
		g := run.Summary.Goodput
		if g == nil || g.Good != good || math.Abs(g.RequestGoodput-perSec) > 1e-9*perSec || g.AttainmentPct == nil ||
			math.Abs(*g.AttainmentPct-100*float64(good)/float64(ended)) > 1e-9 {
			t.Errorf("JSON goodput %+v, recomputed %d good of %d, %.6f req/s", g, good, ended, perSec)
		}
		total += good
		if run.Warmup {
			continue
		}
		if k >= len(printedGood) || k >= len(printedAtt) {
			t.Fatalf("report has %d goodput lines, run %d needs one:\n%s", len(printedGood), k+1, out)
		}
		if v, _ := strconv.ParseFloat(printedGood[k][1], 64); math.Abs(v-perSec) > 0.005+1e-9 {
			t.Errorf("printed goodput %v, recomputed %.6f", v, perSec)
		}
		if v, _ := strconv.ParseFloat(printedAtt[k][1], 64); math.Abs(v-100*float64(good)/float64(ended)) > 0.005+1e-9 ||
			printedAtt[k][2] != strconv.Itoa(good) || printedAtt[k][3] != strconv.Itoa(ended) {
			t.Errorf("printed attainment %q, recomputed %d of %d", printedAtt[k][0], good, ended)
		}
		k++
	}
	return total
}

func TestGoodputRecomputedFake(t *testing.T) {
	// The fake server's TTFT is 2-6.75 ms past the submit and its ITL 1-1.6 ms: the targets cut
	// both distributions, so some requests are good and some are not, for each target alone.
	const ttft, tpot, e2el = 4.0, 1.3, 40.0
	for _, slo := range []struct {
		name            string
		ttft, tpot, e2e float64
	}{{"ttft", ttft, math.Inf(1), math.Inf(1)}, {"tpot", math.Inf(1), tpot, math.Inf(1)}, {"all", ttft, tpot, e2el}} {
		t.Run(slo.name, func(t *testing.T) {
			var targets []SLO
			for _, x := range []SLO{{"ttft", slo.ttft}, {"tpot", slo.tpot}, {"e2el", slo.e2e}} {
				if !math.IsInf(x.Ms, 1) {
					targets = append(targets, x)
				}
			}
			path := filepath.Join(t.TempDir(), "out.json")
			cfg := testConfig(paced, requests(24, 6), runs(1, 2), func(c *Config) { c.Goodput = targets })
			out, _, err := fakeBench(t, context.Background(), newFakeProvider(), cfg, Exports{JSONPath: path})
			if err != nil {
				t.Fatal(err)
			}
			data, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			good := checkGoodput(t, out, data, slo.ttft, slo.tpot, slo.e2e)
			if good == 0 || good == 3*24 {
				t.Errorf("%d of %d requests good: the targets do not discriminate", good, 3*24)
			}
		})
	}
}

// TestGoodputRecomputedEngine is the same check on the real engine (the embedded tiny model on
// the CPU). Half the requests ask for one output token, whose TPOT counts as 0, the rest for 4:
// under a TPOT target of 0 ms exactly the one-token half is good, on any machine.
func TestGoodputRecomputedEngine(t *testing.T) {
	ds := &Dataset{Kind: "jsonl", Path: "inline"}
	for i := range 12 {
		ds.rows = append(ds.rows, datasetRow{prompt: "Hello world number " + strconv.Itoa(i), outputLen: 1 + 3*(i%2), line: i + 1})
	}
	path := filepath.Join(t.TempDir(), "out.json")
	cfg := testConfig(requests(12, 4), func(c *Config) {
		c.Workload.Dataset, c.Workload.StopOnEOS = ds, false
		c.Goodput = []SLO{{"tpot", 0}, {"e2el", 1e9}}
	})
	var out, errOut bytes.Buffer
	if err := RunBench(context.Background(), cfg, SessionOptions{Provider: cpuEngine(2)}, Exports{JSONPath: path}, &out, &errOut); err != nil {
		t.Fatalf("RunBench: %v\n%s", err, errOut.String())
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if n := checkGoodput(t, out.String(), data, 1e9, 0, 1e9); n != 6 {
		t.Errorf("%d good requests, want the 6 of one output token", n)
	}
}
