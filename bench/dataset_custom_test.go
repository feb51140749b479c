package bench

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"
)

// vLLM's custom dataset (custom.py): prompts a line, the output length in "output_tokens".
const customSample = `{"prompt": "What is the capital of India?", "output_tokens": 10}
{"prompt": "What is the capital of Iran?", "output_tokens": 15, "output_len": 99}

{"prompt": "What is the capital of China?", "output_tokens": 8}
`

func TestParseCustom(t *testing.T) {
	rows, err := parseCustom(t.Context(), strings.NewReader(customSample))
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 3 || rows[1].outputLen != 15 || rows[2].line != 4 || rows[2].prompt != "What is the capital of China?" {
		t.Errorf("rows %+v: want 3, output_tokens read (not output_len), lines numbered in the file", rows)
	}
	for _, c := range []struct{ in, want string }{
		{`{"prompt": "x", "output_tokens": "5"}`, `line 1: not a JSON object {"prompt": TEXT, "output_tokens": N} ("output_tokens" is a JSON string, want an integer)`},
		{`{"prompt": "x", "output_tokens": 2.5}`, `line 1: not a JSON object`},
		{`{"prompt": "x", "output_tokens": 0}`, `line 1: "output_tokens" must be an integer from 1 to 16777216`},
		{"{\"prompt\": \"x\"}\n{\"output_tokens\": 3}", `line 2: no "prompt" text`},
		{"\n\n", `no lines: want one {"prompt": TEXT, "output_tokens": N} object per line`},
		{`{"prompt": "x", "output_len": "not read"}`, ""},
	} {
		_, err := parseCustom(t.Context(), strings.NewReader(c.in))
		if c.want == "" && err != nil || c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)) {
			t.Errorf("%q: err %v, want %q", c.in, err, c.want)
		}
	}
}

// TestSampleCustom: --custom-output-len N sets every output; -1 (OutputLen 0 here) takes each
// line's "output_tokens" and names the first line without one; prompts go as written.
func TestSampleCustom(t *testing.T) {
	path := writeTemp(t, "c.jsonl", customSample)
	d, err := LoadDataset(t.Context(), "custom", path, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	m := gpt2Model(t, 1024)
	want := map[string]int{"What is the capital of India?": 10, "What is the capital of Iran?": 15, "What is the capital of China?": 8}
	rs, err := d.sample(testBuild(2), 9, m)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rs {
		if out, ok := want[r.text]; !ok || r.maxNew != out {
			t.Errorf("prompt %q with output %d, want a line's prompt as written and its output_tokens", r.text, r.maxNew)
		}
	}
	d.OutputLen = 256
	rs, _ = d.sample(testBuild(2), 3, m)
	for _, r := range rs {
		if r.maxNew != 256 {
			t.Errorf("--custom-output-len 256: output %d", r.maxNew)
		}
	}
	short := writeTemp(t, "s.jsonl", "{\"prompt\": \"a\", \"output_tokens\": 3}\n{\"prompt\": \"b\"}\n")
	d, err = LoadDataset(t.Context(), "custom", short, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.validate(2); err == nil || !errors.Is(err, ErrBadConfig) || !strings.Contains(err.Error(), "--dataset custom --dataset-path "+short+`: line 2 has no "output_tokens": give --custom-output-len N`) {
		t.Errorf("a line without output_tokens: %v", err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if d, err := LoadDataset(ctx, "custom", path, io.Discard); d != nil || !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: %v, %v", d, err)
	}
}
