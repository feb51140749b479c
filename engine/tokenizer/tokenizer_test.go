package tokenizer

import (
	"bufio"
	"encoding/json"
	"os"
	"slices"
	"sync"
	"testing"
	"unicode/utf8"
)

// goldenCase is one line of testdata/tokenizer/golden.jsonl, made by Hugging Face `tokenizers`
// (BPE.from_file on GPT-2's vocab.json/merges.txt, ByteLevel pre-tokenizer without prefix space,
// <|endoftext|> special) on the GPU machine by testdata/golden/make_golden.py.
type goldenCase struct {
	Text    string  `json:"text"`
	IDs     []int32 `json:"ids"`
	Decoded string  `json:"decoded"`
}

const goldenPath = "../../testdata/tokenizer/golden.jsonl"

func loadGolden(t testing.TB) []goldenCase {
	t.Helper()
	f, err := os.Open(goldenPath)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var cases []goldenCase
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for line := 1; sc.Scan(); line++ {
		var c goldenCase
		if err := json.Unmarshal(sc.Bytes(), &c); err != nil {
			t.Fatalf("%s:%d: %v", goldenPath, line, err)
		}
		cases = append(cases, c)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if len(cases) < 300 {
		t.Fatalf("%s: %d cases, want at least 300", goldenPath, len(cases))
	}
	return cases
}

// sharedGPT2 builds the embedded tokenizer once for the whole test binary (under -race a build
// costs most of a second); it is never modified, and TestGPT2Facts builds a fresh one.
var sharedGPT2 = sync.OnceValues(GPT2)

func gpt2(t testing.TB) *Tokenizer {
	t.Helper()
	tok, err := sharedGPT2()
	if err != nil {
		t.Fatalf("GPT2(): %v", err)
	}
	return tok
}

func TestGoldenIDs(t *testing.T) {
	tok := gpt2(t)
	bad := 0
	for i, c := range loadGolden(t) {
		if got := tok.Encode(c.Text); !slices.Equal(got, c.IDs) {
			bad++
			t.Errorf("case %d: Encode(%q)\n got %v\nwant %v", i, c.Text, got, c.IDs)
		}
	}
	if bad > 0 {
		t.Logf("%d golden strings differ from Hugging Face", bad)
	}
}

func TestGoldenDecode(t *testing.T) {
	tok := gpt2(t)
	for i, c := range loadGolden(t) {
		if got := tok.Decode(c.IDs); got != c.Decoded {
			t.Errorf("case %d: Decode(%v) = %q, Hugging Face gives %q", i, c.IDs, got, c.Decoded)
		}
		if !utf8.ValidString(c.Text) {
			t.Fatalf("case %d: golden text %q is not valid UTF-8", i, c.Text)
		}
		if got := tok.Decode(tok.Encode(c.Text)); got != c.Text {
			t.Errorf("case %d: Decode(Encode(%q)) = %q", i, c.Text, got)
		}
	}
}

func TestGPT2Facts(t *testing.T) {
	tok, err := GPT2()
	if err != nil {
		t.Fatalf("GPT2(): %v", err)
	}
	if got := tok.EOS(); got != 50256 {
		t.Errorf("EOS() = %d, want 50256", got)
	}
	if got := tok.VocabSize(); got != 50257 {
		t.Errorf("VocabSize() = %d, want 50257", got)
	}
	for _, tc := range []struct {
		name string
		id   int32
		want []byte
	}{
		{"first token", 0, []byte("!")},
		{"space", 220, []byte(" ")},
		{"newline", 198, []byte("\n")},
		{"word with leading space", 995, []byte(" world")},
		{"half of an emoji", 47249, []byte{0xF0, 0x9F, 0x98}},
		{"eos", 50256, []byte(EndOfText)},
		{"negative", -1, nil},
		{"past the end", 50257, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tok.TokenBytes(tc.id); !slices.Equal(got, tc.want) {
				t.Errorf("TokenBytes(%d) = %q, want %q", tc.id, got, tc.want)
			}
		})
	}
}

func TestEncodeSpecial(t *testing.T) {
	tok := gpt2(t)
	for _, tc := range []struct {
		name, text string
		want       []int32
	}{
		{"alone", "<|endoftext|>", []int32{50256}},
		{"twice", "<|endoftext|><|endoftext|>", []int32{50256, 50256}},
		{"between words", "a<|endoftext|>b", []int32{64, 50256, 65}},
		{"incomplete is text", "<|endoftext", []int32{27, 91, 437, 1659, 5239}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tok.Encode(tc.text); !slices.Equal(got, tc.want) {
				t.Errorf("Encode(%q) = %v, want %v", tc.text, got, tc.want)
			}
		})
	}
}

// TestEmbeddedMerges proves the property GPT2() relies on without re-reading merges.txt: BPE by
// token id (tiktoken's rank) is BPE by merge order for the embedded vocabulary.
func TestEmbeddedMerges(t *testing.T) {
	rawVocab, err := readGzipAsset("assets/gpt2-vocab.json.gz")
	if err != nil {
		t.Fatal(err)
	}
	rawMerges, err := readGzipAsset("assets/gpt2-merges.txt.gz")
	if err != nil {
		t.Fatal(err)
	}
	vocab, err := parseVocabJSON(rawVocab, "vocab.json")
	if err != nil {
		t.Fatal(err)
	}
	merges, err := parseMerges(rawMerges, "merges.txt")
	if err != nil {
		t.Fatal(err)
	}
	if len(merges) != 50000 {
		t.Fatalf("%d merges, want 50000", len(merges))
	}
	tok, err := build(source{vocabFile: "vocab.json", vocab: vocab, mergesFile: "merges.txt", merges: merges,
		special: map[string]int{EndOfText: idFromVocab}})
	if err != nil {
		t.Fatal(err)
	}
	if got := tok.Encode("Hello world"); !slices.Equal(got, []int32{15496, 995}) {
		t.Errorf("Encode(Hello world) = %v", got)
	}
}

// TestConcurrentEncode runs several goroutines over the golden corpus on one Tokenizer; with -race
// it proves that Encode/Decode share no unsynchronised mutable state (the tables are only read;
// the piece cache and the merge scratch pool lock themselves).
func TestConcurrentEncode(t *testing.T) {
	tok := gpt2(t)
	cases := loadGolden(t)
	const workers = 8
	errs := make(chan string, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range cases {
				c := cases[(i+w*41)%len(cases)] // each worker starts elsewhere in the corpus
				if got := tok.Encode(c.Text); !slices.Equal(got, c.IDs) {
					errs <- c.Text
					return
				}
				if got := tok.Decode(c.IDs); got != c.Decoded {
					errs <- c.Text
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for text := range errs {
		t.Errorf("concurrent Encode/Decode of %q differs from golden", text)
	}
}

func TestDecodeLossy(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   string
		want string
	}{
		{"valid", "héllo 😀", "héllo 😀"},
		{"truncated 4-byte is one subpart", "Hello \xF0\x90\x80World", "Hello \uFFFDWorld"},
		// Unicode 15 section 3.9, Table 3-8's example.
		{"unicode table 3-8", "a\xF1\x80\x80\xE1\x80\xC2b\x80c\x80\xBFd", "a\uFFFD\uFFFD\uFFFDb\uFFFDc\uFFFD\uFFFDd"},
		{"surrogate is three", "\xED\xA0\x80", "\uFFFD\uFFFD\uFFFD"},
		{"overlong 2-byte", "\xC0\x80", "\uFFFD\uFFFD"},
		{"overlong 3-byte", "\xE0\x80\x80", "\uFFFD\uFFFD\uFFFD"},
		{"above U+10FFFF", "\xF4\x90\x80\x80", "\uFFFD\uFFFD\uFFFD\uFFFD"},
		{"never a lead", "\xF5\xFF", "\uFFFD\uFFFD"},
		{"truncated at end", "x\xE2\x82", "x\uFFFD"},
		{"real U+FFFD kept", "\uFFFD", "\uFFFD"},
		{"lead then ascii", "\xC3A", "\uFFFDA"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, rest := appendLossy(nil, []byte(tc.in), true)
			if string(out) != tc.want || rest != 0 {
				t.Errorf("appendLossy(%q) = %q, %d; want %q, 0", tc.in, out, rest, tc.want)
			}
		})
	}
}

func TestDecodeSkipsUnknownIDs(t *testing.T) {
	tok := gpt2(t)
	if got := tok.Decode([]int32{15496, -5, 50257, 1 << 30, 995}); got != "Hello world" {
		t.Errorf("Decode with out-of-range ids = %q, want %q", got, "Hello world")
	}
	// 47249 is the first three bytes of 😀 (F0 9F 98): alone it is one U+FFFD, as in Hugging Face.
	if got := tok.Decode([]int32{47249}); got != "\uFFFD" {
		t.Errorf("Decode(partial emoji) = %q, want one U+FFFD", got)
	}
}
