package bench

import (
	"context"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"rosetop/engine"
	"rosetop/sched"
)

// InProcessOptions say which model rosetop's own engine runs and how.
type InProcessOptions struct {
	Model             string  // "" (embedded), a directory, a hub id, random:NAME
	Seed              uint64  // random:NAME weights
	Device            string  // auto | cpu | cuda
	Threads           int     // CPU threads; 0: all cores
	CaptureAhead      bool    // GPU: capture every graph at engine start
	GPUMemoryFraction float64 // share of free GPU memory for the KV pool; 0: engine default
	PrefixCache       bool
	TokenizeWorkers   int // 0: tokenize inside Submit
}

// inProcess is the Provider of rosetop's own engine and scheduler, in this process.
type inProcess struct {
	opts  InProcessOptions // immutable
	model *engine.Model    // loaded by Prepare on the session's goroutine; read-only afterwards
	mu    sync.Mutex       // guards load
	load  []LedgerEntry
}

// NewInProcess returns the Provider of the engine package's GPT-2 on the best device, with the
// sched package's scheduler.
func NewInProcess(o InProcessOptions) Provider { return &inProcess{opts: o} }

func (p *inProcess) Prepare(ctx context.Context, progress io.Writer) error {
	if p.model != nil {
		return nil
	}
	start := time.Now()
	name := p.opts.Model
	if name == "" {
		name = "tiny-gpt2 (embedded)"
	}
	fmt.Fprintf(progress, "rosetop: loading model %s…\n", name) // random weights take seconds to build
	m, err := engine.LoadModel(ctx, p.opts.Model, engine.LoadOptions{Progress: progress, Seed: p.opts.Seed})
	if err != nil {
		return err
	}
	p.model = m
	c := m.Config
	p.mu.Lock()
	p.load = append(p.load, LedgerEntry{What: "model load", Took: time.Since(start), At: time.Now(),
		Detail: fmt.Sprintf("%s: %d layers, %d heads, %d channels", m.Name, c.NLayer, c.NHead, c.NEmbd)})
	p.mu.Unlock()
	fmt.Fprintf(progress, "rosetop: model %s loaded in %.2f s\n", m.Name, time.Since(start).Seconds())
	return nil
}

func (p *inProcess) Model() ModelInfo {
	t := p.model.Tokenizer
	// EOS is the model's (config.json's eos_token_id), on which generate stops too, as transformers'
	// generate does; for GPT-2 it is the tokenizer's <|endoftext|>.
	return ModelInfo{Codec: t, Vocab: min(t.VocabSize(), p.model.Config.VocabSize), MaxPositions: p.model.Config.NPositions, EOS: p.model.Config.EOSTokenID}
}

func (p *inProcess) Ledger() []LedgerEntry {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]LedgerEntry(nil), p.load...)
}

func (p *inProcess) Close() error {
	if p.model == nil {
		return nil
	}
	return p.model.Close()
}

func (p *inProcess) NewServer(ctx context.Context, spec ServerSpec) (Server, error) {
	o := p.opts
	e, err := engine.New(p.model, engine.Options{
		Device: o.Device, Paged: spec.Engine.Paged, CUDAGraph: spec.Engine.CUDAGraph, CaptureAhead: o.CaptureAhead,
		MaxBatch: spec.MaxBatch, MaxSeqLen: spec.MaxSeqLen, GPUMemoryFraction: o.GPUMemoryFraction, Threads: o.Threads,
	})
	if err != nil {
		return nil, err
	}
	detail := e.Backend.Device()
	device := "cpu"
	if strings.HasPrefix(detail, "cuda") {
		device = "cuda"
	}
	s, err := sched.New(sched.Options{
		Backend: e.Backend, Layout: e.Layout, PrefixCache: o.PrefixCache, MaxSeqLen: e.MaxSeqLen(),
		EOS: p.model.Config.EOSTokenID, Vocab: p.model.Config.VocabSize, Tokenizer: p.model.Tokenizer, TokenizeWorkers: o.TokenizeWorkers,
		Clock: spec.Clock, Config: spec.Sched, BatchLimit: spec.MaxBatch,
	})
	if err != nil {
		e.Close()
		return nil, fmt.Errorf("scheduler: %w", err)
	}
	info := ServerInfo{
		Model: p.model.Name, RandomWeights: p.model.RandomWeights, Device: device, DeviceDetail: detail,
		DeviceNote: e.DeviceNote, Paged: e.Layout.Paged, CUDAGraph: spec.Engine.CUDAGraph && device == "cuda",
		MaxBatch: spec.MaxBatch, KVTotal: e.Layout.NumBlocks, TokenizeWorkers: o.TokenizeWorkers,
	}
	return &inProcServer{Scheduler: s, eng: e, info: info}, nil
}

// inProcServer is an engine with its scheduler; the scheduler's methods serve the Server interface.
type inProcServer struct {
	*sched.Scheduler
	eng  *engine.Engine
	info ServerInfo
}

func (s *inProcServer) Info() ServerInfo { return s.info }

func (s *inProcServer) Submit(r sched.Request) (sched.RequestID, error) { return s.Scheduler.Submit(r) }

func (s *inProcServer) Ledger(from int) []LedgerEntry {
	if s.eng.Ledger.Len() <= from {
		return nil
	}
	es := s.eng.Ledger.Entries()[from:]
	out := make([]LedgerEntry, len(es))
	for i, e := range es {
		out[i] = LedgerEntry{What: e.What, Detail: e.Detail, Took: e.Took, At: e.At}
	}
	return out
}

// Prewarm pays the engine's remaining one-time costs (engine.Engine.Prewarm); the session calls
// it while no request is in flight.
func (s *inProcServer) Prewarm() error { return s.eng.Prewarm() }

// Close stops the scheduler (its tokenize workers) and frees the backend.
func (s *inProcServer) Close() error {
	s.Scheduler.Close()
	return s.eng.Close()
}
