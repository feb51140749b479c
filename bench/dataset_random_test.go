package bench

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

// commonPrefix is how many leading tokens every request's prompt shares.
func commonPrefix(rs []sampled) int {
	n := len(rs[0].tokens)
	for _, r := range rs[1:] {
		k := 0
		for k < min(n, len(r.tokens)) && r.tokens[k] == rs[0].tokens[k] {
			k++
		}
		n = k
	}
	return n
}

// TestSampleRandomPrefix: vLLM's --random-prefix-len: every prompt starts with the same prefix of
// that many tokens, then a part whose length the range ratio spreads around --input-len; the
// prefix's own length is not spread. The merge of the prefix's last token with what follows may
// change that one token, no more.
func TestSampleRandomPrefix(t *testing.T) {
	m := gpt2Model(t, 1024)
	d := &Dataset{Kind: "random", InputLen: 20, OutputLen: 4, RangeRatio: 0.5, PrefixLen: 40, Seed: 5}
	rs, err := d.sample(testBuild(3), 100, m)
	if err != nil {
		t.Fatal(err)
	}
	minIn, maxIn := 1<<30, 0
	for i, r := range rs {
		minIn, maxIn = min(minIn, len(r.tokens)), max(maxIn, len(r.tokens))
		if !slices.Equal(m.Codec.Encode(r.text), r.tokens) {
			t.Fatalf("request %d: its text does not encode to its ids", i)
		}
	}
	// 40 + [floor(20*0.5), ceil(20*1.5)] = [50, 70]; 100 draws reach near both ends.
	if minIn < 50 || maxIn > 70 || minIn > 53 || maxIn < 67 {
		t.Errorf("prompts of %d to %d tokens, want within and near [50, 70]", minIn, maxIn)
	}
	if c := commonPrefix(rs); c < 39 || c > 45 {
		t.Errorf("the prompts share their first %d tokens, want the 40-token prefix (39 with a merge at its end)", c)
	}
	again, _ := d.sample(testBuild(1), 100, m)
	for i := range rs {
		if !slices.Equal(rs[i].tokens, again[i].tokens) || rs[i].maxNew != again[i].maxNew {
			t.Fatalf("request %d differs between two samples with one seed (3 and 1 workers)", i)
		}
	}
	other := *d
	other.Seed = 6
	os, _ := other.sample(testBuild(3), 100, m)
	if slices.Equal(os[0].tokens[:39], rs[0].tokens[:39]) {
		t.Error("seeds 5 and 6 made the same prefix")
	}
	none := *d
	none.PrefixLen = 0
	ns, _ := none.sample(testBuild(3), 100, m)
	if c := commonPrefix(ns); c > 2 {
		t.Errorf("without a prefix the prompts share %d leading tokens", c)
	}

	exact := &Dataset{Kind: "random", InputLen: 8, OutputLen: 3, PrefixLen: 16, Seed: 1}
	es, err := exact.sample(testBuild(2), 20, m)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range es {
		if len(r.tokens) != 24 || r.maxNew != 3 {
			t.Errorf("range ratio 0: request %d has %d prompt tokens and %d output, want 16 + 8 and 3", i, len(r.tokens), r.maxNew)
		}
	}

	// --input-len 0 with a prefix is vLLM's prefix-only prompt: every request the same.
	only := &Dataset{Kind: "random", InputLen: 0, OutputLen: 2, PrefixLen: 12, Seed: 1}
	if err := only.validate(4); err != nil {
		t.Fatal(err)
	}
	ps, err := only.sample(testBuild(2), 4, m)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range ps {
		if len(r.tokens) != 12 || r.text != ps[0].text {
			t.Errorf("prefix only: %d tokens %q, want the same 12 tokens in every prompt", len(r.tokens), r.text)
		}
	}
}

// TestRandomPrefixBounds: as vLLM's sample() checks, the shortest prompt counts the prefix: a
// range ratio that can draw an empty sampled part is refused without a prefix, taken with one;
// a prefix past the model's positions is named.
func TestRandomPrefixBounds(t *testing.T) {
	empty := &Dataset{Kind: "random", InputLen: 1, OutputLen: 1, RangeRatio: 0.9, Seed: 1}
	if err := empty.validate(2); err == nil || !errors.Is(err, ErrBadConfig) || !strings.Contains(err.Error(), "--input-len 1 with --range-ratio 0.9 can sample an empty prompt") {
		t.Errorf("no prefix: %v, want the empty prompt refused", err)
	}
	empty.PrefixLen = 1
	if err := empty.validate(2); err != nil {
		t.Errorf("a 1-token prefix: %v, want it taken", err)
	}
	zero := &Dataset{Kind: "random", InputLen: 0, OutputLen: 1, Seed: 1}
	if err := zero.validate(2); err == nil || !strings.Contains(err.Error(), "--input-len 0") {
		t.Errorf("--input-len 0 alone: %v, want it refused", err)
	}
	long := &Dataset{Kind: "random", InputLen: 10, OutputLen: 10, PrefixLen: 1010, Seed: 1}
	_, err := long.sample(testBuild(1), 1, gpt2Model(t, 1024))
	if want := "--random-prefix-len 1010, --input-len 10 and --output-len 10 with --range-ratio 0 reach 1030 tokens, more than the model's 1024 positions"; err == nil || err.Error() != want {
		t.Errorf("err %v, want %q", err, want)
	}
	huge := &Dataset{Kind: "random", InputLen: 10, OutputLen: 10, PrefixLen: 1 << 40}
	if err := huge.validate(1); err == nil || !strings.Contains(err.Error(), "--random-prefix-len must be from 0 to") {
		t.Errorf("a huge prefix: %v", err)
	}
}
