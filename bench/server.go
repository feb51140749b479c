package bench

import (
	"context"
	"io"

	"rosetop/engine"
	"rosetop/sched"
)

// Server is what a Session drives: an engine with its scheduler. Today it is the in-process
// engine (inproc.go); a remote OpenAI-compatible server can implement it later. Submit, Cancel,
// SetConfig and Config are safe from any goroutine; Run is the scheduler loop, called once.
type Server interface {
	Info() ServerInfo
	Submit(r sched.Request) (sched.RequestID, error)
	Cancel(id sched.RequestID)
	SetConfig(c sched.Config) error
	Config() sched.Config
	// Run steps the scheduler until ctx is done, sending every step's output to out. It does
	// not close out.
	Run(ctx context.Context, out chan<- sched.StepOutput) error
	Ledger() []engine.LedgerEntry // cold-start costs of this engine so far
	LedgerLen() int               // len(Ledger()) without the copy: checked after every step
	Close() error                 // after Run has returned
}

// ServerInfo describes a built server for headers and reports.
type ServerInfo struct {
	Model         string
	RandomWeights bool
	Device        string // "cpu" | "cuda"
	DeviceDetail  string // the backend's description, e.g. "cpu (2 threads)"
	DeviceNote    string // why this device
	Paged         bool
	CUDAGraph     bool
	MaxBatch      int // the engine's capacity: the scheduler's max batch cannot exceed it
	KVTotal       int // KV blocks in the pool
}

// EngineOptions are the settings that need a new engine when they change.
type EngineOptions struct {
	Paged     bool
	CUDAGraph bool
}

// Provider builds servers. It holds what outlives one engine: the loaded model.
type Provider interface {
	// Prepare loads the model (once), writing progress to progress.
	Prepare(ctx context.Context, cfg Config, progress io.Writer) error
	// Codec is the model's tokenizer and its vocabulary size; valid after Prepare.
	Codec() (TextCodec, int)
	// MaxPositions is the model's n_positions; valid after Prepare.
	MaxPositions() int
	// NewServer builds an engine and its scheduler. maxSeqLen bounds one sequence.
	NewServer(ctx context.Context, cfg Config, eo EngineOptions, maxSeqLen int, clock Clock) (Server, error)
	// Ledger returns the provider's own cold-start costs (model load).
	Ledger() []engine.LedgerEntry
	Close() error
}
