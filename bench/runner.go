package bench

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"rosetop/sched"
)

// cancelGrace bounds the wait for cancelled requests' records when a run is interrupted: a
// guard against a stuck engine, never reached by a healthy one.
const cancelGrace = 5 * time.Second

// runState is the run in progress. Its fields are guarded by Session.mu.
type runState struct {
	info      runInfo
	hdr       reportHeader
	engine    int           // the session's n-th engine runs it
	start     time.Duration // session clock at its start
	hinted    bool          // the "this run will take minutes" note was logged
	n         int
	maxTokens int               // the output tokens of all its requests, each run to its length
	ids       []sched.RequestID // request i's id, in submission order
	targets   []time.Duration
	hasTarget []bool
	records   map[sched.RequestID]*sched.Record // written by the recorder
	tokens    int                               // output tokens so far, counted by the recorder
	failed    int                               // records that are failures (not cancels), counted by the recorder
	progress  chan struct{}                     // recorder -> session goroutine: a record arrived (cap 1)
	// inFlight holds a token per request submitted and not finished when --max-concurrency is
	// set (its capacity): the submitter puts one in before each submit, the recorder takes one
	// out per record. nil: no limit.
	inFlight chan struct{}
}

// outcome is how a run or an engine's runs ended.
type outcome int

const (
	runComplete outcome = iota // every request finished
	runStopped                 // the session's context was cancelled (Ctrl-C, Close)
	runRestart                 // Do asked for a new engine
	runFailed                  // the scheduler loop returned
)

// plannedRun is the next run of an engine.
type plannedRun struct {
	label  string
	index  int
	warmup bool // recorded as cold, not a steady run
	live   bool // the continuous steady state (runLive) until a restart or stop
	phase  Phase
}

// plan returns an engine's k-th run: on the first engine the warmup runs, the repeat runs,
// then (dashboard) the continuous steady state; on a rebuilt engine a cold run, then the steady
// state.
func (s *Session) plan(g *generation, k int) (plannedRun, bool) {
	w, m := s.cfg.WarmupRuns, s.cfg.RepeatRuns
	if g.index > 1 {
		w, m = 1, 0
	}
	switch {
	case k < w && g.index > 1:
		return plannedRun{label: fmt.Sprintf("cold run (engine %d)", g.index), index: g.index, warmup: true, phase: PhaseCold}, true
	case k < w:
		return plannedRun{label: fmt.Sprintf("warmup %d/%d", k+1, w), index: k + 1, warmup: true, phase: PhaseCold}, true
	case k < w+m:
		return plannedRun{label: fmt.Sprintf("run %d/%d", k-w+1, m), index: k - w + 1, phase: PhaseRun}, true
	case !s.opts.headless && k == w+m:
		return plannedRun{label: "live", live: true, phase: PhaseLive}, true
	}
	return plannedRun{}, false
}

// loop is the session goroutine: it runs each engine's runs and rebuilds engines on request.
func (s *Session) loop(ctx context.Context, g *generation) error {
	for {
		var why outcome
		var err error
		if s.opts.External {
			why, err = s.serveExternal(ctx, g)
		} else {
			why, err = s.runEngine(ctx, g)
		}
		if cerr := s.stopEngine(g); err == nil && cerr != nil {
			err = fmt.Errorf("close engine: %w", cerr)
		}
		if s.opts.External {
			s.ext.abandon(ErrStopped)
			s.mu.Lock()
			s.fileWindow(g, windowExternal, true)
			s.mu.Unlock()
		}
		if err != nil {
			s.mu.Lock()
			s.logf(LogError, "%v", err)
			s.mu.Unlock()
			return err
		}
		if why != runRestart || ctx.Err() != nil { // a quit with a restart pending builds nothing
			return ctx.Err()
		}
		if g, err = s.nextEngine(ctx, g); err != nil {
			return err
		}
	}
}

// nextEngine builds the engine after g, and builds again while a change asked for during a
// build supersedes it: an engine no longer wanted is stopped before it runs a request.
func (s *Session) nextEngine(ctx context.Context, g *generation) (*generation, error) {
	for {
		s.setPhase(PhaseStarting, fmt.Sprintf("building engine %d", g.index+1))
		ng, err := s.startEngine(g.index + 1)
		if err != nil {
			// Keep the session alive on the options that worked.
			s.mu.Lock()
			s.logf(LogError, "new engine: %v; back to the previous options", err)
			s.want = EngineOptions{Paged: g.info.Paged, CUDAGraph: g.info.CUDAGraph}
			s.mu.Unlock()
			if ng, err = s.startEngine(g.index + 1); err != nil {
				return nil, err
			}
		}
		if ctx.Err() != nil || !s.supersede(ctx) { // a quit: runEngine stops it at once
			return ng, nil
		}
		s.mu.Lock()
		s.logf(LogInfo, "engine %d stopped before it ran: other options were asked for while it was built", ng.index)
		s.mu.Unlock()
		if err := s.stopEngine(ng); err != nil {
			return nil, fmt.Errorf("close engine: %w", err)
		}
		g = ng
	}
}

// runEngine runs an engine's planned runs until they end, a restart or a stop.
func (s *Session) runEngine(ctx context.Context, g *generation) (outcome, error) {
	cold := false // the previous run was a cold one
	for k := 0; ; k++ {
		if ctx.Err() != nil { // stopped between runs, or while this engine was being built
			return runStopped, nil
		}
		pr, ok := s.plan(g, k)
		if !ok {
			return runComplete, nil
		}
		if cold && !pr.warmup {
			if err := s.prewarm(g); err != nil {
				return runFailed, err
			}
		}
		cold = pr.warmup
		if pr.live {
			return s.runLive(ctx, g)
		}
		why, err := s.runOne(ctx, g, pr, k == 0)
		if err != nil || why != runComplete {
			return why, err
		}
	}
}

// prewarmer is a Server whose engine can pay its remaining one-time costs at once
// (engine.Prewarmer).
type prewarmer interface {
	Prewarm() error
}

// prewarm has the engine pay, between the cold runs and the first steady one, the one-time
// costs the cold runs did not meet: on the GPU, cuBLAS's first call for a GEMM row class and a
// batch size's graph capture, a few ms each, which depend on how a run's arrivals were split
// into prefill steps, so a steady run could otherwise pay one. The log and the ledger show it.
func (s *Session) prewarm(g *generation) error {
	w, ok := g.srv.(prewarmer)
	if !ok {
		return nil
	}
	t0 := time.Now()
	if err := w.Prewarm(); err != nil {
		return fmt.Errorf("prewarm: %w", err)
	}
	took := time.Since(t0)
	s.mu.Lock()
	seen := g.ledgerSeen
	s.noteLedger(g)
	if g.ledgerSeen > seen { // else nothing was left to pay (the CPU engine has nothing)
		s.logf(LogRun, "prewarm: the one-time costs the cold runs did not meet, paid in %v", took.Round(100*time.Microsecond))
	}
	s.mu.Unlock()
	return nil
}

// runOne submits the workload once and waits for every request to finish.
func (s *Session) runOne(ctx context.Context, g *generation, pr plannedRun, first bool) (outcome, error) {
	rs := &runState{n: s.cfg.Workload.NumRequests, maxTokens: s.wl.totalNew, engine: g.index, start: s.clock.Now(), records: map[sched.RequestID]*sched.Record{}, progress: make(chan struct{}, 1)}
	rs.info = runInfo{Label: pr.label, Index: pr.index, Warmup: pr.warmup, Planned: rs.n}
	s.mu.Lock()
	rs.hdr = s.reportHeader(g.info)
	rs.info.LagPrinted = rs.hdr.lagPrinted()
	s.cur, s.phase, s.runLabel = rs, pr.phase, pr.label
	s.logf(LogRun, "%s started", pr.label)
	s.mu.Unlock()
	s.publish(true)
	if s.opts.onRunStart != nil {
		s.opts.onRunStart(pr.label)
	}

	subCtx, subCancel := context.WithCancel(ctx)
	defer subCancel()
	subDone := make(chan struct{})
	var wall time.Duration // written by the submitter goroutine, read after subDone
	var subErr error       // likewise
	sub := submitter{clock: s.clock, settings: s.arrivals, waitResume: s.waitResume, seed: s.cfg.Arrivals.Seed}
	if n := s.cfg.Arrivals.MaxConcurrency; n > 0 {
		rs.inFlight = make(chan struct{}, n)
		sub.acquire = func(ctx context.Context) error {
			select {
			case rs.inFlight <- struct{}{}:
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		}
	}
	go func() {
		defer close(subDone)
		wall, subErr = sub.run(subCtx, rs.n, func(i int, target time.Duration, has bool) error {
			id, err := g.srv.Submit(s.wl.request(i))
			if err != nil {
				return fmt.Errorf("submit request %d: %w", i, err)
			}
			s.mu.Lock()
			rs.ids, rs.targets, rs.hasTarget = append(rs.ids, id), append(rs.targets, target), append(rs.hasTarget, has)
			s.mu.Unlock()
			return nil
		})
	}()
	why := s.waitRun(ctx, g, rs, subDone)
	subCancel()
	<-subDone
	if why == runComplete && ctx.Err() != nil {
		why = runStopped // the submitter saw the cancel first
	}
	if why == runComplete && subErr != nil {
		return runFailed, subErr
	}
	if why != runComplete {
		s.cancelOutstanding(g, rs)
	}
	sum := s.finishRun(rs, first, wall, why != runComplete)
	// The session's first run stops it here; a later measured run's failure is the headless
	// caller's to report once every run is written (Measure).
	if why == runComplete && first && g.index == 1 && noneSucceeded(sum) && !s.opts.KeepFailedRuns {
		return runFailed, firstRunFailed(rs.hdr, sum, rs.n)
	}
	if why == runFailed {
		if g.loopErr != nil {
			return why, fmt.Errorf("scheduler: %w", g.loopErr)
		}
		return why, errors.New("scheduler loop stopped")
	}
	return why, nil
}

// firstRunFailed is the error that stops a session whose first run finished without one request
// succeeding: like vLLM bench serve's initial test prompt, it tells a benchmark misconfigured
// (the endpoint, the model, the API) before every later run reports nothing but n/a.
func firstRunFailed(h reportHeader, sum Summary, n int) error {
	return &nothingSucceeded{msg: noneSucceededMessage(h, sum, n, true), is: ErrNothingSucceeded}
}

// measuredRunFailed is the error of a bench with a later measured run (not its first run) in
// which no request succeeded: the runs go on and are all reported and exported, then the command
// fails. The command line worked for an earlier run, so no hint to check it.
func measuredRunFailed(h reportHeader, sum Summary, n int) error {
	return &nothingSucceeded{msg: noneSucceededMessage(h, sum, n, false), is: ErrRunFailed}
}

// noneSucceeded reports whether a run finished (not interrupted) without one request succeeding.
func noneSucceeded(sum Summary) bool { return !sum.Partial && sum.Requests == 0 && sum.Failed > 0 }

// ErrNothingSucceeded is wrapped by the error of a session stopped by a first run in which no
// request succeeded: nothing was measured.
var ErrNothingSucceeded = errors.New("no request of the first run succeeded")

// ErrRunFailed is wrapped by the error of a bench one of whose measured runs, not the first run
// (ErrNothingSucceeded), finished with no request succeeding; every run was reported and exported.
var ErrRunFailed = errors.New("no request of a measured run succeeded")

type nothingSucceeded struct {
	msg string
	is  error // ErrNothingSucceeded or ErrRunFailed
}

func (e *nothingSucceeded) Error() string { return e.msg }
func (e *nothingSucceeded) Unwrap() error { return e.is }

// noneSucceededMessage is the one line of a run in which no request succeeded; hint: name the
// flags to check when every failure is one they can fix.
func noneSucceededMessage(h reportHeader, sum Summary, n int, hint bool) string {
	what := fmt.Sprintf("all %d requests failed", sum.Failed)
	if sum.Failed < n {
		what = fmt.Sprintf("no request succeeded, %d of %d failed", sum.Failed, n)
	}
	check := ""
	if hint && h.Endpoint != "" && fixableByFlags(sum.Failures) {
		check = ": check --endpoint, --model and --api"
	}
	return fmt.Sprintf("%s: %s (%s)%s; first: %s", sum.Label, what, countsText(sum.Failures), check, sum.FirstFailure)
}

// fixableByFlags reports whether every failure (counted by Failure.Brief) is one the command
// line can fix: no connection (the endpoint) or an HTTP status refusing the request as asked
// (4xx but 429: a wrong path, model, API shape or key), unlike a timeout, a server error or a
// rate limit.
func fixableByFlags(failures map[string]int) bool {
	for name := range failures {
		code, ok := strings.CutPrefix(name, "http 4")
		if name != "connect" && (!ok || code == "29") {
			return false
		}
	}
	return len(failures) > 0
}

// status is how far the run has got at now; nil for no run.
func (rs *runState) status(now time.Duration) *RunProgress {
	if rs == nil {
		return nil
	}
	p := &RunProgress{Finished: len(rs.records), Requests: rs.n, Tokens: rs.tokens, MaxTokens: rs.maxTokens, Elapsed: now - rs.start}
	// Two rates, the lower estimate kept: output tokens (right when requests end together, as
	// in a batch that decodes to one length) and finished requests (right when prompts, not
	// outputs, take the time). Tokens count once a hundredth of them came: a first token after a
	// long prefill says nothing yet.
	left := func(done, total int) time.Duration {
		return time.Duration(float64(p.Elapsed) * float64(total-done) / float64(done))
	}
	if p.Tokens > 0 && p.MaxTokens > p.Tokens && 100*p.Tokens >= p.MaxTokens {
		p.ETA = left(p.Tokens, p.MaxTokens)
	}
	if p.Finished > 0 && p.Requests > p.Finished {
		if r := left(p.Finished, p.Requests); p.ETA == 0 || r < p.ETA {
			p.ETA = r
		}
	}
	return p
}

// longRun is the ETA past which a run's progress notes say how to make runs shorter.
const longRun = 2 * time.Minute

// noteLongRun logs once on the dashboard, a few seconds into a run that will take minutes, what
// makes it shorter (bench notes it on stderr); the caller holds s.mu.
func (s *Session) noteLongRun(rs *runState, now time.Duration) {
	p := rs.status(now)
	if s.opts.headless || rs.hinted || p.Elapsed < 3*time.Second || p.ETA < longRun {
		return
	}
	rs.hinted = true
	s.logf(LogInfo, "%s will take about %s more on %s: %s make runs shorter",
		rs.info.Label, p.ETA.Round(time.Second), s.info.DeviceDetail, s.wl.shorter())
}

// waitRun waits until the run is complete or interrupted.
func (s *Session) waitRun(ctx context.Context, g *generation, rs *runState, subDone <-chan struct{}) outcome {
	submitted := false
	for {
		s.mu.Lock()
		complete := submitted && len(rs.records) >= len(rs.ids)
		s.mu.Unlock()
		if complete {
			return runComplete
		}
		select {
		case <-subDone:
			submitted, subDone = true, nil
		case <-rs.progress:
		case <-s.restartCh:
			if s.takeRebuild(ctx) {
				return runRestart
			}
		case <-ctx.Done():
			return runStopped
		case <-g.loopDone:
			return runFailed
		}
	}
}

// cancelOutstanding cancels the run's unfinished requests and waits for their records, so their
// KV blocks are released before the engine stops.
func (s *Session) cancelOutstanding(g *generation, rs *runState) {
	s.mu.Lock()
	var open []sched.RequestID
	for _, id := range rs.ids {
		if _, ok := rs.records[id]; !ok {
			open = append(open, id)
		}
	}
	s.mu.Unlock()
	s.cancelAndWait(g, open, func() int { return len(rs.ids) - len(rs.records) }, rs.progress)
}

// cancelAndWait cancels ids on g and waits until left (read under s.mu) drops to zero, waking on
// progress, or g's loop ends, or cancelGrace passes: a guard against a stuck engine, never
// reached by a healthy one.
func (s *Session) cancelAndWait(g *generation, ids []sched.RequestID, left func() int, progress <-chan struct{}) {
	for _, id := range ids {
		g.srv.Cancel(id)
	}
	guard := time.NewTimer(cancelGrace)
	defer guard.Stop()
	for {
		s.mu.Lock()
		n := left()
		s.mu.Unlock()
		if n <= 0 {
			return
		}
		select {
		case <-progress:
		case <-g.loopDone:
			return
		case <-guard.C:
			s.mu.Lock()
			s.logf(LogError, "%d cancelled requests did not finish within %v", n, cancelGrace)
			s.mu.Unlock()
			return
		}
	}
}

// finishRun summarizes the run, files it and returns its summary.
func (s *Session) finishRun(rs *runState, first bool, wall time.Duration, partial bool) Summary {
	s.mu.Lock()
	rs.info.SubmitWall, rs.info.Partial = wall, partial
	reqs := make([]RequestResult, len(rs.ids))
	for i, id := range rs.ids {
		reqs[i] = RequestResult{Index: i, Target: rs.targets[i], HasTarget: rs.hasTarget[i], Record: rs.records[id]}
	}
	s.cur = nil
	res := s.fileRun(rs.hdr, rs.info, reqs, first, false)
	res.engine = rs.engine
	s.mu.Unlock()
	s.publish(true)
	if s.opts.onRunEnd != nil {
		s.opts.onRunEnd(res)
	}
	return res.sum
}

// fileRun summarizes a finished run (or window), keeps it for the reports and the cold/steady
// panes, and logs it unless quiet. The caller holds s.mu.
func (s *Session) fileRun(hdr reportHeader, info runInfo, reqs []RequestResult, first, quiet bool) *runResult {
	sum := summarize(info, reqs)
	addGoodput(&sum, s.cfg.Goodput, reqs)
	res := &runResult{hdr: hdr, sum: sum, live: quiet}
	if s.opts.KeepRecords {
		res.reqs = reqs
	}
	s.keep(res)
	switch {
	case first:
		c := sum
		s.live.cold = &c
	case !sum.Partial:
		s.live.steady.push(sum)
	}
	if quiet {
		return res
	}
	state := "finished"
	if sum.Partial {
		state = "interrupted"
	}
	if sum.TTFT.N == 0 {
		s.logf(LogRun, "%s %s: no request finished", info.Label, state)
	} else {
		s.logf(LogRun, "%s %s: %d requests, TTFT p99 %.2f ms, %.1f tokens/s", info.Label, state, sum.Requests, sum.TTFT.P99, sum.Throughput)
	}
	return res
}

// reportHeader is what a run's report block says it ran on; the caller holds s.mu.
func (s *Session) reportHeader(info ServerInfo) reportHeader {
	h := reportHeader{
		Model: modelName(info), Device: info.Device, DeviceDetail: info.DeviceDetail, Pretok: s.cfg.Workload.Pretok,
		TokenizeWorkers: info.TokenizeWorkers, StreamInterval: s.cfg.Workload.StreamInterval, Paged: info.Paged,
		CUDAGraph: info.CUDAGraph, NVTX: s.cfg.NVTX, IntervalMs: s.arr.intervalMs(), Schedule: s.arr.label(),
		Backend: cmp.Or(info.Backend, "rosetop"), MaxConcurrency: s.arr.MaxConcurrency,
	}
	if r := info.Remote; r != nil {
		h.Endpoint, h.API, h.Server = r.Endpoint, r.API, r.Kind
	}
	return h
}

// arrivals is the submitter's view of the schedule in force.
func (s *Session) arrivals() (Arrivals, uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.arr, s.arrGen
}

// waitResume blocks while arrivals are paused.
func (s *Session) waitResume(ctx context.Context) (bool, error) {
	s.mu.Lock()
	paused, ch := s.paused, s.resume
	s.mu.Unlock()
	if !paused {
		return false, nil
	}
	select {
	case <-ch:
		return true, nil
	case <-ctx.Done():
		return true, ctx.Err()
	}
}
