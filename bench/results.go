package bench

import (
	"fmt"
	"io"
	"strings"
	"time"
)

// Bounds of what a dashboard session keeps of its finished runs: it runs for hours, files a
// steady window every NumRequests requests, and must not grow.
const (
	maxResults     = 512     // run summaries
	maxKeptRecords = 200_000 // per-request records (KeepRecords: the dashboard's --json/--csv)
)

// keep files res into the results. A headless session keeps every run (their number is bounded
// by the flags). A dashboard session keeps its planned runs (cold and measured) whole and bounds
// the steady windows: past maxResults summaries the oldest window goes, and past maxKeptRecords
// records the oldest windows lose theirs (the export marks them). The caller holds s.mu.
func (s *Session) keep(res *runResult) {
	s.results = append(s.results, res)
	s.filed++
	s.kept += len(res.reqs)
	if s.opts.headless {
		return
	}
	for i := 0; i < len(s.results) && (len(s.results) > maxResults || s.kept > maxKeptRecords); i++ {
		r := s.results[i]
		if !r.live || r == res {
			continue
		}
		if len(s.results) > maxResults {
			s.kept -= len(r.reqs)
			s.results = append(s.results[:i], s.results[i+1:]...)
			s.dropped++
			i--
			continue
		}
		if r.reqs != nil {
			s.kept -= len(r.reqs)
			r.reqs, r.recordsDropped = nil, true
		}
	}
}

// Report writes the session's summary table: per engine its cold run, the median of its steady
// runs and windows, the last of them and a run cut short by the end, then the ledger. Per-run
// summaries and every request are in the --json export. A watch session, which runs nothing,
// writes what the server reported instead (watchReport).
func (s *Session) Report(w io.Writer) error {
	if s.watching() {
		return s.watchReport(w)
	}
	s.mu.Lock()
	results := append([]*runResult(nil), s.results...)
	dropped, ledger, now := s.dropped, s.ledger(), s.clock.Now()
	s.mu.Unlock()
	_, err := io.WriteString(w, strings.Join(summaryTable(results, dropped, ledger, now), "\n")+"\n")
	return err
}

// summaryTable is Report's lines.
func summaryTable(results []*runResult, dropped int, ledger []LedgerEntry, elapsed time.Duration) []string {
	engines := map[int][]*runResult{}
	var order []int
	for _, r := range results {
		if _, ok := engines[r.engine]; !ok {
			order = append(order, r.engine)
		}
		engines[r.engine] = append(engines[r.engine], r)
	}
	lines := []string{fmt.Sprintf("=== rosetop session: %s, %d engine(s) ===", elapsed.Round(time.Second), len(order))}
	if len(results) == 0 {
		return append(lines, "No run finished.")
	}
	lines = append(lines, fmt.Sprintf("%-26s %8s %9s %9s %9s %9s %9s", "", "requests", "TTFT p50", "TTFT p99", "TPOT p50", "ITL p99", "tok/s"))
	for _, e := range order {
		lines = append(lines, engineRows(e, engines[e])...)
	}
	if dropped > 0 {
		lines = append(lines, fmt.Sprintf("(%d older steady windows were dropped to bound memory; the medians are over those kept)", dropped))
	}
	if len(ledger) > 0 {
		lines = append(lines, ledgerLines(ledger)...)
	}
	return lines
}

// engineRows is one engine's block of the summary table.
func engineRows(index int, runs []*runResult) []string {
	h := runs[0].hdr
	lines := []string{fmt.Sprintf("engine %d: %s on %s, paged attention %s, CUDA Graph %s", index, h.Model, h.DeviceDetail, onOff(h.Paged), onOff(h.CUDAGraph))}
	if h.Endpoint != "" { // the server's engine settings are its own
		lines[0] = fmt.Sprintf("remote server: %s on %s (%s API)", h.Model, h.DeviceDetail, h.API)
	}
	sums := make([]Summary, len(runs))
	for i, r := range runs {
		sums[i] = r.sum
	}
	return append(lines, SummaryRows(sums, 24)...)
}

// SummaryRows are one engine's rows of a summary table, names padded to width: its cold runs,
// the median of its other runs and windows and the last of them, its failed requests by cause,
// and its runs cut short with what finished in them. The quit table and replay --summary both
// print them.
func SummaryRows(runs []Summary, width int) []string {
	var lines, cut []string
	var steady []Summary
	var failed int
	var causes map[string]int
	for _, s := range runs {
		failed += s.Failed
		for k, n := range s.Failures {
			causes = addCounts(causes, k, n)
		}
		switch {
		case s.Partial:
			if s.Requests > 0 { // what finished before the end, measured as any run is
				cut = append(cut, summaryRow("cut short ("+s.Label+")", s, width))
			}
			line := fmt.Sprintf("  cut short (%s): %d finished, %d cancelled%s", s.Label, s.Requests, s.Cancelled+s.Failed, notSentText(s))
			if s.CutTTFT.N > 0 {
				line += fmt.Sprintf(" after %d tokens (%d had started: TTFT p50 %.2f, p99 %.2f ms)", s.CutTokens, s.CutTTFT.N, s.CutTTFT.P50, s.CutTTFT.P99)
			}
			cut = append(cut, line)
		case s.Warmup:
			name := s.Label
			if !strings.HasPrefix(name, "cold") {
				name = "cold (" + name + ")"
			}
			lines = append(lines, summaryRow(name, s, width))
		default:
			steady = append(steady, s)
		}
	}
	if n := len(steady); n > 0 {
		lines = append(lines, summaryRow(fmt.Sprintf("steady (median of %d)", n), medianSummary(steady), width))
		if n > 1 {
			lines = append(lines, summaryRow("last ("+steady[n-1].Label+")", steady[n-1], width))
		}
	}
	if failed > 0 { // the rows count the requests that completed
		lines = append(lines, fmt.Sprintf("  failed: %d (%s)", failed, countsText(causes)))
	}
	return append(lines, cut...)
}

// summaryRow is one row: requests, TTFT p50/p99, TPOT p50, ITL p99 (ms), completion tokens/s.
func summaryRow(name string, s Summary, width int) string {
	cell := func(d Dist, v float64) string {
		if d.N == 0 {
			return fmt.Sprintf(" %9s", "n/a")
		}
		return fmt.Sprintf(" %9.2f", v)
	}
	tps := fmt.Sprintf(" %9.0f", s.Throughput)
	if s.Wall <= 0 { // a window whose requests all finished in the step that ended the one before
		tps = fmt.Sprintf(" %9s", "n/a")
	}
	return fmt.Sprintf("  %-*s %8d", width, name, s.Requests) + cell(s.TTFT, s.TTFT.P50) + cell(s.TTFT, s.TTFT.P99) +
		cell(s.TPOT, s.TPOT.P50) + cell(s.ITL, s.ITL.P99) + tps
}

// medianSummary is the median of each figure the table shows over runs, and their request total.
func medianSummary(runs []Summary) Summary {
	med := func(get func(s *Summary) float64, dist func(s *Summary) Dist) (float64, int) {
		var vals []float64
		n := 0
		for i := range runs {
			if d := dist(&runs[i]); d.N > 0 {
				vals = append(vals, get(&runs[i]))
				n += d.N
			}
		}
		if len(vals) == 0 {
			return 0, 0
		}
		return median(vals), n
	}
	var m Summary
	for i := range runs {
		m.Requests += runs[i].Requests
	}
	ttft := func(s *Summary) Dist { return s.TTFT }
	m.TTFT.P50, m.TTFT.N = med(func(s *Summary) float64 { return s.TTFT.P50 }, ttft)
	m.TTFT.P99, _ = med(func(s *Summary) float64 { return s.TTFT.P99 }, ttft)
	m.TPOT.P50, m.TPOT.N = med(func(s *Summary) float64 { return s.TPOT.P50 }, func(s *Summary) Dist { return s.TPOT })
	m.ITL.P99, m.ITL.N = med(func(s *Summary) float64 { return s.ITL.P99 }, func(s *Summary) Dist { return s.ITL })
	var tps []float64 // over the runs that span some time
	for i := range runs {
		if runs[i].Wall > 0 {
			tps = append(tps, runs[i].Throughput)
			m.Wall += runs[i].Wall // their total: the row has a throughput
		}
	}
	if len(tps) > 0 {
		m.Throughput = median(tps)
	}
	return m
}

// Export writes the --json and --csv files of a dashboard session (every run kept, its records
// when KeepRecords), each atomically, noting on notes what it wrote. Call it after Close.
func (s *Session) Export(exp Exports, notes io.Writer) error {
	s.mu.Lock()
	results := append([]*runResult(nil), s.results...)
	dropped := s.dropped
	s.mu.Unlock()
	return s.writeExports(exp, results, dropped, notes)
}
