package engine

import (
	"context"
	"math"
	"math/rand/v2"
	"testing"

	"rosetop/internal/gpt2ref"
)

// Small random models to check the CPU backend against the float64 reference (internal/gpt2ref).

// smallConfig is a GPT-2 shape small enough for -race: odd vocabulary, head dim 8.
func smallConfig() Config {
	return Config{ModelType: "gpt2", NLayer: 2, NHead: 2, NEmbd: 16, NPositions: 48, VocabSize: 97,
		LayerNormEps: 1e-5, EOSTokenID: 96, InnerDim: 64, ActivationFun: "gelu_new"}
}

// smallModel builds cfg with random weights, biases and layer-norm parameters (the HF
// initialisation leaves those at 0 and 1, which would hide indexing mistakes).
func smallModel(t testing.TB, cfg Config, seed uint64) *Model {
	t.Helper()
	w, err := NewRandomWeights(context.Background(), cfg, seed)
	if err != nil {
		t.Fatalf("NewRandomWeights: %v", err)
	}
	rng := rand.New(rand.NewPCG(seed, 7))
	jitter := func(s []float32, base, scale float32) {
		for i := range s {
			s[i] = base + scale*float32(rng.NormFloat64())
		}
	}
	jitter(w.WTE, 0, 0.5) // larger than HF's 0.02 so logits spread out
	jitter(w.WPE, 0, 0.3)
	for l := range w.Layers {
		lw := &w.Layers[l]
		jitter(lw.LN1W, 1, 0.2)
		jitter(lw.LN1B, 0, 0.1)
		jitter(lw.AttnW, 0, 0.3)
		jitter(lw.AttnB, 0, 0.1)
		jitter(lw.AttnProjB, 0, 0.1)
		jitter(lw.LN2W, 1, 0.2)
		jitter(lw.LN2B, 0, 0.1)
		jitter(lw.FCB, 0, 0.1)
		jitter(lw.FCProjB, 0, 0.1)
	}
	jitter(w.LNFW, 1, 0.2)
	jitter(w.LNFB, 0, 0.1)
	return &Model{Name: "small-test", Config: cfg, Weights: w, RandomWeights: true}
}

// refLogits returns the float64 reference's logits of every position of tokens.
func refLogits(cfg Config, w *Weights, tokens []int32) [][]float64 {
	ref := &gpt2ref.Weights{WTE: w.WTE, WPE: w.WPE, LNFW: w.LNFW, LNFB: w.LNFB}
	for _, l := range w.Layers {
		ref.Layers = append(ref.Layers, gpt2ref.Layer(l))
	}
	c := gpt2ref.Config{NLayer: cfg.NLayer, NHead: cfg.NHead, NEmbd: cfg.NEmbd, Inner: innerDim(cfg),
		VocabSize: cfg.VocabSize, Eps: float64(cfg.LayerNormEps)}
	return gpt2ref.Logits(c, ref, tokens)
}

// maxDiffRatio returns max|got-want| / max|want| over a row, +Inf when got holds a NaN or an
// infinity (which math.Max and a > comparison would otherwise let through).
func maxDiffRatio(got []float32, want []float64) float64 {
	if firstNonFinite(got) >= 0 {
		return math.Inf(1)
	}
	d, m := 0.0, 0.0
	for i := range want {
		d = math.Max(d, math.Abs(float64(got[i])-want[i]))
		m = math.Max(m, math.Abs(want[i]))
	}
	return d / m
}
