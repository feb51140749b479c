package bench

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
)

// TestSamplePrefixRepetition: vLLM's prefix_repetition: NumPrefixes groups of n/NumPrefixes
// requests, each group sharing its prefix and each request its own suffix, every prompt
// prefix + suffix tokens long, in an order shuffled by the seed.
func TestSamplePrefixRepetition(t *testing.T) {
	m := gpt2Model(t, 1024)
	d := &Dataset{Kind: "prefix_repetition", PrefixLen: 30, SuffixLen: 10, NumPrefixes: 3, OutputLen: 7, Seed: 2}
	if err := d.validate(12); err != nil {
		t.Fatal(err)
	}
	rs, err := d.sample(testBuild(3), 12, m)
	if err != nil {
		t.Fatal(err)
	}
	groups := map[string]int{} // requests by their first 29 tokens
	var order []string
	texts := map[string]bool{}
	for i, r := range rs {
		if len(r.tokens) != 40 || r.maxNew != 7 || !slices.Equal(m.Codec.Encode(r.text), r.tokens) {
			t.Fatalf("request %d: %d prompt tokens, output %d; want 30 + 10 tokens that its text encodes to, and 7", i, len(r.tokens), r.maxNew)
		}
		key := fmt.Sprint(r.tokens[:29])
		groups[key]++
		order = append(order, key)
		texts[r.text] = true
	}
	if len(groups) != 3 || len(texts) != 12 {
		t.Fatalf("%d prefix groups, %d distinct prompts; want 3 groups of 4, every prompt its own", len(groups), len(texts))
	}
	for _, c := range groups {
		if c != 4 {
			t.Errorf("groups of %v requests, want 4 each", groups)
			break
		}
	}
	runs := 1 // a group's requests next to each other: the order was not shuffled
	for i := 1; i < len(order); i++ {
		if order[i] != order[i-1] {
			runs++
		}
	}
	if runs == 3 {
		t.Error("each prefix's requests come together: not shuffled")
	}
	again, _ := d.sample(testBuild(1), 12, m)
	for i := range rs {
		if rs[i].text != again[i].text {
			t.Fatalf("request %d differs between two samples with one seed (3 and 1 workers)", i)
		}
	}
	other := *d
	other.Seed = 3
	if os, _ := other.sample(testBuild(3), 12, m); os[0].text == rs[0].text {
		t.Error("seeds 2 and 3 made the same first prompt")
	}
	noSuffix := &Dataset{Kind: "prefix_repetition", PrefixLen: 8, NumPrefixes: 2, OutputLen: 1, Seed: 1}
	ns, err := noSuffix.sample(testBuild(2), 4, m)
	if err != nil {
		t.Fatal(err)
	}
	distinct := map[string]bool{}
	for _, r := range ns {
		distinct[r.text] = true
	}
	if len(distinct) != 2 {
		t.Errorf("no suffix: %d distinct prompts, want the 2 prefixes alone", len(distinct))
	}
}

func TestPrefixRepetitionErrors(t *testing.T) {
	base := Dataset{Kind: "prefix_repetition", PrefixLen: 4, SuffixLen: 4, NumPrefixes: 3, OutputLen: 2}
	for _, tc := range []struct {
		name string
		edit func(*Dataset)
		n    int
		want string
	}{
		{"fewer requests than prefixes", nil, 2, "--num-requests 2 is fewer than --prefix-repetition-num-prefixes 3"},
		{"not a multiple", nil, 7, "--num-requests 7 is not a multiple of --prefix-repetition-num-prefixes 3 (vLLM would run 6)"},
		{"empty prompts", func(d *Dataset) { d.PrefixLen, d.SuffixLen = 0, 0 }, 3, "make empty prompts"},
		{"no output", func(d *Dataset) { d.OutputLen = 0 }, 3, "--prefix-repetition-output-len must be from 1"},
	} {
		d := base
		if tc.edit != nil {
			tc.edit(&d)
		}
		if err := d.validate(tc.n); err == nil || !errors.Is(err, ErrBadConfig) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}
	long := Dataset{Kind: "prefix_repetition", PrefixLen: 1000, SuffixLen: 20, NumPrefixes: 1, OutputLen: 5}
	_, err := long.sample(testBuild(1), 1, gpt2Model(t, 1024))
	if want := "--prefix-repetition-prefix-len 1000, -suffix-len 20 and -output-len 5 reach 1025 tokens, more than the model's 1024 positions"; err == nil || err.Error() != want {
		t.Errorf("too long: %v, want %q", err, want)
	}
}
