package record

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"rosetop/bench"
)

// sampledEngines builds the views a dashboard's tick samples of a session whose engines run
// faster than the tick, as `rosetop --num-requests 4 --max-new-tokens 2` with r pressed: each
// engine's first view already shows its cold run and windows (its steady list never empty),
// every engine names its windows from "live 1", engine 4 was stopped before it ran (it shows no
// run), and engine 6's cold run was cut short by the quit. marked: bench's "cold start (engine
// N)" markers are in the views (without them the cold runs' labels name the engines).
func sampledEngines(marked bool) []*bench.View {
	run := func(label string, warmup bool, i int) bench.Summary {
		return bench.Summary{Index: i, Warmup: warmup, Label: label, Requests: 4, TTFT: bench.Dist{P50: float64(i), P99: float64(i), N: 4}, Throughput: float64(100 * i)}
	}
	windows := func(from, to int) []bench.Summary {
		var ws []bench.Summary
		for k := from; k <= to; k++ {
			ws = append(ws, run(fmt.Sprintf("live %d", k), false, k))
		}
		return ws
	}
	var views []*bench.View
	var markers []bench.Marker
	now := time.Duration(0)
	add := func(engine int, cold *bench.Summary, steady []bench.Summary) {
		now += 100 * time.Millisecond
		if n := len(markers); marked && (n == 0 || !strings.HasSuffix(markers[n-1].Label, fmt.Sprintf("(engine %d)", engine))) {
			markers = append(markers[:n:n], bench.Marker{At: now, Label: fmt.Sprintf("cold start (engine %d)", engine)})
			markers = append(markers, bench.Marker{At: now, Label: "prefill max batch 9"}) // a config mark after it
		}
		views = append(views, &bench.View{Now: now, Header: bench.Header{Model: "tiny", Device: "cpu", RunLabel: fmt.Sprint(engine)}, Cold: cold, Steady: steady, Markers: markers})
	}
	warm := run("warmup 1/1", true, 1)
	planned := []bench.Summary{run("run 1/3", false, 1), run("run 2/3", false, 2), run("run 3/3", false, 3)}
	add(1, nil, nil)
	add(1, &warm, nil)
	add(1, &warm, planned)
	add(1, &warm, append(planned[:3:3], windows(1, 20)...))
	add(1, &warm, append(planned[2:3:3], windows(1, 31)...)) // the ring of 32
	add(1, &warm, windows(9, 40))
	for _, e := range []struct{ engine, windows int }{{2, 5}, {3, 3}, {5, 9}} {
		c := run(fmt.Sprintf("cold run (engine %d)", e.engine), true, e.engine)
		add(e.engine, &c, windows(1, 2))
		add(e.engine, &c, windows(1, e.windows))
		if e.engine == 3 {
			add(4, nil, nil) // built, then replaced by a newer change before it ran
		}
	}
	cut := run("cold run (engine 6)", true, 6)
	cut.Partial = true
	add(6, &cut, nil)
	return views
}

// The replay's summary holds one block per engine that finished a run, numbered as the session
// numbered it, each with its own cold run and windows, as the live summary groups them: an
// engine whose first view already shows runs is a new one, not more of the last.
func TestSummaryEngines(t *testing.T) {
	for _, marked := range []bool{true, false} {
		t.Run(fmt.Sprintf("markers=%v", marked), func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "engines.rec")
			if err := WriteViews(path, Meta{Command: "dashboard"}, sampledEngines(marked), nil); err != nil {
				t.Fatal(err)
			}
			rec, err := Open(path)
			if err != nil {
				t.Fatal(err)
			}
			defer rec.Close()
			var got []string
			for _, e := range rec.Engine {
				cold := "-"
				if e.Cold != nil {
					cold = e.Cold.Label
				}
				got = append(got, fmt.Sprintf("%d: %s, %d steady, header %s", e.Index, cold, len(e.Steady), e.Header.RunLabel))
			}
			want := []string{
				"1: warmup 1/1, 43 steady, header 1",
				"2: cold run (engine 2), 5 steady, header 2",
				"3: cold run (engine 3), 3 steady, header 3",
				"5: cold run (engine 5), 9 steady, header 5",
				"6: cold run (engine 6), 0 steady, header 6",
			}
			if strings.Join(got, "\n") != strings.Join(want, "\n") {
				t.Fatalf("engines:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
			}
			var b strings.Builder
			if err := WriteSummary(&b, rec); err != nil {
				t.Fatal(err)
			}
			for _, rows := range [][]string{
				{"engine 1: ", "  cold (warmup 1/1) ", "  steady (median of 43) ", "  last (live 40) "},
				{"engine 2: ", "  cold run (engine 2) ", "  steady (median of 5) ", "  last (live 5) "},
				{"engine 5: ", "  cold run (engine 5) ", "  steady (median of 9) ", "  last (live 9) "},
				{"engine 6: ", "  cut short (cold run (engine 6)) ", "  cut short (cold run (engine 6)): 4 finished"},
			} {
				if rowsAt(b.String(), rows) != strings.Join(rows, "\n") {
					t.Fatalf("the summary lacks, in order:\n%s\n%s", strings.Join(rows, "\n"), b.String())
				}
			}
			if strings.Contains(b.String(), "engine 4") {
				t.Fatalf("engine 4 ran nothing, yet has a block:\n%s", b.String())
			}
		})
	}
}

// rowsAt is the summary's lines from the one starting rows[0], as many as rows, each cut to its
// row's length (the columns' heading skipped): equal to rows joined when they follow each other.
func rowsAt(s string, rows []string) string {
	var lines []string
	for _, l := range strings.Split(s, "\n") {
		if !strings.Contains(l, "requests  TTFT p50") {
			lines = append(lines, l)
		}
	}
	for i, l := range lines {
		if !strings.HasPrefix(l, rows[0]) || i+len(rows) > len(lines) {
			continue
		}
		got := make([]string, len(rows))
		for j, r := range rows {
			got[j] = lines[i+j][:min(len(r), len(lines[i+j]))]
		}
		return strings.Join(got, "\n")
	}
	return ""
}

// An engine's first run is its cold one; without --warmup-runs it is a measured run, which the
// live summary counts among the steady runs, and a cold run cut short has the quit table's "cut
// short" row and line.
func TestSummaryColdRunKinds(t *testing.T) {
	r := func(label string, warmup, partial bool) bench.Summary {
		return bench.Summary{Label: label, Warmup: warmup, Partial: partial, Requests: 4, Throughput: 10}
	}
	measured := r("run 1/3", false, false)
	got := engineRows(EngineRuns{Cold: &measured, Steady: []bench.Summary{r("run 2/3", false, false), r("run 3/3", false, false)}})
	if len(got) != 2 || !strings.HasPrefix(got[0], "  steady (median of 3) ") || !strings.HasPrefix(got[1], "  last (run 3/3) ") {
		t.Errorf("a measured first run:\n%s", strings.Join(got, "\n"))
	}
	cut := r("cold run (engine 2)", true, true)
	got = engineRows(EngineRuns{Cold: &cut})
	if len(got) != 2 || !strings.HasPrefix(got[0], "  cut short (cold run (engine 2)) ") || !strings.HasPrefix(got[1], "  cut short (cold run (engine 2)): 4 finished, 0 cancelled") {
		t.Errorf("a cold run cut short:\n%s", strings.Join(got, "\n"))
	}
}
