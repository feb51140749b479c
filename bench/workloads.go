package bench

import "sync"

// Workloads keeps the last workload built, for sessions that build the same one in turn: a
// sweep's points make their prompts once (a big dataset's take seconds and gigabytes). Safe for
// concurrent use; the workload itself is read-only once built.
type Workloads struct {
	mu  sync.Mutex
	key workloadKey // guarded by mu
	wl  *workload   // guarded by mu; nil: none yet
}

// workloadKey is what a workload is built from: its spec and the model's vocabulary and
// lengths (one sweep's points load the same model, so the tokenizer is the same).
type workloadKey struct {
	spec                       Workload
	vocab, positions, seqLimit int
	eos                        int32
}

// get returns the workload for spec on model, building it unless it is the last one built. A
// nil *Workloads builds every time.
func (c *Workloads) get(b build, spec Workload, model ModelInfo, maxSeqLen int) (*workload, error) {
	if c == nil {
		return buildWorkload(b, spec, model, maxSeqLen)
	}
	k := workloadKey{spec: spec, vocab: model.Vocab, positions: model.MaxPositions, seqLimit: maxSeqLen, eos: model.EOS}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.wl != nil && c.key == k {
		return c.wl, nil
	}
	wl, err := buildWorkload(b, spec, model, maxSeqLen)
	if err != nil {
		return nil, err
	}
	c.key, c.wl = k, wl
	return wl, nil
}
