package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"rosetop/engine/tokenizer"
)

func gpt2Model(t testing.TB, positions int) ModelInfo {
	t.Helper()
	tok, err := tokenizer.GPT2()
	if err != nil {
		t.Fatal(err)
	}
	return ModelInfo{Codec: tok, Vocab: tok.VocabSize(), MaxPositions: positions, EOS: tok.EOS()}
}

// writeFile writes content to a file in a test's temporary directory.
func writeTemp(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// The ShareGPT format as vLLM reads it (vllm/benchmarks/datasets/sharegpt.py) and as the
// ShareGPT_V3 files have it: an array of {"id", "conversations": [{"from", "value"}, ...]}.
const shareGPTSample = `[
 {"id": "a", "conversations": [{"from": "human", "value": "What is the capital of France? Answer in a sentence."},
   {"from": "gpt", "value": "The capital of France is Paris, on the Seine."}]},
 {"id": "b", "conversations": [{"from": "system", "value": "Be brief, and answer in order."}, {"from": "human", "value": "Name three prime numbers please, in order."},
   {"from": "gpt", "value": "Two, three and five are the first three primes."}, {"from": "human", "value": "more"}]},
 {"id": "c", "conversations": [{"from": "human", "value": "only a question"}]},
 {"id": "d", "conversations": []}
]`

func TestParseShareGPT(t *testing.T) {
	cases := []struct {
		name, in string
		prompts  []string // the rows' prompts, in order
		err      string
	}{
		{"two usable entries, their first two turns", shareGPTSample, []string{"What is the capital of France? Answer in a sentence.", "Be brief, and answer in order."}, ""},
		{"turns without from", `[{"conversations": [{"value": "q one two three four"}, {"value": "a"}]}]`, []string{"q one two three four"}, ""},
		{"not JSON", `hello`, nil, "not ShareGPT JSON"},
		{"an object", `{"conversations": []}`, nil, "not ShareGPT JSON"},
		{"a bad entry", `[{"conversations": "x"}]`, nil, `entry 1: not ShareGPT JSON ("conversations" is a JSON string, want an array)`},
		{"text after the array", `[{"conversations": [{"from": "human", "value": "q"}, {"from": "gpt", "value": "a"}]}] garbage{`, nil, "text after the array's closing ]"},
		{"truncated", `[{"conversations": [{"from": "human", "value": "x"}`, nil, "not ShareGPT JSON"},
		{"empty array", `[]`, nil, "no conversation"},
		{"no reply", `[{"conversations": [{"from": "human", "value": "x"}]}]`, nil, "no conversation"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rows, err := parseShareGPT(t.Context(), strings.NewReader(c.in))
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("err = %v, want %q", err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, r := range rows {
				got = append(got, r.prompt)
			}
			if !slices.Equal(got, c.prompts) {
				t.Errorf("prompts %q, want %q", got, c.prompts)
			}
		})
	}
}

func TestParseJSONL(t *testing.T) {
	cases := []struct {
		name, in string
		rows     int
		err      string
	}{
		{"two lines and a blank", "{\"prompt\": \"hi there\", \"output_len\": 8}\n\n{\"prompt\": \"bye\", \"output_len\": 1, \"x\": 3}\n", 2, ""},
		{"no trailing newline", `{"prompt": "hi", "output_len": 2}`, 1, ""},
		{"empty file", "", 0, "no lines"},
		{"blank lines only", "\n \n", 0, "no lines"},
		{"malformed", "{\"prompt\": \"hi\", \"output_len\": 2}\n{prompt: hi}\n", 0, "line 2: not a JSON object"},
		{"an array", `[{"prompt": "hi", "output_len": 2}]`, 0, "(the value is a JSON array, want an object)"},
		{"a string for a number", `{"prompt": "hi", "output_len": "2"}`, 0, `("output_len" is a JSON string, want an integer)`},
		{"no prompt", `{"output_len": 2}`, 0, `line 1: no "prompt"`},
		{"empty prompt", `{"prompt": "", "output_len": 2}`, 0, `no "prompt"`},
		{"zero output", `{"prompt": "x", "output_len": 0}`, 0, `"output_len" must be`},
		{"no output: vLLM's custom dataset", `{"prompt": "x"}`, 1, ""},
		{"huge output", `{"prompt": "x", "output_len": 9223372036854775807}`, 0, `"output_len" must be an integer from 1 to`},
		{"string output", `{"prompt": "x", "output_len": "5"}`, 0, "line 1"},
		{"fractional output", `{"prompt": "x", "output_len": 2.5}`, 0, "line 1"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rows, err := parseJSONL(t.Context(), strings.NewReader(c.in))
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("err = %v, want %q", err, c.err)
				}
				return
			}
			if err != nil || len(rows) != c.rows {
				t.Fatalf("%d rows, err %v; want %d", len(rows), err, c.rows)
			}
		})
	}
}

// A JSONL file in vLLM's custom dataset shape (prompts alone) runs when --output-len gives
// the lengths the lines leave out, and names the first such line when it does not.
func TestJSONLOutputLenFromFlag(t *testing.T) {
	path := writeTemp(t, "custom.jsonl", "{\"prompt\": \"What is the capital of India?\", \"output_len\": 3}\n{\"prompt\": \"What is the capital of Iran?\"}\n")
	d, err := LoadDataset(t.Context(), "jsonl", path, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.validate(2); err == nil || !errors.Is(err, ErrBadConfig) || !strings.Contains(err.Error(), path+": line 2 has no \"output_len\"") {
		t.Fatalf("no --output-len: err %v, want line 2 named", err)
	}
	d.OutputLen = 5
	if err := d.validate(2); err != nil {
		t.Fatal(err)
	}
	rs, err := d.sample(testBuild(2), 4, gpt2Model(t, 1024))
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rs {
		if r.maxNew != 5 {
			t.Errorf("%q: output %d, want --output-len's 5", r.text, r.maxNew)
		}
	}
}

// Lengths from flags beyond any context are refused before a prompt is built for them.
func TestValidateBoundsLengths(t *testing.T) {
	for _, d := range []*Dataset{
		{Kind: "random", InputLen: 1 << 40, OutputLen: 1},
		{Kind: "random", InputLen: 1, OutputLen: 1 << 40},
		{Kind: "jsonl", Path: "x", OutputLen: 1 << 40, rows: []datasetRow{{prompt: "a", outputLen: 1, line: 1}}},
	} {
		if err := d.validate(1); err == nil || !errors.Is(err, ErrBadConfig) || !strings.Contains(err.Error(), "must be from") {
			t.Errorf("%+v: err %v, want a bound named", d, err)
		}
	}
}

func TestLoadDatasetErrorsNameTheFile(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "none.json")
	empty := writeTemp(t, "empty.jsonl", "")
	for _, c := range []struct{ kind, path, want string }{
		{"sharegpt", missing, "--dataset sharegpt --dataset-path " + missing},
		{"jsonl", empty, "--dataset jsonl --dataset-path " + empty + ": no lines"},
		{"random", "x", "not a file dataset (valid: sharegpt, jsonl, custom, burstgpt, sonnet)"},
		{"prefix_repetition", "x", "not a file dataset"},
	} {
		_, err := LoadDataset(t.Context(), c.kind, c.path, io.Discard)
		if err == nil || !strings.Contains(err.Error(), c.want) || !errors.Is(err, ErrBadConfig) {
			t.Errorf("LoadDataset(%s, %s) = %v, want ErrBadConfig naming %q", c.kind, c.path, err, c.want)
		}
	}
}

// TestSampleRandom: vLLM's random dataset: lengths uniform within the range ratio's bounds,
// prompts whose text encodes back to their ids, the same sample for the same seed.
func TestSampleRandom(t *testing.T) {
	m := gpt2Model(t, 1024)
	d := &Dataset{Kind: "random", InputLen: 100, OutputLen: 20, RangeRatio: 0.5, Seed: 3}
	a, err := d.sample(testBuild(2), 200, m)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := d.sample(testBuild(2), 200, m)
	hit, minIn, maxIn, minOut, maxOut := 0, 1<<30, 0, 1<<30, 0
	for i, r := range a {
		if !slices.Equal(r.tokens, b[i].tokens) || r.maxNew != b[i].maxNew {
			t.Fatalf("request %d differs between two samples with one seed", i)
		}
		if !slices.Equal(m.Codec.Encode(r.text), r.tokens) {
			t.Fatalf("request %d: its text does not encode to its ids", i)
		}
		minIn, maxIn, minOut, maxOut = min(minIn, len(r.tokens)), max(maxIn, len(r.tokens)), min(minOut, r.maxNew), max(maxOut, r.maxNew)
		if slices.Contains(r.tokens, m.EOS) {
			t.Errorf("request %d holds EOS", i)
		}
		hit++
	}
	// [floor(100*0.5), ceil(100*1.5)] = [50, 150]; outputs [10, 30]; 200 draws reach near both ends.
	if minIn < 50 || maxIn > 150 || minIn > 60 || maxIn < 140 || minOut < 10 || maxOut > 30 || minOut > 12 || maxOut < 28 {
		t.Errorf("inputs in [%d, %d] (want within and near [50, 150]), outputs in [%d, %d] (want [10, 30])", minIn, maxIn, minOut, maxOut)
	}
	fixed := &Dataset{Kind: "random", InputLen: 64, OutputLen: 8, Seed: 1}
	rs, err := fixed.sample(testBuild(2), 20, m)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range rs {
		if len(r.tokens) != 64 || r.maxNew != 8 {
			t.Errorf("range ratio 0: request %d has %d prompt tokens, %d output, want 64 and 8", i, len(r.tokens), r.maxNew)
		}
	}
	for _, bad := range []*Dataset{
		{Kind: "random", InputLen: 1000, OutputLen: 100, Seed: 1},
		{Kind: "random", InputLen: 1, OutputLen: 1, RangeRatio: 0.9, Seed: 1},
	} {
		if _, err := bad.sample(testBuild(2), 2, m); err == nil || !errors.Is(err, ErrBadConfig) || !strings.Contains(err.Error(), "--input-len") {
			t.Errorf("%+v: err %v, want a --input-len error", bad, err)
		}
	}
}

// TestSampleShareGPT: rows that fit are used, shuffled by the seed and reused when fewer fit than
// asked for; a prompt too long for the model is skipped; --output-len overrides the reply's length.
func TestSampleShareGPT(t *testing.T) {
	d, err := LoadDataset(t.Context(), "sharegpt", writeTemp(t, "sg.json", shareGPTSample), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	m := gpt2Model(t, 1024)
	rs, err := d.sample(testBuild(2), 5, m)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, r := range rs {
		seen[r.text] = true
		if r.maxNew < 4 || !slices.Equal(m.Codec.Encode(r.text), r.tokens) {
			t.Errorf("row %q: output %d, tokens %v", r.text, r.maxNew, r.tokens)
		}
	}
	if len(rs) != 5 || len(seen) != 2 {
		t.Errorf("%d requests from %d distinct rows, want 5 from the 2 usable", len(rs), len(seen))
	}
	d.OutputLen = 7
	rs, _ = d.sample(testBuild(2), 2, m)
	for _, r := range rs {
		if r.maxNew != 7 {
			t.Errorf("--output-len 7: output %d", r.maxNew)
		}
	}
	if _, err := d.sample(testBuild(2), 2, gpt2Model(t, 12)); err == nil || !strings.Contains(err.Error(), "no row fits") {
		t.Errorf("12 positions: err %v, want no row fits", err)
	}
}

// TestShareGPTLikeVLLM: vLLM's is_valid_sequence bounds hold however long the model's context
// (a remote server's may be 128k): a prompt over 1024 tokens, or prompt + output over 2048, is
// skipped; and when fewer rows fit than are asked for, each is drawn about as often.
func TestShareGPTLikeVLLM(t *testing.T) {
	words := func(n int) string { return strings.Repeat(" hello", n) }
	entry := func(prompt, reply string) string {
		return fmt.Sprintf(`{"conversations": [{"from": "human", "value": %q}, {"from": "gpt", "value": %q}]}`, prompt, reply)
	}
	file := "[" + strings.Join([]string{
		entry(words(1025), words(8)),    // prompt over 1024
		entry(words(1000), words(1100)), // prompt + output over 2048
		entry(words(10), words(20)),
		entry(words(30), words(5)),
	}, ",") + "]"
	d, err := LoadDataset(t.Context(), "sharegpt", writeTemp(t, "sg.json", file), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	for seed := range uint64(6) {
		d.Seed = seed
		rs, err := d.sample(testBuild(2), 1000, gpt2Model(t, 1<<17))
		if err != nil {
			t.Fatal(err)
		}
		count := map[int]int{}
		for _, r := range rs {
			count[len(r.tokens)]++
		}
		if len(count) != 2 || count[10] < 400 || count[30] < 400 { // binomial(1000, 1/2): sd 16
			t.Errorf("seed %d: prompts by length %v; want the two short rows, about 500 each", seed, count)
		}
	}
}

func FuzzParseShareGPT(f *testing.F) {
	for _, s := range []string{shareGPTSample, `[]`, `[{"conversations": [{"value": "a"}, {"value": "b"}]}]`, `[{"conversations": 1}]`, `{`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		rows, err := parseShareGPT(t.Context(), strings.NewReader(s))
		if err == nil && len(rows) == 0 {
			t.Fatal("no error and no rows")
		}
	})
}

func FuzzParseJSONL(f *testing.F) {
	for _, s := range []string{`{"prompt": "hi", "output_len": 2}`, "\n\n", `{"prompt": 1}`, `[1]`, `{"prompt": "x", "output_len": -1}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		rows, err := parseJSONL(t.Context(), strings.NewReader(s))
		if err != nil {
			return
		}
		for _, r := range rows {
			if r.prompt == "" || r.outputLen < 0 || r.outputLen > maxRequestTokens {
				t.Fatalf("accepted row %+v", r)
			}
		}
	})
}

// tickingClock is a fake clock that moves a second every time it is read.
type tickingClock struct{ *fakeClock }

func (c tickingClock) Now() time.Duration {
	c.advance(time.Second)
	return c.fakeClock.Now()
}

// TestLoadNotesASlowRead: reading a dataset file that takes a while notes how far it has got in
// the file's bytes, then when it is done; a quick read notes nothing.
func TestLoadNotesASlowRead(t *testing.T) {
	var lines strings.Builder
	for lines.Len() < 3<<20 {
		lines.WriteString(`{"prompt": "a prompt of a few words to fill the file", "output_len": 8}` + "\n")
	}
	path := writeTemp(t, "big.jsonl", lines.String())
	for _, tc := range []struct {
		name  string
		clock Clock
		want  []string
	}{
		{"slow", tickingClock{newFakeClock(0)}, []string{"rosetop: reading --dataset jsonl --dataset-path " + path + ": ", " MB, about ", "s left\n", ": done in "}},
		{"quick", newFakeClock(0), nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var notes strings.Builder
			d := &Dataset{Kind: "jsonl", Path: path}
			if err := d.load(build{ctx: t.Context(), workers: 1, clock: tc.clock, notes: &notes}, parseJSONL); err != nil {
				t.Fatal(err)
			}
			for _, w := range tc.want {
				if !strings.Contains(notes.String(), w) {
					t.Errorf("notes %q, want %q in them", notes.String(), w)
				}
			}
			if tc.want == nil && notes.Len() > 0 {
				t.Errorf("a quick read noted %q", notes.String())
			}
		})
	}
}

// TestLoadStopsWhenCancelled: a signal while a dataset or trace file is read stops the read and
// comes back as the context's error, not as bad input.
func TestLoadStopsWhenCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	sg := writeTemp(t, "sg.json", shareGPTSample)
	jl := writeTemp(t, "d.jsonl", `{"prompt": "hi", "output_len": 2}`)
	tr := writeTemp(t, "t.jsonl", mooncakeSample)
	so := writeTemp(t, "sonnet.txt", "a line\nanother\n")
	for name, load := range map[string]func() (*Dataset, error){
		"sharegpt": func() (*Dataset, error) { return LoadDataset(ctx, "sharegpt", sg, io.Discard) },
		"jsonl":    func() (*Dataset, error) { return LoadDataset(ctx, "jsonl", jl, io.Discard) },
		"sonnet":   func() (*Dataset, error) { return LoadDataset(ctx, "sonnet", so, io.Discard) },
		"trace":    func() (*Dataset, error) { return LoadTrace(ctx, tr, io.Discard) },
	} {
		if d, err := load(); d != nil || !errors.Is(err, context.Canceled) || errors.Is(err, ErrBadConfig) {
			t.Errorf("%s: %v, %v; want context.Canceled alone", name, d, err)
		}
	}
}
