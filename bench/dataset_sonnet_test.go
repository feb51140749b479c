package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"
)

func TestParseSonnet(t *testing.T) {
	rows, err := parseSonnet(t.Context(), strings.NewReader("Shall I compare thee\r\nto a summer's day?\n\nlast line"))
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, r := range rows {
		lines = append(lines, r.prompt)
	}
	if want := []string{"Shall I compare thee\n", "to a summer's day?\n", "\n", "last line"}; !slices.Equal(lines, want) {
		t.Errorf("lines %q, want %q (Python's readlines: newlines kept, blank lines too)", lines, want)
	}
	for _, c := range []struct{ in, want string }{
		{"", "no lines: want a text file of lines"},
		{"fine\n\xff\xfe\n", "line 2: not UTF-8 text"},
		{strings.Repeat("x", maxLineBytes+1), "a line is longer than"},
	} {
		if _, err := parseSonnet(t.Context(), strings.NewReader(c.in)); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%.20q: err %v, want %q", c.in, err, c.want)
		}
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := parseSonnet(ctx, strings.NewReader("a\nb\n")); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: %v", err)
	}
}

// sonnetLines are poem lines of 8 GPT-2 tokens each, which add up when joined (checked).
func sonnetLines(t *testing.T, m ModelInfo, n int) []string {
	t.Helper()
	nouns := []string{"cat", "dog", "fox", "owl", "bee", "ant", "cow", "pig", "hen", "bat", "rat", "man"}
	places := []string{"mat", "sun", "hill", "road", "bed", "sea", "car", "box"}
	var lines []string
	for i := range n {
		l := fmt.Sprintf("The %s sat on the %s,\n", nouns[i%len(nouns)], places[i/len(nouns)%len(places)])
		if k := len(m.Codec.Encode(l)); k != 8 {
			t.Fatalf("%q is %d tokens, want 8", l, k)
		}
		lines = append(lines, l)
	}
	if k := len(m.Codec.Encode(sonnetBase + strings.Join(lines, ""))); k != len(m.Codec.Encode(sonnetBase))+8*n {
		t.Fatalf("the lines joined are %d tokens, want the sum of theirs", k)
	}
	return lines
}

// TestSampleSonnet: vLLM's sonnet arithmetic: at a mean line length of 8 tokens, a prefix of
// base + 20 tokens is round(2.5) = 2 of the file's first lines and a prompt of base + 84 tokens
// round(10.5) = 10 lines, Python's round taking halves to even; the other 8 lines are drawn from
// the whole file, with replacement, by the seed.
func TestSampleSonnet(t *testing.T) {
	m := gpt2Model(t, 1024)
	lines := sonnetLines(t, m, 60)
	d, err := LoadDataset(t.Context(), "sonnet", writeTemp(t, "sonnet.txt", strings.Join(lines, "")), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	base := len(m.Codec.Encode(sonnetBase))
	d.InputLen, d.OutputLen, d.PrefixLen, d.Seed = base+84, 9, base+20, 4
	if err := d.validate(50); err != nil {
		t.Fatal(err)
	}
	rs, err := d.sample(testBuild(3), 50, m)
	if err != nil {
		t.Fatal(err)
	}
	fixed := sonnetBase + lines[0] + lines[1]
	drawn := map[string]bool{}
	for i, r := range rs {
		rest, ok := strings.CutPrefix(r.text, fixed)
		got := strings.SplitAfter(rest, "\n")
		got = got[:len(got)-1] // after the last newline: ""
		if !ok || len(got) != 8 || len(r.tokens) != base+80 || r.maxNew != 9 || !slices.Equal(m.Codec.Encode(r.text), r.tokens) {
			t.Fatalf("request %d: %d tokens, output %d, %q; want the base prompt, the first 2 lines and 8 drawn (%d tokens), output 9", i, len(r.tokens), r.maxNew, r.text, base+80)
		}
		for _, l := range got {
			if !slices.Contains(lines, l) {
				t.Fatalf("request %d: drawn line %q is not in the file", i, l)
			}
			drawn[l] = true
		}
	}
	if len(drawn) < 50 {
		t.Errorf("400 draws reached %d of the 60 lines, want nearly all", len(drawn))
	}
	again, _ := d.sample(testBuild(1), 50, m)
	for i := range rs {
		if rs[i].text != again[i].text {
			t.Fatalf("request %d differs between two samples with one seed (3 and 1 workers)", i)
		}
	}
	d.Seed = 5
	if other, _ := d.sample(testBuild(3), 50, m); other[0].text == rs[0].text {
		t.Error("seeds 4 and 5 drew the same first prompt")
	}
}

// TestSonnetDrawsAgain: lines of unequal length make some draws too long; those are drawn again
// (vLLM's prompt_len <= input_len), so every prompt is within --sonnet-input-len.
func TestSonnetDrawsAgain(t *testing.T) {
	m := gpt2Model(t, 1024)
	file := strings.Repeat("So long lives this,\nShall I compare thee to a summer's day and all the rest of it, my dear?\n", 20)
	d, err := LoadDataset(t.Context(), "sonnet", writeTemp(t, "s.txt", file), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	d.InputLen, d.OutputLen, d.PrefixLen = 120, 4, 0
	rs, err := d.sample(testBuild(2), 40, m)
	if err != nil {
		t.Fatal(err)
	}
	longest := 0
	for _, r := range rs {
		if len(r.tokens) > 120 {
			t.Fatalf("a prompt of %d tokens, more than --sonnet-input-len 120", len(r.tokens))
		}
		longest = max(longest, len(r.tokens))
	}
	if longest < 100 {
		t.Errorf("the longest prompt has %d tokens, want near 120", longest)
	}
}

func TestSonnetErrors(t *testing.T) {
	m := gpt2Model(t, 1024)
	path := writeTemp(t, "sonnet.txt", strings.Join(sonnetLines(t, m, 10), ""))
	base := len(m.Codec.Encode(sonnetBase))
	for _, tc := range []struct {
		name                string
		input, output, pref int
		want                string
	}{
		{"input within the base prompt", base, 5, 0, fmt.Sprintf("--sonnet-input-len %d must be more than the base prompt's %d tokens", base, base)},
		{"prefix past the input", base + 20, 5, base + 80, fmt.Sprintf("--sonnet-prefix-len %d puts the file's first 10 lines before the drawn ones: %d tokens with the base prompt, more than --sonnet-input-len %d", base+80, base+80, base+20)},
		{"no draw fits", base + 3, 5, 0, "draws of 1 lines gave 0 of 4 prompts within --sonnet-input-len"},
		{"past the positions", 1000, 100, 0, "--sonnet-input-len 1000 and --sonnet-output-len 100 reach 1100 tokens, more than the model's 1024 positions"},
		{"no output", 100, 0, 0, "--sonnet-output-len must be from 1"},
	} {
		d, err := LoadDataset(t.Context(), "sonnet", path, io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		d.InputLen, d.OutputLen, d.PrefixLen = tc.input, tc.output, tc.pref
		if _, err := d.sample(testBuild(2), 4, m); err == nil || !errors.Is(err, ErrBadConfig) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}
}
