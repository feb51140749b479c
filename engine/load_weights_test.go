package engine

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"rosetop/engine/safetensors"
)

// loadPoison sets element idx of every tensor named in names (or of all tensors when names is
// nil) to v, re-encoding the tensor as dtype.
func loadPoison(ts []loadTensor, dtype string, names []string, idx int, v float32) []loadTensor {
	for i := range ts {
		x := &ts[i]
		n := len(x.data) / 4
		vals := make([]float32, n)
		for j := range vals {
			vals[j] = math.Float32frombits(binary.LittleEndian.Uint32(x.data[4*j:]))
		}
		hit := names == nil
		for _, name := range names {
			hit = hit || strings.HasSuffix(x.name, name)
		}
		if hit {
			vals[(idx+n)%n] = v // idx -1: the last element
		}
		x.dtype, x.data = dtype, loadEncode(dtype, vals)
	}
	return ts
}

// loadEncode writes vals as little-endian F32, F16 or BF16 (the halves by truncation: only the
// special values matter here, and NaN and infinities survive it).
func loadEncode(dtype string, vals []float32) []byte {
	var b []byte
	for _, v := range vals {
		bits := math.Float32bits(v)
		switch dtype {
		case "F32":
			b = binary.LittleEndian.AppendUint32(b, bits)
		case "BF16":
			b = binary.LittleEndian.AppendUint16(b, uint16(bits>>16))
		case "F16":
			b = binary.LittleEndian.AppendUint16(b, f32ToF16Special(v))
		}
	}
	return b
}

// f32ToF16Special maps NaN and infinities exactly and other values to a nearby half (the test
// weights are small, within a half's normal range, or zero).
func f32ToF16Special(v float32) uint16 {
	switch {
	case v != v:
		return 0x7e00
	case math.IsInf(float64(v), 1):
		return 0x7c00
	case math.IsInf(float64(v), -1):
		return 0xfc00
	case v == 0:
		return 0
	}
	bits := math.Float32bits(v)
	sign := uint16(bits>>16) & 0x8000
	exp := int(bits>>23&0xff) - 127 + 15
	exp = max(1, min(exp, 30))
	return sign | uint16(exp)<<10 | uint16(bits>>13&0x3ff)
}

// TestLoadRefusesNonFinite: a NaN or infinity anywhere in the weights, in any dtype, is refused at
// load with the tensor's name and the element; nothing else is reported first.
func TestLoadRefusesNonFinite(t *testing.T) {
	cfg := loadTestCfg()
	nan, inf := float32(math.NaN()), float32(math.Inf(1))
	cases := []struct {
		name   string
		dtype  string
		poison []string // tensors to poison; nil: all
		idx    int      // element; -1: the last
		v      float32
		tensor string // the tensor the message names
		elem   int
		says   string
	}{
		{"all NaN F32", "F32", nil, 0, nan, "transformer.wte.weight", 0, "NaN"},
		{"all NaN F16", "F16", nil, 0, nan, "transformer.wte.weight", 0, "NaN"},
		{"all NaN BF16", "BF16", nil, 0, nan, "transformer.wte.weight", 0, "NaN"},
		{"wte last element F32", "F32", []string{"wte.weight"}, -1, nan, "transformer.wte.weight", 50257*8 - 1, "NaN"},
		{"wte last element F16", "F16", []string{"wte.weight"}, -1, inf, "transformer.wte.weight", 50257*8 - 1, "+Inf"},
		{"ln_f weight +Inf F32", "F32", []string{"ln_f.weight"}, 3, inf, "transformer.ln_f.weight", 3, "+Inf"},
		{"ln_f bias -Inf BF16", "BF16", []string{"ln_f.bias"}, 0, -inf, "transformer.ln_f.bias", 0, "-Inf"},
		{"one layer F32", "F32", []string{"h.1.attn.c_attn.weight"}, 100, nan, "transformer.h.1.attn.c_attn.weight", 100, "NaN"},
		{"one layer F16", "F16", []string{"h.1.mlp.c_proj.bias"}, 7, -inf, "transformer.h.1.mlp.c_proj.bias", 7, "-Inf"},
		{"one layer BF16", "BF16", []string{"h.0.ln_2.weight"}, 5, nan, "transformer.h.0.ln_2.weight", 5, "NaN"},
		{"first in file order wins", "F32", []string{"h.1.ln_1.bias", "h.0.mlp.c_fc.bias", "wpe.weight"}, -1, nan, "transformer.wpe.weight", 16*8 - 1, "NaN"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ts := loadPoison(loadTestTensors(cfg, "transformer."), c.dtype, c.poison, c.idx, c.v)
			dir := loadWriteModel(t, loadTestConfigJSON(cfg), ts)
			m, err := LoadModel(context.Background(), dir, LoadOptions{})
			if err == nil {
				m.Close()
				t.Fatal("LoadModel accepted non-finite weights")
			}
			want := fmt.Sprintf("non-finite weights: tensor %q holds %s at element %d of ", c.tensor, c.says, c.elem)
			msg := err.Error()
			if !errors.Is(err, ErrNonFiniteWeights) || !errors.Is(err, ErrInvalidModel) || !strings.Contains(msg, want) ||
				!strings.Contains(msg, filepath.Join(dir, "model.safetensors")) || strings.Contains(msg, "\n") {
				t.Errorf("error %q: want one line naming the file, wrapping ErrNonFiniteWeights and ErrInvalidModel, saying %q", msg, want)
			}
		})
	}
	// The same files without the poison load, in every dtype.
	for _, dtype := range []string{"F32", "F16", "BF16"} {
		ts := loadPoison(loadTestTensors(cfg, ""), dtype, []string{"no such tensor"}, 0, nan)
		m, err := LoadModel(context.Background(), loadWriteModel(t, loadTestConfigJSON(cfg), ts), LoadOptions{})
		if err != nil {
			t.Fatalf("%s: %v", dtype, err)
		}
		m.Close()
	}
}

func TestFirstNonFinite(t *testing.T) {
	maxF, minSub := float32(math.MaxFloat32), math.Float32frombits(1)
	for _, c := range []struct {
		name string
		x    []float32
		want int
	}{
		{"empty", nil, -1},
		{"finite extremes", []float32{0, -0.0, maxF, -maxF, minSub, -minSub}, -1},
		{"NaN", []float32{1, float32(math.NaN())}, 1},
		{"NaN with payload", []float32{math.Float32frombits(0x7f800001)}, 0},
		{"negative NaN", []float32{2, 3, math.Float32frombits(0xffc00000)}, 2},
		{"+Inf", []float32{float32(math.Inf(1)), float32(math.NaN())}, 0},
		{"-Inf", []float32{0, float32(math.Inf(-1))}, 1},
	} {
		if got := firstNonFinite(c.x); got != c.want {
			t.Errorf("%s: firstNonFinite = %d, want %d", c.name, got, c.want)
		}
	}
}

// TestLoadMemoryLimit: weights that need more float32 memory than the machine has are refused
// before any allocation; F32 weights used in place need none.
func TestLoadMemoryLimit(t *testing.T) {
	cfg := loadTestCfg()
	need := uint64(4 * cfg.Params())
	cases := []struct {
		name   string
		dtype  string
		memory uint64
		ok     bool
	}{
		{"F16 with room", "F16", need, true},
		{"F16 one byte short", "F16", need - 1, false},
		{"BF16 on a tiny machine", "BF16", 1 << 10, false},
		{"F32 in place on a tiny machine", "F32", 1 << 10, true},
		{"unknown memory", "F16", 0, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ts := loadPoison(loadTestTensors(cfg, ""), c.dtype, []string{"none"}, 0, 0)
			f, err := safetensors.FromBytes("m.safetensors", loadEncodeST(t, ts))
			if err != nil {
				t.Fatal(err)
			}
			_, _, err = loadWeights(context.Background(), f, cfg, c.memory)
			if c.ok != (err == nil) {
				t.Fatalf("loadWeights with %d bytes of memory: %v; want ok=%v", c.memory, err, c.ok)
			}
			if err != nil && (!errors.Is(err, ErrModelTooLarge) || !strings.Contains(err.Error(), "converting the weights to float32") ||
				!strings.Contains(err.Error(), "of memory this process may use")) {
				t.Errorf("error %q: want ErrModelTooLarge saying what needs how much", err)
			}
		})
	}
}

func TestCheckMemory(t *testing.T) {
	for _, c := range []struct {
		name         string
		need, memory uint64
		want         string // "" for no error
	}{
		{"fits", 1 << 30, 2 << 30, ""},
		{"exactly", 1 << 30, 1 << 30, ""},
		{"unknown machine", 1 << 50, 0, ""},
		{"too large", 3 << 30, 2 << 30, "the weights: 3.0 GiB needed, more than the 2.0 GiB of memory this process may use"},
	} {
		err := checkMemory(c.need, c.memory, "the weights")
		if (c.want == "") != (err == nil) || err != nil && (!strings.Contains(err.Error(), c.want) || !errors.Is(err, ErrModelTooLarge)) {
			t.Errorf("%s: checkMemory = %v, want %q", c.name, err, c.want)
		}
	}
}

// TestNewRandomWeightsMemoryLimit: a config within Validate's bounds whose weights exceed the
// machine's memory is refused, not allocated.
func TestNewRandomWeightsMemoryLimit(t *testing.T) {
	if machineMemory() == 0 {
		t.Skip("machine memory unknown on this platform")
	}
	cfg := smallConfig()
	cfg.NEmbd, cfg.NHead, cfg.InnerDim = 8192, 64, 32768
	cfg.NLayer = int(machineMemory()/4/uint64(12*8192*8192)) + 1 // just past the machine
	if err := cfg.Validate(); err != nil {
		t.Skipf("machine too large for this test: %v", err)
	}
	_, err := NewRandomWeights(context.Background(), cfg, 1)
	if !errors.Is(err, ErrModelTooLarge) || !strings.Contains(err.Error(), "of memory this process may use") {
		t.Fatalf("NewRandomWeights(%d layers of 8192 channels) = %v; want ErrModelTooLarge", cfg.NLayer, err)
	}
}

// countdownCtx is a context whose Err turns to Canceled after n calls: cancellation at a
// deterministic point of a load, without timing.
type countdownCtx struct {
	context.Context
	n atomic.Int64
}

func (c *countdownCtx) Err() error {
	if c.n.Add(-1) < 0 {
		return context.Canceled
	}
	return nil
}

// TestLoadCancel: a done context stops a load between chunks, with an error wrapping
// context.Canceled, for files, random weights and a context cancelled mid-load.
func TestLoadCancel(t *testing.T) {
	cfg := loadTestCfg()
	dir := func(dtype string) func(t *testing.T) string {
		return func(t *testing.T) string {
			ts := loadPoison(loadTestTensors(cfg, ""), dtype, []string{"none"}, 0, 0)
			return loadWriteModel(t, loadTestConfigJSON(cfg), ts)
		}
	}
	random := func(t *testing.T) string { return "random:gpt2" }
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	midway := func() context.Context {
		c := &countdownCtx{Context: context.Background()}
		c.n.Store(3) // a few chunks in
		return c
	}
	cases := []struct {
		name string
		spec func(t *testing.T) string
		ctx  func() context.Context
	}{
		{"F32 directory, cancelled before", dir("F32"), func() context.Context { return cancelled }},
		{"F16 directory, cancelled before", dir("F16"), func() context.Context { return cancelled }},
		{"F32 directory, cancelled midway", dir("F32"), midway},
		{"BF16 directory, cancelled midway", dir("BF16"), midway},
		{"random:gpt2, cancelled before", random, func() context.Context { return cancelled }},
		{"random:gpt2, cancelled midway", random, midway},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m, err := LoadModel(c.ctx(), c.spec(t), LoadOptions{})
			if err == nil {
				m.Close()
				t.Fatal("LoadModel finished despite the cancelled context")
			}
			if !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "cancelled") || strings.Contains(err.Error(), "\n") {
				t.Errorf("error %q: want one line saying the load was cancelled, wrapping context.Canceled", err)
			}
		})
	}
}

// FuzzLoadWeights feeds config.json and safetensors bytes to loadWeights: whatever the sizes in
// either, it returns a one-line error or weights of the config's shapes, all finite, never a
// panic or an allocation past its memory limit.
func FuzzLoadWeights(f *testing.F) {
	cfg := Config{ModelType: "gpt2", NLayer: 1, NHead: 1, NEmbd: 4, NPositions: 4, VocabSize: 8,
		LayerNormEps: 1e-5, EOSTokenID: 7, InnerDim: 16, ActivationFun: "gelu_new"}
	js := `{"model_type":"gpt2","n_layer":1,"n_head":1,"n_embd":4,"n_positions":4,"vocab_size":8,"eos_token_id":7}`
	for _, dtype := range []string{"F32", "F16", "BF16"} {
		ts := loadPoison(loadTestTensors(cfg, "transformer."), dtype, []string{"none"}, 0, 0)
		f.Add([]byte(js), loadEncodeST(f, ts))
	}
	nan := loadPoison(loadTestTensors(cfg, ""), "F16", []string{"ln_f.bias"}, 2, float32(math.NaN()))
	f.Add([]byte(js), loadEncodeST(f, nan))
	f.Add([]byte(strings.Replace(js, `"n_layer":1`, `"n_layer":16000000`, 1)), loadEncodeST(f, loadTestTensors(cfg, "")))
	f.Add([]byte(strings.Replace(js, `"vocab_size":8`, `"vocab_size":16777216`, 1)), loadEncodeST(f, loadTestTensors(cfg, "")))
	const memory = 1 << 26
	f.Fuzz(func(t *testing.T, cfgJSON, st []byte) {
		cfg, err := ParseConfig("config.json", cfgJSON)
		if err != nil {
			return
		}
		file, err := safetensors.FromBytes("model.safetensors", st)
		if err != nil {
			return
		}
		w, _, err := loadWeights(context.Background(), file, cfg, memory)
		if err != nil {
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("multi-line error %q", err)
			}
			return
		}
		for _, s := range weightSpecs(cfg, w) {
			n := 1
			for _, d := range s.shape {
				n *= d
			}
			if len(*s.dst) != n {
				t.Fatalf("%s: %d values for shape %v", s.name, len(*s.dst), s.shape)
			}
			if i := firstNonFinite(*s.dst); i >= 0 {
				t.Fatalf("%s[%d] = %g was accepted", s.name, i, (*s.dst)[i])
			}
		}
	})
}
