package main

import (
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"encoding/xml"
	"errors"
	"image/png"
	"io"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	"rosetop/bench"
	"rosetop/plot"
)

// TestSweepPrefillBatches is the sweep's acceptance run on the embedded model: --job admission
// over prefill max batch sizes 1,4,16,64 (fewer, shorter requests than the job's, so that it
// takes seconds on two cores). The table's numbers equal the medians of the per-point JSON's
// measured runs; sweep.csv holds the same; the PNG decodes and the SVG parses, with labelled axes
// and the caption; stderr shows the progress bar with an ETA.
func TestSweepPrefillBatches(t *testing.T) {
	dir := t.TempDir()
	code, stdout, stderr := runCLI(t, "sweep", "--prefill-max-batch-sizes", "1,4,16,64", "--job", "admission",
		"--num-requests", "24", "--max-new-tokens", "4", "--repeat-runs", "2", "--goodput", "ttft:1000,tpot:500", "--out-dir", dir)
	if code != 0 {
		t.Fatalf("exit %d\nstderr:\n%s", code, stderr)
	}
	if !strings.Contains(stderr, "rosetop: sweep [") || !strings.Contains(stderr, "ETA ") || !strings.Contains(stderr, "4/4") {
		t.Errorf("no progress bar with an ETA on stderr:\n%s", stderr)
	}
	table := parseTable(t, stdout)
	if len(table) != 4 {
		t.Fatalf("%d table rows, want 4:\n%s", len(table), stdout)
	}
	var sw sweepResult
	readJSON(t, filepath.Join(dir, "sweep.json"), &sw)
	if len(sw.Points) != 4 || sw.Axis != "prefill-max-batch-sizes" {
		t.Fatalf("sweep.json: %+v", sw)
	}
	for i, row := range table {
		if want := []string{"1", "4", "16", "64"}[i]; row["prefill-max-batch-sizes"] != want {
			t.Errorf("row %d is %q, want %s", i, row["prefill-max-batch-sizes"], want)
		}
		want := pointMedians(t, filepath.Join(dir, sw.Points[i].File), 2)
		for col, v := range want {
			if row[col] != v {
				t.Errorf("row %d %s: table %q, point JSON %q", i, col, row[col], v)
			}
		}
	}
	checkSweepCSV(t, filepath.Join(dir, "sweep.csv"), table)
	checkSweepCharts(t, dir, sw.Model, "prefill max batch size (requests)")
}

// parseTable reads the printed table: a header line, then one row a point.
func parseTable(t *testing.T, out string) []map[string]string {
	t.Helper()
	lines := strings.Split(strings.TrimSpace(out), "\n")
	head := strings.Fields(strings.NewReplacer("TTFT p", "TTFT_p", "TPOT p", "TPOT_p", "ITL p", "ITL_p", "E2EL p", "E2EL_p", "SLO %", "SLO_%").Replace(lines[0]))
	var rows []map[string]string
	for _, l := range lines[1:] {
		f := strings.Fields(l)
		if len(f) != len(head) {
			t.Fatalf("row %q has %d cells for %d columns", l, len(f), len(head))
		}
		row := map[string]string{}
		for i, h := range head {
			row[strings.ReplaceAll(h, "_", " ")] = f[i]
		}
		rows = append(rows, row)
	}
	return rows
}

func readJSON(t *testing.T, path string, v any) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

// pointMedians reads a point's rosetop JSON and returns, for each table column, the median over
// its measured runs printed as the table prints it.
func pointMedians(t *testing.T, path string, runs int) map[string]string {
	t.Helper()
	type dist struct{ P50, P99 *float64 }
	var rep struct {
		Runs []struct {
			Warmup  bool `json:"warmup"`
			Summary struct {
				RequestRate float64 `json:"request_throughput"`
				Throughput  float64 `json:"throughput_completion_tok_s"`
				TTFT        dist    `json:"ttft_ms"`
				TPOT        dist    `json:"tpot_ms"`
				ITL         dist    `json:"itl_ms"`
				Latency     dist    `json:"latency_ms"`
				Goodput     struct {
					RequestGoodput float64 `json:"request_goodput"`
					AttainmentPct  float64 `json:"attainment_pct"`
				} `json:"goodput"`
			} `json:"summary"`
		} `json:"runs"`
	}
	readJSON(t, path, &rep)
	cols := map[string][]float64{}
	add := func(name string, p *float64) {
		if p != nil {
			cols[name] = append(cols[name], *p)
		}
	}
	measured := 0
	for _, r := range rep.Runs {
		if r.Warmup {
			continue
		}
		measured++
		s := r.Summary
		add("req/s", &s.RequestRate)
		add("tok/s", &s.Throughput)
		add("TTFT p50", s.TTFT.P50)
		add("TTFT p99", s.TTFT.P99)
		add("TPOT p50", s.TPOT.P50)
		add("TPOT p99", s.TPOT.P99)
		add("ITL p99", s.ITL.P99)
		add("E2EL p99", s.Latency.P99)
		add("goodput", &s.Goodput.RequestGoodput)
		add("SLO %", &s.Goodput.AttainmentPct)
	}
	if measured != runs {
		t.Fatalf("%s: %d measured runs, want %d", path, measured, runs)
	}
	out := map[string]string{}
	for name, xs := range cols {
		m := xs[0]
		if len(xs) == 2 {
			m = (xs[0] + xs[1]) / 2
		}
		out[name] = strconv.FormatFloat(m, 'f', 2, 64)
	}
	if len(out) != 10 {
		t.Fatalf("%s: %d of the 10 columns", path, len(out))
	}
	return out
}

func checkSweepCSV(t *testing.T, path string, table []map[string]string) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	recs, err := csv.NewReader(f).ReadAll()
	if err != nil || len(recs) != len(table)+1 {
		t.Fatalf("sweep.csv: %d records, %v", len(recs), err)
	}
	for i, rec := range recs[1:] {
		for j, col := range recs[0][:len(recs[0])-1] {
			got := rec[j]
			if v, err := strconv.ParseFloat(got, 64); err == nil && j > 0 { // the table rounds the CSV's numbers
				got = strconv.FormatFloat(v, 'f', 2, 64)
			}
			if table[i][col] != got {
				t.Errorf("sweep.csv row %d %s = %q, table %q", i, col, rec[j], table[i][col])
			}
		}
	}
}

// checkSweepCharts decodes sweep.png and parses sweep.svg as XML, looking for the axis labels
// and the caption among its text.
func checkSweepCharts(t *testing.T, dir, model, axis string) {
	t.Helper()
	f, err := os.Open(filepath.Join(dir, "sweep.png"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatalf("sweep.png does not decode: %v", err)
	}
	if b := img.Bounds(); b.Dx() < 800 || b.Dy() < 300 {
		t.Errorf("sweep.png is %v", b)
	}
	data, err := os.ReadFile(filepath.Join(dir, "sweep.svg"))
	if err != nil {
		t.Fatal(err)
	}
	dec := xml.NewDecoder(bytes.NewReader(data))
	var text strings.Builder
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("sweep.svg is not XML: %v", err)
		}
		if cd, ok := tok.(xml.CharData); ok {
			text.Write(cd)
			text.WriteByte('\n')
		}
	}
	for _, want := range []string{"output throughput (tokens/s)", "TTFT p99 (ms)", "TPOT p50 (ms)", "requests/s",
		axis, "rosetop sweep: " + model + " on cpu", ", commit "} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("sweep.svg has no text %q", want)
		}
	}
}

// TestSweepBadInput: every bad sweep list is one line naming it, exit 2, before anything runs.
func TestSweepBadInput(t *testing.T) {
	dir := t.TempDir()
	cases := []struct {
		name string
		args []string
		want string
	}{
		{"no axis", nil, "needs exactly one of --request-rates, --concurrency, --prefill-max-batch-sizes"},
		{"two axes", []string{"--concurrency", "1,2", "--request-rates", "1"}, "needs exactly one of"},
		{"not a number", []string{"--prefill-max-batch-sizes", "1,x,4"}, `--prefill-max-batch-sizes 1,x,4: "x" is not an integer`},
		{"empty item", []string{"--concurrency", "1,,4"}, `--concurrency 1,,4: "" is not an integer`},
		{"exponent", []string{"--concurrency", "1e2"}, `"1e2" is not an integer`},
		{"integer overflow", []string{"--prefill-max-batch-sizes", "99999999999999999999"}, "99999999999999999999 must be from 1 to 4096"},
		{"empty list", []string{"--request-rates", ""}, `--request-rates "": want 1 to 64 comma-separated values`},
		{"fraction", []string{"--concurrency", "1.5"}, `"1.5" is not an integer`},
		{"zero", []string{"--prefill-max-batch-sizes", "0,4"}, "0 must be from 1 to 4096"},
		{"negative rate", []string{"--request-rates", "-1"}, "-1 must be from 0.001 to"},
		{"NaN rate", []string{"--request-rates", "1,NaN"}, `"NaN" is not a number`},
		{"twice", []string{"--request-rates", "1,2,1"}, "1 is listed twice"},
		{"inf twice", []string{"--request-rates", "inf,1,INF"}, "INF is listed twice"},
		{"overflow rate", []string{"--request-rates", "1,1e400"}, `"1e400" is not a number`},
		{"minus inf", []string{"--request-rates", "1,-inf"}, `"-inf" is not a number`},
		{"inf concurrency", []string{"--concurrency", "1,inf"}, `--concurrency 1,inf: "inf" is not a number from 1 to 100000 (only --request-rates takes inf)`},
		{"inf batch", []string{"--prefill-max-batch-sizes", "Infinity"}, `"Infinity" is not a number from 1 to 4096`},
		{"inf with burstiness", []string{"--request-rates", "inf", "--burstiness", "2"}, "--burstiness shapes the gaps of --request-rate: give a rate"},
		{"beyond max batch", []string{"--prefill-max-batch-sizes", "4,128", "--max-batch-size", "64"}, "--prefill-max-batch-size 128 exceeds --max-batch-size 64"},
		{"with its flag", []string{"--concurrency", "1,2", "--max-concurrency", "3"}, "--concurrency and --max-concurrency both set the swept value"},
		{"rates with an interval", []string{"--request-rates", "1,inf", "--submit-interval-ms", "3"}, "--request-rates and --submit-interval-ms both set the swept value"},
		{"rates with a replay", []string{"--request-rates", "1", "--replay", "no-such-trace.jsonl"}, "--request-rates and --replay both set the swept value"},
		{"rate with a rate", []string{"--request-rates", "1,2", "--request-rate", "3"}, "--request-rates and --request-rate both set"},
		{"with --json", []string{"--concurrency", "1", "--json", filepath.Join(dir, "x.json")}, "drop --json"},
		{"bad goodput", []string{"--concurrency", "1", "--goodput", "ttft"}, "--goodput"},
		{"vllm result format", []string{"--concurrency", "1", "--result-format", "vllm"}, "rosetop sweep writes its own files to --out-dir"},
		{"save detailed", []string{"--request-rates", "1", "--save-detailed"}, "--result-format and --save-detailed shape rosetop bench's --json"},
		{"vllm percentiles", []string{"--request-rates", "1", "--metric-percentiles", "50"}, "--percentile-metrics and --metric-percentiles shape rosetop bench's --json"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			code, stdout, stderr := runCLI(t, append([]string{"sweep", "--out-dir", dir}, tc.args...)...)
			line := strings.TrimSuffix(stderr, "\n")
			if code != exitUsage || strings.Contains(line, "\n") || !strings.Contains(line, tc.want) || stdout != "" {
				t.Errorf("exit %d, stderr %q; want exit 2 and one line with %q", code, stderr, tc.want)
			}
		})
	}
}

func TestSweepPointMedian(t *testing.T) {
	for _, c := range []struct {
		xs   []float64
		want float64
	}{{[]float64{3}, 3}, {[]float64{4, 1}, 2.5}, {[]float64{5, 1, 3}, 3}} {
		if got := medianOf(c.xs); got != c.want {
			t.Errorf("medianOf(%v) = %v, want %v", c.xs, got, c.want)
		}
	}
	if !math.IsNaN(medianOf(nil)) {
		t.Error("medianOf(nil) is not NaN")
	}
}

func FuzzSweepList(f *testing.F) {
	for _, s := range []string{"1,4,16,64", "0.5,1e3", "", ",", "1,1", "NaN", "-1", "1e400", "1,inf", "inf,+Infinity", "-inf"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		for _, fl := range []listFlag{{lo: 1, hi: maxBatch, integer: true}, {lo: minRate, hi: maxRate, inf: true}} {
			var got []float64
			fl.values = &got
			if err := fl.Set(s); err != nil {
				if strings.Contains(err.Error(), "\n") {
					t.Fatalf("multi-line error %q", err)
				}
				continue
			}
			if len(got) == 0 || len(got) > maxSweepPoints {
				t.Fatalf("%q: %d values", s, len(got))
			}
			for i, v := range got {
				if (v < fl.lo || v > fl.hi || (fl.integer && v != math.Trunc(v))) && !(fl.inf && math.IsInf(v, 1)) {
					t.Fatalf("%q: accepted %v (%+v)", s, v, fl)
				}
				for _, w := range got[:i] {
					if w == v {
						t.Fatalf("%q: %v twice", s, v)
					}
				}
			}
		}
	})
}

// TestSweepIntegerListSyntax: an integer axis reads its values as the integer flags read theirs
// (--max-concurrency 0x10 is 16, so --concurrency 0x10 is too).
func TestSweepIntegerListSyntax(t *testing.T) {
	var got []float64
	if err := (listFlag{values: &got, lo: 1, hi: maxRequests, integer: true}).Set("0x10, 1_000,0b11"); err != nil {
		t.Fatal(err)
	}
	if want := []float64{16, 1000, 3}; !slices.Equal(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
	var n int
	if err := (intFlag{p: &n, lo: 1, hi: maxRequests}).Set("0x10"); err != nil || n != 16 {
		t.Errorf("--max-concurrency 0x10: %d, %v", n, err)
	}
}

// TestSweepListInf: --request-rates takes inf in any case strconv.ParseFloat reads, once, in the
// order given; the bench flags' checks see the first finite rate, or inf when there is none.
func TestSweepListInf(t *testing.T) {
	inf := math.Inf(1)
	for _, c := range []struct {
		in    string
		want  []float64
		onSet float64
	}{
		{"1,inf", []float64{1, inf}, 1},
		{" INF , 2,4", []float64{inf, 2, 4}, 2},
		{"+Infinity", []float64{inf}, inf},
		{"0.5,Inf,8", []float64{0.5, inf, 8}, 0.5},
	} {
		var got []float64
		seen := math.NaN()
		fl := listFlag{values: &got, lo: minRate, hi: maxRate, inf: true, onSet: func(v float64) { seen = v }}
		if err := fl.Set(c.in); err != nil || !slices.Equal(got, c.want) || seen != c.onSet {
			t.Errorf("%q: %v (checks see %v), %v; want %v (%v)", c.in, got, seen, err, c.want, c.onSet)
		}
		var labels []string
		for _, v := range c.want {
			labels = append(labels, plot.Label(v))
		}
		if want := strings.Join(labels, ","); fl.String() != want {
			t.Errorf("%q: String() = %q, want %q", c.in, fl.String(), want)
		}
	}
}

// TestSweepInfPointIsBench: the inf point runs what `rosetop bench --request-rate inf` runs, every
// request at once, even under a job whose arrivals are paced.
func TestSweepInfPointIsBench(t *testing.T) {
	for _, extra := range [][]string{nil, {"--job", "paced"}, {"--job", "prefill-heavy", "--max-concurrency", "4"}} {
		want, err := parseOptions(t.Context(), append([]string{"--request-rate", "inf"}, extra...), io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		o, ax, _, err := parseSweep(t.Context(), append([]string{"--request-rates", "2,inf"}, extra...), io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		p := o
		ax.apply(&p, ax.values[1])
		got, bench := p.sessionConfig(), want.sessionConfig()
		if !reflect.DeepEqual(got, bench) || got.Arrivals.Interval != 0 || got.Arrivals.Schedule == "poisson" {
			t.Errorf("%v: the inf point runs %+v, bench --request-rate inf %+v", extra, got.Arrivals, bench.Arrivals)
		}
	}
}

// TestSweepInfRate: a sweep over 1,inf on the embedded model carries "inf" into the table, the CSV,
// the JSON (a string: JSON has no infinity), the point's file and the charts, and no NaN or
// infinity leaks into any of them.
func TestSweepInfRate(t *testing.T) {
	dir := t.TempDir()
	code, stdout, stderr := runCLI(t, "sweep", "--request-rates", "1,inf", "--num-requests", "3", "--max-new-tokens", "2", "--warmup-runs", "0", "--out-dir", dir)
	if code != 0 {
		t.Fatalf("exit %d\nstderr:\n%s", code, stderr)
	}
	table := parseTable(t, stdout)
	if len(table) != 2 || table[0]["request-rates"] != "1" || table[1]["request-rates"] != "inf" {
		t.Fatalf("table:\n%s", stdout)
	}
	raw, err := os.ReadFile(filepath.Join(dir, "sweep.json"))
	if err != nil {
		t.Fatal(err)
	}
	var loose struct {
		Points []struct {
			Value any    `json:"value"`
			Label string `json:"label"`
			File  string `json:"file"`
		} `json:"points"`
	}
	if err := json.Unmarshal(raw, &loose); err != nil || len(loose.Points) != 2 {
		t.Fatalf("sweep.json: %v\n%s", err, raw)
	}
	if p := loose.Points[1]; p.Value != "inf" || p.Label != "inf" || p.File != "point-02-inf.json" {
		t.Errorf("inf point in sweep.json: %+v", p)
	}
	if p := loose.Points[0]; p.Value != 1.0 || p.Label != "1" {
		t.Errorf("rate 1 in sweep.json: %+v", p)
	}
	var sw sweepResult
	readJSON(t, filepath.Join(dir, "sweep.json"), &sw)
	if !math.IsInf(float64(sw.Points[1].Value), 1) {
		t.Errorf("sweep.json's inf reads back as %v", sw.Points[1].Value)
	}
	for i, row := range table {
		want := pointMedians(t, filepath.Join(dir, sw.Points[i].File), 1)
		for _, col := range []string{"req/s", "tok/s", "TTFT p99", "E2EL p99"} {
			if row[col] != want[col] {
				t.Errorf("row %d %s: table %q, point JSON %q", i, col, row[col], want[col])
			}
		}
	}
	var point struct {
		Config struct {
			RequestRate any `json:"request_rate"`
		} `json:"config"`
	}
	readJSON(t, filepath.Join(dir, "point-02-inf.json"), &point)
	if point.Config.RequestRate != "inf" {
		t.Errorf("point-02-inf.json: config.request_rate %#v, want \"inf\"", point.Config.RequestRate)
	}
	checkSweepCSV(t, filepath.Join(dir, "sweep.csv"), table)
	csvData, err := os.ReadFile(filepath.Join(dir, "sweep.csv"))
	if err != nil || !strings.Contains(string(csvData), "\ninf,") {
		t.Errorf("sweep.csv has no row for inf (%v):\n%s", err, csvData)
	}
	svg, err := os.ReadFile(filepath.Join(dir, "sweep.svg"))
	if err != nil {
		t.Fatal(err)
	}
	for name, data := range map[string]string{"stdout": stdout, "sweep.json": string(raw), "sweep.csv": string(csvData), "sweep.svg": string(svg)} {
		if l := strings.ToLower(data); strings.Contains(l, "nan") || strings.Contains(data, "Inf") {
			t.Errorf("%s holds NaN or Inf:\n%s", name, data)
		}
	}
	checkSweepCharts(t, dir, sw.Model, "request rate (req/s)")
}

// TestSweepCPUProfile: sweep takes --cpuprofile as bench does: a profile of the whole sweep, and
// a path that cannot be written refused before the out dir is made.
func TestSweepCPUProfile(t *testing.T) {
	dir := t.TempDir()
	prof, out := filepath.Join(dir, "cpu.prof"), filepath.Join(dir, "out")
	sweep := []string{"sweep", "--concurrency", "1", "--num-requests", "2", "--max-new-tokens", "2", "--warmup-runs", "0", "--out-dir", out}
	code, _, stderr := runCLI(t, append(sweep, "--cpuprofile", filepath.Join(dir, "no", "cpu.prof"))...)
	if code != exitUsage || !strings.Contains(stderr, "--cpuprofile "+filepath.Join(dir, "no", "cpu.prof")+": cannot write there") {
		t.Fatalf("exit %d, stderr %q; want exit 2 naming --cpuprofile", code, stderr)
	}
	if _, err := os.Stat(out); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("--out-dir made before the refusal: %v", err)
	}
	// A profile among the sweep's own files would replace one of them (sweep.json).
	if code, _, stderr := runCLI(t, append(sweep[:len(sweep)-1:len(sweep)-1], dir, "--cpuprofile", filepath.Join(dir, "sweep.json"))...); code != exitUsage ||
		!strings.Contains(stderr, "is in --out-dir") {
		t.Errorf("a profile in --out-dir: exit %d, stderr %q; want exit 2", code, stderr)
	}
	if code, _, stderr := runCLI(t, append(sweep, "--cpuprofile", prof)...); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if b, err := os.ReadFile(prof); err != nil || len(b) < 2 || b[0] != 0x1f || b[1] != 0x8b {
		t.Errorf("%s is not a gzip-compressed profile: %v", prof, err)
	}
}

// TestSweepHelpOmitsRefusedFlags: sweep's help lists the bench flags it takes, not the ones it
// refuses (its files go to --out-dir; it has no dashboard to record).
func TestSweepHelpOmitsRefusedFlags(t *testing.T) {
	var b strings.Builder
	sweepUsage(&b)
	help := b.String()
	for _, f := range []string{"json", "csv", "save-trace", "record", "result-format", "save-detailed", "percentile-metrics", "metric-percentiles"} {
		if strings.Contains(help, "\n  -"+f+" ") {
			t.Errorf("sweep's help lists --%s, which sweep refuses", f)
		}
	}
	for _, f := range []string{"out-dir", "request-rates", "num-requests", "cpuprofile"} {
		if !strings.Contains(help, "\n  -"+f+" ") {
			t.Errorf("sweep's help lacks --%s", f)
		}
	}
}

// TestSweepRefusesAnEarlierSweepsDir: a second sweep into a directory that holds the first's
// files is refused (its points would mix with the earlier ones), before anything runs.
func TestSweepRefusesAnEarlierSweepsDir(t *testing.T) {
	out := filepath.Join(t.TempDir(), "out")
	sweep := []string{"sweep", "--num-requests", "2", "--max-new-tokens", "2", "--warmup-runs", "0", "--out-dir", out}
	if code, _, stderr := runCLI(t, append(sweep, "--concurrency", "1,2")...); code != 0 {
		t.Fatalf("first sweep: exit %d: %s", code, stderr)
	}
	code, stdout, stderr := runCLI(t, append(sweep, "--request-rates", "5")...)
	if code != exitUsage || stdout != "" || !strings.Contains(stderr, "holds an earlier sweep's files") {
		t.Errorf("second sweep: exit %d, stderr %q; want exit 2 naming the earlier files", code, stderr)
	}
	if _, err := os.Stat(filepath.Join(out, "point-01-5.json")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the refused sweep ran a point: %v", err)
	}
}

// TestSweepCSVKeepsDigits: sweep.csv has every digit of a point's numbers, as sweep.json does;
// only the printed table rounds them.
func TestSweepCSVKeepsDigits(t *testing.T) {
	r := sweepResult{Axis: "request-rates", Points: []sweepPoint{{Label: "0.001", Value: 0.001, RequestRate: 0.0012345, Throughput: num(math.NaN())}}}
	var b strings.Builder
	if err := r.writeCSV(&b); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "\n0.001,0.0012345,") || !strings.Contains(b.String(), ",n/a,") {
		t.Errorf("sweep.csv:\n%s", b.String())
	}
}

// TestSweepFirstPointMisconfigured: a sweep whose first point is refused (a workload the model
// cannot take) leaves --out-dir as it was (here: not there, nor its parents), so the corrected
// command runs there.
func TestSweepFirstPointMisconfigured(t *testing.T) {
	top := filepath.Join(t.TempDir(), "a")
	out := filepath.Join(top, "b", "out")
	sweep := []string{"sweep", "--request-rates", "5,10", "--num-requests", "2", "--max-new-tokens", "2", "--warmup-runs", "0", "--out-dir", out}
	code, _, stderr := runCLI(t, append(sweep, "--dataset", "random", "--input-len", "2000")...)
	if code != exitUsage || !strings.Contains(stderr, "--request-rates 5:") {
		t.Fatalf("first sweep: exit %d, stderr %q; want exit 2 naming the point", code, stderr)
	}
	if _, err := os.Stat(top); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the refused sweep left the directories it made: %v", err)
	}
	if code, _, stderr := runCLI(t, sweep...); code != 0 {
		t.Errorf("corrected sweep: exit %d: %s", code, stderr)
	}
}

// TestSweepFirstPointCannotStart: a first point whose engine never starts (a model directory that
// is not there) leaves --out-dir as it was, made (not there, nor its parents) or given (empty),
// so the corrected command runs there.
func TestSweepFirstPointCannotStart(t *testing.T) {
	tmp := t.TempDir()
	top := filepath.Join(tmp, "a")
	given := filepath.Join(tmp, "given")
	if err := os.Mkdir(given, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, out := range []string{filepath.Join(top, "b", "out"), given} {
		code, _, stderr := runCLI(t, "sweep", "--concurrency", "1,2", "--num-requests", "2", "--max-new-tokens", "2", "--warmup-runs", "0",
			"--model", filepath.Join(tmp, "no-such-model"), "--out-dir", out)
		if code != exitUsage || !strings.Contains(stderr, "--concurrency 1:") {
			t.Fatalf("exit %d, stderr %q; want exit 2 naming the point", code, stderr)
		}
	}
	if _, err := os.Stat(top); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the failed sweep left the directories it made: %v", err)
	}
	if ents, err := os.ReadDir(given); err != nil || len(ents) != 0 {
		t.Errorf("the failed sweep left files in --out-dir: %v %v", ents, err)
	}
}

// TestSweepStopsAfterASignal: a signal that lands as a point ends (its exports being written) stops
// the sweep there: the next point starts no engine and leaves no files, and the sweep reports the
// interruption.
func TestSweepStopsAfterASignal(t *testing.T) {
	o, ax, _, err := parseSweep(t.Context(), []string{"--concurrency", "1,2", "--num-requests", "2", "--max-new-tokens", "2", "--warmup-runs", "0"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	dir := t.TempDir()
	var stderr strings.Builder
	if err := sweepPoints(ctx, o, ax, dir, io.Discard, &stderr); !errors.Is(err, bench.ErrInterrupted) {
		t.Errorf("err %v, want interrupted", err)
	}
	if ents, err := os.ReadDir(dir); err != nil || len(ents) != 0 {
		t.Errorf("a point ran after the signal: %v %v", ents, err)
	}
	if !strings.Contains(stderr.String(), "sweep interrupted: 0 of 2 points finished") {
		t.Errorf("stderr %q", stderr.String())
	}
}

// TestSweepRefusesEarlierPointsInAnyDir: an earlier sweep's point files are found whatever
// characters the directory's name holds (glob metacharacters too).
func TestSweepRefusesEarlierPointsInAnyDir(t *testing.T) {
	for _, name := range []string{"runs[1]", "a*b", "c[", "d?"} {
		out := filepath.Join(t.TempDir(), name)
		if err := os.Mkdir(out, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(out, "point-01-1.txt"), []byte("an interrupted sweep's point\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		code, stdout, stderr := runCLI(t, "sweep", "--concurrency", "1", "--num-requests", "2", "--max-new-tokens", "2", "--warmup-runs", "0", "--out-dir", out)
		if code != exitUsage || stdout != "" || !strings.Contains(stderr, "holds an earlier sweep's files (point-01-1.txt and 0 more)") {
			t.Errorf("--out-dir %s: exit %d, stderr %q; want exit 2 naming the earlier point", name, code, stderr)
		}
	}
}

// TestSweepChecksEveryFileFirst: a sweep file that cannot be written (here: sweep.svg is a
// directory) is refused before any point runs, not after the whole sweep.
func TestSweepChecksEveryFileFirst(t *testing.T) {
	for _, name := range []string{"sweep.csv", "sweep.png", "sweep.svg"} {
		out := t.TempDir()
		if err := os.Mkdir(filepath.Join(out, name), 0o755); err != nil {
			t.Fatal(err)
		}
		code, stdout, stderr := runCLI(t, "sweep", "--concurrency", "1", "--num-requests", "2", "--max-new-tokens", "2", "--warmup-runs", "0", "--out-dir", out)
		if code != exitUsage || stdout != "" || !strings.Contains(stderr, name) || strings.Count(stderr, "\n") != 1 {
			t.Errorf("%s a directory: exit %d, stderr %q; want exit 2 naming it", name, code, stderr)
		}
		if _, err := os.Stat(filepath.Join(out, "point-01-1.json")); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s a directory: a point ran: %v", name, err)
		}
	}
}
