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

// inProcess is the Provider of rosetop's own engine and scheduler, in this process.
type inProcess struct {
	model *engine.Model // loaded by Prepare on the session's goroutine; read-only afterwards
	mu    sync.Mutex    // guards ledger
	load  []engine.LedgerEntry
}

// NewInProcess returns the default Provider: the engine package's GPT-2 on the best device, with
// the sched package's scheduler.
func NewInProcess() Provider { return &inProcess{} }

func (p *inProcess) Prepare(ctx context.Context, cfg Config, progress io.Writer) error {
	if p.model != nil {
		return nil
	}
	start := time.Now()
	m, err := engine.LoadModel(ctx, cfg.Model, engine.LoadOptions{Progress: progress, Seed: cfg.Seed})
	if err != nil {
		return err
	}
	p.model = m
	c := m.Config
	p.mu.Lock()
	p.load = append(p.load, engine.LedgerEntry{What: "model load", Took: time.Since(start), At: time.Now(),
		Detail: fmt.Sprintf("%s: %d layers, %d heads, %d channels", m.Name, c.NLayer, c.NHead, c.NEmbd)})
	p.mu.Unlock()
	fmt.Fprintf(progress, "rosetop: model %s loaded in %.2f s\n", m.Name, time.Since(start).Seconds())
	return nil
}

func (p *inProcess) Codec() (TextCodec, int) {
	return p.model.Tokenizer, min(p.model.Tokenizer.VocabSize(), p.model.Config.VocabSize)
}

func (p *inProcess) MaxPositions() int { return p.model.Config.NPositions }

func (p *inProcess) Ledger() []engine.LedgerEntry {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]engine.LedgerEntry(nil), p.load...)
}

func (p *inProcess) Close() error { return p.model.Close() }

func (p *inProcess) NewServer(ctx context.Context, cfg Config, eo EngineOptions, maxSeqLen int, clock Clock) (Server, error) {
	e, err := engine.New(p.model, engine.Options{
		Device: cfg.Device, Paged: eo.Paged, CUDAGraph: eo.CUDAGraph, CaptureAhead: cfg.CaptureAhead,
		MaxBatch: cfg.MaxBatch, MaxSeqLen: maxSeqLen, GPUMemoryFraction: cfg.GPUMemoryFraction, Threads: cfg.Threads,
	})
	if err != nil {
		return nil, err
	}
	detail := e.Backend.Device()
	device := "cpu"
	if strings.HasPrefix(detail, "cuda") {
		device = "cuda"
	}
	knobs := schedConfig(cfg)
	s, err := sched.New(sched.Options{
		Backend: e.Backend, Layout: e.Layout, PrefixCache: !cfg.NoPrefixCache, MaxSeqLen: e.MaxSeqLen(),
		EOS: p.model.Tokenizer.EOS(), Tokenizer: p.model.Tokenizer, TokenizeWorkers: cfg.TokenizeWorkers,
		Clock: clock, Config: knobs, BatchLimit: cfg.MaxBatch,
	})
	if err != nil {
		e.Close()
		return nil, fmt.Errorf("scheduler: %w", err)
	}
	info := ServerInfo{
		Model: p.model.Name, RandomWeights: p.model.RandomWeights, Device: device, DeviceDetail: detail,
		DeviceNote: e.DeviceNote, Paged: e.Layout.Paged, CUDAGraph: eo.CUDAGraph && device == "cuda",
		MaxBatch: cfg.MaxBatch, KVTotal: e.Layout.NumBlocks,
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

func (s *inProcServer) Ledger() []engine.LedgerEntry { return s.eng.Ledger.Entries() }

// Prewarm pays the engine's remaining one-time costs (engine.Engine.Prewarm); the session calls
// it while no request is in flight.
func (s *inProcServer) Prewarm() error { return s.eng.Prewarm() }

func (s *inProcServer) LedgerLen() int { return s.eng.Ledger.Len() }

// Close stops the scheduler (its tokenize workers) and frees the backend.
func (s *inProcServer) Close() error {
	s.Scheduler.Close()
	return s.eng.Close()
}
