package bench

import (
	"context"
	"io"
	"time"

	"rosetop/sched"
)

// Server is what a Session drives: an engine with its scheduler. The in-process engine
// (inproc.go) is one; a remote OpenAI-compatible server is another. Submit, Cancel, SetConfig
// and Config are safe from any goroutine; Run is the scheduler loop, called once.
type Server interface {
	Info() ServerInfo
	Submit(r sched.Request) (sched.RequestID, error)
	Cancel(id sched.RequestID)
	SetConfig(c sched.Config) error
	Config() sched.Config
	// Run steps the scheduler until ctx is done, sending every step's output to out. It does
	// not close out.
	Run(ctx context.Context, out chan<- sched.StepOutput) error
	// Ledger returns the engine's cold-start costs from the from-th on (nil when there are no
	// more): the session asks after every step for what is new.
	Ledger(from int) []LedgerEntry
	Close() error // after Run has returned
}

// LedgerEntry is one cold-start cost: a model load, a kernel module load, a graph capture.
type LedgerEntry struct {
	What   string        // "model load", "kernel module load", "graph capture"
	Detail string        // "batch 16", "12 tensors, 497 MB"
	Took   time.Duration // wall time
	At     time.Time     // when it finished
}

// ServerInfo describes a built server for headers and reports.
type ServerInfo struct {
	Model           string
	RandomWeights   bool
	Device          string // "cpu" | "cuda"
	DeviceDetail    string // the backend's description, e.g. "cpu (2 threads)"
	DeviceNote      string // why this device
	Paged           bool
	CUDAGraph       bool
	MaxBatch        int // the engine's capacity: the scheduler's max batch cannot exceed it
	KVTotal         int // KV blocks in the pool
	TokenizeWorkers int // the scheduler's tokenize workers (0: inline)
	// Backend names the serving stack in vLLM-format results ("": rosetop's own engine).
	Backend string
	// Remote describes a server outside this process; nil for rosetop's own engine.
	Remote *RemoteInfo
}

// EngineOptions are the settings that need a new engine when they change.
type EngineOptions struct {
	Paged     bool
	CUDAGraph bool
}

// ServerSpec is what one engine is built with.
type ServerSpec struct {
	Engine    EngineOptions
	MaxBatch  int           // the engine's capacity: most sequences in one step
	MaxSeqLen int           // longest sequence, prompt plus output
	Sched     sched.Config  // the scheduler's first knobs
	Clock     Clock         // the session's clock: request timestamps share its time base
	Window    time.Duration // the rolling window of the dashboard's percentiles
	SLOs      []SLO         // --goodput's targets: a watched server's histograms say how many met them
}

// ModelInfo is what a Session needs of the model a Provider serves.
type ModelInfo struct {
	Codec        TextCodec // the tokenizer
	Vocab        int       // token ids are below it
	MaxPositions int       // the longest sequence the model takes (n_positions)
	EOS          int32     // end-of-text id
}

// Provider builds servers. It holds what outlives one engine: the loaded model.
type Provider interface {
	// Prepare loads the model (once), writing progress to progress.
	Prepare(ctx context.Context, progress io.Writer) error
	// Model describes the prepared model; valid after Prepare.
	Model() ModelInfo
	// NewServer builds an engine and its scheduler.
	NewServer(ctx context.Context, spec ServerSpec) (Server, error)
	// Ledger returns the provider's own cold-start costs (model load).
	Ledger() []LedgerEntry
	Close() error
}
