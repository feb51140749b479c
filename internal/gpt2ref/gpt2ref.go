// Package gpt2ref is GPT-2 as its equations write it, in float64: one sequence, no KV cache, no
// parallelism. The engine's and the GPU runner's tests check their forward passes against it, and
// Argmax is the one greedy rule (the lowest id on ties) that the backends and the tests share.
package gpt2ref

import "math"

// Config is the model's shape.
type Config struct {
	NLayer, NHead, NEmbd int // L, NH, C
	Inner                int // F: the MLP's hidden width
	VocabSize            int // V
	Eps                  float64
}

// Layer is one block's parameters in Hugging Face layout (Conv1D weights [in, out]): the norms
// (C), AttnW (C, 3C) with q, k, v columns in that order, AttnB (3C), AttnProjW (C, C), FCW (C, F),
// FCB (F), FCProjW (F, C), and the other biases (C). The fields are engine.LayerWeights's and
// gpu.Layer's, in their order, so either converts to a Layer.
type Layer struct {
	LN1W, LN1B, AttnW, AttnB, AttnProjW, AttnProjB, LN2W, LN2B, FCW, FCB, FCProjW, FCProjB []float32
}

// Weights are the model's parameters; the LM head is tied to WTE.
type Weights struct {
	WTE, WPE   []float32 // (V, C), (T, C)
	Layers     []Layer
	LNFW, LNFB []float32 // (C)
}

// Logits returns the logits of every position of tokens (T, V).
func Logits(cfg Config, w *Weights, tokens []int32) [][]float64 {
	C, T := cfg.NEmbd, len(tokens)
	x := make([][]float64, T)
	for t, tok := range tokens {
		x[t] = make([]float64, C)
		for c := range C {
			x[t][c] = float64(w.WTE[int(tok)*C+c]) + float64(w.WPE[t*C+c])
		}
	}
	for l := range w.Layers {
		block(cfg, &w.Layers[l], x)
	}
	out := make([][]float64, T)
	for t := range T {
		xf := norm(x[t], w.LNFW, w.LNFB, cfg.Eps)
		out[t] = make([]float64, cfg.VocabSize)
		for v := range cfg.VocabSize {
			for c := range C {
				out[t][v] += xf[c] * float64(w.WTE[v*C+c])
			}
		}
	}
	return out
}

// block applies one transformer block to the residual stream x (T, C) in place.
func block(cfg Config, L *Layer, x [][]float64) {
	C, T, F := cfg.NEmbd, len(x), cfg.Inner
	qkv := make([][]float64, T)
	for t := range T {
		qkv[t] = linear(norm(x[t], L.LN1W, L.LN1B, cfg.Eps), L.AttnW, L.AttnB, 3*C)
	}
	for t := range T {
		proj := linear(attend(cfg, qkv, t), L.AttnProjW, L.AttnProjB, C)
		for c := range C {
			x[t][c] += proj[c]
		}
	}
	for t := range T {
		h := linear(norm(x[t], L.LN2W, L.LN2B, cfg.Eps), L.FCW, L.FCB, F)
		for i, a := range h {
			h[i] = 0.5 * a * (1 + math.Tanh(math.Sqrt(2/math.Pi)*(a+0.044715*a*a*a))) // gelu_new
		}
		proj := linear(h, L.FCProjW, L.FCProjB, C)
		for c := range C {
			x[t][c] += proj[c]
		}
	}
}

// attend is causal self-attention for position t over the rows qkv (T, 3C): (C).
func attend(cfg Config, qkv [][]float64, t int) []float64 {
	C, NH := cfg.NEmbd, cfg.NHead
	hd := C / NH
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
	return att
}

// norm is layer normalization of v with weights g and biases b.
func norm(v []float64, g, b []float32, eps float64) []float64 {
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
		out[i] = (a-mean)/math.Sqrt(vr+eps)*float64(g[i]) + float64(b[i])
	}
	return out
}

// linear is v (in) @ W (in, out) + b.
func linear(v []float64, W, b []float32, out int) []float64 {
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

// Argmax returns the index of the largest value, the lowest on ties (0 for an empty slice).
// NaN counts as larger than every number, as in torch.argmax.
func Argmax[T float32 | float64](v []T) int32 {
	best := 0
	for i, x := range v {
		if b := v[best]; x > b || (x != x && b == b) {
			best = i
		}
	}
	return int32(best)
}
