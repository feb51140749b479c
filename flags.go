package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"runtime"
	"strconv"
	"strings"
	"time"

	"rosetop/bench"
	"rosetop/engine"
	"rosetop/sched"
)

// options is the command line of `rosetop` and `rosetop bench`: every flag's target. Its JSON
// is the "config" object of a --json export.
type options struct {
	Model             string      `json:"model"`
	Device            string      `json:"device"` // auto | cpu | cuda
	Job               string      `json:"job,omitempty"`
	Prompt            string      `json:"prompt"`
	PromptRepeats     int         `json:"prompt_repeats"`
	UniquePrompts     bool        `json:"unique_prompts"`
	NumRequests       int         `json:"num_requests"`
	MaxNewTokens      int         `json:"max_new_tokens"`
	MaxBatch          int         `json:"max_batch_size"`
	PrefillMaxBatch   int         `json:"prefill_max_batch_size"` // 0: = MaxBatch
	PrefillMaxTokens  int         `json:"prefill_max_tokens"`     // 0: no limit
	Policy            string      `json:"policy"`                 // decode-first | prefill-first | mixed
	BurstQuietUs      float64     `json:"burst_quiet_us"`         // 0: off
	SubmitIntervalMs  float64     `json:"submit_interval_ms"`
	SubmitSchedule    string      `json:"submit_schedule"` // relative | absolute
	RequestRate       requestRate `json:"request_rate"`    // Poisson arrivals per second; 0 or +Inf: off
	Seed              uint64      `json:"seed"`
	Temperature       float64     `json:"temperature"`
	TopK              int         `json:"top_k"`
	TopP              float64     `json:"top_p"`
	NoStopOnEOS       bool        `json:"no_stop_on_eos"`
	NoPrefixCache     bool        `json:"no_prefix_cache"`
	Paged             bool        `json:"paged_attn"`
	CUDAGraph         bool        `json:"cuda_graph"`
	CaptureAhead      bool        `json:"capture_ahead"`
	GPUMemoryFraction float64     `json:"gpu_memory_fraction"`
	Threads           int         `json:"threads"`
	MaxSeqLen         int         `json:"max_seq_len"` // 0: longest prompt + max new tokens
	NVTX              bool        `json:"nvtx"`
	Pretok            bool        `json:"pretok"`
	TokenizeWorkers   int         `json:"tokenize_workers"`
	StreamInterval    int         `json:"stream_interval"`
	WarmupRuns        int         `json:"warmup_runs"`
	RepeatRuns        int         `json:"repeat_runs"`
	JSONPath          string      `json:"-"`
	CSVPath           string      `json:"-"`
	CPUProfilePath    string      `json:"-"`
	RecordPath        string      `json:"-"`
	loadOptions                   // load_flags.go
	remoteOptions                 // remote_flags.go
	// command is the command parsing the flags, set by its bind function: "dashboard", "sweep";
	// "" for rosetop bench. Some flags are one command's (--watch: the dashboard's).
	command string
}

// Bounds of the size flags: nothing is allocated from a flag before it is checked against them.
const (
	maxRequests    = 100_000 // requests per run (every record of a run is kept)
	maxNewTokens   = 1 << 20
	maxBatch       = 4096
	maxRuns        = 10_000
	maxPromptBytes = 4 << 20 // the prompt text after --prompt-repeats
	// maxUniqueBytes bounds the prompt text of a run with --unique-prompts, where each request
	// holds (and tokenizes) its own copy.
	maxUniqueBytes = 128 << 20
	maxIntervalMs  = 3_600_000
	maxRate        = 1e6
	minRate        = 1e-3
)

// defaultOptions is the command line with no flags given.
func defaultOptions() options {
	return options{
		Device: "auto", Prompt: "Hello", PromptRepeats: 1, NumRequests: 16, MaxNewTokens: 64,
		MaxBatch: 64, Policy: "mixed", BurstQuietUs: 20, SubmitSchedule: "relative", StreamInterval: 1,
		WarmupRuns: 1, RepeatRuns: 1, loadOptions: defaultLoadOptions(), // a warm-up first: the default report is a steady run, not a cold one
	}
}

// newFlagSet binds every option of `rosetop` and `rosetop bench` to o's fields.
func newFlagSet(o *options) *flag.FlagSet {
	fs := flag.NewFlagSet("rosetop", flag.ContinueOnError)
	cores := runtime.NumCPU()
	fs.StringVar(&o.Model, "model", o.Model, `model: "" (embedded tiny model), a directory, a hub id (gpt2, distilgpt2, ...), random:NAME`)
	fs.StringVar(&o.Device, "device", o.Device, "auto | cpu | cuda")
	fs.StringVar(&o.Job, "job", o.Job, "named preset: "+strings.Join(jobNames(), ", ")+" (explicit flags override it)")
	fs.StringVar(&o.Prompt, "prompt", o.Prompt, "prompt text")
	intVar(fs, &o.PromptRepeats, "prompt-repeats", 1, maxPromptBytes, "repeat the prompt text N times")
	fs.BoolVar(&o.UniquePrompts, "unique-prompts", o.UniquePrompts, `prefix request i with a marker word of its own: "<marker_i> <prompt>"`)
	intVar(fs, &o.NumRequests, "num-requests", 1, maxRequests, "requests per run")
	intVar(fs, &o.MaxNewTokens, "max-new-tokens", 1, maxNewTokens, "output tokens per request")
	intVar(fs, &o.MaxBatch, "max-batch-size", 1, maxBatch, "most running sequences")
	intVar(fs, &o.PrefillMaxBatch, "prefill-max-batch-size", 0, maxBatch, "most requests admitted per step (0: = max batch size)")
	intVar(fs, &o.PrefillMaxTokens, "prefill-max-tokens", 0, 1<<24, "most prompt tokens prefilled per step (0: no limit)")
	floatVar(fs, &o.BurstQuietUs, "burst-quiet-us", 0, float64(sched.MaxBurstQuiet/time.Microsecond), "when requests reach an idle scheduler, its first step waits until none has arrived for this many microseconds (at most 8x that), so a burst starts as one batch (0: at once)")
	fs.StringVar(&o.Policy, "policy", o.Policy, "how a step runs its new prompts and its running sequences' next tokens: mixed (one forward pass over both) | prefill-first | decode-first (two passes, in that order)")
	floatVar(fs, &o.SubmitIntervalMs, "submit-interval-ms", 0, maxIntervalMs, "submit interval in ms (0: burst)")
	fs.StringVar(&o.SubmitSchedule, "submit-schedule", o.SubmitSchedule, "relative (sleep the interval after each submit) | absolute (target t0 + i*interval)")
	fs.Var(rateFlag{&o.RequestRate}, "request-rate", fmt.Sprintf("Poisson arrivals at R requests/s (%g to %g), seeded by --seed; 0: off (the interval schedule); inf: every request at once", minRate, maxRate))
	uint64Var(fs, &o.Seed, "seed", "seed of arrivals, sampling and random:NAME weights")
	floatVar(fs, &o.Temperature, "temperature", 0, 100, "sampling temperature (0: greedy)")
	intVar(fs, &o.TopK, "top-k", 0, 1<<24, "top-k sampling (0: off)")
	floatVar(fs, &o.TopP, "top-p", 0, 1, "top-p sampling (0 or 1: off)")
	fs.BoolVar(&o.NoStopOnEOS, "no-stop-on-eos", o.NoStopOnEOS, "keep generating after EOS")
	fs.BoolVar(&o.NoPrefixCache, "no-prefix-cache", o.NoPrefixCache, "turn the prefix cache off")
	fs.BoolVar(&o.Paged, "paged-attn", o.Paged, "paged KV cache (block size 16)")
	fs.BoolVar(&o.CUDAGraph, "cuda-graph", o.CUDAGraph, "replay decode steps, and prefill or mixed steps whose shape recurs, from CUDA Graphs (GPU only)")
	fs.BoolVar(&o.CaptureAhead, "capture-ahead", o.CaptureAhead, "GPU: pay the one-time costs at start (every graph capture, cuBLAS first calls), not on first use in the cold run")
	floatVar(fs, &o.GPUMemoryFraction, "gpu-memory-fraction", 0, 1, "share of free GPU memory for the KV pool (0: engine default)")
	intVar(fs, &o.Threads, "threads", 0, 4*cores, "CPU threads (0: all cores)")
	intVar(fs, &o.MaxSeqLen, "max-seq-len", 0, maxNewTokens, "longest sequence (0: longest prompt + max new tokens)")
	fs.BoolVar(&o.NVTX, "nvtx", o.NVTX, "NVTX ranges (accepted and printed; no effect without a profiler attached)")
	fs.BoolVar(&o.Pretok, "pretok", o.Pretok, "tokenize prompts before the run; submit token ids")
	intVar(fs, &o.TokenizeWorkers, "tokenize-workers", 0, 4*cores, "scheduler tokenize workers (0: inline in add_request)")
	intVar(fs, &o.StreamInterval, "stream-interval", 0, maxNewTokens, "emit a text piece every N tokens (0 or 1: every token)")
	intVar(fs, &o.WarmupRuns, "warmup-runs", 0, maxRuns, "runs before the measured ones (recorded, summarized in one line); after them the engine pays its remaining one-time costs (prewarm)")
	intVar(fs, &o.RepeatRuns, "repeat-runs", 1, maxRuns, "measured runs, each printed")
	fs.StringVar(&o.JSONPath, "json", o.JSONPath, "write config, run summaries and per-request records to FILE")
	fs.StringVar(&o.CSVPath, "csv", o.CSVPath, "write one row per request to FILE")
	fs.StringVar(&o.RecordPath, "record", o.RecordPath, "record what the dashboard shows (its views and key presses) to FILE: rosetop replay FILE plays it back anywhere")
	fs.StringVar(&o.CPUProfilePath, "cpuprofile", o.CPUProfilePath, "write a Go CPU profile of the whole process to FILE (go tool pprof)")
	bindLoadFlags(fs, &o.loadOptions)
	remoteFlags(fs, &o.remoteOptions)
	return fs
}

// benchUsage prints every option with its default.
func benchUsage(w io.Writer) {
	o := defaultOptions()
	fs := newFlagSet(&o)
	fs.SetOutput(w)
	fmt.Fprintln(w, "usage: rosetop [bench] [flags]\n\nThe dashboard (rosetop with no command) starts from --job decode-heavy: its presets replace the\ndefaults below for every flag not given. rosetop --endpoint URL --watch (the dashboard only) sends\nthe server no request: it shows what the server's Prometheus metrics say, and takes no load flag.\n\nFlags:")
	fs.PrintDefaults()
}

// parseOptions parses args (without the program and subcommand names), applies --job's preset
// to every option not given explicitly, and validates the result, reading a dataset or trace
// file until ctx is done (then its error). Errors are one line naming the flag and wrap
// errBadFlag; -h/--help returns a *helpShown (flag.ErrHelp) carrying the usage.
func parseOptions(ctx context.Context, args []string, stderr io.Writer) (options, error) {
	o, _, err := parseOptionsWith(ctx, args, stderr, nil, benchUsage)
	return o, err
}

// parseOptionsWith is parseOptions for a command with flags of its own, which bind adds to the
// set; it also returns the flags given explicitly.
func parseOptionsWith(ctx context.Context, args []string, stderr io.Writer, bind func(*flag.FlagSet, *options), usage func(io.Writer)) (options, map[string]bool, error) {
	o := defaultOptions()
	fs := newFlagSet(&o)
	if bind != nil {
		bind(fs, &o)
	}
	set := map[string]bool{} // flags given explicitly
	if err := parseFlagSet(fs, args, usage); err != nil {
		return o, set, err
	}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if err := o.finish(ctx, fs, set, stderr); err != nil {
		return o, set, lineError{err}
	}
	return o, set, nil
}

// finish applies --job's preset to every option not given explicitly (through fs, which is bound
// to o) and validates the result; notes go to stderr.
func (o *options) finish(ctx context.Context, fs *flag.FlagSet, set map[string]bool, stderr io.Writer) error {
	if err := o.checkWatch(set); err != nil {
		return err
	}
	if o.Job != "" {
		job, ok := jobByName(o.Job)
		if !ok {
			return badFlag("--job: unknown job %q (valid: %s)", o.Job, strings.Join(jobNames(), ", "))
		}
		for _, kv := range job.Flags {
			if set[kv[0]] {
				continue // an explicit flag overrides the job
			}
			if err := fs.Set(kv[0], kv[1]); err != nil {
				return fmt.Errorf("job %s: --%s=%s: %w", job.Name, kv[0], kv[1], err)
			}
		}
	}
	if err := o.checkRemote(set, stderr); err != nil {
		return err
	}
	if ((set["request-rate"] && o.RequestRate != 0) || set["request-rates"]) && !set["submit-interval-ms"] {
		o.SubmitIntervalMs = 0 // an explicit rate (or rosetop sweep's rates) replaces the job's interval; 0 is off
	}
	if o.PrefillMaxBatch == 0 || (!set["prefill-max-batch-size"] && o.PrefillMaxBatch > o.MaxBatch) {
		o.PrefillMaxBatch = o.MaxBatch // the default, or a job's value under an explicit smaller max batch
	}
	if err := o.applyLoad(ctx, set, stderr); err != nil {
		return err
	}
	return o.validate()
}

// parseFlagSet parses args into fs with one-line errors, "did you mean" for a misspelt flag, and
// usage on -h (a *helpShown, which wraps flag.ErrHelp).
func parseFlagSet(fs *flag.FlagSet, args []string, usage func(io.Writer)) error {
	fs.SetOutput(io.Discard) // errors come back as one line, not with the whole usage
	if fs.Lookup("goodput") != nil {
		args = joinGoodputPairs(args)
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return askedHelp(usage)
		}
		return badFlag("%s", withSuggestion(fs, err))
	}
	if fs.NArg() > 0 {
		if b := boolGivenApart(fs, args); b != "" {
			return badFlag("unexpected argument %q: a switch takes its value after \"=\": --%s=%s", fs.Arg(0), b, fs.Arg(0))
		}
		return badFlag("unexpected argument %q (flags only; see -h)", fs.Arg(0))
	}
	return nil
}

// boolGivenApart is the name of the boolean flag whose value the first argument left over
// seems to be (--paged-attn false: the flag package takes a switch's value only after "="), or "".
func boolGivenApart(fs *flag.FlagSet, args []string) string {
	i := len(args) - fs.NArg() - 1 // the argument before the first one left over
	if i < 0 || args[i] == "--" {
		return ""
	}
	if _, err := strconv.ParseBool(fs.Arg(0)); err != nil {
		return ""
	}
	name, hasValue := flagArg(args[i])
	f := fs.Lookup(name)
	if f == nil || hasValue {
		return ""
	}
	if b, ok := f.Value.(interface{ IsBoolFlag() bool }); ok && b.IsBoolFlag() {
		return name
	}
	return ""
}

// flagArg is the flag an argument names as the flag package reads it (-name, --name, -name=v,
// --name=v) and whether it carries its value; "" for an argument that is no flag.
func flagArg(a string) (name string, hasValue bool) {
	if !strings.HasPrefix(a, "-") {
		return "", false
	}
	name, _, hasValue = strings.Cut(strings.TrimLeft(a, "-"), "=")
	return name, hasValue
}

// joinGoodputPairs takes vLLM's --goodput form, its KEY:MS pairs as separate arguments
// (--goodput ttft:200 tpot:20), to rosetop's one comma-separated value.
func joinGoodputPairs(args []string) []string {
	out := make([]string, 0, len(args))
	for i := 0; i < len(args); i++ {
		a := args[i]
		out = append(out, a)
		if a == "--" {
			return append(out, args[i+1:]...)
		}
		name, hasValue := flagArg(a)
		if name != "goodput" {
			continue
		}
		if !hasValue && i+1 < len(args) { // the value is the next argument
			i++
			out = append(out, args[i])
		}
		for i+1 < len(args) && !strings.HasPrefix(args[i+1], "-") && strings.Contains(args[i+1], ":") {
			i++
			out[len(out)-1] += "," + args[i]
		}
	}
	return out
}

// validate checks what the flags' own bounds cannot: choices and relations between flags.
func (o options) validate() error {
	promptBytes := len(o.Prompt) * o.PromptRepeats
	ownPrompts := o.UniquePrompts && o.dataset == nil
	checks := []struct {
		bad bool
		msg string
	}{
		{o.Device != "auto" && o.Device != "cpu" && o.Device != "cuda", fmt.Sprintf("--device: unknown device %q (valid: auto, cpu, cuda)", o.Device)},
		{o.SubmitSchedule != "relative" && o.SubmitSchedule != "absolute", fmt.Sprintf("--submit-schedule: unknown schedule %q (valid: relative, absolute)", o.SubmitSchedule)},
		{o.Prompt == "" && o.dataset == nil, `--prompt "": empty (a request needs a prompt of at least one token)`},
		{promptBytes > maxPromptBytes, fmt.Sprintf("--prompt-repeats %d makes a prompt of %d bytes, more than the limit of %d", o.PromptRepeats, promptBytes, maxPromptBytes)},
		{ownPrompts && promptBytes*o.NumRequests > maxUniqueBytes, fmt.Sprintf("--unique-prompts gives each of --num-requests %d its own copy of a %d-byte prompt: %d bytes, more than the limit of %d (fewer requests or a shorter prompt)",
			o.NumRequests, promptBytes, promptBytes*o.NumRequests, maxUniqueBytes)},
		{o.RequestRate != 0 && o.SubmitIntervalMs > 0, fmt.Sprintf("--request-rate %s and --submit-interval-ms %g both set the arrivals: give one", o.RequestRate, o.SubmitIntervalMs)},
	}
	for _, ch := range checks {
		if ch.bad {
			return badFlag("%s", ch.msg)
		}
	}
	if _, err := sched.ParsePolicy(o.Policy); err != nil {
		return badFlag("--policy: unknown policy %q (valid: %s)", o.Policy, strings.Join(sched.Policies(), ", "))
	}
	if err := o.sessionConfig().Validate(); err != nil {
		return badFlag("%s", err)
	}
	return nil
}

// sessionConfig is what the Session runs.
func (o options) sessionConfig() bench.Config {
	policy, _ := sched.ParsePolicy(o.Policy) // validate refuses an unknown one first
	arr := bench.Arrivals{Schedule: o.SubmitSchedule, Interval: time.Duration(o.SubmitIntervalMs * float64(time.Millisecond)), Seed: o.Seed}
	if o.RequestRate.poisson() {
		arr = bench.Arrivals{Schedule: "poisson", Rate: float64(o.RequestRate), Seed: o.Seed}
	}
	sp := engine.SamplingParams{Temperature: float32(o.Temperature), TopK: o.TopK, TopP: engine.TopPOf(o.TopP), Seed: o.Seed}
	return o.withLoad(bench.Config{
		Job: o.Job,
		Workload: bench.Workload{
			Prompt: o.Prompt, PromptRepeats: o.PromptRepeats, UniquePrompts: o.UniquePrompts, NumRequests: o.NumRequests,
			MaxNewTokens: o.MaxNewTokens, StopOnEOS: !o.NoStopOnEOS, Pretok: o.Pretok, StreamInterval: o.StreamInterval,
			Sampling: sp,
		},
		Arrivals: arr,
		Sched: sched.Config{MaxBatch: o.MaxBatch, PrefillMaxBatch: o.PrefillMaxBatch, PrefillMaxTokens: o.PrefillMaxTokens,
			Policy: policy, BurstQuiet: time.Duration(o.BurstQuietUs * float64(time.Microsecond))},
		Engine:    bench.EngineOptions{Paged: o.Paged, CUDAGraph: o.CUDAGraph},
		MaxSeqLen: o.MaxSeqLen, WarmupRuns: o.WarmupRuns, RepeatRuns: o.RepeatRuns, NVTX: o.NVTX,
	})
}

// inProcess is the in-process engine the options ask for.
func (o options) inProcess() bench.InProcessOptions {
	return bench.InProcessOptions{
		Model: o.Model, Seed: o.Seed, Device: o.Device, Threads: o.Threads, CaptureAhead: o.CaptureAhead,
		GPUMemoryFraction: o.GPUMemoryFraction, PrefixCache: !o.NoPrefixCache, TokenizeWorkers: o.TokenizeWorkers,
	}
}
