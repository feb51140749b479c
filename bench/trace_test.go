package bench

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// mooncakeSample is the Mooncake trace format as its README shows it
// (kvcache-ai/Mooncake, FAST25-release/README.md), with lengths that fit GPT-2.
const mooncakeSample = `{"timestamp": 0, "input_length": 600, "output_length": 52, "hash_ids": [46, 47]}
{"timestamp": 0, "input_length": 100, "output_length": 26, "hash_ids": [46]}
{"timestamp": 3052, "input_length": 700, "output_length": 10, "hash_ids": [46, 48]}
{"timestamp": 3052.5, "input_length": 20, "output_length": 3}
`

func TestParseTrace(t *testing.T) {
	cases := []struct {
		name, in string
		rows     int
		err      string
	}{
		{"mooncake lines", mooncakeSample, 4, ""},
		{"empty", "", 0, "no lines"},
		{"malformed", `{"timestamp": 0, "input_length": 3, "output_length": 2` + "\n", 0, "line 1: not a trace line"},
		{"no timestamp", `{"input_length": 3, "output_length": 2}`, 0, `line 1: "timestamp"`},
		{"negative timestamp", `{"timestamp": -1, "input_length": 3, "output_length": 2}`, 0, `"timestamp"`},
		{"zero input", `{"timestamp": 0, "input_length": 0, "output_length": 2}`, 0, `"input_length"`},
		{"no output", `{"timestamp": 0, "input_length": 3}`, 0, `"output_length"`},
		{"string length", `{"timestamp": 0, "input_length": "3", "output_length": 2}`, 0, "line 1"},
		{"huge input", `{"timestamp": 0, "input_length": 9223372036854775807, "output_length": 1}`, 0, `line 1: "input_length" must be an integer from 1 to`},
		{"huge output", `{"timestamp": 0, "input_length": 1, "output_length": 9223372036854775807}`, 0, `line 1: "output_length" must be an integer from 1 to`},
		{"too long for an int", `{"timestamp": 0, "input_length": 1e30, "output_length": 1}`, 0, "line 1"},
		{"NaN timestamp", `{"timestamp": NaN, "input_length": 1, "output_length": 1}`, 0, "line 1: not a trace line"},
		{"null timestamp", `{"timestamp": null, "input_length": 1, "output_length": 1}`, 0, `line 1: "timestamp"`},
		{"huge timestamp", `{"timestamp": 1e300, "input_length": 1, "output_length": 1}`, 0, `line 1: "timestamp" must be`},
		{"an array", `[0, 1, 1]`, 0, "line 1: not a trace line"},
		{"binary", "\x00\xff\xfe", 0, "line 1: not a trace line"},
		{"out of order", "{\"timestamp\": 5, \"input_length\": 3, \"output_length\": 2}\n{\"timestamp\": 4, \"input_length\": 3, \"output_length\": 2}", 0, "line 2: timestamp 4 is before"},
		{"bad hash ids", `{"timestamp": 0, "input_length": 3, "output_length": 2, "hash_ids": ["a"]}`, 0, "line 1"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rows, err := parseTrace(t.Context(), strings.NewReader(c.in))
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("err = %v, want %q", err, c.err)
				}
				return
			}
			if err != nil || len(rows) != c.rows {
				t.Fatalf("%d rows, err %v", len(rows), err)
			}
		})
	}
}

// TestSampleTraceSharesBlocks: requests with the same first hash id share their first 512
// tokens' text; lengths follow the trace; offsets follow the timestamps at the replay speed.
func TestSampleTraceSharesBlocks(t *testing.T) {
	d, err := LoadTrace(t.Context(), writeTemp(t, "trace.jsonl", mooncakeSample), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	m := gpt2Model(t, 1024)
	rs, err := d.sample(testBuild(2), 4, m)
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []struct{ in, out int }{{600, 52}, {100, 26}, {700, 10}, {20, 3}} {
		if len(rs[i].tokens) != want.in || rs[i].maxNew != want.out {
			t.Errorf("request %d: %d prompt tokens, %d output; want %d, %d", i, len(rs[i].tokens), rs[i].maxNew, want.in, want.out)
		}
	}
	shared := func(a, b []int32) int {
		n := 0
		for n < len(a) && n < len(b) && a[n] == b[n] {
			n++
		}
		return n
	}
	if n := shared(rs[0].tokens, rs[2].tokens); n < 400 {
		t.Errorf("requests 0 and 2 share hash id 46 but only %d leading tokens", n)
	}
	if n := shared(rs[0].tokens, rs[3].tokens); n > 5 {
		t.Errorf("requests 0 and 3 share no hash id but %d leading tokens", n)
	}
	offs := d.Offsets(4, 2)
	want := []time.Duration{0, 0, 1526 * time.Millisecond, 1526250 * time.Microsecond}
	for i := range want {
		if offs[i] != want[i] {
			t.Errorf("offset %d at speed 2 = %v, want %v", i, offs[i], want[i])
		}
	}
	if _, err := d.sample(testBuild(2), 4, gpt2Model(t, 256)); err == nil || !strings.Contains(err.Error(), "line 1: input_length 600") {
		t.Errorf("256 positions: err %v, want line 1 named", err)
	}
}

// A trace whose lengths sum past the model's positions is refused, however large they are: a
// remote server that gives no max_model_len leaves the limit at 2^31 positions.
func TestSampleTraceRefusesLongRequests(t *testing.T) {
	d := &Dataset{Kind: "trace", Path: "t.jsonl", rows: []datasetRow{{inputLen: maxRequestTokens, outputLen: maxRequestTokens, line: 1}}}
	if _, err := d.sample(testBuild(2), 1, gpt2Model(t, 1<<24)); err == nil || !errors.Is(err, ErrBadConfig) || !strings.Contains(err.Error(), "line 1") {
		t.Errorf("err %v, want line 1 named", err)
	}
}

type traceRec struct {
	Timestamp    float64 `json:"timestamp"`
	InputLength  int     `json:"input_length"`
	OutputLength int     `json:"output_length"`
	HashIDs      []int64 `json:"hash_ids"`
}

func readTraceLines(t *testing.T, path string) []traceRec {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []traceRec
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var r traceRec
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("trace line %q: %v", sc.Text(), err)
		}
		if strings.Contains(sc.Text(), ".") {
			t.Errorf("trace line %q: timestamps are whole ms", sc.Text())
		}
		out = append(out, r)
	}
	return out
}

type replayReq struct {
	PromptTokens   int     `json:"prompt_tokens"`
	OutputTokens   int     `json:"output_tokens"`
	SubmitTargetMs float64 `json:"submit_target_ms"`
	SubmitStartMs  float64 `json:"submit_start_ms"`
}

func measuredRequests(t *testing.T, path string) []replayReq {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var rep struct {
		Runs []struct {
			Warmup   bool        `json:"warmup"`
			Requests []replayReq `json:"requests"`
		} `json:"runs"`
	}
	if err := json.Unmarshal(data, &rep); err != nil {
		t.Fatal(err)
	}
	for _, r := range rep.Runs {
		if !r.Warmup {
			return r.Requests
		}
	}
	t.Fatal("no measured run")
	return nil
}

// TestSaveTraceReplay: a run with gamma arrivals is saved as a trace; the trace's timestamps are
// the run's submit offsets to the nearest ms; replaying it submits every request due at its
// timestamp (the submit targets the run recorded), with the saved lengths. On the fake clock the
// submits land on their targets exactly, so the replay reproduces the offsets within 1 ms.
func TestSaveTraceReplay(t *testing.T) {
	dir := t.TempDir()
	tracePath, json1, json2 := filepath.Join(dir, "t.jsonl"), filepath.Join(dir, "a.json"), filepath.Join(dir, "b.json")
	cfg := testConfig(requests(40, 3), runs(1, 1), func(c *Config) {
		c.Arrivals = Arrivals{Schedule: "poisson", Rate: 150, Burstiness: 0.5, Seed: 9}
		c.Workload.UniquePrompts = true
	})
	if _, _, err := fakeBench(t, context.Background(), newFakeProvider(), cfg, Exports{JSONPath: json1, TracePath: tracePath}); err != nil {
		t.Fatal(err)
	}
	orig, lines := measuredRequests(t, json1), readTraceLines(t, tracePath)
	if len(lines) != 40 || len(orig) != 40 {
		t.Fatalf("%d trace lines, %d requests; want 40", len(lines), len(orig))
	}
	for i, l := range lines {
		if off := orig[i].SubmitStartMs - orig[0].SubmitStartMs; math.Abs(l.Timestamp-off) > 0.5 {
			t.Errorf("line %d: timestamp %v, submit offset %.3f ms", i, l.Timestamp, off)
		}
		if l.InputLength != orig[i].PromptTokens || l.OutputLength != 3 || len(l.HashIDs) != 1 {
			t.Errorf("line %d: %+v for a request of %d prompt tokens", i, l, orig[i].PromptTokens)
		}
	}
	d, err := LoadTrace(t.Context(), tracePath, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	replay := testConfig(requests(40, 64), runs(0, 1), func(c *Config) {
		c.Workload.Dataset = d
		c.Arrivals = Arrivals{Schedule: "trace", Offsets: d.Offsets(40, 1)}
	})
	out, _, err := fakeBench(t, context.Background(), newFakeProvider(), replay, Exports{JSONPath: json2})
	if err != nil {
		t.Fatal(err)
	}
	got := measuredRequests(t, json2)
	worst, worstStart := 0.0, 0.0
	for i, r := range got {
		off := r.SubmitTargetMs - got[0].SubmitTargetMs
		recorded := orig[i].SubmitStartMs - orig[0].SubmitStartMs
		worst = max(worst, math.Abs(off-recorded))
		worstStart = max(worstStart, math.Abs(r.SubmitStartMs-got[0].SubmitStartMs-recorded))
		if off != lines[i].Timestamp || r.SubmitStartMs < r.SubmitTargetMs {
			t.Errorf("replayed request %d: due at +%.3f ms (trace %v), submitted at %.3f, target %.3f", i, off, lines[i].Timestamp, r.SubmitStartMs, r.SubmitTargetMs)
		}
		if r.PromptTokens != lines[i].InputLength || r.OutputTokens != lines[i].OutputLength {
			t.Errorf("replayed request %d: %d/%d tokens, trace %d/%d", i, r.PromptTokens, r.OutputTokens, lines[i].InputLength, lines[i].OutputLength)
		}
	}
	if worst > 1 || worstStart > 1 {
		t.Errorf("replayed due times differ from the recorded run's offsets by up to %.3f ms, submits by %.3f ms", worst, worstStart)
	}
	t.Logf("replayed due times within %.3f ms of the recorded run's offsets, submits (fake clock, add_request costs included) within %.3f ms", worst, worstStart)
	if !strings.Contains(out, "Submit interval/schedule: ") || !strings.Contains(out, " / trace") {
		t.Errorf("report does not name the trace schedule:\n%s", out)
	}
}

func TestBlockHashesChain(t *testing.T) {
	a := make([]int32, 1100)
	for i := range a {
		a[i] = int32(i)
	}
	b := append([]int32(nil), a...)
	b[600] = 7 // second block differs
	ha, hb := blockHashes(a), blockHashes(b)
	if len(ha) != 3 || ha[0] != hb[0] || ha[1] == hb[1] || ha[2] == hb[2] {
		t.Errorf("hashes %x vs %x: want 3 blocks, the first equal, the rest different", ha, hb)
	}
}

func FuzzParseTrace(f *testing.F) {
	for _, s := range []string{mooncakeSample, "", `{"timestamp": 1e300, "input_length": 1, "output_length": 1}`, `{"timestamp": 0, "input_length": 1, "output_length": 1, "hash_ids": [1, -2]}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		rows, err := parseTrace(t.Context(), strings.NewReader(s))
		if err != nil {
			return
		}
		for i, r := range rows {
			if r.inputLen < 1 || r.outputLen < 1 || r.inputLen > maxRequestTokens || r.outputLen > maxRequestTokens || r.atMs < 0 || r.atMs > maxTraceMs || (i > 0 && r.atMs < rows[i-1].atMs) {
				t.Fatalf("accepted row %+v", r)
			}
		}
	})
}

// TestSaveTraceNotes: each trace file's note on stderr says what that file holds (one measured
// run and its requests), not the whole session's runs.
func TestSaveTraceNotes(t *testing.T) {
	tracePath := filepath.Join(t.TempDir(), "t.jsonl")
	cfg := testConfig(requests(5, 2), runs(1, 2))
	_, stderr, err := fakeBench(t, context.Background(), newFakeProvider(), cfg, Exports{TracePath: tracePath})
	if err != nil {
		t.Fatal(err)
	}
	for k := 1; k <= 2; k++ {
		path := RunTracePath(tracePath, k)
		if n := len(readTraceLines(t, path)); n != 5 {
			t.Errorf("%s: %d lines, want 5", path, n)
		}
		want := fmt.Sprintf("rosetop: wrote %s: run %d/2, 5 requests\n", path, k)
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr)
		}
	}
}
