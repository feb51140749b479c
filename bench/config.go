package bench

import (
	"fmt"
	"math"

	"rosetop/engine"
	"rosetop/sched"
)

// Config is what a Session runs: the workload, its arrivals, the runs, and the scheduler knobs
// and engine options the first engine starts with. Where the engine comes from (the model, the
// device, a remote server) is the Provider's business, not the Config's.
type Config struct {
	Job        string        // the preset the command line named, for headers ("": none)
	Workload   Workload      // the requests of one run
	Arrivals   Arrivals      // when they are submitted
	Sched      sched.Config  // the scheduler knobs (live-tunable)
	Engine     EngineOptions // the settings that need a new engine when they change
	MaxSeqLen  int           // longest sequence of every engine; 0: longest prompt + max new tokens
	WarmupRuns int           // cold runs, recorded but not printed
	RepeatRuns int           // measured runs, each printed
	NVTX       bool          // printed in the report; no effect without a profiler attached
	Goodput    []SLO         // --goodput latency targets; nil: no goodput
}

// Workload describes one run's requests; every run of a session submits the same ones.
type Workload struct {
	Prompt         string
	PromptRepeats  int  // the prompt is Prompt repeated this many times
	UniquePrompts  bool // prefix request i with a marker word of its own (UniqueMarkers)
	NumRequests    int
	MaxNewTokens   int
	StopOnEOS      bool
	Sampling       engine.SamplingParams // Seed seeds request i's stream (see workload.request)
	Pretok         bool                  // submit token ids instead of text
	StreamInterval int                   // a text piece every N tokens
	// Dataset, when set, makes the requests instead of Prompt, PromptRepeats, UniquePrompts and
	// MaxNewTokens: their prompts and output lengths come from it (dataset.go).
	Dataset *Dataset
}

// Validate checks the settings a Session relies on; the error names the flag that sets the bad
// value. The scheduler knobs are checked by sched.Config.Validate.
func (c Config) Validate() error {
	w := c.Workload
	checks := []struct {
		bad bool
		msg string
	}{
		{c.WarmupRuns < 0, fmt.Sprintf("--warmup-runs must be >= 0, got %d", c.WarmupRuns)},
		{c.RepeatRuns < 1, fmt.Sprintf("--repeat-runs must be >= 1, got %d", c.RepeatRuns)},
		{c.MaxSeqLen < 0, fmt.Sprintf("--max-seq-len must be >= 0, got %d", c.MaxSeqLen)},
		{w.NumRequests < 1, fmt.Sprintf("--num-requests must be >= 1, got %d", w.NumRequests)},
		{w.MaxNewTokens < 1, fmt.Sprintf("--max-new-tokens must be >= 1, got %d", w.MaxNewTokens)},
		{w.PromptRepeats < 1, fmt.Sprintf("--prompt-repeats must be >= 1, got %d", w.PromptRepeats)},
		{w.StreamInterval < 0, fmt.Sprintf("--stream-interval must be >= 0, got %d", w.StreamInterval)},
		{!finite(float64(w.Sampling.Temperature)) || w.Sampling.Temperature < 0, fmt.Sprintf("--temperature must be a finite number >= 0, got %v", w.Sampling.Temperature)},
		{w.Sampling.TopK < 0, fmt.Sprintf("--top-k must be >= 0, got %d", w.Sampling.TopK)},
		{!(w.Sampling.TopP >= 0 && w.Sampling.TopP <= 1), fmt.Sprintf("--top-p must be in [0, 1], got %v", w.Sampling.TopP)},
	}
	for _, ch := range checks {
		if ch.bad {
			return &ConfigError{msg: ch.msg}
		}
	}
	if err := c.Arrivals.validate(w.NumRequests); err != nil {
		return err
	}
	if err := validateSLOs(c.Goodput); err != nil {
		return err
	}
	if err := w.Dataset.validate(w.NumRequests); err != nil {
		return err
	}
	if err := c.Sched.Validate(0); err != nil {
		return &ConfigError{msg: err.Error()}
	}
	return nil
}

// ConfigError is a one-line message about one setting; errors.Is(err, ErrBadConfig) holds.
type ConfigError struct{ msg string }

func (e *ConfigError) Error() string { return e.msg }
func (e *ConfigError) Unwrap() error { return ErrBadConfig }

// ErrBadConfig is wrapped by every settings error: the command line prints it and exits 2.
var ErrBadConfig = sched.ErrBadConfig

func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }
