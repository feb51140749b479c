package bench

import "time"

// Dist is a latency distribution in milliseconds: percentiles by linear interpolation between
// closest ranks (numpy's default). N == 0 means no samples (print "n/a").
type Dist struct {
	P50, P95, P99, Mean, Max float64
	N                        int
}

// Summary is one run's report: every line of the seeds' "=== streaming benchmark ===" block.
type Summary struct {
	Index            int    // 1-based within its kind (warmup i / run i / live i)
	Warmup           bool   // a warmup (cold) run: recorded, not in the steady summary
	Label            string // "warmup 1/1", "run 2/3", "live 7"
	Requests         int
	PromptTokens     int
	CompletionTokens int
	SubmitWall       time.Duration
	SubmitLag        Dist // absolute schedule with interval > 0 only
	AddRequest       Dist
	Tokenize         Dist
	QueueWait        Dist // post-tokenize: admitted - tokenized
	PrefillFirst     Dist // first token - admitted
	TTFT             Dist
	TPOT             Dist // ms/token
	ITL              Dist // between tokens; a remote server's: between stream chunks (vLLM bench serve's ITL)
	TokenGap         Dist // a remote server's streams: between tokens (see tokenGaps); N == 0 elsewhere
	Latency          Dist
	Throughput       float64 // completion tokens/s
	TotalThroughput  float64 // (prompt + completion) tokens/s
	Preemptions      int
	Cancelled        int
	NotSent          int            // an interrupted run's requests never submitted (0 for a window of a continuous load)
	Failed           int            // requests the engine failed or could not fit (reason error / too_long)
	Failures         map[string]int // Failed by cause ("http 429", "timeout (stall)", "too_long"); nil: none
	FirstFailure     string         // the first failed request's cause on one line (see failureText); "": none
	TokenSources     map[string]int // a remote server's completed requests by where their output count came from; nil in-process
	Partial          bool           // the run was interrupted (Ctrl-C, engine restart, stop) before every request finished
	CutTokens        int            // output tokens of the requests cancelled in flight
	CutTTFT          Dist           // TTFT of those of them that had their first token
	Wall             time.Duration  // first submit start -> last finish
	// RequestThroughput is completed requests per second of Wall.
	RequestThroughput float64
	// Goodput (--goodput): SLOs are the targets (nil: none given); Good the completed requests
	// that met every one; Goodput is Good per second of Wall; Attainment is Good as a share of
	// the requests that ended (completed or failed), in %, NaN without targets or requests.
	SLOs       []SLO
	Good       int
	Goodput    float64
	Attainment float64
}

// Phase is where the session is.
type Phase int

const (
	PhaseStarting Phase = iota // loading the model / building the engine
	PhaseCold                  // the first (warmup) run of a fresh engine
	PhaseRun                   // a measured repeat run
	PhaseLive                  // the steady state: continuous load until stopped (dashboard, serve)
	PhaseDone                  // finished (bench) or stopped
)

// Header is the dashboard's top line.
type Header struct {
	Model           string
	RandomWeights   bool
	Device          string
	DeviceNote      string // why this device, e.g. "auto: no CUDA driver found"
	Job             string
	Paged           bool
	CUDAGraph       bool
	Schedule        string  // "relative" | "absolute" | "poisson"
	IntervalMs      float64 // submit interval
	MaxBatch        int
	PrefillMaxBatch int
	Phase           Phase
	RunLabel        string // "cold run", "run 2/3", "live 5"
	Paused          bool   // arrivals paused
	Elapsed         time.Duration
	TokensPerSec    float64      // completion tokens/s over the recent window
	Run             *RunProgress // the planned run in progress (cold or measured); nil in the steady state
	// SLOs are the --goodput targets (nil: none); Attainment is the share in % of the requests
	// that ended in the latency window that met them all (NaN: none ended), over AttainmentN.
	SLOs        []SLO
	Attainment  float64
	AttainmentN int
	Remote      *RemoteInfo // the server outside this process the session drives; nil: rosetop's engine
	Concurrency int         // the steady state's most requests in flight (c/C); 0 for external load
	Stopped     string      // PhaseDone: the error that stopped the session; "" when it finished or was quit
	// Engine changes not running yet; both nil while the engine runs as asked. Building is the
	// engine being built (or the run being stopped for it); Pending is a change asked for and not
	// begun, which waits a moment after the last engine key and then replaces the engine.
	Building *EnginePlan
	Pending  *EnginePlan
}

// EnginePlan is an engine the session builds or is asked to build.
type EnginePlan struct {
	Engine    int  // its number in the session (engine 1 is the first)
	Paged     bool // paged attention
	CUDAGraph bool // CUDA Graphs (never on a CPU)
	Restart   bool // Pending only: the options are the current engine's; r asked for a fresh one
}

// RunProgress is how far a planned run (a cold or measured run) has got.
type RunProgress struct {
	Finished, Requests int           // requests finished, of the run's
	Tokens, MaxTokens  int           // output tokens so far, of at most Requests x max new tokens
	Elapsed            time.Duration // since the run started
	ETA                time.Duration // left at the token or request rate so far (the lower); 0: no estimate yet
}

// QueuePoint is the queue depth after one step.
type QueuePoint struct {
	At               time.Duration // since the session started
	Waiting, Running int
}

// Admission is one prefill admission: how many requests entered one prefill batch.
type Admission struct {
	Step  uint64
	At    time.Duration
	Size  int
	Limit int // the prefill max batch size in force
}

// LatencyRow is one metric's rolling percentiles over the last Window: TTFT, queue wait and
// prefill->first of the requests whose first token came in it (taken as the token arrives),
// ITL of the tokens that came in it, TPOT of the requests that finished in it.
type LatencyRow struct {
	Name string // "TTFT", "Queue wait", "Prefill->first", "TPOT", "ITL"
	Dist Dist
}

// Point is one sample of a time series.
type Point struct {
	At    time.Duration
	Value float64
}

// RequestITL is one recent request's inter-token latencies in ms, in token order.
type RequestITL struct {
	ID  uint64
	ITL []float64
}

// Comparison is one row of the cold-vs-steady pane.
type Comparison struct {
	Metric string  // "TTFT p99 (ms)", "Queue wait p99 (ms)", "TPOT p50 (ms)", "Throughput (tok/s)"
	Cold   float64 // NaN when there is no cold run yet
	Steady float64 // median over steady runs; NaN when none yet
	Ratio  float64 // Cold / Steady; NaN when either is missing
	// HigherIsBetter: a throughput (a ratio below 1 means the cold run was slower); else a
	// latency (above 1 means slower).
	HigherIsBetter bool
}

// ColdSlower says which way the ratio goes: 1 when the cold run was slower than the steady
// state, -1 when faster, 0 when within 2% or unknown.
func (c Comparison) ColdSlower() int {
	r := c.Ratio
	if r != r || r <= 0 { // NaN or meaningless
		return 0
	}
	if c.HigherIsBetter {
		r = 1 / r
	}
	switch {
	case r > 1.02:
		return 1
	case r < 1/1.02:
		return -1
	}
	return 0
}

// LogKind classifies a log line.
type LogKind int

const (
	LogInfo    LogKind = iota
	LogRun             // run boundaries
	LogConfig          // config changes (also a chart marker)
	LogCapture         // graph captures and other cold-start costs
	LogPreempt
	LogError
	LogRestart // a remote server restarted (also a chart marker)
)

// LogEvent is one line of the events pane.
type LogEvent struct {
	At   time.Duration
	Kind LogKind
	Text string
}

// Marker is a vertical mark on the time charts (a config change, a restart).
type Marker struct {
	At    time.Duration
	Label string
}

// LiveCounts counts the steady state's windows: after its cold and measured runs a dashboard
// session keeps the load continuous and files every NumRequests finished requests as a window
// (a run of the steady state), counted here rather than logged one by one; so are the one-time
// costs paid in it (a CUDA Graph captured for a new step shape), which stay in the ledger.
type LiveCounts struct {
	Windows  int           // filed on the current engine
	Requests int           // finished in them
	Costs    int           // ledger entries added during the steady state
	CostTook time.Duration // their time in all
}

// View is everything the dashboard draws, published by the Session as an immutable value. The
// dashboard never computes a metric: every number here was computed by bench.
type View struct {
	Start         time.Time     // session start; At values are offsets from it
	Now           time.Duration // when this view was made
	Header        Header
	Queue         []Timeline    // waiting and running requests, bucket means
	QueueLast     QueuePoint    // the latest step's queue
	Admissions    []Admission   // recent admissions, oldest first
	Latency       []LatencyRow  // rolling percentiles over the last LatencyWindow
	LatencyWindow time.Duration // span of the rolling percentiles
	P99           []Timeline    // p99 over time of TTFT, queue wait, prefill->first, TPOT, ITL
	Live          LiveCounts
	ITL           []float64    // recent inter-token latencies (ms), pooled, oldest first
	SlowITL       []RequestITL // the slowest recent requests (by TPOT), slowest first
	KVUsed        int
	KVTotal       int
	Cold          *Summary  // the current engine's cold run, nil until it finished
	Steady        []Summary // finished steady runs of the current engine (bounded)
	Compare       []Comparison
	Ledger        []LedgerEntry
	Events        []LogEvent // recent, oldest first
	Markers       []Marker
	Server        *ServerPanel // a remote server's own metrics beside the client-side ones; nil in-process
	Replay        *Playback    // where a replayed recording is (rosetop replay); nil in a live session
	// ServerP99 (watch mode only; nil otherwise): p99 over time of each latency histogram the
	// server exposes, over its window as it stood at each good scrape. A p99 within the first
	// bucket is only a bound and is at that bound (ServerLatency.FirstBound).
	ServerP99 []Timeline
}

// Playback is where a replay of a recording is: the view it shows was recorded at Position.
type Playback struct {
	Position, Length time.Duration // of the recording's views
	Speed            float64       // 1: as recorded
	Paused           bool
	Recorded         time.Time // when the recorded session started
	Note             string    // why the recording ends where it does, when not closed cleanly ("" when it was)
	// Key is the recorded dashboard's last key press at or before Position, as its status line
	// showed it ("" none yet): its result, or why it was refused (KeyRefused).
	Key        string
	KeyAt      time.Duration
	KeyRefused bool
}

// Action is a control the dashboard sends to the Session.
type Action int

const (
	ActTogglePaged      Action = iota // needs a new engine: restarts with a cold run
	ActToggleGraph                    // needs a new engine; refused with a reason on a CPU
	ActToggleSchedule                 // relative <-> absolute, live
	ActPrefillBatchDown               // prefill max batch -1 (live)
	ActPrefillBatchUp                 // prefill max batch +1 (live, at most max batch)
	ActMaxBatchDown                   // max batch to the power of two below (live)
	ActMaxBatchUp                     // max batch to the power of two above, at most the engine's capacity (live)
	ActIntervalDown                   // submit interval down a step (live)
	ActIntervalUp                     // submit interval up a step (live)
	ActRestart                        // a fresh engine: a new cold start
	ActTogglePause                    // pause/resume arrivals; a replay's playback
	ActConcurrencyDown                // the steady state's most requests in flight to the power of two below (live)
	ActConcurrencyUp                  // ... to the power of two above (live)
	ActReplayBack                     // replay: 5 s back
	ActReplayForward                  // replay: 5 s forward
	ActReplaySlower                   // replay: half the speed (down to 0.25x)
	ActReplayFaster                   // replay: twice the speed (up to 16x)
	ActReplayStart                    // replay: the first view
	ActReplayEnd                      // replay: the last view
	ActReplayNextEvent                // replay: the next view where an event shows
	ActReplayPrevEvent                // replay: the previous one
)
