package tokenizer

import (
	"bufio"
	"compress/gzip"
	"encoding/json"
	"os"
	"slices"
	"testing"
)

// hfCase is one line of testdata/hf_random.jsonl.gz, made by Hugging Face's Rust tokenizer
// (testdata/make_hf_random.js): a random text with its ids, or (Text nil) random ids alone, and
// Hugging Face's decode of the ids.
type hfCase struct {
	Text    *string `json:"text"`
	IDs     []int32 `json:"ids"`
	Decoded string  `json:"decoded"`
}

func loadHFRandom(t *testing.T) []hfCase {
	t.Helper()
	f, err := os.Open("testdata/hf_random.jsonl.gz")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	var cases []hfCase
	sc := bufio.NewScanner(zr)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for line := 1; sc.Scan(); line++ {
		var c hfCase
		if err := json.Unmarshal(sc.Bytes(), &c); err != nil {
			t.Fatalf("hf_random.jsonl:%d: %v", line, err)
		}
		cases = append(cases, c)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return cases
}

// TestHFRandom compares with Hugging Face on 3000 random texts (all kinds of Unicode whitespace,
// combining marks, non-ASCII digits, astral planes, long words) and on 3000 random id sequences
// rich in tokens that hold only part of a UTF-8 character, where Decode's U+FFFD rule shows.
func TestHFRandom(t *testing.T) {
	tok := gpt2(t)
	cases := loadHFRandom(t)
	texts, fails := 0, 0
	for i, c := range cases {
		if fails > 10 {
			t.Fatal("too many differences; stopping")
		}
		if c.Text != nil {
			texts++
			if got := tok.Encode(*c.Text); !slices.Equal(got, c.IDs) {
				fails++
				t.Errorf("case %d: Encode(%q)\n got %v\nwant %v", i, *c.Text, got, c.IDs)
			}
			if got := tok.Decode(tok.Encode(*c.Text)); got != *c.Text {
				fails++
				t.Errorf("case %d: Decode(Encode(%q)) = %q", i, *c.Text, got)
			}
		}
		if got := tok.Decode(c.IDs); got != c.Decoded {
			fails++
			t.Errorf("case %d: Decode(%v) = %q, Hugging Face gives %q", i, c.IDs, got, c.Decoded)
		}
		checkStream(t, tok, c.IDs, c.Decoded)
	}
	if texts < 1000 || len(cases)-texts < 1000 {
		t.Fatalf("%d text cases and %d id cases; want at least 1000 of each", texts, len(cases)-texts)
	}
}
