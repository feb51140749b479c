package bench

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"rosetop/internal/oneline"
	"rosetop/sched"
)

// ErrInterrupted is returned by RunBench when its context was cancelled (Ctrl-C) before every
// run finished; what finished was printed. errors.Is(err, context.Canceled) holds too.
var ErrInterrupted = fmt.Errorf("interrupted: %w", context.Canceled)

// SessionOptions configure a Session beyond the command line.
type SessionOptions struct {
	Provider Provider      // where engines come from (NewInProcess, a remote server)
	Clock    Clock         // nil: the real monotonic clock
	Progress io.Writer     // model load progress and notes; nil: discarded
	Window   time.Duration // rolling window of the latency percentiles; 0: 30 s
	// KeepRecords keeps every run's per-request records (bench --json/--csv). Otherwise only
	// the current run's are kept and earlier runs survive as summaries.
	KeepRecords bool
	// External: the load comes from outside through Submit (rosetop serve); the session runs no
	// workload of its own. Its runs are windows of Config.Workload.NumRequests finished
	// requests: the first of each engine is its cold run.
	External bool
	// OnStep, when set, sees every scheduler step's output on the recorder goroutine before the
	// session files it (serve's metrics). It must return quickly and must not modify so.
	OnStep func(so *sched.StepOutput)
	// Started, when set, is called once with the session when it starts running, from
	// NewSession (rosetop bench --record samples the views of a session it does not hold).
	Started func(*Session)
	// KeepFailedRuns: a first run whose every request failed does not stop the session, as it
	// otherwise does (a misconfigured benchmark, vLLM's initial test prompt), nor does a later
	// measured run's fail Measure: rosetop sweep's points after the first, where it is a result
	// (a load past what the server takes).
	KeepFailedRuns bool
	// Workloads, when set, builds the session's workload, or hands back the one it built last for
	// the same spec and model (rosetop sweep's points); nil: the session builds its own.
	Workloads *Workloads

	// headless (RunBench) stops after the warmup and repeat runs; a dashboard session then
	// keeps the load continuous (runLive, the steady state) until Close.
	headless   bool
	onRunStart func(label string) // bench: print "=== warmup i/N ===" (session goroutine)
	onRunEnd   func(r *runResult) // bench: print the report (session goroutine)
	onPublish  func()             // tests: a new View was stored (any goroutine; must not block)
	meter      meterHooks         // tests: bench's progress line's terminal and ticks
}

// runResult is one finished run.
type runResult struct {
	hdr    reportHeader
	sum    Summary
	reqs   []RequestResult // nil unless SessionOptions.KeepRecords (and not dropped, see keepBounded)
	engine int             // the session's n-th engine ran it
	live   bool            // a window of the steady state (or of external load), not a planned run
	// recordsDropped: its records were kept and then dropped to bound memory (see keep).
	recordsDropped bool
}

// Session drives an engine and its scheduler with the workload: warmup runs, repeat runs, then
// (dashboard) a continuous load until closed. It publishes an immutable View for the dashboard
// and takes control Actions. Goroutines: the session goroutine (runs, engine rebuilds), per run
// (and for the steady state) a submitter, per engine the scheduler loop and a recorder
// consuming its step outputs.
type Session struct {
	cfg   Config         // immutable
	opts  SessionOptions // immutable
	clock Clock          // shared with the scheduler
	start time.Time      // wall time of the clock's epoch
	prov  Provider       // immutable; used by the session goroutine
	wl    *workload      // immutable after NewSession
	seqs  int            // max sequence length of every engine
	view  atomic.Pointer[View]
	ext   *externalState // external submissions (SessionOptions.External)

	restartCh chan struct{} // Do and settle timers -> session goroutine: the engine wanted changed (state under mu); buffered 1
	stop      func()        // cancels the session goroutine's context
	done      chan struct{} // closed when the session goroutine has returned
	err       error         // the session goroutine's result; read after done
	closeOnce sync.Once

	mu          sync.Mutex // guards the fields below
	live        *liveState
	srv         Server        // the current engine; nil while rebuilding
	lastLedger  []LedgerEntry // the last stopped engine's ledger, shown until the next engine's
	info        ServerInfo    // of srv
	want        EngineOptions // what the next engine is built with
	engine      int           // the number of the current engine, or of the one being built
	engineOpts  EngineOptions // what that engine was asked for
	restart     bool          // r: a fresh engine is wanted even with engineOpts
	rebuild     rebuildState  // how far a rebuild the session goroutine took has got
	keyAt       time.Duration // when the last engine key came: a pending change waits rebuildSettle from it
	settling    bool          // a settle timer will wake the session goroutine
	knobs       sched.Config  // the scheduler knobs asked for (kept across engines)
	arr         Arrivals      // the submit schedule in force
	arrGen      uint64        // bumped on every schedule change
	paused      bool
	graphNoted  bool            // the note that CUDA Graphs cannot run on this device was given
	resume      chan struct{}   // closed on resume; replaced on pause
	cur         *runState       // the planned run in progress; nil between runs
	liveRun     *liveRun        // the continuous steady state in progress; nil outside it
	concurrency int             // the steady state's most requests in flight (c/C)
	window      []RequestResult // the finished requests of the window being filled (live or External)
	results     []*runResult    // finished runs, oldest first (bounded: see keep)
	filed       int             // runs and windows filed so far
	dropped     int             // steady windows dropped from results to bound them
	kept        int             // per-request records held in results
	phase       Phase
	runLabel    string
	stopped     string // the error that ended the session early (Header.Stopped)
	lastPublish time.Duration
	// server is the latest a remote server said about itself, kept once its engine has stopped
	// (the pane stays, and a watch session's summary reads it).
	server *ServerMetrics
	// restarts are the restarts of each remote server (a fleet's members in order, else the one)
	// that the events already tell (see noteRestarts).
	restarts []int
}

// NewSession loads the model, builds the first engine and starts running. Model and engine errors
// are returned here; later failures end the session (see Wait) and appear in the View's events.
func NewSession(ctx context.Context, cfg Config, opts SessionOptions) (*Session, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if opts.Clock == nil {
		opts.Clock = NewRealClock()
	}
	if opts.Provider == nil {
		return nil, errors.New("bench: NewSession without a Provider")
	}
	if opts.Progress == nil {
		opts.Progress = io.Discard
	}
	if opts.Window <= 0 {
		opts.Window = 30 * time.Second
	}
	s := &Session{
		cfg: cfg, opts: opts, clock: opts.Clock, start: time.Now().Add(-opts.Clock.Now()), prov: opts.Provider,
		restartCh: make(chan struct{}, 1), done: make(chan struct{}), live: newLiveState(opts.Window),
		want: cfg.Engine, engineOpts: cfg.Engine, arr: cfg.Arrivals, phase: PhaseStarting, knobs: cfg.Sched, ext: newExternalState(),
		concurrency: cmp.Or(cfg.Arrivals.MaxConcurrency, cfg.Workload.NumRequests),
	}
	if opts.External {
		s.arr, s.concurrency = Arrivals{Schedule: "external"}, 0
	}
	s.live.attain = newAttainment(cfg.Goodput, newWindow(opts.Window, windowCap))
	s.view.Store(s.live.view(s.start, s.clock.Now(), s.header(s.clock.Now()), nil))
	if err := s.prov.Prepare(ctx, opts.Progress); err != nil {
		return nil, err
	}
	model := s.prov.Model()
	if cfg.MaxSeqLen > model.MaxPositions {
		s.prov.Close()
		return nil, &ConfigError{msg: fmt.Sprintf("--max-seq-len %d: the model has %d positions (n_positions)", cfg.MaxSeqLen, model.MaxPositions)}
	}
	s.seqs = cfg.MaxSeqLen
	if !opts.External {
		wl, err := opts.Workloads.get(newBuild(ctx, s.clock, opts.Progress), cfg.Workload, model, cfg.MaxSeqLen)
		if err != nil {
			s.prov.Close()
			return nil, err
		}
		s.wl = wl
		if s.seqs == 0 {
			s.seqs = wl.longestTotal
		}
	}
	if s.seqs == 0 { // an external load with no --max-seq-len: the model's own
		s.seqs = model.MaxPositions
	}
	g, err := s.startEngine(1)
	if err != nil {
		s.prov.Close()
		return nil, err
	}
	// The caller's ctx interrupts the runs as Close does; the engine's own loop is stopped by
	// the session goroutine after outstanding requests were cancelled.
	runCtx, cancel := context.WithCancel(ctx)
	s.stop = cancel
	go func() {
		defer close(s.done)
		defer cancel()
		s.err = s.loop(runCtx, g)
		s.mu.Lock()
		if s.err != nil && !errors.Is(s.err, context.Canceled) {
			s.stopped = s.err.Error()
		}
		s.mu.Unlock()
		s.setPhase(PhaseDone, "done") // from here Do refuses every action
		if err := s.prov.Close(); err != nil && s.err == nil {
			s.err = err
		}
	}()
	if opts.Started != nil {
		opts.Started(s)
	}
	return s, nil
}

// staleAfter is how old the latest view may get before View builds a new one: the recorder
// publishes on steps, and when none come (paused, idle) the clock and rates must still move.
const staleAfter = 250 * time.Millisecond

// View returns the latest published view, first publishing a fresh one when no step has for
// staleAfter; never nil after NewSession.
func (s *Session) View() *View {
	if v := s.view.Load(); v != nil && s.clock.Now()-v.Now < staleAfter {
		return v
	}
	s.publish(false)
	return s.view.Load()
}

// Wait blocks until the session goroutine has returned (its runs finished, or Close) and returns
// its error.
func (s *Session) Wait() error {
	<-s.done
	return s.err
}

// Close stops the runs (outstanding requests are cancelled), the engine and every goroutine, and
// waits for them. The summaries so far stay available to Report.
func (s *Session) Close() error {
	s.closeOnce.Do(func() { s.stop() })
	<-s.done
	if errors.Is(s.err, context.Canceled) {
		return nil
	}
	return s.err
}

// Model describes the model the session's engines run.
func (s *Session) Model() ModelInfo { return s.prov.Model() }

// Note adds text from outside the session (an HTTP server's error) to the events pane as one
// line of error, so that nothing writes over a dashboard drawn on the terminal.
func (s *Session) Note(text string) {
	s.mu.Lock()
	s.logf(LogError, "%s", oneline.Clip(oneline.Fold(text), maxFailureText))
	s.mu.Unlock()
	s.publish(true)
}

// logf adds an event line; the caller holds s.mu.
func (s *Session) logf(kind LogKind, format string, args ...any) {
	s.live.log(s.clock.Now(), kind, fmt.Sprintf(format, args...))
}

func (s *Session) setPhase(p Phase, label string) {
	s.mu.Lock()
	s.phase, s.runLabel = p, label
	s.mu.Unlock()
	s.publish(true)
}

// publish builds and stores a new View, at most every 50 ms unless forced.
func (s *Session) publish(force bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.clock.Now()
	if !force && now-s.lastPublish < 50*time.Millisecond && s.view.Load() != nil && now-s.view.Load().Now < staleAfter {
		return
	}
	s.lastPublish = now
	if m, ok := s.srv.(metricsReporter); ok {
		if sm := m.ServerMetrics(); sm != nil {
			s.server = sm
		}
	}
	if rr, ok := s.srv.(restartReporter); ok {
		s.noteRestarts(rr.ServerRestarts())
	}
	if r := s.info.Remote; r != nil && r.Watch {
		s.live.server.sample(s.server)
	}
	v := s.live.view(s.start, now, s.header(now), s.ledger())
	v.Server = s.live.serverPanel(now, s.server)
	s.view.Store(v)
	if s.opts.onPublish != nil {
		s.opts.onPublish()
	}
}

// header is the dashboard's top line; the caller holds s.mu.
func (s *Session) header(now time.Duration) Header {
	cfg := s.knobs // applied with SetConfig before Do returns
	h := Header{
		Model: s.info.Model, RandomWeights: s.info.RandomWeights, Device: s.info.DeviceDetail,
		DeviceNote: s.info.DeviceNote, Job: s.cfg.Job, Paged: s.info.Paged, CUDAGraph: s.info.CUDAGraph,
		Schedule: s.arr.label(), IntervalMs: s.arr.intervalMs(), MaxBatch: cfg.MaxBatch,
		PrefillMaxBatch: cfg.PrefillMaxBatch, Phase: s.phase, RunLabel: s.runLabel, Paused: s.paused,
		Elapsed: now, Run: s.cur.status(now), SLOs: s.cfg.Goodput, Remote: s.info.Remote,
		Concurrency: s.concurrency, Stopped: s.stopped,
	}
	if s.phase != PhaseDone { // an ended session builds nothing more
		h.Building, h.Pending = s.building(), s.pending()
	}
	return h
}

// ledger is the model's and the current engine's cold-start costs; the caller holds s.mu.
func (s *Session) ledger() []LedgerEntry {
	out := s.prov.Ledger()
	if s.srv != nil {
		return append(out, s.srv.Ledger(0)...)
	}
	return append(out, s.lastLedger...)
}
