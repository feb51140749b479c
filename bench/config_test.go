package bench

import (
	"time"

	"rosetop/sched"
)

// testConfig is the command line's defaults as a Session's Config, changed by mods in order.
func testConfig(mods ...func(c *Config)) Config {
	c := Config{
		Workload:   Workload{Prompt: "Hello", PromptRepeats: 1, NumRequests: 16, MaxNewTokens: 64, StopOnEOS: true, StreamInterval: 1},
		Arrivals:   Arrivals{Schedule: "relative"},
		Sched:      sched.Config{MaxBatch: 64, PrefillMaxBatch: 64, Policy: sched.Mixed, BurstQuiet: 20 * time.Microsecond},
		RepeatRuns: 1,
	}
	for _, m := range mods {
		m(&c)
	}
	return c
}

// The seeds' jobs, as the command line's --job presets set the Session's part of them.

func decodeHeavy(c *Config) {
	c.Job = "decode-heavy"
	c.Workload = Workload{Prompt: "Hello", PromptRepeats: 1, UniquePrompts: true, NumRequests: 64, MaxNewTokens: 256, StreamInterval: 1}
	c.Sched.MaxBatch, c.Sched.PrefillMaxBatch = 64, 64
	c.Engine = EngineOptions{Paged: true, CUDAGraph: true}
	c.WarmupRuns, c.RepeatRuns = 1, 3
}

func paced(c *Config) {
	c.Job = "paced"
	c.Workload = Workload{Prompt: "Hello", PromptRepeats: 1, Pretok: true, NumRequests: 64, MaxNewTokens: 128, StreamInterval: 8}
	c.Sched.MaxBatch, c.Sched.PrefillMaxBatch = 64, 64
	c.Arrivals = Arrivals{Schedule: "absolute", Interval: 20 * time.Millisecond}
	c.Engine = EngineOptions{Paged: true, CUDAGraph: true}
	c.WarmupRuns, c.RepeatRuns = 1, 1
}

func prefillHeavy(c *Config) {
	c.Job = "prefill-heavy"
	c.Workload = Workload{Prompt: "Hello", PromptRepeats: 256, UniquePrompts: true, NumRequests: 256, MaxNewTokens: 1, StreamInterval: 1}
	c.Sched.MaxBatch, c.Sched.PrefillMaxBatch = 16, 16
	c.Arrivals = Arrivals{Schedule: "absolute", Interval: time.Millisecond}
	c.WarmupRuns, c.RepeatRuns = 1, 1
}

// requests sets the run's size: n requests of newTokens output tokens.
func requests(n, newTokens int) func(*Config) {
	return func(c *Config) { c.Workload.NumRequests, c.Workload.MaxNewTokens = n, newTokens }
}

// runs sets the warmup and repeat runs.
func runs(warmup, repeat int) func(*Config) {
	return func(c *Config) { c.WarmupRuns, c.RepeatRuns = warmup, repeat }
}

// cpuEngine is rosetop's engine on the embedded tiny model, on the CPU with threads threads.
func cpuEngine(threads int) Provider {
	return NewInProcess(InProcessOptions{Device: "cpu", Threads: threads, PrefixCache: true})
}
