package engine

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// Golden tests against Hugging Face transformers (testdata/golden/make_golden.py): float64
// reference logits of every position of 4 prompts on the embedded tiny model, and 24-token
// greedy continuations.

type tinyGolden struct {
	Model struct {
		VocabSize int `json:"vocab_size"`
	} `json:"model"`
	Prompts []struct {
		Text        string  `json:"text"`
		IDs         []int32 `json:"ids"`
		MaxAbsLogit float64 `json:"max_abs_logit"`
		Greedy      []int32 `json:"greedy"`
	} `json:"prompts"`
}

// refRow is one position's reference logits, dequantized, and its quantization step.
type refRow struct {
	logits []float64
	scale  float64
}

func loadTinyGolden(t *testing.T) (tinyGolden, [][]refRow) {
	t.Helper()
	dir := filepath.Join("..", "testdata", "golden")
	raw, err := os.ReadFile(filepath.Join(dir, "tiny_golden.json"))
	if err != nil {
		t.Fatal(err)
	}
	var g tinyGolden
	if err := json.Unmarshal(raw, &g); err != nil {
		t.Fatalf("tiny_golden.json: %v", err)
	}
	q, err := os.ReadFile(filepath.Join(dir, "tiny_logits.q16"))
	if err != nil {
		t.Fatal(err)
	}
	V := g.Model.VocabSize
	rowBytes := 4 + 2*V
	rows := make([][]refRow, len(g.Prompts))
	for i, p := range g.Prompts {
		for range p.IDs {
			if len(q) < rowBytes {
				t.Fatalf("tiny_logits.q16 ends before prompt %d's positions", i)
			}
			r := refRow{logits: make([]float64, V), scale: float64(math.Float32frombits(binary.LittleEndian.Uint32(q)))}
			for v := range V {
				r.logits[v] = float64(int16(binary.LittleEndian.Uint16(q[4+2*v:]))) * r.scale
			}
			rows[i] = append(rows[i], r)
			q = q[rowBytes:]
		}
	}
	if len(q) != 0 {
		t.Fatalf("tiny_logits.q16 has %d bytes past the last position", len(q))
	}
	return g, rows
}

func tinyModel(t testing.TB) *Model {
	t.Helper()
	m, err := LoadModel(context.Background(), "", LoadOptions{})
	if err != nil {
		t.Fatalf("LoadModel(embedded tiny): %v", err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

func TestGoldenTinyLogits(t *testing.T) {
	g, ref := loadTinyGolden(t)
	m := tinyModel(t)
	for _, paged := range []bool{false, true} {
		c := newTestBackend(t, m, paged, 1, 64, 0)
		table := blockTables(c.layout, 1, 64, 1)[0]
		for i, p := range g.Prompts {
			t.Run(fmt.Sprintf("paged=%v/prompt=%d", paged, i), func(t *testing.T) {
				got, err := c.Logits(&Batch{Seqs: []SeqStep{{Tokens: p.IDs, Blocks: table}}}, true)
				if err != nil {
					t.Fatal(err)
				}
				worst := 0.0
				for pos, r := range ref[i] {
					if v := firstNonFinite(got[pos]); v >= 0 {
						t.Fatalf("%q position %d: logit %d is %g", p.Text, pos, v, got[pos][v])
					}
					// the true reference max is 32767*s; quantization moved each value by <= s/2
					maxRef := 32767 * r.scale
					diff := 0.0
					for v, want := range r.logits {
						diff = math.Max(diff, math.Abs(float64(got[pos][v])-want))
					}
					if bound := 1e-4*maxRef - r.scale/2; diff > bound {
						t.Errorf("%q position %d: max|diff| %.3g > %.3g (1e-4*max|ref| - s/2)", p.Text, pos, diff, bound)
					}
					worst = math.Max(worst, (diff+r.scale/2)/maxRef)
				}
				t.Logf("%q: %d positions, max|diff|/max|ref| <= %.2e (quantization included)", p.Text, len(p.IDs), worst)
			})
		}
	}
}

func TestGoldenTinyGreedy(t *testing.T) {
	g, _ := loadTinyGolden(t)
	m := tinyModel(t)
	for _, paged := range []bool{false, true} {
		e := newTestEngine(t, m, Options{MaxBatch: 1, MaxSeqLen: 64, Paged: paged})
		for i, p := range g.Prompts {
			got, err := e.Generate(context.Background(), p.IDs, len(p.Greedy), SamplingParams{}, false, nil)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, p.Greedy) {
				t.Errorf("paged=%v prompt %d %q: greedy\n got %v\nwant %v", paged, i, p.Text, got, p.Greedy)
			}
		}
	}
}

// TestGolden124M compares last-position logits of a GPT-2-124M-shaped random model with
// transformers' float64 ones. The model is too big to commit: make_golden.py big DIR builds it.
func TestGolden124M(t *testing.T) {
	dir := os.Getenv("ROSETOP_GOLDEN_124M")
	if dir == "" {
		t.Skip("ROSETOP_GOLDEN_124M is not set: it names the directory `make_golden.py big DIR` wrote (config.json, model.safetensors, golden.json, last_logits.f32)")
	}
	checkLastLogits(t, dir)
}

// TestGoldenDirFormat runs TestGolden124M's check on a directory in the same format, written
// here from a small random model and the float64 reference forward, so the check itself (loading,
// file layout, comparison) is proven without the big model.
func TestGoldenDirFormat(t *testing.T) {
	cfg := smallConfig()
	cfg.VocabSize, cfg.EOSTokenID = 50257, 50256 // LoadDir wants room for the GPT-2 tokenizer
	m := smallModel(t, cfg, 12)
	dir := t.TempDir()
	writeTestModelDir(t, dir, m)
	type prompt struct {
		Text        string  `json:"text"`
		IDs         []int32 `json:"ids"`
		MaxAbsLogit float64 `json:"max_abs_logit"`
	}
	var g struct {
		Prompts []prompt `json:"prompts"`
	}
	var last []byte
	for _, ids := range [][]int32{{15496}, {464, 3139, 286, 4881, 318}, {7454, 2402, 257, 640, 11, 287, 257}} {
		ref := refLogits(cfg, m.Weights, ids)
		row := ref[len(ids)-1]
		top := 0.0
		for _, v := range row {
			top = math.Max(top, math.Abs(v))
			last = binary.LittleEndian.AppendUint32(last, math.Float32bits(float32(v)))
		}
		g.Prompts = append(g.Prompts, prompt{Text: fmt.Sprint(ids), IDs: ids, MaxAbsLogit: top})
	}
	js, err := json.Marshal(g)
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(dir, "golden.json"), js)
	writeFile(t, filepath.Join(dir, "last_logits.f32"), last)
	checkLastLogits(t, dir)
}

// checkLastLogits loads the model in dir and compares its last-position logits for the prompts of
// dir/golden.json with dir/last_logits.f32 (float32 little-endian, vocab per prompt, in order).
func checkLastLogits(t *testing.T, dir string) {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(dir, "golden.json"))
	if err != nil {
		t.Fatal(err)
	}
	var g struct {
		Prompts []struct {
			Text        string  `json:"text"`
			IDs         []int32 `json:"ids"`
			MaxAbsLogit float64 `json:"max_abs_logit"`
		} `json:"prompts"`
	}
	if err := json.Unmarshal(raw, &g); err != nil {
		t.Fatalf("golden.json: %v", err)
	}
	last, err := os.ReadFile(filepath.Join(dir, "last_logits.f32"))
	if err != nil {
		t.Fatal(err)
	}
	m, err := LoadModel(context.Background(), dir, LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	V := m.Config.VocabSize
	if len(last) != 4*V*len(g.Prompts) {
		t.Fatalf("last_logits.f32 is %d bytes, want %d (%d prompts x %d floats)", len(last), 4*V*len(g.Prompts), len(g.Prompts), V)
	}
	c := newTestBackend(t, m, true, 1, 64, 0)
	table := blockTables(c.layout, 1, 64, 1)[0]
	for i, p := range g.Prompts {
		got, err := c.Logits(&Batch{Seqs: []SeqStep{{Tokens: p.IDs, Blocks: table}}}, false)
		if err != nil {
			t.Fatal(err)
		}
		want := make([]float64, V)
		for v := range want {
			want[v] = float64(math.Float32frombits(binary.LittleEndian.Uint32(last[4*(i*V+v):])))
		}
		ratio := maxDiffRatio(got[0], want)
		t.Logf("%q (%d tokens, max|logit| %.3g): max|diff|/max|ref| = %.3e", p.Text, len(p.IDs), p.MaxAbsLogit, ratio)
		if ratio > 1e-4 {
			t.Errorf("%q: max|diff|/max|ref| = %.3e, want <= 1e-4", p.Text, ratio)
		}
	}
}

// writeTestModelDir writes m as a Hugging Face GPT-2 directory: config.json and an F32
// model.safetensors with save_pretrained's names (transformer. prefix, no lm_head).
func writeTestModelDir(t *testing.T, dir string, m *Model) {
	t.Helper()
	c := m.Config
	cfg, err := json.Marshal(map[string]any{"model_type": "gpt2", "n_layer": c.NLayer, "n_head": c.NHead,
		"n_embd": c.NEmbd, "n_positions": c.NPositions, "vocab_size": c.VocabSize, "n_inner": c.InnerDim,
		"layer_norm_epsilon": c.LayerNormEps, "activation_function": "gelu_new", "eos_token_id": c.EOSTokenID})
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(dir, "config.json"), cfg)
	hdr := map[string]any{"__metadata__": map[string]string{"format": "pt"}}
	var data []byte
	for _, s := range weightSpecs(c, m.Weights) {
		start := len(data)
		for _, v := range *s.dst {
			data = binary.LittleEndian.AppendUint32(data, math.Float32bits(v))
		}
		hdr["transformer."+s.name] = map[string]any{"dtype": "F32", "shape": s.shape, "data_offsets": []int{start, len(data)}}
	}
	js, err := json.Marshal(hdr)
	if err != nil {
		t.Fatal(err)
	}
	out := binary.LittleEndian.AppendUint64(nil, uint64(len(js)))
	writeFile(t, filepath.Join(dir, "model.safetensors"), append(append(out, js...), data...))
}

func writeFile(t *testing.T, path string, b []byte) {
	t.Helper()
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}
