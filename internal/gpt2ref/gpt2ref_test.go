package gpt2ref

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

func TestArgmax(t *testing.T) {
	nan, inf := float32(math.NaN()), float32(math.Inf(1))
	tests := []struct {
		name string
		in   []float32
		want int32
	}{
		{"empty", nil, 0},
		{"one", []float32{-3}, 0},
		{"last", []float32{1, 2, 3}, 2},
		{"ties take the lowest id", []float32{1, 5, 2, 5}, 1},
		{"all negative", []float32{-4, -1, -2}, 1},
		{"all equal", []float32{7, 7, 7}, 0},
		// NaN counts as the largest value, as torch.argmax and the CUDA sampler's keys order it.
		{"NaN is the largest", []float32{1, nan, 2, nan}, 1},
		{"NaN above +Inf", []float32{inf, nan}, 1},
		{"NaN first", []float32{nan, 3}, 0},
		{"+Inf", []float32{1, inf, 2, inf}, 1},
		{"all -Inf", []float32{-inf, -inf}, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := Argmax(tc.in); got != tc.want {
				t.Errorf("Argmax(%v) = %d, want %d", tc.in, got, tc.want)
			}
			in64 := make([]float64, len(tc.in))
			for i, v := range tc.in {
				in64[i] = float64(v)
			}
			if got := Argmax(in64); got != tc.want {
				t.Errorf("Argmax(float64 %v) = %d, want %d", in64, got, tc.want)
			}
		})
	}
}

var tiny = Config{NLayer: 2, NHead: 2, NEmbd: 8, Inner: 32, VocabSize: 11, Eps: 1e-5}

func randomWeights(cfg Config, seed uint64) *Weights {
	rng := rand.New(rand.NewPCG(seed, 1))
	vec := func(n int, mean float32) []float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = mean + 0.3*float32(rng.NormFloat64())
		}
		return v
	}
	C, F := cfg.NEmbd, cfg.Inner
	w := &Weights{WTE: vec(cfg.VocabSize*C, 0), WPE: vec(16*C, 0), LNFW: vec(C, 1), LNFB: vec(C, 0)}
	for range cfg.NLayer {
		w.Layers = append(w.Layers, Layer{LN1W: vec(C, 1), LN1B: vec(C, 0), AttnW: vec(C*3*C, 0), AttnB: vec(3*C, 0),
			AttnProjW: vec(C*C, 0), AttnProjB: vec(C, 0), LN2W: vec(C, 1), LN2B: vec(C, 0), FCW: vec(C*F, 0), FCB: vec(F, 0),
			FCProjW: vec(F*C, 0), FCProjB: vec(C, 0)})
	}
	return w
}

// TestLogitsCausal: position t's logits depend on tokens [0, t] alone, so the logits of a prefix
// are the first rows of the whole sequence's, exactly, and changing a later token changes only
// the rows from its position on.
func TestLogitsCausal(t *testing.T) {
	w := randomWeights(tiny, 3)
	toks := []int32{3, 1, 4, 1, 5, 9, 2, 6}
	all := Logits(tiny, w, toks)
	for n := 1; n < len(toks); n++ {
		part := Logits(tiny, w, toks[:n])
		for p := range n {
			if !slices.Equal(part[p], all[p]) {
				t.Fatalf("prefix of %d tokens: position %d's logits differ from the whole sequence's", n, p)
			}
		}
	}
	changed := slices.Clone(toks)
	changed[5] = 0
	other := Logits(tiny, w, changed)
	for p := range toks {
		if same := slices.Equal(other[p], all[p]); same != (p < 5) {
			t.Errorf("token 5 changed: position %d's logits unchanged %v, want %v", p, same, p < 5)
		}
	}
}

// TestLogitsEmptyBlocks: with every block's matrices and norm weights zero, each block adds its
// two output biases to the residual stream (attention then averages zero values; the MLP's
// product is zero), so the logits are ln_f(wte + wpe + the biases) . wte, written out here.
func TestLogitsEmptyBlocks(t *testing.T) {
	cfg := tiny
	w := randomWeights(cfg, 4)
	C := cfg.NEmbd
	for l := range w.Layers {
		L := &w.Layers[l]
		for _, v := range [][]float32{L.LN1W, L.AttnW, L.AttnProjW, L.LN2W, L.FCW, L.FCProjW} {
			clear(v)
		}
	}
	toks := []int32{7, 2, 10}
	got := Logits(cfg, w, toks)
	for p, tok := range toks {
		x := make([]float64, C)
		for c := range C {
			x[c] = float64(w.WTE[int(tok)*C+c]) + float64(w.WPE[p*C+c])
			for _, L := range w.Layers {
				x[c] += float64(L.AttnProjB[c]) + float64(L.FCProjB[c])
			}
		}
		var mean, v2 float64
		for _, a := range x {
			mean += a / float64(C)
		}
		for _, a := range x {
			v2 += (a - mean) * (a - mean) / float64(C)
		}
		for v := range cfg.VocabSize {
			want := 0.0
			for c := range C {
				xf := (x[c]-mean)/math.Sqrt(v2+cfg.Eps)*float64(w.LNFW[c]) + float64(w.LNFB[c])
				want += xf * float64(w.WTE[v*C+c])
			}
			if math.Abs(got[p][v]-want) > 1e-12*max(1, math.Abs(want)) {
				t.Fatalf("position %d, token %d: logit %v, want %v", p, v, got[p][v], want)
			}
		}
	}
}
