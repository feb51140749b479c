package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"rosetop/internal/sticky"
)

// progressEvery is how often RunBench notes on stderr how far a slow run has got when stderr is
// not a terminal (a terminal's line is redrawn every meterRate).
const progressEvery = 10 * time.Second

// Exports are the files a headless run writes after its runs.
type Exports struct {
	JSONPath string // the JSONFormat results ("": none)
	// JSONFormat is JSONPath's shape: "" or "rosetop" (config, run summaries and per-request
	// records), "vllm" (one `vllm bench serve --save-result` object per measured run, vllm.go).
	JSONFormat string
	Detailed   bool      // vllm: the per-request arrays too (--save-detailed)
	VLLMStats  VLLMStats // vllm: the statistics written (--percentile-metrics, --metric-percentiles)
	CSVPath    string    // one row per request ("": none)
	TracePath  string    // each measured run as a Mooncake trace (trace.go; "": none)
	Settings   any       // the command line's options, written as the JSON's "config"
	Tool       ToolInfo
}

// Result is what a headless benchmark measured.
type Result struct {
	Model  string    // as the report names it
	Device string    // the backend's description
	Runs   []Summary // the measured runs (no warmups), in order
}

// RunBench is `rosetop bench`: it runs cfg's warmup and repeat runs headless on opts.Provider and
// prints, as the seeds do, "=== warmup i/N ===" per warmup run, "=== run i/M ===" per run when
// M > 1 and each measured run's report on stdout; progress goes to stderr (runMeter). Then it
// writes the exports, each atomically. An unwritable export does not lose the report (already
// printed); its error is returned, as is a measured run in which no request succeeded (Measure).
// Ctrl-C (ctx cancelled) cancels outstanding requests, prints what finished, writes the exports
// and returns ErrInterrupted.
func RunBench(ctx context.Context, cfg Config, opts SessionOptions, exp Exports, stdout, stderr io.Writer) error {
	_, err := Measure(ctx, cfg, opts, exp, stdout, stderr)
	return err
}

// Measure is RunBench that also returns the measured runs' summaries (rosetop sweep's points).
// A measured run in which no request succeeded fails it (ErrRunFailed), unless
// opts.KeepFailedRuns, once every run has been reported and exported; the session's first run
// stops it at once (ErrNothingSucceeded).
func Measure(ctx context.Context, cfg Config, opts SessionOptions, exp Exports, stdout, stderr io.Writer) (Result, error) {
	meter := newRunMeter(stderr, opts.meter)
	out := &sticky.Writer{W: meter.guard(stdout)}
	stderr = meter.guard(stderr)
	opts.headless = true
	opts.KeepRecords = exp.JSONPath != "" || exp.CSVPath != "" || exp.TracePath != ""
	opts.Progress = stderr
	var res Result
	var failed []error // measured runs in which no request succeeded; written by the session goroutine, read after it ended
	opts.onRunStart = func(label string) {
		if strings.HasPrefix(label, "warmup") || cfg.RepeatRuns > 1 {
			fmt.Fprintln(out, runHeaderLine(label))
		}
		meter.runStarted(label)
	}
	opts.onRunEnd = func(r *runResult) {
		meter.runEnded()
		if r.sum.Partial {
			fmt.Fprintf(stderr, "rosetop: %s interrupted: %d requests finished, %d cancelled%s\n", r.sum.Label, r.sum.Requests, r.sum.Cancelled, notSentText(r.sum))
		} else {
			fmt.Fprintf(stderr, "rosetop: %s: %d requests in %.2f s\n", r.sum.Label, r.sum.Requests+r.sum.Failed, r.sum.Wall.Seconds())
		}
		if r.sum.Warmup {
			fmt.Fprintln(out, coldRunLine(r.sum))
		} else {
			writeReport(out, r.hdr, r.sum)
			res.Model, res.Device = r.hdr.Model, r.hdr.DeviceDetail
			res.Runs = append(res.Runs, r.sum)
			if noneSucceeded(r.sum) {
				failed = append(failed, measuredRunFailed(r.hdr, r.sum, cfg.Workload.NumRequests))
			}
		}
	}
	if cfg.NVTX {
		fmt.Fprintln(stderr, "rosetop: --nvtx: printed in the report; it has no effect without a profiler (nsys) attached")
	}
	s, err := NewSession(ctx, cfg, opts)
	if err != nil {
		return res, err
	}
	runErr := meter.wait(s, opts.meter)
	s.mu.Lock()
	results := append([]*runResult(nil), s.results...)
	cold := coldStartLines(s.live.cold, len(s.live.steady.slice()), s.live.compare(), s.ledger())
	s.mu.Unlock()
	if runErr == nil {
		writeColdStart(out, cold)
	}
	if opts.KeepFailedRuns || errors.Is(runErr, ErrNothingSucceeded) { // a result; or the error already names the run
		failed = nil
	}
	interrupted := errors.Is(runErr, context.Canceled)
	var errs []error
	if interrupted {
		// The interrupt's exit status wins; the runs that failed entirely are still named.
		for _, e := range failed {
			fmt.Fprintf(stderr, "rosetop: %v\n", e)
		}
	} else {
		errs = append(errs, failed...)
		errs = append(errs, runErr)
	}
	errs = append(errs, s.writeExports(exp, results, 0, stderr))
	if out.Err != nil {
		errs = append(errs, fmt.Errorf("stdout: %w", out.Err))
	}
	if err := errors.Join(errs...); err != nil {
		return res, err
	}
	if interrupted {
		return res, ErrInterrupted
	}
	return res, nil
}

// writeExports writes every export asked for, each atomically, noting on notes what it wrote
// ("rosetop: wrote out.json: 4 runs, 256 requests"); dropped is how many old windows a long
// dashboard session left out. Every error is returned.
func (s *Session) writeExports(exp Exports, results []*runResult, dropped int, notes io.Writer) error {
	var measured []*runResult // what the vLLM result and the traces hold: no warmups
	for _, r := range results {
		if !r.sum.Warmup {
			measured = append(measured, r)
		}
	}
	what := runsText(results)
	var errs []error
	writeNoted := func(flag, path, what string, fill func(io.Writer) error) {
		if err := writeFile(flag, path, fill); err != nil {
			errs = append(errs, err)
			return
		}
		fmt.Fprintf(notes, "rosetop: wrote %s: %s\n", path, what)
	}
	write := func(flag, path string, fill func(io.Writer) error) { writeNoted(flag, path, what, fill) }
	switch {
	case exp.JSONPath != "" && exp.JSONFormat == "vllm":
		c := vllmContext{cfg: s.cfg, tool: exp.Tool, epoch: s.start, detailed: exp.Detailed, stats: exp.VLLMStats}
		writeNoted("json", exp.JSONPath, runsText(measured), func(w io.Writer) error { return writeVLLM(w, c, results) })
	case exp.JSONPath != "":
		meta := jsonMeta{Tool: "rosetop", Version: exp.Tool.Version, Commit: exp.Tool.Commit, Epoch: s.start.Format(time.RFC3339Nano)}
		meta.Host, _ = os.Hostname()
		write("json", exp.JSONPath, func(w io.Writer) error { return writeJSON(w, exp.Settings, meta, results, dropped) })
	}
	if exp.CSVPath != "" {
		write("csv", exp.CSVPath, func(w io.Writer) error { return writeCSV(w, results) })
	}
	if exp.TracePath != "" && s.wl != nil {
		for k, r := range measured {
			path := exp.TracePath
			if len(measured) > 1 {
				path = RunTracePath(path, k+1)
			}
			recs := traceRecords(s.wl, r.reqs)
			what := fmt.Sprintf("%s, %d requests", r.sum.Label, len(recs)) // one measured run a trace
			writeNoted("save-trace", path, what, func(w io.Writer) error { return writeTrace(w, recs) })
		}
	}
	return errors.Join(errs...)
}

// runsText says how many runs and requests an export holds: "4 runs, 256 requests".
func runsText(rs []*runResult) string {
	reqs := 0
	for _, r := range rs {
		reqs += len(r.reqs)
	}
	return fmt.Sprintf("%d runs, %d requests", len(rs), reqs)
}

// RunTracePath is where --save-trace writes measured run k when there are several: "-run<k>"
// before the extension (trace.jsonl -> trace-run2.jsonl).
func RunTracePath(path string, k int) string {
	ext := filepath.Ext(path)
	return fmt.Sprintf("%s-run%d%s", strings.TrimSuffix(path, ext), k, ext)
}

// coldRunLine is the one line under a warmup run's heading: it is not reported in full, but
// what it measured is the cold side of the cold start block.
func coldRunLine(s Summary) string {
	ttft := "no request finished"
	if s.TTFT.N > 0 {
		ttft = fmt.Sprintf("TTFT p99 %.2f ms", s.TTFT.P99)
	}
	failed := ""
	if s.Failed > 0 {
		failed = fmt.Sprintf(" and %d failed", s.Failed)
	}
	return fmt.Sprintf("Cold run, not measured: %d requests%s in %.2f s, %s (compared under === cold start ===)", s.Requests, failed, s.Wall.Seconds(), ttft)
}
