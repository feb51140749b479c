package engine

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"
)

func TestArchConfig(t *testing.T) {
	cases := []struct {
		name    string
		l, h, c int
		params  int // as published for the Hugging Face checkpoints
	}{
		{"distilgpt2", 6, 12, 768, 81_912_576},
		{"gpt2", 12, 12, 768, 124_439_808},
		{"gpt2-medium", 24, 16, 1024, 354_823_168},
		{"gpt2-large", 36, 20, 1280, 774_030_080},
		{"gpt2-xl", 48, 25, 1600, 1_557_611_200},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg, ok := ArchConfig(c.name)
			if !ok || cfg.NLayer != c.l || cfg.NHead != c.h || cfg.NEmbd != c.c || cfg.VocabSize != 50257 ||
				cfg.NPositions != 1024 || cfg.InnerDim != 4*c.c {
				t.Fatalf("ArchConfig = %+v, %v", cfg, ok)
			}
			if err := cfg.Validate(); err != nil {
				t.Fatal(err)
			}
			if got := cfg.Params(); got != c.params {
				t.Errorf("Params() = %d, want %d", got, c.params)
			}
		})
	}
	if len(ArchNames()) != len(cases) {
		t.Errorf("ArchNames() = %v", ArchNames())
	}
	if _, ok := ArchConfig("gpt3"); ok {
		t.Error("ArchConfig(gpt3) succeeded")
	}
}

func TestNewRandomModelUnknown(t *testing.T) {
	_, err := NewRandomModel(context.Background(), "gpt-5", 1)
	if !errors.Is(err, ErrUnknownArch) || !strings.Contains(err.Error(), "random:gpt-5") ||
		!strings.Contains(err.Error(), "distilgpt2, gpt2, gpt2-medium, gpt2-large, gpt2-xl") {
		t.Fatalf("NewRandomModel(gpt-5) = %v; want ErrUnknownArch listing the valid names", err)
	}
}

// randomTestCfg is big enough for statistics (3.2M embedding values) and quick under -race.
func randomTestCfg() Config {
	return Config{ModelType: "gpt2", NLayer: 2, NHead: 4, NEmbd: 64, NPositions: 128, VocabSize: 50257,
		LayerNormEps: 1e-5, EOSTokenID: 50256, InnerDim: 256, ActivationFun: "gelu_new"}
}

func TestRandomWeightsInit(t *testing.T) {
	cfg := randomTestCfg()
	w, err := NewRandomWeights(context.Background(), cfg, 7)
	if err != nil {
		t.Fatal(err)
	}
	check := func(name string, x []float32, std float64) {
		t.Helper()
		var sum, sq, peak float64
		for _, v := range x {
			sum += float64(v)
			sq += float64(v) * float64(v)
			peak = max(peak, math.Abs(float64(v)))
		}
		n := float64(len(x))
		mean, sd := sum/n, math.Sqrt(sq/n-(sum/n)*(sum/n))
		// Sampling error of the std over n values is std/sqrt(2n); allow 5 of those.
		if math.Abs(mean) > 5*std/math.Sqrt(n) || math.Abs(sd-std) > 5*std/math.Sqrt(2*n) {
			t.Errorf("%s: mean %g std %g, want 0 and %g", name, mean, sd, std)
		}
		if peak > std*2*math.Sqrt(3)+1e-9 {
			t.Errorf("%s: |x| reaches %g, beyond the generator's bound", name, peak)
		}
	}
	check("wte", w.WTE, 0.02)
	check("wpe", w.WPE, 0.02)
	check("h.1.attn.c_attn.weight", w.Layers[1].AttnW, 0.02)
	check("h.0.mlp.c_proj.weight", w.Layers[0].FCProjW, 0.02/math.Sqrt(4))
	for _, v := range append(append([]float32{}, w.LNFW...), w.Layers[1].LN2W...) {
		if v != 1 {
			t.Fatalf("layer norm weight %g, want 1", v)
		}
	}
	for _, b := range [][]float32{w.LNFB, w.Layers[0].AttnB, w.Layers[1].FCB, w.Layers[1].FCProjB} {
		for _, v := range b {
			if v != 0 {
				t.Fatalf("bias %g, want 0", v)
			}
		}
	}
	if len(w.Layers[1].FCW) != cfg.NEmbd*cfg.InnerDim || len(w.WTE) != cfg.VocabSize*cfg.NEmbd {
		t.Fatal("tensor sizes do not follow the config")
	}
	// Two tensors drawn with the same std must still differ (each has its own stream).
	if w.Layers[0].AttnW[0] == w.Layers[1].AttnW[0] && w.Layers[0].AttnW[1] == w.Layers[1].AttnW[1] {
		t.Error("layers 0 and 1 share their random values")
	}
}

func TestRandomWeightsDeterministic(t *testing.T) {
	cfg := randomTestCfg()
	a, _ := NewRandomWeights(context.Background(), cfg, 42)
	b, _ := NewRandomWeights(context.Background(), cfg, 42)
	c, _ := NewRandomWeights(context.Background(), cfg, 43)
	same, diff := true, 0
	for i := range a.WTE {
		same = same && a.WTE[i] == b.WTE[i]
		if a.WTE[i] != c.WTE[i] {
			diff++
		}
	}
	if !same {
		t.Error("same seed, different weights")
	}
	if diff < len(a.WTE)*9/10 {
		t.Errorf("seeds 42 and 43 differ in only %d of %d values", diff, len(a.WTE))
	}
}

func TestNewRandomModel(t *testing.T) {
	if testing.Short() || raceEnabled {
		t.Skip("builds all 124M parameters: too slow under -race or -short")
	}
	m, err := NewRandomModel(context.Background(), "gpt2", 1)
	if err != nil {
		t.Fatal(err)
	}
	if m.Name != "random:gpt2" || !m.RandomWeights || m.Tokenizer == nil || m.Config.NLayer != 12 || len(m.Weights.Layers) != 12 {
		t.Fatalf("model %q random %v config %+v", m.Name, m.RandomWeights, m.Config)
	}
	if got := len(m.Weights.Layers[11].FCProjW); got != 3072*768 {
		t.Fatalf("h.11 mlp.c_proj.weight has %d values", got)
	}
	if m.Close() != nil {
		t.Fatal("Close of a random model failed")
	}
}

func BenchmarkNewRandomWeights(b *testing.B) {
	for _, name := range []string{"gpt2", "gpt2-medium"} {
		cfg, _ := ArchConfig(name)
		b.Run(name, func(b *testing.B) {
			b.SetBytes(int64(4 * cfg.Params()))
			for b.Loop() {
				if _, err := NewRandomWeights(context.Background(), cfg, 1); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
