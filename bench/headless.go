package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"
)

// progressEvery is how often RunBench notes on stderr how far a slow run has got.
const progressEvery = 10 * time.Second

// Exports are the files a headless run writes after its runs.
type Exports struct {
	JSONPath string // config, run summaries and per-request records ("": none)
	CSVPath  string // one row per request ("": none)
	Settings any    // the command line's options, written as the JSON's "config"
}

// RunBench is `rosetop bench`: it runs cfg's warmup and repeat runs headless on opts.Provider and
// prints, as the seeds do, "=== warmup i/N ===" per warmup run, "=== run i/M ===" per run when
// M > 1 and each measured run's report on stdout; progress goes to stderr. Then it writes the
// exports, each atomically. An unwritable export does not lose the report (already printed); its
// error is returned. Ctrl-C (ctx cancelled) cancels outstanding requests, prints what finished,
// writes the exports and returns ErrInterrupted.
func RunBench(ctx context.Context, cfg Config, opts SessionOptions, exp Exports, stdout, stderr io.Writer) error {
	out := &errWriter{w: stdout}
	opts.headless = true
	opts.KeepRecords = exp.JSONPath != "" || exp.CSVPath != ""
	opts.Progress = stderr
	opts.onRunStart = func(label string) {
		if strings.HasPrefix(label, "warmup") || cfg.RepeatRuns > 1 {
			fmt.Fprintln(out, runHeaderLine(label))
		}
	}
	opts.onRunEnd = func(r *runResult) {
		if r.sum.Partial {
			fmt.Fprintf(stderr, "rosetop: %s interrupted: %d requests finished, %d cancelled\n", r.sum.Label, r.sum.Requests, r.sum.Cancelled)
		} else {
			fmt.Fprintf(stderr, "rosetop: %s: %d requests in %.2f s\n", r.sum.Label, r.sum.Requests+r.sum.Failed, r.sum.Wall.Seconds())
		}
		if r.sum.Warmup {
			fmt.Fprintln(out, coldRunLine(r.sum))
		} else {
			writeReport(out, r.hdr, r.sum)
		}
	}
	if cfg.NVTX {
		fmt.Fprintln(stderr, "rosetop: --nvtx: printed in the report; it has no effect without a profiler (nsys) attached")
	}
	s, err := NewSession(ctx, cfg, opts)
	if err != nil {
		return err
	}
	runErr := waitWithProgress(s, stderr)
	s.mu.Lock()
	results := append([]*runResult(nil), s.results...)
	cold := coldStartLines(s.live.cold, len(s.live.steady.slice()), s.live.compare(), s.ledger())
	s.mu.Unlock()
	if runErr == nil {
		writeColdStart(out, cold)
	}
	var errs []error
	if runErr != nil && !errors.Is(runErr, context.Canceled) {
		errs = append(errs, runErr)
	}
	errs = append(errs, writeExports(exp, results, 0, stderr))
	if out.err != nil {
		errs = append(errs, fmt.Errorf("stdout: %w", out.err))
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	if errors.Is(runErr, context.Canceled) {
		return ErrInterrupted
	}
	return nil
}

// coldRunLine is the one line under a warmup run's heading: it is not reported in full, but
// what it measured is the cold side of the cold start block.
func coldRunLine(s Summary) string {
	ttft := "no request finished"
	if s.TTFT.N > 0 {
		ttft = fmt.Sprintf("TTFT p99 %.2f ms", s.TTFT.P99)
	}
	return fmt.Sprintf("Cold run, not measured: %d requests in %.2f s, %s (compared under === cold start ===)", s.Requests, s.Wall.Seconds(), ttft)
}

// waitWithProgress waits for the session, noting a slow run's progress on stderr.
func waitWithProgress(s *Session, stderr io.Writer) error {
	tick := time.NewTicker(progressEvery)
	defer tick.Stop()
	for {
		select {
		case <-s.done:
			return s.err
		case <-tick.C:
			s.mu.Lock()
			if rs := s.cur; rs != nil {
				p := rs.status(s.clock.Now(), s.cfg.Workload.MaxNewTokens)
				eta := ""
				if p.ETA > 0 {
					eta = fmt.Sprintf(", about %s left", p.ETA.Round(time.Second))
				}
				fmt.Fprintf(stderr, "rosetop: %s: %d/%d requests finished, %d/%d tokens%s\n", rs.info.Label, p.Finished, p.Requests, p.Tokens, p.MaxTokens, eta)
				if p.ETA > longRun && !rs.hinted {
					rs.hinted = true
					fmt.Fprintln(stderr, "rosetop: --num-requests and --max-new-tokens make runs shorter")
				}
			}
			s.mu.Unlock()
		}
	}
}

// errWriter keeps the first write error so a long report is not cut short silently.
type errWriter struct {
	w   io.Writer
	err error
}

func (e *errWriter) Write(p []byte) (int, error) {
	if e.err != nil {
		return 0, e.err
	}
	n, err := e.w.Write(p)
	e.err = err
	return n, err
}
