//go:build cgo

package gpu

import (
	"math"
	"math/rand/v2"
	"os"
	"testing"

	"rosetop/internal/gpt2ref"
)

// needGPU skips the test without a usable GPU, or fails it when ROSETOP_REQUIRE_GPU=1 (on the
// GPU machine a skip would hide a broken binding).
func needGPU(t testing.TB) {
	t.Helper()
	if _, err := Probe(); err != nil {
		if os.Getenv("ROSETOP_REQUIRE_GPU") == "1" {
			t.Fatalf("ROSETOP_REQUIRE_GPU=1 but no usable GPU: %v", err)
		}
		t.Skipf("no usable GPU: %v", err)
	}
}

// testModel is a small random GPT-2 whose weights are exactly representable in fp16, so the
// float64 reference and the GPU start from the same parameters.
func testModel(cfg Config, seed uint64) *Weights {
	rng := rand.New(rand.NewPCG(seed, 7))
	vec := func(n int, scale, mean float32) []float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = halfToFloat(halfBits(mean + scale*float32(rng.NormFloat64())))
		}
		return v
	}
	C, F := cfg.NEmbd, cfg.Inner
	w := &Weights{WTE: vec(cfg.VocabSize*C, 0.1, 0), WPE: vec(cfg.NPositions*C, 0.05, 0),
		LNFW: vec(C, 0.1, 1), LNFB: vec(C, 0.05, 0)}
	for range cfg.NLayer {
		w.Layers = append(w.Layers, Layer{
			LN1W: vec(C, 0.1, 1), LN1B: vec(C, 0.05, 0), AttnW: vec(C*3*C, 0.08, 0), AttnB: vec(3*C, 0.02, 0),
			AttnProjW: vec(C*C, 0.08, 0), AttnProjB: vec(C, 0.02, 0), LN2W: vec(C, 0.1, 1), LN2B: vec(C, 0.05, 0),
			FCW: vec(C*F, 0.08, 0), FCB: vec(F, 0.02, 0), FCProjW: vec(F*C, 0.04, 0), FCProjB: vec(C, 0.02, 0),
		})
	}
	return w
}

// refLogits is the float64 reference's (internal/gpt2ref) last-position logits of tokens.
func refLogits(cfg Config, w *Weights, tokens []int32) []float64 {
	ref := &gpt2ref.Weights{WTE: w.WTE, WPE: w.WPE, LNFW: w.LNFW, LNFB: w.LNFB}
	for _, l := range w.Layers {
		ref.Layers = append(ref.Layers, gpt2ref.Layer(l))
	}
	c := gpt2ref.Config{NLayer: cfg.NLayer, NHead: cfg.NHead, NEmbd: cfg.NEmbd, Inner: cfg.Inner,
		VocabSize: cfg.VocabSize, Eps: float64(cfg.Eps)}
	all := gpt2ref.Logits(c, ref, tokens)
	return all[len(all)-1]
}

// relErr is ||got - want|| / ||want||.
func relErr(got []float32, want []float64) float64 {
	var d, n float64
	for i, w := range want {
		e := float64(got[i]) - w
		d += e * e
		n += w * w
	}
	return math.Sqrt(d / n)
}
