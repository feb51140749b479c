package engine

import (
	"context"
	"fmt"
	"math"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"

	"rosetop/engine/tokenizer"
)

// ArchNames lists the architectures random:NAME accepts.
func ArchNames() []string {
	return []string{"distilgpt2", "gpt2", "gpt2-medium", "gpt2-large", "gpt2-xl"}
}

// archShape returns the published (layers, heads, channels) of a GPT-2 family model; all share
// the GPT-2 vocabulary and a 1024-position context.
func archShape(name string) (l, h, c int, ok bool) {
	switch name {
	case "distilgpt2":
		return 6, 12, 768, true
	case "gpt2":
		return 12, 12, 768, true
	case "gpt2-medium":
		return 24, 16, 1024, true
	case "gpt2-large":
		return 36, 20, 1280, true
	case "gpt2-xl":
		return 48, 25, 1600, true
	}
	return 0, 0, 0, false
}

// ArchConfig returns the configuration of a GPT-2 family architecture by its hub name.
func ArchConfig(name string) (Config, bool) {
	l, h, c, ok := archShape(name)
	if !ok {
		return Config{}, false
	}
	return Config{
		ModelType: "gpt2", NLayer: l, NHead: h, NEmbd: c, NPositions: 1024, VocabSize: 50257,
		LayerNormEps: 1e-5, EOSTokenID: 50256, InnerDim: 4 * c, ActivationFun: "gelu_new",
	}, true
}

// NewRandomModel builds architecture name (see ArchNames) with weights drawn from seed and the
// GPT-2 tokenizer. Its speed is that of the real model: only the values differ. A done ctx stops
// the fill early with ctx's error.
func NewRandomModel(ctx context.Context, name string, seed uint64) (*Model, error) {
	cfg, ok := ArchConfig(name)
	if !ok {
		return nil, fmt.Errorf("random:%s: %w (valid: %s)", name, ErrUnknownArch, strings.Join(ArchNames(), ", "))
	}
	w, err := NewRandomWeights(ctx, cfg, seed)
	if err != nil {
		return nil, fmt.Errorf("random:%s: %w", name, err)
	}
	tok, err := tokenizer.GPT2()
	if err != nil {
		return nil, fmt.Errorf("random:%s: %w", name, err)
	}
	return &Model{Name: "random:" + name, Config: cfg, Weights: w, Tokenizer: tok, RandomWeights: true}, nil
}

// NewRandomWeights allocates weights for cfg in one block and fills them the way Hugging Face
// initialises GPT-2: embeddings and Conv1D weights ~ N(0, 0.02), the residual projections
// (attn.c_proj, mlp.c_proj) ~ N(0, 0.02/sqrt(2L)), biases 0, layer norm weights 1. Each value is a
// pure function of (seed, tensor, index), so the result does not depend on the number of cores.
// It refuses a config whose weights do not fit in the machine's memory, and stops with ctx's
// error when ctx is done.
func NewRandomWeights(ctx context.Context, cfg Config, seed uint64) (*Weights, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if err := checkMemory(4*uint64(cfg.Params()), machineMemory(), "the float32 weights"); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("building random weights cancelled: %w", err)
	}
	V, T, C, I, L := cfg.VocabSize, cfg.NPositions, cfg.NEmbd, cfg.InnerDim, cfg.NLayer
	buf := make([]float32, cfg.Params()) // one allocation, carved into the tensors below

	var fills []fill
	take := func(n int, std float32, one bool) []float32 {
		s := buf[:n:n]
		buf = buf[n:]
		fills = append(fills, fill{dst: s, std: std, one: one, stream: uint64(len(fills))})
		return s
	}
	normal := func(n int, std float32) []float32 { return take(n, std, false) }
	zeros := func(n int) []float32 { return take(n, 0, false) }
	ones := func(n int) []float32 { return take(n, 0, true) }
	const std = 0.02
	projStd := float32(std / math.Sqrt(2*float64(L)))

	w := &Weights{WTE: normal(V*C, std), WPE: normal(T*C, std), Layers: make([]LayerWeights, L)}
	for l := range w.Layers {
		w.Layers[l] = LayerWeights{
			LN1W: ones(C), LN1B: zeros(C),
			AttnW: normal(C*3*C, std), AttnB: zeros(3 * C),
			AttnProjW: normal(C*C, projStd), AttnProjB: zeros(C),
			LN2W: ones(C), LN2B: zeros(C),
			FCW: normal(C*I, std), FCB: zeros(I),
			FCProjW: normal(I*C, projStd), FCProjB: zeros(C),
		}
	}
	w.LNFW, w.LNFB = ones(C), zeros(C)
	if len(buf) != 0 {
		return nil, fmt.Errorf("internal error: %d parameters not assigned", len(buf))
	}
	if err := fillAll(ctx, fills, seed); err != nil {
		return nil, err
	}
	return w, nil
}

// fill is one tensor to initialise: N(0, std) when std > 0, ones when one, else left zero.
type fill struct {
	dst    []float32
	std    float32
	one    bool
	stream uint64 // tensor number, mixed into the seed
}

// fillAll fills every tensor in parallel, in chunks claimed from a shared counter, until ctx is
// done.
func fillAll(ctx context.Context, fills []fill, seed uint64) error {
	const chunk = 1 << 18
	type job struct {
		f          *fill
		begin, end int
	}
	var jobs []job
	for i := range fills {
		f := &fills[i]
		if f.std == 0 && !f.one {
			continue // make already zeroed it
		}
		for b := 0; b < len(f.dst); b += chunk {
			jobs = append(jobs, job{f, b, min(b+chunk, len(f.dst))})
		}
	}
	var next atomic.Int64 // index of the next unclaimed job
	var wg sync.WaitGroup
	for range min(runtime.GOMAXPROCS(0), max(len(jobs), 1)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := int(next.Add(1) - 1); j < len(jobs) && ctx.Err() == nil; j = int(next.Add(1) - 1) {
				jb := jobs[j]
				if jb.f.one {
					for i := jb.begin; i < jb.end; i++ {
						jb.f.dst[i] = 1
					}
					continue
				}
				key := splitmix(seed ^ splitmix(jb.f.stream+1))
				for i := jb.begin; i < jb.end; i++ {
					jb.f.dst[i] = jb.f.std * approxNormal(splitmix(key+uint64(i)))
				}
			}
		}()
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("building random weights cancelled: %w", err)
	}
	return nil
}

// splitmix is SplitMix64's output function: a bijective hash of a 64-bit counter, good enough
// statistically for initial weights and a couple of nanoseconds per value.
func splitmix(z uint64) uint64 {
	z += 0x9e3779b97f4a7c15
	z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
	z = (z ^ z>>27) * 0x94d049bb133111eb
	return z ^ z>>31
}

// approxNormal turns 64 random bits into a standard normal deviate approximately: the sum of four
// 16-bit uniforms (Irwin-Hall, n=4) centred and scaled to unit variance (mean exactly 0, variance
// 1 to within 1e-9); the tails stop at ±2√3. Far cheaper than Box-Muller, which matters for gpt2-xl's
// 1.5 billion values, and the engine's speed does not depend on the values.
func approxNormal(r uint64) float32 {
	const inv = 1.0 / 65536
	s := float32(r&0xffff) + float32(r>>16&0xffff) + float32(r>>32&0xffff) + float32(r>>48)
	// Each 16-bit uniform u/65536 + 1/(2*65536) has mean 1/2; the sum has mean 2.
	u := (s+2)*inv - 2
	const scale = 1.7320508075688772 // √3 = 1/√(4/12)
	return u * scale
}
