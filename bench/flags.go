package bench

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"time"

	"rosetop/sched"
)

// Config is what the command line parses to; `rosetop` and `rosetop bench` share it.
type Config struct {
	Model             string  `json:"model"`
	Device            string  `json:"device"` // auto | cpu | cuda
	Job               string  `json:"job,omitempty"`
	Prompt            string  `json:"prompt"`
	PromptRepeats     int     `json:"prompt_repeats"`
	UniquePrompts     bool    `json:"unique_prompts"`
	NumRequests       int     `json:"num_requests"`
	MaxNewTokens      int     `json:"max_new_tokens"`
	MaxBatch          int     `json:"max_batch_size"`
	PrefillMaxBatch   int     `json:"prefill_max_batch_size"` // 0: = MaxBatch
	PrefillMaxTokens  int     `json:"prefill_max_tokens"`     // 0: no limit
	Policy            string  `json:"policy"`                 // decode-first | prefill-first | mixed
	BurstQuietUs      float64 `json:"burst_quiet_us"`         // sched.Config.BurstQuiet in microseconds; 0: off
	SubmitIntervalMs  float64 `json:"submit_interval_ms"`
	SubmitSchedule    string  `json:"submit_schedule"` // relative | absolute
	RequestRate       float64 `json:"request_rate"`    // Poisson arrivals per second; 0 or +Inf: off
	Seed              uint64  `json:"seed"`
	Temperature       float64 `json:"temperature"`
	TopK              int     `json:"top_k"`
	TopP              float64 `json:"top_p"`
	NoStopOnEOS       bool    `json:"no_stop_on_eos"`
	NoPrefixCache     bool    `json:"no_prefix_cache"`
	Paged             bool    `json:"paged_attn"`
	CUDAGraph         bool    `json:"cuda_graph"`
	CaptureAhead      bool    `json:"capture_ahead"`
	GPUMemoryFraction float64 `json:"gpu_memory_fraction"`
	Threads           int     `json:"threads"`
	MaxSeqLen         int     `json:"max_seq_len"` // 0: longest prompt + max new tokens
	NVTX              bool    `json:"nvtx"`
	Pretok            bool    `json:"pretok"`
	TokenizeWorkers   int     `json:"tokenize_workers"`
	StreamInterval    int     `json:"stream_interval"`
	WarmupRuns        int     `json:"warmup_runs"`
	RepeatRuns        int     `json:"repeat_runs"`
	JSONPath          string  `json:"-"`
	CSVPath           string  `json:"-"`
	CPUProfilePath    string  `json:"-"`
}

// maxBurstQuietUs is sched.MaxBurstQuiet in microseconds, --burst-quiet-us's unit.
const maxBurstQuietUs = float64(sched.MaxBurstQuiet / time.Microsecond)

// ErrBadFlag is wrapped by every command-line error: main prints the message and exits 2.
var ErrBadFlag = errors.New("bad command line")

// flagError is a one-line message about one flag; errors.Is(err, ErrBadFlag) holds.
type flagError struct{ msg string }

func (e *flagError) Error() string { return e.msg }
func (e *flagError) Unwrap() error { return ErrBadFlag }

func badFlag(format string, args ...any) error { return &flagError{msg: fmt.Sprintf(format, args...)} }

// DefaultConfig is the configuration with no flags given.
func DefaultConfig() Config {
	return Config{
		Device: "auto", Prompt: "Hello", PromptRepeats: 1, NumRequests: 16, MaxNewTokens: 64,
		MaxBatch: 64, Policy: "mixed", BurstQuietUs: 20, SubmitSchedule: "relative", StreamInterval: 1,
		RepeatRuns: 1,
	}
}

// newFlagSet binds every option to cfg's fields.
func newFlagSet(cfg *Config) *flag.FlagSet {
	fs := flag.NewFlagSet("rosetop", flag.ContinueOnError)
	fs.StringVar(&cfg.Model, "model", cfg.Model, `model: "" (embedded tiny model), a directory, a hub id (gpt2, distilgpt2, ...), random:NAME`)
	fs.StringVar(&cfg.Device, "device", cfg.Device, "auto | cpu | cuda")
	fs.StringVar(&cfg.Job, "job", cfg.Job, "named preset: "+strings.Join(JobNames(), ", ")+" (explicit flags override it)")
	fs.StringVar(&cfg.Prompt, "prompt", cfg.Prompt, "prompt text")
	fs.IntVar(&cfg.PromptRepeats, "prompt-repeats", cfg.PromptRepeats, "repeat the prompt text N times")
	fs.BoolVar(&cfg.UniquePrompts, "unique-prompts", cfg.UniquePrompts, `prefix request i with a marker word of its own: "<marker_i> <prompt>" (see UniqueMarkers)`)
	fs.IntVar(&cfg.NumRequests, "num-requests", cfg.NumRequests, "requests per run")
	fs.IntVar(&cfg.MaxNewTokens, "max-new-tokens", cfg.MaxNewTokens, "output tokens per request")
	fs.IntVar(&cfg.MaxBatch, "max-batch-size", cfg.MaxBatch, "most running sequences")
	fs.IntVar(&cfg.PrefillMaxBatch, "prefill-max-batch-size", cfg.PrefillMaxBatch, "most requests admitted per step (0: = max batch size)")
	fs.IntVar(&cfg.PrefillMaxTokens, "prefill-max-tokens", cfg.PrefillMaxTokens, "most prompt tokens prefilled per step (0: no limit)")
	fs.Float64Var(&cfg.BurstQuietUs, "burst-quiet-us", cfg.BurstQuietUs, "when requests reach an idle scheduler, its first step waits until none has arrived for this many microseconds (at most 8x that), so a burst starts as one batch (0: at once; at most "+fmt.Sprint(maxBurstQuietUs)+")")
	fs.StringVar(&cfg.Policy, "policy", cfg.Policy, "how a step runs its new prompts and its running sequences' next tokens: mixed (one forward pass over both) | prefill-first | decode-first (two passes, in that order)")
	fs.Float64Var(&cfg.SubmitIntervalMs, "submit-interval-ms", cfg.SubmitIntervalMs, "submit interval in ms (0: burst)")
	fs.StringVar(&cfg.SubmitSchedule, "submit-schedule", cfg.SubmitSchedule, "relative (sleep the interval after each submit) | absolute (target t0 + i*interval)")
	fs.Float64Var(&cfg.RequestRate, "request-rate", cfg.RequestRate, "Poisson arrivals at R requests/s, seeded by --seed (0 or inf: off)")
	fs.Uint64Var(&cfg.Seed, "seed", cfg.Seed, "seed of arrivals and sampling")
	fs.Float64Var(&cfg.Temperature, "temperature", cfg.Temperature, "sampling temperature (0: greedy)")
	fs.IntVar(&cfg.TopK, "top-k", cfg.TopK, "top-k sampling (0: off)")
	fs.Float64Var(&cfg.TopP, "top-p", cfg.TopP, "top-p sampling (0 or 1: off)")
	fs.BoolVar(&cfg.NoStopOnEOS, "no-stop-on-eos", cfg.NoStopOnEOS, "keep generating after EOS")
	fs.BoolVar(&cfg.NoPrefixCache, "no-prefix-cache", cfg.NoPrefixCache, "turn the prefix cache off")
	fs.BoolVar(&cfg.Paged, "paged-attn", cfg.Paged, "paged KV cache (block size 16)")
	fs.BoolVar(&cfg.CUDAGraph, "cuda-graph", cfg.CUDAGraph, "replay decode steps, and prefill or mixed steps whose shape recurs, from CUDA Graphs (GPU only)")
	fs.BoolVar(&cfg.CaptureAhead, "capture-ahead", cfg.CaptureAhead, "GPU: pay the one-time costs at start (every graph capture, cuBLAS first calls), not on first use in the cold run")
	fs.Float64Var(&cfg.GPUMemoryFraction, "gpu-memory-fraction", cfg.GPUMemoryFraction, "share of free GPU memory for the KV pool (0: engine default)")
	fs.IntVar(&cfg.Threads, "threads", cfg.Threads, "CPU threads (0: all cores)")
	fs.IntVar(&cfg.MaxSeqLen, "max-seq-len", cfg.MaxSeqLen, "longest sequence (0: longest prompt + max new tokens)")
	fs.BoolVar(&cfg.NVTX, "nvtx", cfg.NVTX, "NVTX ranges (accepted and printed; no effect without a profiler attached)")
	fs.BoolVar(&cfg.Pretok, "pretok", cfg.Pretok, "tokenize prompts before the run; submit token ids")
	fs.IntVar(&cfg.TokenizeWorkers, "tokenize-workers", cfg.TokenizeWorkers, "scheduler tokenize workers (0: inline in add_request)")
	fs.IntVar(&cfg.StreamInterval, "stream-interval", cfg.StreamInterval, "emit a text piece every N tokens")
	fs.IntVar(&cfg.WarmupRuns, "warmup-runs", cfg.WarmupRuns, "runs before the measured ones (recorded, not printed); after them the engine pays its remaining one-time costs (prewarm)")
	fs.IntVar(&cfg.RepeatRuns, "repeat-runs", cfg.RepeatRuns, "measured runs, each printed")
	fs.StringVar(&cfg.JSONPath, "json", cfg.JSONPath, "write config, run summaries and per-request records to FILE")
	fs.StringVar(&cfg.CSVPath, "csv", cfg.CSVPath, "write one row per request to FILE")
	fs.StringVar(&cfg.CPUProfilePath, "cpuprofile", cfg.CPUProfilePath, "write a Go CPU profile of the whole process to FILE (go tool pprof)")
	return fs
}

// Usage prints every option with its default.
func Usage(w io.Writer) {
	cfg := DefaultConfig()
	fs := newFlagSet(&cfg)
	fs.SetOutput(w)
	fmt.Fprintln(w, "usage: rosetop [bench] [flags]")
	fs.PrintDefaults()
}

// ParseFlags parses args (without the program and subcommand names), applies --job's preset to
// every option not given explicitly, and validates the result. Errors are one line naming the
// flag and wrap ErrBadFlag; -h/--help prints Usage on stderr and returns flag.ErrHelp (exit 0).
func ParseFlags(args []string, stderr io.Writer) (Config, error) {
	cfg := DefaultConfig()
	fs := newFlagSet(&cfg)
	fs.SetOutput(io.Discard) // errors come back as one line, not with the whole usage
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			Usage(stderr)
			return cfg, err
		}
		return cfg, badFlag("%v", err)
	}
	if fs.NArg() > 0 {
		return cfg, badFlag("unexpected argument %q (flags only)", fs.Arg(0))
	}
	set := map[string]bool{} // flags given explicitly
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if cfg.Job != "" {
		job, ok := jobByName(cfg.Job)
		if !ok {
			return cfg, badFlag("--job: unknown job %q (valid: %s)", cfg.Job, strings.Join(JobNames(), ", "))
		}
		for _, kv := range job.Flags {
			if set[kv[0]] {
				continue // an explicit flag overrides the job
			}
			if err := fs.Set(kv[0], kv[1]); err != nil {
				return cfg, fmt.Errorf("job %s: --%s=%s: %w", job.Name, kv[0], kv[1], err)
			}
		}
	}
	if cfg.PrefillMaxBatch == 0 || (!set["prefill-max-batch-size"] && cfg.PrefillMaxBatch > cfg.MaxBatch) {
		cfg.PrefillMaxBatch = cfg.MaxBatch // the default, or a job's value under an explicit smaller max batch
	}
	return cfg, cfg.Validate()
}

// Validate checks every option; the error names the first bad one.
func (c Config) Validate() error {
	checks := []struct {
		bad bool
		msg string
	}{
		{c.Device != "auto" && c.Device != "cpu" && c.Device != "cuda", fmt.Sprintf("--device: unknown device %q (valid: auto, cpu, cuda)", c.Device)},
		{c.WarmupRuns < 0, fmt.Sprintf("--warmup-runs must be >= 0, got %d", c.WarmupRuns)},
		{c.RepeatRuns < 1, fmt.Sprintf("--repeat-runs must be >= 1, got %d", c.RepeatRuns)},
		{c.NumRequests < 1, fmt.Sprintf("--num-requests must be >= 1, got %d", c.NumRequests)},
		{c.MaxNewTokens < 1, fmt.Sprintf("--max-new-tokens must be >= 1, got %d", c.MaxNewTokens)},
		{c.PromptRepeats < 1, fmt.Sprintf("--prompt-repeats must be >= 1, got %d", c.PromptRepeats)},
		{c.MaxBatch < 1, fmt.Sprintf("--max-batch-size must be >= 1, got %d", c.MaxBatch)},
		{c.PrefillMaxBatch < 1, fmt.Sprintf("--prefill-max-batch-size must be >= 1, got %d", c.PrefillMaxBatch)},
		{c.PrefillMaxBatch > c.MaxBatch, fmt.Sprintf("--prefill-max-batch-size (%d) must be <= --max-batch-size (%d)", c.PrefillMaxBatch, c.MaxBatch)},
		{c.PrefillMaxTokens < 0, fmt.Sprintf("--prefill-max-tokens must be >= 0, got %d", c.PrefillMaxTokens)},
		{!(c.BurstQuietUs >= 0 && c.BurstQuietUs <= maxBurstQuietUs), fmt.Sprintf("--burst-quiet-us must be in [0, %g], got %v", maxBurstQuietUs, c.BurstQuietUs)},
		{!slices.Contains(sched.Policies(), c.Policy), fmt.Sprintf("--policy: unknown policy %q (valid: %s)", c.Policy, strings.Join(sched.Policies(), ", "))},
		{c.SubmitIntervalMs < 0 || math.IsNaN(c.SubmitIntervalMs) || math.IsInf(c.SubmitIntervalMs, 0), fmt.Sprintf("--submit-interval-ms must be a finite number >= 0, got %v", c.SubmitIntervalMs)},
		{c.SubmitSchedule != "relative" && c.SubmitSchedule != "absolute", fmt.Sprintf("--submit-schedule: unknown schedule %q (valid: relative, absolute)", c.SubmitSchedule)},
		{c.RequestRate < 0 || math.IsNaN(c.RequestRate), fmt.Sprintf("--request-rate must be >= 0 (0 or inf: burst), got %v", c.RequestRate)},
		{c.Temperature < 0, fmt.Sprintf("--temperature must be >= 0, got %v", c.Temperature)},
		{c.TopK < 0, fmt.Sprintf("--top-k must be >= 0, got %d", c.TopK)},
		{c.TopP < 0 || c.TopP > 1, fmt.Sprintf("--top-p must be in [0, 1], got %v", c.TopP)},
		{c.GPUMemoryFraction < 0 || c.GPUMemoryFraction > 1, fmt.Sprintf("--gpu-memory-fraction must be in [0, 1], got %v", c.GPUMemoryFraction)},
		{c.Threads < 0, fmt.Sprintf("--threads must be >= 0, got %d", c.Threads)},
		{c.MaxSeqLen < 0, fmt.Sprintf("--max-seq-len must be >= 0, got %d", c.MaxSeqLen)},
		{c.TokenizeWorkers < 0, fmt.Sprintf("--tokenize-workers must be >= 0, got %d", c.TokenizeWorkers)},
		{c.StreamInterval < 0, fmt.Sprintf("--stream-interval must be >= 0, got %d", c.StreamInterval)},
	}
	for _, ch := range checks {
		if ch.bad {
			return &flagError{msg: ch.msg}
		}
	}
	return nil
}

// poisson reports whether arrivals follow --request-rate.
func (c Config) poisson() bool { return c.RequestRate > 0 && !math.IsInf(c.RequestRate, 1) }
