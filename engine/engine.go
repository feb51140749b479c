// Package engine is rosetop's GPT-2 inference engine: model loading (Hugging Face layout,
// safetensors), the GPT-2 tokenizer, the KV cache bookkeeping, sampling, and the backends that run
// the forward pass (pure Go on the CPU; CUDA through package gpu when a GPU is present).
//
// The scheduler drives an engine one step at a time: it decides which sequences run, asks the
// BlockManager for room in the KV cache, and hands the backend a Batch whose sequences carry their
// new tokens, their start position and their block table. The backend writes the new KV entries
// and samples one token per sequence. Backends cannot tell contiguous from paged KV apart: both
// are a KVLayout (contiguous is one block of MaxSeqLen tokens per batch slot).
package engine

import (
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"
)

// SeqID identifies a sequence to the KV cache and the backend. The scheduler assigns them.
type SeqID uint64

// TopPOf is SamplingParams.TopP for a top-p setting p: 0 stays off, and a positive p too small
// for a float32 is its smallest positive value, not 0 (which would turn top-p off).
func TopPOf(p float64) float32 {
	if p <= 0 {
		return 0
	}
	return max(float32(p), math.SmallestNonzeroFloat32)
}

// SamplingParams chooses how the next token is picked. The zero value is greedy (argmax).
type SamplingParams struct {
	Temperature float32 // <= 0: greedy
	TopK        int     // keep the K most likely tokens; 0: off
	TopP        float32 // keep the smallest set whose probability reaches P; 0 or >= 1: off
	// Seed keys the draw: the token at position p is drawn with Uniform(Seed, p), so a sequence
	// samples the same tokens whatever it is batched with, and again after preemption/recompute.
	Seed uint64
}

// Greedy reports whether these parameters pick the argmax.
func (p SamplingParams) Greedy() bool { return p.Temperature <= 0 }

// SeqStep is one sequence's share of a step.
type SeqStep struct {
	ID     SeqID
	Tokens []int32 // tokens to run: the prompt (or the rest of it) for prefill, the last sampled token for decode
	Start  int     // position of Tokens[0]; the KV cache already holds positions [0, Start) of this sequence
	// Blocks is the sequence's block table: block b holds positions [b*BlockSize, (b+1)*BlockSize).
	// It covers at least Start+len(Tokens) positions.
	Blocks []int32
	Sample SamplingParams
	// Logprobs asks for the sampled token's log-probability and TopLogprobs (0..MaxTopLogprobs)
	// alternatives' in Batch.Logprobs.
	Logprobs    bool
	TopLogprobs int
	// PromptLogprobs asks for the log-probability of each of Tokens[1:] given the tokens before
	// it, and PromptTopLogprobs (0..MaxTopLogprobs) alternatives', in Batch.PromptLogprobs[i]:
	// the prompt's teacher-forced logprobs (vLLM's prompt_logprobs). Tokens[0]'s own needs the
	// row of the position before it: a step from Start 0 runs the prompt's every one.
	PromptLogprobs    bool
	PromptTopLogprobs int
}

// Batch is the work of one step: any mix of prefill and decode sequences.
type Batch struct {
	Seqs []SeqStep
	// Repeats is the caller's hint that each of the next Repeats steps will run exactly these
	// sequences again, one token each one position further, fed the tokens the step before
	// sampled, with the same sampling and the same blocks where their positions are (a table may
	// gain blocks at its end). A backend may start those steps before it is asked for them (the
	// CUDA backend queues them on the device); a step that turns out different still runs
	// correctly. 0: no hint.
	Repeats int
	// Stop, when the caller sets it during Step (from any goroutine), says no sequence's result
	// is wanted any more: a backend may then return ErrStopped early, with some of the batch's KV
	// entries written and others not. The CPU backend checks it between layers; nil: never.
	Stop *atomic.Bool
	// Logprobs receives, when a sequence asks (SeqStep.Logprobs), Logprobs[i] for Seqs[i]
	// (FillLogprobs over its row of logits, reusing each entry's Top). The caller sizes it to
	// len(Seqs) when any sequence asks; entries of sequences that do not ask are left as they are.
	// Entries are filled in parallel, so no two may share Top memory.
	Logprobs []TokenLogprobs
	// PromptLogprobs receives, when a sequence asks (SeqStep.PromptLogprobs), PromptLogprobs[i][j]
	// for Tokens[j+1] of Seqs[i] (its Sampled is that token), j < len(Tokens)-1. The caller sizes
	// PromptLogprobs to len(Seqs) and each asking sequence's entry to len(Tokens)-1 (a sequence of
	// one token has none: when no other asks, PromptLogprobs may be nil); as with Logprobs, no two
	// entries may share Top memory.
	PromptLogprobs [][]TokenLogprobs
}

// ErrStopped: a Step returned early because its Batch.Stop was set.
var ErrStopped = errors.New("step stopped: its results are no longer wanted")

// stopped reports whether the caller has asked the step to stop.
func (b *Batch) stopped() bool { return b.Stop != nil && b.Stop.Load() }

// Tokens counts the tokens the batch runs.
func (b *Batch) Tokens() int {
	n := 0
	for i := range b.Seqs {
		n += len(b.Seqs[i].Tokens)
	}
	return n
}

// KVLayout is the shape of the KV cache a backend allocates: NumBlocks blocks of BlockSize
// positions, each holding keys and values of every layer.
type KVLayout struct {
	BlockSize int // positions per block: 16 when paged; MaxSeqLen when contiguous
	NumBlocks int // blocks in the pool: as many as fit the budget when paged; max batch when contiguous
	Paged     bool
}

// Tokens is the number of positions the layout can hold.
func (l KVLayout) Tokens() int { return l.BlockSize * l.NumBlocks }

// Backend runs GPT-2 forward passes. Calls come from one goroutine at a time (the scheduler's
// loop); a backend that needs an OS-thread-locked goroutine (CUDA) keeps its own.
type Backend interface {
	// Step runs every sequence of b, writes their new keys and values into the KV blocks their
	// tables name, and writes into next[i] the token sampled from the last position of b.Seqs[i].
	Step(b *Batch, next []int32) error
	// Device describes where the backend runs, e.g. "cpu (2 threads)" or "cuda: NVIDIA H200".
	Device() string
	// Close frees everything the backend allocated (KV pool, graphs, device memory).
	Close() error
}

// Prewarmer is a Backend with one-time costs it pays on first use (the CUDA backend: a GEMM
// shape's first cuBLAS call, a batch size's graph capture). Prewarm pays every one left now, so
// no later Step does. Unlike Step it may be called from any goroutine, also during a Step (the
// CUDA runner serializes them).
type Prewarmer interface {
	Prewarm() error
}

// LedgerEntry is one cold-start cost the engine paid: model load, module JIT, a graph capture...
type LedgerEntry struct {
	What   string        // e.g. "model load", "kernel module load", "graph capture"
	Detail string        // e.g. "batch 16", "12 tensors, 497 MB"
	Took   time.Duration // wall time
	At     time.Time     // when it finished
}

// ledgerKeep is how many entries a Ledger keeps one by one; later ones are summed by kind, so an
// engine that captures graphs for hours holds a bounded ledger.
const ledgerKeep = 256

// Ledger records cold-start costs. It is written on the engine's goroutine and read by the
// session and dashboard from theirs.
type Ledger struct {
	mu      sync.Mutex     // guards the fields below
	entries []LedgerEntry  // the first ledgerKeep entries, then one summing entry per kind
	tail    map[string]int // kind -> index of its summing entry in entries
	folded  map[string]int // kind -> entries summed into it
}

// Add records an entry.
func (l *Ledger) Add(e LedgerEntry) {
	if e.At.IsZero() {
		e.At = time.Now()
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.entries) < ledgerKeep && l.tail == nil {
		l.entries = append(l.entries, e)
		return
	}
	if l.tail == nil {
		l.tail, l.folded = map[string]int{}, map[string]int{}
	}
	i, ok := l.tail[e.What]
	if !ok {
		i = len(l.entries)
		l.tail[e.What] = i
		l.entries = append(l.entries, LedgerEntry{What: e.What})
	}
	l.folded[e.What]++
	t := &l.entries[i]
	t.Took += e.Took
	t.At = e.At
	t.Detail = fmt.Sprintf("%d more after the first %d entries, summed", l.folded[e.What], ledgerKeep)
}

// Time runs f and records how long it took under what/detail.
func (l *Ledger) Time(what, detail string, f func() error) error {
	start := time.Now()
	err := f()
	l.Add(LedgerEntry{What: what, Detail: detail, Took: time.Since(start)})
	return err
}

// Len is the number of entries so far: a cheap way to see whether there are new ones.
func (l *Ledger) Len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.entries)
}

// Entries returns a copy of the entries so far.
func (l *Ledger) Entries() []LedgerEntry {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]LedgerEntry(nil), l.entries...)
}

// Options choose the backend and the KV cache of a new Engine.
type Options struct {
	Device            string  // "auto" (GPU when a driver and a device are found, else CPU), "cpu", "cuda"
	Paged             bool    // paged KV cache (block size 16) instead of one contiguous region per batch slot
	CUDAGraph         bool    // decode steps, and prefill or mixed steps whose shape recurs, from CUDA Graphs (GPU only)
	CaptureAhead      bool    // pay one-time GPU costs (graph captures, cuBLAS first calls) at start, not on first use
	MaxBatch          int     // most sequences in one step
	MaxSeqLen         int     // longest sequence (prompt + output); 0: the model's n_positions
	GPUMemoryFraction float64 // share of free GPU memory the KV pool may take; 0: 0.5
	Threads           int     // CPU threads; 0: all cores
}

// Engine is a loaded model on a backend with its KV cache layout.
type Engine struct {
	Model   *Model
	Backend Backend
	Layout  KVLayout
	Ledger  *Ledger
	// DeviceNote says why this device was chosen, e.g. "auto: no CUDA driver (libcuda.so.1 not found)".
	DeviceNote string
}
