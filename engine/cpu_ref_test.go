package engine

import (
	"math"
	"math/rand/v2"
	"testing"
)

// A deliberately naive float64 GPT-2 forward pass (one sequence, no KV cache, no parallelism,
// straight from the equations) and small random models to check the CPU backend against it.

// smallConfig is a GPT-2 shape small enough for -race: odd vocabulary, head dim 8.
func smallConfig() Config {
	return Config{ModelType: "gpt2", NLayer: 2, NHead: 2, NEmbd: 16, NPositions: 48, VocabSize: 97,
		LayerNormEps: 1e-5, EOSTokenID: 96, InnerDim: 64, ActivationFun: "gelu_new"}
}

// smallModel builds cfg with random weights, biases and layer-norm parameters (the HF
// initialisation leaves those at 0 and 1, which would hide indexing mistakes).
func smallModel(t testing.TB, cfg Config, seed uint64) *Model {
	t.Helper()
	w, err := NewRandomWeights(cfg, seed)
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

// refLogits returns the logits of every position of tokens, computed in float64.
func refLogits(cfg Config, w *Weights, tokens []int32) [][]float64 {
	C, T, NH := cfg.NEmbd, len(tokens), cfg.NHead
	hd, inner := C/NH, innerDim(cfg)
	x := make([][]float64, T)
	for t, tok := range tokens {
		x[t] = make([]float64, C)
		for c := range C {
			x[t][c] = float64(w.WTE[int(tok)*C+c]) + float64(w.WPE[t*C+c])
		}
	}
	ln := func(v []float64, g, b []float32) []float64 {
		mean, vr := 0.0, 0.0
		for _, a := range v {
			mean += a
		}
		mean /= float64(len(v))
		for _, a := range v {
			vr += (a - mean) * (a - mean)
		}
		vr /= float64(len(v))
		out := make([]float64, len(v))
		for i, a := range v {
			out[i] = (a-mean)/math.Sqrt(vr+float64(cfg.LayerNormEps))*float64(g[i]) + float64(b[i])
		}
		return out
	}
	lin := func(v []float64, W, b []float32, out int) []float64 { // v (in) @ W (in, out) + b
		y := make([]float64, out)
		for j := range out {
			s := float64(b[j])
			for k := range v {
				s += v[k] * float64(W[k*out+j])
			}
			y[j] = s
		}
		return y
	}
	for l := range w.Layers {
		lw := &w.Layers[l]
		qkv := make([][]float64, T)
		for t := range T {
			qkv[t] = lin(ln(x[t], lw.LN1W, lw.LN1B), lw.AttnW, lw.AttnB, 3*C)
		}
		for t := range T {
			att := make([]float64, C)
			for h := range NH {
				sc := make([]float64, t+1)
				top := math.Inf(-1)
				for p := 0; p <= t; p++ {
					for i := range hd {
						sc[p] += qkv[t][h*hd+i] * qkv[p][C+h*hd+i]
					}
					sc[p] /= math.Sqrt(float64(hd))
					top = math.Max(top, sc[p])
				}
				sum := 0.0
				for p := range sc {
					sc[p] = math.Exp(sc[p] - top)
					sum += sc[p]
				}
				for p := range sc {
					for i := range hd {
						att[h*hd+i] += sc[p] / sum * qkv[p][2*C+h*hd+i]
					}
				}
			}
			proj := lin(att, lw.AttnProjW, lw.AttnProjB, C)
			for c := range C {
				x[t][c] += proj[c]
			}
		}
		for t := range T {
			h := lin(ln(x[t], lw.LN2W, lw.LN2B), lw.FCW, lw.FCB, inner)
			for i, a := range h {
				h[i] = 0.5 * a * (1 + math.Tanh(math.Sqrt(2/math.Pi)*(a+0.044715*a*a*a)))
			}
			proj := lin(h, lw.FCProjW, lw.FCProjB, C)
			for c := range C {
				x[t][c] += proj[c]
			}
		}
	}
	out := make([][]float64, T)
	for t := range T {
		xf := ln(x[t], w.LNFW, w.LNFB)
		out[t] = make([]float64, cfg.VocabSize)
		for v := range cfg.VocabSize {
			for c := range C {
				out[t][v] += xf[c] * float64(w.WTE[v*C+c])
			}
		}
	}
	return out
}

// maxDiffRatio returns max|got-want| / max|want| over a row.
func maxDiffRatio(got []float32, want []float64) float64 {
	d, m := 0.0, 0.0
	for i := range want {
		d = math.Max(d, math.Abs(float64(got[i])-want[i]))
		m = math.Max(m, math.Abs(want[i]))
	}
	return d / m
}
