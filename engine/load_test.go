package engine

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"unsafe"

	"rosetop/engine/hub"
	"rosetop/engine/safetensors"
)

// loadTestCfg is a small GPT-2 with the real vocabulary (the tokenizer falls back to GPT-2's).
func loadTestCfg() Config {
	return Config{ModelType: "gpt2", NLayer: 2, NHead: 2, NEmbd: 8, NPositions: 16, VocabSize: 50257,
		LayerNormEps: 1e-5, EOSTokenID: 50256, InnerDim: 32, ActivationFun: "gelu_new"}
}

func loadTestConfigJSON(c Config) map[string]any {
	return map[string]any{"model_type": c.ModelType, "n_layer": c.NLayer, "n_head": c.NHead, "n_embd": c.NEmbd,
		"n_positions": c.NPositions, "vocab_size": c.VocabSize, "layer_norm_epsilon": 1e-5, "n_inner": nil,
		"activation_function": "gelu_new", "eos_token_id": 50256}
}

// loadTensor is a tensor to write: raw little-endian bytes of dtype.
type loadTensor struct {
	name  string
	dtype string
	shape []int
	data  []byte
}

// loadEncodeST lays tensors out back to back after a space-padded, 8-aligned header.
func loadEncodeST(t testing.TB, ts []loadTensor) []byte {
	t.Helper()
	hdr := map[string]any{"__metadata__": map[string]string{"format": "pt"}}
	var data []byte
	for _, x := range ts {
		hdr[x.name] = map[string]any{"dtype": x.dtype, "shape": x.shape, "data_offsets": []int{len(data), len(data) + len(x.data)}}
		data = append(data, x.data...)
	}
	js, err := json.Marshal(hdr)
	if err != nil {
		t.Fatal(err)
	}
	for len(js)%8 != 0 {
		js = append(js, ' ')
	}
	out := binary.LittleEndian.AppendUint64(nil, uint64(len(js)))
	return append(append(out, js...), data...)
}

// loadTestTensors builds every tensor of cfg as F32 with value i*scale+offset per tensor, so that
// each tensor's contents are recognisable; prefix is "" or "transformer.".
func loadTestTensors(cfg Config, prefix string) []loadTensor {
	var ts []loadTensor
	for k, s := range weightSpecs(cfg, &Weights{Layers: make([]LayerWeights, cfg.NLayer)}) {
		n := 1
		for _, d := range s.shape {
			n *= d
		}
		b := make([]byte, 4*n)
		for i := 0; i < n; i++ {
			binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(float32(k)+float32(i%97)/128))
		}
		ts = append(ts, loadTensor{prefix + s.name, "F32", s.shape, b})
	}
	return ts
}

// loadWriteModel writes a model directory and returns it.
func loadWriteModel(t *testing.T, cfg map[string]any, ts []loadTensor) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "model")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	js, _ := json.Marshal(cfg)
	if err := os.WriteFile(filepath.Join(dir, "config.json"), js, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "model.safetensors"), loadEncodeST(t, ts), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestLoadDirF32AliasesMap(t *testing.T) {
	cfg := loadTestCfg()
	for _, prefix := range []string{"", "transformer."} {
		t.Run("prefix="+prefix, func(t *testing.T) {
			ts := loadTestTensors(cfg, prefix)
			dir := loadWriteModel(t, loadTestConfigJSON(cfg), ts)
			m, err := LoadModel(context.Background(), dir, LoadOptions{})
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			if m.Config != cfg || m.Dir != dir || m.Name != dir || m.RandomWeights || m.Tokenizer == nil {
				t.Fatalf("model = %+v", m)
			}
			if m.close == nil {
				t.Error("F32 weights are mapped but Model.close does not unmap")
			}
			// Tensor 1 is wpe: values 1 + (i%97)/128; layer 1's mlp.c_proj.weight is tensor 4+12+10.
			if got, want := m.Weights.WPE[100], float32(1)+float32(100%97)/128; got != want {
				t.Errorf("WPE[100] = %g, want %g", got, want)
			}
			if got, want := m.Weights.Layers[1].FCProjW[5], float32(26)+float32(5)/128; got != want {
				t.Errorf("h.1 FCProjW[5] = %g, want %g", got, want)
			}
			if len(m.Weights.Layers[1].FCW) != cfg.NEmbd*cfg.InnerDim {
				t.Errorf("FCW has %d values", len(m.Weights.Layers[1].FCW))
			}
		})
	}
	// In place: the weights are the mapped bytes themselves.
	f, err := safetensors.Open(filepath.Join(loadWriteModel(t, loadTestConfigJSON(cfg), loadTestTensors(cfg, "")), "model.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	w, aliased, err := loadWeights(context.Background(), f, cfg, 0)
	if err != nil {
		t.Fatal(err)
	}
	wte, _ := f.Tensor("wte.weight")
	if !aliased || unsafe.Pointer(&w.WTE[0]) != unsafe.Pointer(&wte.Data[0]) {
		t.Fatal("F32 wte was copied, want it to alias the memory map")
	}
}

// TestLoadF16BF16Exact: half and bfloat16 values convert exactly to the hand-computed floats.
func TestLoadF16BF16Exact(t *testing.T) {
	cfg := loadTestCfg()
	ts := loadTestTensors(cfg, "transformer.")
	halves := []uint16{0x3c00, 0x3555, 0x0001, 0xc000, 0x03ff, 0x7bff, 0x4248, 0x8000}
	wantF16 := []float32{1, 0.333251953125, 5.9604644775390625e-08, -2, 6.0975551605224609375e-05, 65504, 3.140625, 0}
	bf := []uint16{0x3f80, 0xc049, 0x3e80, 0, 0, 0, 0, 0}
	wantBF := []float32{1, -3.140625, 0.25, 0, 0, 0, 0, 0}
	for i := range ts {
		switch ts[i].name {
		case "transformer.ln_f.weight":
			ts[i] = loadTensor{ts[i].name, "F16", ts[i].shape, loadU16(halves)}
		case "transformer.ln_f.bias":
			ts[i] = loadTensor{ts[i].name, "BF16", ts[i].shape, loadU16(bf)}
		}
	}
	m, err := LoadModel(context.Background(), loadWriteModel(t, loadTestConfigJSON(cfg), ts), LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	for i := range wantF16 {
		if m.Weights.LNFW[i] != wantF16[i] || m.Weights.LNFB[i] != wantBF[i] {
			t.Errorf("[%d]: F16 %g want %g; BF16 %g want %g", i, m.Weights.LNFW[i], wantF16[i], m.Weights.LNFB[i], wantBF[i])
		}
	}
}

// TestLoadSkipsBuffers: files saved by transformers 4.x also hold each layer's causal-mask buffers
// (attn.bias as BOOL or U8 of shape [1, 1, T, T], attn.masked_bias an F32 scalar; see
// modeling_gpt2.py's GPT2Attention.register_buffer) and often lm_head.weight; they load, and the
// buffers are not read.
func TestLoadSkipsBuffers(t *testing.T) {
	cfg := loadTestCfg()
	T := cfg.NPositions
	for _, mask := range []string{"BOOL", "U8"} {
		t.Run(mask, func(t *testing.T) {
			ts := loadTestTensors(cfg, "transformer.")
			for l := range cfg.NLayer {
				p := fmt.Sprintf("transformer.h.%d.attn.", l)
				ts = append(ts, loadTensor{p + "bias", mask, []int{1, 1, T, T}, make([]byte, T*T)},
					loadTensor{p + "masked_bias", "F32", []int{}, binary.LittleEndian.AppendUint32(nil, math.Float32bits(-1e4))})
			}
			ts = append(ts, loadTensor{"lm_head.weight", "F32", []int{cfg.VocabSize, cfg.NEmbd}, ts[0].data})
			m, err := LoadModel(context.Background(), loadWriteModel(t, loadTestConfigJSON(cfg), ts), LoadOptions{})
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			if got, want := m.Weights.Layers[1].AttnB[3], float32(4+12+3)+float32(3)/128; got != want {
				t.Errorf("h.1 AttnB[3] = %g, want %g", got, want)
			}
		})
	}
}

func loadU16(v []uint16) []byte {
	b := make([]byte, 2*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint16(b[2*i:], x)
	}
	return b
}

// TestLoadBadInput: every broken model directory gives a one-line error naming the input.
func TestLoadBadInput(t *testing.T) {
	cfg := loadTestCfg()
	good := func() (map[string]any, []loadTensor) {
		return loadTestConfigJSON(cfg), loadTestTensors(cfg, "transformer.")
	}
	withCfg := func(k string, v any) func(t *testing.T) string {
		return func(t *testing.T) string {
			c, ts := good()
			c[k] = v
			return loadWriteModel(t, c, ts)
		}
	}
	withST := func(mutate func(b []byte) []byte) func(t *testing.T) string {
		return func(t *testing.T) string {
			c, ts := good()
			dir := loadWriteModel(t, c, ts)
			p := filepath.Join(dir, "model.safetensors")
			b, _ := os.ReadFile(p)
			os.WriteFile(p, mutate(b), 0o644)
			return dir
		}
	}
	withTensors := func(mutate func([]loadTensor) []loadTensor) func(t *testing.T) string {
		return func(t *testing.T) string {
			c, ts := good()
			return loadWriteModel(t, c, mutate(ts))
		}
	}
	// header rewrites the JSON header in place (same length, so offsets stay valid).
	header := func(old, new string) func(b []byte) []byte {
		return func(b []byte) []byte {
			n := binary.LittleEndian.Uint64(b)
			h := strings.Replace(string(b[8:8+n]), old, new, 1)
			h += strings.Repeat(" ", int(n)-len(h))
			return append(append(b[:8:8], h[:n]...), b[8+n:]...)
		}
	}
	cases := []struct {
		name  string
		setup func(t *testing.T) string // returns the spec
		is    error
		want  string // substring of the message besides the input's name
		file  string // the message names dir/file ("" : the dir itself)
	}{
		{"missing directory", func(t *testing.T) string { return filepath.Join(t.TempDir(), "nope") }, ErrModelNotFound, "does not exist", ""},
		{"missing relative directory", func(t *testing.T) string { return "./no/such/model" }, ErrModelNotFound, "does not exist", ""},
		{"missing config.json", func(t *testing.T) string {
			d := loadWriteModel(t, loadTestConfigJSON(cfg), loadTestTensors(cfg, ""))
			os.Remove(filepath.Join(d, "config.json"))
			return d
		}, ErrInvalidModel, "does not exist", "config.json"},
		{"invalid config.json", func(t *testing.T) string {
			d := loadWriteModel(t, loadTestConfigJSON(cfg), loadTestTensors(cfg, ""))
			os.WriteFile(filepath.Join(d, "config.json"), []byte("{\"n_layer\": 2,\n"), 0o644)
			return d
		}, ErrInvalidModel, "invalid JSON", "config.json"},
		{"unsupported model_type", withCfg("model_type", "llama"), ErrInvalidModel, `model_type: "llama" is not supported`, "config.json"},
		{"n_embd not divisible", withCfg("n_head", 3), ErrInvalidModel, "n_embd: 8 is not divisible by n_head 3", "config.json"},
		{"zero layers", withCfg("n_layer", 0), ErrInvalidModel, "n_layer: must be positive", "config.json"},
		{"wrong activation", withCfg("activation_function", "relu"), ErrInvalidModel, "activation_function", "config.json"},
		{"missing model.safetensors", func(t *testing.T) string {
			d := loadWriteModel(t, loadTestConfigJSON(cfg), loadTestTensors(cfg, ""))
			os.Remove(filepath.Join(d, "model.safetensors"))
			return d
		}, ErrInvalidModel, "no model.safetensors", ""},
		{"safetensors truncated", withST(func(b []byte) []byte { return b[:len(b)-100] }), safetensors.ErrInvalid, "beyond the", "model.safetensors"},
		{"header length larger than file", withST(func(b []byte) []byte {
			binary.LittleEndian.PutUint64(b, uint64(len(b)))
			return b
		}), safetensors.ErrInvalid, "header length", "model.safetensors"},
		{"malformed header JSON", withST(header(`"__metadata__":`, `"__metadata__" `)), safetensors.ErrInvalid, "header JSON", "model.safetensors"},
		{"tensor offsets out of range", withST(func(b []byte) []byte {
			n := binary.LittleEndian.Uint64(b)
			var h map[string]any
			json.Unmarshal(b[8:8+n], &h)
			h["transformer.ln_f.bias"].(map[string]any)["data_offsets"] = []uint64{1 << 40, 1<<40 + 32}
			js, _ := json.Marshal(h)
			return append(append(binary.LittleEndian.AppendUint64(nil, uint64(len(js))), js...), b[8+n:]...)
		}), safetensors.ErrInvalid, `tensor "transformer.ln_f.bias": data_offsets [1099511627776, 1099511627808] beyond the`, "model.safetensors"},
		{"unsupported dtype", withTensors(func(ts []loadTensor) []loadTensor {
			ts[0].dtype = "I32"
			return ts
		}), safetensors.ErrUnsupportedDType, `tensor "transformer.wte.weight" has dtype I32, want F32, F16 or BF16`, "model.safetensors"},
		{"unknown dtype", withTensors(func(ts []loadTensor) []loadTensor {
			ts[0].dtype = "Q4_0"
			return ts
		}), safetensors.ErrUnsupportedDType, `has dtype "Q4_0"`, "model.safetensors"},
		{"missing tensor", withTensors(func(ts []loadTensor) []loadTensor {
			return ts[:len(ts)-1] // h.1.mlp.c_proj.bias
		}), ErrInvalidModel, `missing tensor "h.1.mlp.c_proj.bias"`, "model.safetensors"},
		{"shape not matching config", func(t *testing.T) string {
			c, ts := good()
			c["n_positions"] = 32 // wpe is [16, 8] in the file
			return loadWriteModel(t, c, ts)
		}, ErrInvalidModel, `"transformer.wpe.weight" has shape [16 8], config.json implies [32 8]`, "model.safetensors"},
		// Sizes are checked against the file before anything is allocated per layer or element.
		{"n_layer 16000000", withCfg("n_layer", 16000000), ErrInvalidModel, "config.json n_layer is 16000000, the file holds 2 layers (h.0 to h.1)", "model.safetensors"},
		{"n_layer 1000000", withCfg("n_layer", 1000000), ErrInvalidModel, "config.json n_layer is 1000000, the file holds 2 layers (h.0 to h.1)", "model.safetensors"},
		{"n_layer one more than the file", withCfg("n_layer", 3), ErrInvalidModel, "n_layer is 3, the file holds 2 layers", "model.safetensors"},
		{"n_layer one less than the file", withCfg("n_layer", 1), ErrInvalidModel, "n_layer is 1, the file holds 2 layers", "model.safetensors"},
		{"no layers in the file", withTensors(func(ts []loadTensor) []loadTensor { return ts[:4] }), ErrInvalidModel, "n_layer is 2, the file holds no layers", "model.safetensors"},
		{"layer numbers with a gap", withTensors(func(ts []loadTensor) []loadTensor {
			for i := range ts {
				ts[i].name = strings.Replace(ts[i].name, "h.1.", "h.7.", 1)
			}
			return ts
		}), ErrInvalidModel, `missing tensor "h.1.ln_1.weight"`, "model.safetensors"},
		{"n_embd larger than the file's", withCfg("n_embd", 64), ErrInvalidModel, `"transformer.wte.weight" has shape [50257 8], config.json implies [50257 64]`, "model.safetensors"},
		{"n_embd 65536", func(t *testing.T) string {
			c, ts := good()
			c["n_embd"], c["n_head"], c["n_inner"] = 1<<16, 1, 8
			return loadWriteModel(t, c, ts)
		}, ErrInvalidModel, `"transformer.wte.weight" has shape [50257 8], config.json implies [50257 65536]`, "model.safetensors"},
		{"n_inner not the file's", withCfg("n_inner", 64), ErrInvalidModel, `"transformer.h.0.mlp.c_fc.weight" has shape [8 32], config.json implies [8 64]`, "model.safetensors"},
		{"n_positions at the limit", withCfg("n_positions", 1<<24), ErrInvalidModel, "config.json implies [16777216 8]", "model.safetensors"},
		{"n_positions negative", withCfg("n_positions", -16), ErrInvalidModel, "n_positions: must be positive, got -16", "config.json"},
		{"vocab_size at the limit", withCfg("vocab_size", 1<<24), ErrInvalidModel, "has shape [50257 8], config.json implies [16777216 8]", "model.safetensors"},
		{"vocab_size below the tokenizer's", func(t *testing.T) string {
			c, ts := good()
			c["vocab_size"], c["eos_token_id"] = 1000, 999
			return loadWriteModel(t, c, ts)
		}, ErrInvalidModel, "the tokenizer has 50257 tokens but config.json vocab_size is 1000", ""},
		{"vocab_size zero", withCfg("vocab_size", 0), ErrInvalidModel, "vocab_size: must be positive, got 0", "config.json"},
		{"n_head negative", withCfg("n_head", -2), ErrInvalidModel, "n_head: must be positive, got -2", "config.json"},
		{"config.json over 1 MiB", func(t *testing.T) string {
			d := loadWriteModel(t, loadTestConfigJSON(cfg), loadTestTensors(cfg, ""))
			os.WriteFile(filepath.Join(d, "config.json"), []byte("{}"+strings.Repeat(" ", 1<<20)), 0o644)
			return d
		}, ErrInvalidModel, "over the 1048576-byte limit", "config.json"},
		{"not a directory", func(t *testing.T) string {
			d := loadWriteModel(t, loadTestConfigJSON(cfg), loadTestTensors(cfg, ""))
			return filepath.Join(d, "config.json")
		}, ErrInvalidModel, "not a directory", ""},
		{"not an id or path", func(t *testing.T) string { return "what is this" }, ErrModelNotFound, "not a Hugging Face id", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			spec := c.setup(t)
			m, err := LoadModel(context.Background(), spec, LoadOptions{Getenv: func(string) string { return "" }})
			if err == nil {
				m.Close()
				t.Fatal("LoadModel succeeded")
			}
			msg := err.Error()
			if strings.Contains(msg, "\n") {
				t.Errorf("error spans lines: %q", msg)
			}
			if !errors.Is(err, c.is) {
				t.Errorf("error %q does not wrap %v", msg, c.is)
			}
			name := spec
			if c.file != "" {
				name = filepath.Join(spec, c.file)
			}
			if !strings.Contains(msg, name) || !strings.Contains(msg, c.want) {
				t.Errorf("error %q: want it to name %s and say %q", msg, name, c.want)
			}
		})
	}
}

func TestLoadEmbedded(t *testing.T) {
	m, err := LoadModel(context.Background(), "", LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	c := m.Config
	if c.NLayer != 4 || c.NHead != 4 || c.NEmbd != 32 || c.VocabSize != 50257 || c.NPositions != 1024 || c.InnerDim != 128 {
		t.Fatalf("config = %+v", c)
	}
	if m.Name != "tiny-gpt2 (embedded)" || !m.RandomWeights || m.Dir != "" || m.Tokenizer == nil {
		t.Fatalf("model = %q dir %q random %v", m.Name, m.Dir, m.RandomWeights)
	}
	// The first and last wte values, decoded by hand from the embedded file's F16 bits.
	f, err := safetensors.FromBytes("tiny", []byte(tinySafetensors))
	if err != nil {
		t.Fatal(err)
	}
	wte, _ := f.Tensor("transformer.wte.weight")
	first := binary.LittleEndian.Uint16(wte.Data)
	last := binary.LittleEndian.Uint16(wte.Data[len(wte.Data)-2:])
	if m.Weights.WTE[0] != loadHalfByHand(first) || m.Weights.WTE[len(m.Weights.WTE)-1] != loadHalfByHand(last) {
		t.Errorf("wte ends %g, %g; want %g, %g", m.Weights.WTE[0], m.Weights.WTE[len(m.Weights.WTE)-1], loadHalfByHand(first), loadHalfByHand(last))
	}
	if m.Weights.WTE[0] == 0 || len(m.Weights.Layers) != 4 {
		t.Error("embedded weights look empty")
	}
}

// loadHalfByHand evaluates a binary16 by its definition (normal or subnormal only).
func loadHalfByHand(h uint16) float32 {
	s, e, f := 1.0, int(h>>10&0x1f), float64(h&0x3ff)
	if h&0x8000 != 0 {
		s = -1
	}
	if e == 0 {
		return float32(s * math.Ldexp(f, -24))
	}
	return float32(s * math.Ldexp(1+f/1024, e-15))
}

// TestLoadFromHub: a hub id goes through the cache/download path and loads what it fetched.
func TestLoadFromHub(t *testing.T) {
	cfg := loadTestCfg()
	src := loadWriteModel(t, loadTestConfigJSON(cfg), loadTestTensors(cfg, "transformer."))
	mux := http.NewServeMux()
	mux.HandleFunc("/org/tiny/resolve/", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Repo-Commit", "c0ffee")
		name := filepath.Base(r.URL.Path)
		if name != "config.json" && name != "model.safetensors" {
			http.NotFound(w, r)
			return
		}
		http.ServeFile(w, r, filepath.Join(src, name))
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	cache := t.TempDir()
	getenv := func(k string) string {
		return map[string]string{"HF_HUB_CACHE": cache, "HF_ENDPOINT": srv.URL}[k]
	}
	m, err := LoadModel(context.Background(), "org/tiny", LoadOptions{Getenv: getenv, HTTPClient: srv.Client()})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if m.Name != "org/tiny" || m.Dir != filepath.Join(hub.RepoDir(cache, "org/tiny"), "snapshots", "c0ffee") || m.Config != cfg {
		t.Fatalf("model %q from %s, config %+v", m.Name, m.Dir, m.Config)
	}
	// Offline and uncached: ErrModelNotFound, naming the alternatives.
	_, err = LoadModel(context.Background(), "org/other", LoadOptions{Getenv: func(k string) string {
		return map[string]string{"HF_HUB_CACHE": cache, "HF_HUB_OFFLINE": "1"}[k]
	}})
	if !errors.Is(err, ErrModelNotFound) || !errors.Is(err, hub.ErrNotCached) || !strings.Contains(err.Error(), "random:gpt2") {
		t.Fatalf("offline LoadModel = %v", err)
	}
}

func TestLooksLikePath(t *testing.T) {
	for s, want := range map[string]bool{
		"gpt2": false, "openai-community/gpt2": false, "./gpt2": true, "/models/gpt2": true,
		"models/gpt2/": true, "a/b/c": true, "~/m": true, "../m": true,
	} {
		if got := looksLikePath(s); got != want {
			t.Errorf("looksLikePath(%q) = %v, want %v", s, got, want)
		}
	}
}

// loadWriteSharded writes a model directory whose tensors are split over shards (tensor i goes to
// shard i%n) with a model.safetensors.index.json, as save_pretrained does past max_shard_size;
// edit may change the weight_map before it is written.
func loadWriteSharded(t *testing.T, cfg map[string]any, ts []loadTensor, n int, edit func(map[string]string)) string {
	t.Helper()
	dir := loadWriteModel(t, cfg, nil)
	os.Remove(filepath.Join(dir, "model.safetensors"))
	parts := make([][]loadTensor, n)
	weightMap := map[string]string{}
	for i, x := range ts {
		parts[i%n] = append(parts[i%n], x)
		weightMap[x.name] = fmt.Sprintf("model-%05d-of-%05d.safetensors", i%n+1, n)
	}
	for i, p := range parts {
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("model-%05d-of-%05d.safetensors", i+1, n)), loadEncodeST(t, p), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if edit != nil {
		edit(weightMap)
	}
	js, _ := json.Marshal(map[string]any{"metadata": map[string]any{"total_size": 1}, "weight_map": weightMap})
	if err := os.WriteFile(filepath.Join(dir, "model.safetensors.index.json"), js, 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestLoadSharded: a checkpoint split over shards (transformers' model.safetensors.index.json)
// loads to the same weights as one file, F32 shards staying mapped.
func TestLoadSharded(t *testing.T) {
	cfg := loadTestCfg()
	one, err := LoadModel(context.Background(), loadWriteModel(t, loadTestConfigJSON(cfg), loadTestTensors(cfg, "transformer.")), LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer one.Close()
	for _, n := range []int{1, 3} {
		t.Run(fmt.Sprintf("%d shards", n), func(t *testing.T) {
			ts := loadTestTensors(cfg, "transformer.")
			for i := range ts { // shards of mixed dtypes
				if ts[i].name == "transformer.ln_f.bias" {
					ts[i] = loadTensor{ts[i].name, "BF16", ts[i].shape, loadEncode("BF16", slices.Repeat([]float32{0.5}, cfg.NEmbd))}
				}
			}
			m, err := LoadModel(context.Background(), loadWriteSharded(t, loadTestConfigJSON(cfg), ts, n, nil), LoadOptions{})
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			if m.close == nil {
				t.Error("F32 shards are mapped but Model.close does not unmap them")
			}
			want := one.Weights
			if !slices.Equal(m.Weights.WTE, want.WTE) || !slices.Equal(m.Weights.Layers[1].FCProjW, want.Layers[1].FCProjW) ||
				!slices.Equal(m.Weights.WPE, want.WPE) || m.Weights.LNFB[0] != 0.5 {
				t.Error("sharded weights differ from the single file's")
			}
		})
	}
}

// TestLoadShardedBadInput: every broken sharded checkpoint is a one-line error naming the index or
// the shard, never a panic or a file outside the directory.
func TestLoadShardedBadInput(t *testing.T) {
	cfg := loadTestCfg()
	shard := func(i int) string { return fmt.Sprintf("model-%05d-of-00002.safetensors", i) }
	write := func(edit func(map[string]string)) func(t *testing.T) string {
		return func(t *testing.T) string {
			return loadWriteSharded(t, loadTestConfigJSON(cfg), loadTestTensors(cfg, ""), 2, edit)
		}
	}
	cases := []struct {
		name  string
		setup func(t *testing.T) string
		is    error
		file  string // the file the message names
		want  string
	}{
		{"missing shard", func(t *testing.T) string {
			d := write(nil)(t)
			os.Remove(filepath.Join(d, shard(2)))
			return d
		}, fs.ErrNotExist, shard(2), "a shard listed in model.safetensors.index.json"},
		{"truncated shard", func(t *testing.T) string {
			d := write(nil)(t)
			p := filepath.Join(d, shard(1))
			b, _ := os.ReadFile(p)
			os.WriteFile(p, b[:len(b)-10], 0o644)
			return d
		}, safetensors.ErrInvalid, shard(1), "beyond the"},
		{"shard outside the directory", write(func(m map[string]string) { m["wte.weight"] = "../model-00001-of-00002.safetensors" }),
			safetensors.ErrInvalid, "model.safetensors.index.json", "want a file name ending in .safetensors"},
		{"absolute shard path", write(func(m map[string]string) { m["wte.weight"] = "/etc/passwd" }),
			safetensors.ErrInvalid, "model.safetensors.index.json", `weight_map["wte.weight"] is "/etc/passwd"`},
		{"tensor in the wrong shard", write(func(m map[string]string) { m["wte.weight"] = shard(2) }),
			ErrInvalidModel, "model.safetensors.index.json", `tensor "wte.weight" is listed in ` + shard(2) + ", which does not hold it"},
		{"listed tensor nowhere", write(func(m map[string]string) { m["h.9.mlp.c_fc.weight"] = shard(1) }),
			ErrInvalidModel, "model.safetensors.index.json", `tensor "h.9.mlp.c_fc.weight" is listed in`},
		{"tensor in two shards", func(t *testing.T) string {
			ts := loadTestTensors(cfg, "")
			d := loadWriteSharded(t, loadTestConfigJSON(cfg), ts, 2, nil)
			two := []loadTensor{ts[0]} // wte, which shard 1 holds, and shard 2's own (odd) tensors
			for i := 1; i < len(ts); i += 2 {
				two = append(two, ts[i])
			}
			os.WriteFile(filepath.Join(d, shard(2)), loadEncodeST(t, two), 0o644)
			return d
		}, ErrInvalidModel, "model.safetensors.index.json", "is in two shards"},
		{"empty weight_map", write(func(m map[string]string) { clear(m) }), safetensors.ErrInvalid, "model.safetensors.index.json", "weight_map is missing or empty"},
		{"index not JSON", func(t *testing.T) string {
			d := write(nil)(t)
			os.WriteFile(filepath.Join(d, "model.safetensors.index.json"), []byte("<html>"), 0o644)
			return d
		}, safetensors.ErrInvalid, "model.safetensors.index.json", "not a JSON object"},
		{"missing tensor across shards", func(t *testing.T) string {
			return loadWriteSharded(t, loadTestConfigJSON(cfg), loadTestTensors(cfg, "")[1:], 2, nil)
		}, ErrInvalidModel, "model.safetensors.index.json", `missing tensor "wte.weight"`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := c.setup(t)
			m, err := LoadModel(context.Background(), dir, LoadOptions{})
			if err == nil {
				m.Close()
				t.Fatal("LoadModel succeeded")
			}
			msg := err.Error()
			if !errors.Is(err, c.is) || !errors.Is(err, ErrInvalidModel) || strings.Contains(msg, "\n") ||
				!strings.Contains(msg, filepath.Join(dir, c.file)) || !strings.Contains(msg, c.want) {
				t.Errorf("error %q: want one line wrapping %v and ErrInvalidModel, naming %s, saying %q", msg, c.is, c.file, c.want)
			}
		})
	}
	// model.safetensors wins over an index, as in transformers: a stale index is not read.
	d := loadWriteModel(t, loadTestConfigJSON(cfg), loadTestTensors(cfg, ""))
	os.WriteFile(filepath.Join(d, "model.safetensors.index.json"), []byte("stale"), 0o644)
	m, err := LoadModel(context.Background(), d, LoadOptions{})
	if err != nil {
		t.Fatalf("model.safetensors beside a broken index: %v", err)
	}
	m.Close()
}
