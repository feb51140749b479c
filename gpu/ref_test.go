//go:build cgo

package gpu

import (
	"math"
	"math/rand/v2"
	"os"
	"testing"
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

// refLogits is GPT-2 in float64: the last-position logits of tokens.
func refLogits(cfg Config, w *Weights, tokens []int32) []float64 {
	C, F, NH, T := cfg.NEmbd, cfg.Inner, cfg.NHead, len(tokens)
	HD := C / NH
	x := make([][]float64, T)
	for t, id := range tokens {
		x[t] = make([]float64, C)
		for c := range C {
			x[t][c] = float64(w.WTE[int(id)*C+c]) + float64(w.WPE[t*C+c])
		}
	}
	norm := func(v []float64, g, b []float32) []float64 {
		mean, vr := 0.0, 0.0
		for _, a := range v {
			mean += a
		}
		mean /= float64(len(v))
		for _, a := range v {
			vr += (a - mean) * (a - mean)
		}
		rstd := 1 / math.Sqrt(vr/float64(len(v))+float64(cfg.Eps))
		out := make([]float64, len(v))
		for i, a := range v {
			out[i] = (a-mean)*rstd*float64(g[i]) + float64(b[i])
		}
		return out
	}
	matvec := func(v []float64, W, bias []float32, out int) []float64 {
		y := make([]float64, out)
		for o := range out {
			y[o] = float64(bias[o])
		}
		for i, a := range v {
			row := W[i*out : (i+1)*out]
			for o := range out {
				y[o] += a * float64(row[o])
			}
		}
		return y
	}
	for _, L := range w.Layers {
		qkv := make([][]float64, T)
		for t := range T {
			qkv[t] = matvec(norm(x[t], L.LN1W, L.LN1B), L.AttnW, L.AttnB, 3*C)
		}
		for t := range T {
			att := make([]float64, C)
			for h := range NH {
				sc := make([]float64, t+1)
				mx := math.Inf(-1)
				for j := 0; j <= t; j++ {
					s := 0.0
					for d := range HD {
						s += qkv[t][h*HD+d] * qkv[j][C+h*HD+d]
					}
					sc[j] = s / math.Sqrt(float64(HD))
					mx = math.Max(mx, sc[j])
				}
				sum := 0.0
				for j := range sc {
					sc[j] = math.Exp(sc[j] - mx)
					sum += sc[j]
				}
				for j := range sc {
					for d := range HD {
						att[h*HD+d] += sc[j] / sum * qkv[j][2*C+h*HD+d]
					}
				}
			}
			proj := matvec(att, L.AttnProjW, L.AttnProjB, C)
			for c := range C {
				x[t][c] += proj[c]
			}
		}
		for t := range T {
			h := matvec(norm(x[t], L.LN2W, L.LN2B), L.FCW, L.FCB, F)
			for i, v := range h {
				h[i] = 0.5 * v * (1 + math.Tanh(math.Sqrt(2/math.Pi)*(v+0.044715*v*v*v)))
			}
			y := matvec(h, L.FCProjW, L.FCProjB, C)
			for c := range C {
				x[t][c] += y[c]
			}
		}
	}
	xf := norm(x[T-1], w.LNFW, w.LNFB)
	logits := make([]float64, cfg.VocabSize)
	for v := range logits {
		for c := range C {
			logits[v] += xf[c] * float64(w.WTE[v*C+c])
		}
	}
	return logits
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

func argmax64(v []float64) int32 {
	best := 0
	for i, x := range v {
		if x > v[best] {
			best = i
		}
	}
	return int32(best)
}
