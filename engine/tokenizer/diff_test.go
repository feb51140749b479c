package tokenizer

import (
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"

	"github.com/dlclark/regexp2"
	"github.com/pkoukk/tiktoken-go"
)

// reference is tiktoken-go's encoder over tok's own rank table, special tokens and gpt2Pattern:
// what Encode gave before it had its own pre-tokenizer and merge, and what it must still give.
func reference(tok *Tokenizer) (func(string) []int32, error) {
	core, err := tiktoken.NewCoreBPE(tok.ranks, tok.special, gpt2Pattern)
	if err != nil {
		return nil, err
	}
	set := make(map[string]any, len(tok.special))
	for text := range tok.special {
		set[text] = true
	}
	enc := tiktoken.NewTiktoken(core, &tiktoken.Encoding{Name: "gpt2", PatStr: gpt2Pattern,
		MergeableRanks: tok.ranks, SpecialTokens: tok.special, ExplicitNVocab: len(tok.tokens)}, set)
	return func(text string) []int32 {
		ids := enc.Encode(text, []string{"all"}, nil)
		out := make([]int32, len(ids))
		for i, id := range ids {
			out[i] = int32(id)
		}
		return out
	}, nil
}

// sharedReference is the reference of sharedGPT2, built once per test binary.
var sharedReference = sync.OnceValues(func() (func(string) []int32, error) {
	tok, err := sharedGPT2()
	if err != nil {
		return nil, err
	}
	return reference(tok)
})

func gpt2Reference(t testing.TB) func(string) []int32 {
	t.Helper()
	ref, err := sharedReference()
	if err != nil {
		t.Fatalf("reference encoder: %v", err)
	}
	return ref
}

// checkSame fails t when Encode, and Encode with the cache off, differ from tiktoken-go on text.
func checkSame(t testing.TB, tok *Tokenizer, ref func(string) []int32, text string) bool {
	t.Helper()
	want := ref(text)
	if got := tok.Encode(text); !slices.Equal(got, want) {
		t.Errorf("Encode(%.200q) (%d bytes)\n got %v\nwant %v (tiktoken-go)", text, len(text), got, want)
		return false
	}
	uncached := *tok
	uncached.cache = nil
	if got := uncached.Encode(text); !slices.Equal(got, want) {
		t.Errorf("Encode(%.200q) without cache\n got %v\nwant %v (tiktoken-go)", text, got, want)
		return false
	}
	return true
}

// TestDifferentialCorpora compares Encode with tiktoken-go on the golden corpus and on every
// text of the Hugging Face random set.
func TestDifferentialCorpora(t *testing.T) {
	tok, ref := gpt2(t), gpt2Reference(t)
	n := 0
	for _, c := range loadGolden(t) {
		checkSame(t, tok, ref, c.Text)
		n++
	}
	for _, c := range loadHFRandom(t) {
		if c.Text != nil {
			checkSame(t, tok, ref, *c.Text)
			n++
		}
	}
	if n < 2000 {
		t.Fatalf("compared %d texts, want the whole corpora", n)
	}
}

// longWordAlphabets are the building blocks of randomLongText: scripts, digits, symbols, spaces
// of several kinds, apostrophes (contractions) and the special token.
var longWordAlphabets = []string{
	"Hello", "hello", "ab", "a", "the", "ing", "tion", "aaaaaaaa", "zzzz", "Qx", "é", "ß", "Ω", "я",
	"日本", "語", "한국", "ا", "😀", "👍🏽", "\u200d", "\u0301", "0", "12", "345", "٣", "Ⅻ",
	"!", "?!", "==", "//", "...", "'s", "'re", "'ll", "'", " ", "  ", "\t", "\n", "\r\n", "\u00a0",
	"\u3000", "\u2028", "<|endoftext|>", "<|endof", "\xff",
}

// randomLongText builds texts rich in long pieces: a few blocks repeated many times (long words
// with repeated substrings, which is where BPE merges tie), with occasional separators.
func randomLongText(r *rand.Rand, maxLen int) string {
	var b strings.Builder
	target := 1 + r.IntN(maxLen)
	for b.Len() < target {
		unit := longWordAlphabets[r.IntN(len(longWordAlphabets))]
		if r.IntN(3) > 0 { // a run of one block: a long word
			unit = strings.Repeat(unit, 1+r.IntN(64))
		}
		b.WriteString(unit)
	}
	return b.String()
}

// TestDifferentialLongWords compares Encode with tiktoken-go on random texts full of long pieces,
// on single words of every length around scanMax and cacheMin, and on the benchmark's prompt.
func TestDifferentialLongWords(t *testing.T) {
	tok, ref := gpt2(t), gpt2Reference(t)
	r := rand.New(rand.NewPCG(1, 2))
	texts := []string{"in " + strings.Repeat("Hello", 256), strings.Repeat("a", 3000), strings.Repeat("ab", 700),
		strings.Repeat("0123456789", 40), strings.Repeat(" ", 600) + "x", strings.Repeat("!?", 300)}
	for n := 1; n <= 2*scanMax+2; n++ {
		for _, unit := range []string{"a", "Hello", "ab", "9", "!", "日", " x"} {
			texts = append(texts, strings.Repeat(unit, n)[:n*len(unit)])
			texts = append(texts, " "+strings.Repeat(unit, n))
		}
	}
	for range 400 {
		texts = append(texts, randomLongText(r, 1500))
	}
	bad := 0
	for _, text := range texts {
		if !checkSame(t, tok, ref, text) {
			if bad++; bad > 5 {
				t.Fatal("too many differences; stopping")
			}
		}
	}
}

// TestMergeHeapEqualsScan checks the two merges against each other on random pieces of every
// length up to several times scanMax; mergeScan is tiktoken's algorithm.
func TestMergeHeapEqualsScan(t *testing.T) {
	tok := gpt2(t)
	r := rand.New(rand.NewPCG(3, 4))
	for range 1000 {
		piece := randomLongText(r, 4*scanMax)
		if !utf8.ValidString(piece) {
			piece = string([]rune(piece))
		}
		if len(piece) < 2 {
			continue
		}
		if got, want := tok.mergeHeap(nil, piece), tok.mergeScan(nil, piece); !slices.Equal(got, want) {
			t.Errorf("mergeHeap(%q) = %v, mergeScan gives %v", piece, got, want)
		}
	}
}

// TestPieceEndMatchesRegexp2 checks the hand-written pre-tokenizer against gpt2Pattern run by
// regexp2 (tiktoken-go's engine): first the class of every code point, each placed after a letter,
// a digit and a space so that its class shows in where the pieces end, then random texts.
func TestPieceEndMatchesRegexp2(t *testing.T) {
	re := regexp2.MustCompile(gpt2Pattern, regexp2.None)
	split := func(text string) []string {
		var got []string
		for i := 0; i < len(text); {
			end := pieceEnd(text, i)
			got = append(got, text[i:end])
			i = end
		}
		return got
	}
	splitRE := func(text string) []string {
		var want []string
		m, err := re.FindStringMatch(text)
		for ; m != nil && err == nil; m, err = re.FindNextMatch(m) {
			want = append(want, m.String())
		}
		if err != nil {
			t.Fatal(err)
		}
		return want
	}
	// Every code point of the BMP (where nearly all class boundaries are), every 31st above it.
	next := func(r rune) rune {
		if r < 0x10000 {
			return r + 1
		}
		return r + 31
	}
	var b strings.Builder
	flush := func() {
		text := b.String()
		b.Reset()
		if got, want := split(text), splitRE(text); !slices.Equal(got, want) {
			for i := range min(len(got), len(want)) {
				if got[i] != want[i] {
					t.Fatalf("pieces differ from regexp2 at piece %d: got %q, want %q", i, got[i], want[i])
				}
			}
			t.Fatalf("%d pieces, regexp2 gives %d", len(got), len(want))
		}
	}
	for r := rune(0); r <= utf8.MaxRune; r = next(r) {
		if !utf8.ValidRune(r) {
			continue
		}
		c := string(r)
		b.WriteString("a" + c + "1" + c + " " + c) // joins a letter, a digit, a space: or none
		if b.Len() > 1<<16 {
			flush()
		}
	}
	flush()
	rnd := rand.New(rand.NewPCG(5, 6))
	for range 500 {
		text := randomLongText(rnd, 200)
		if !utf8.ValidString(text) {
			text = string([]rune(text))
		}
		b.WriteString(text)
		flush()
	}
}

// TestCacheBounded fills the cache with far more distinct long pieces than it may hold and checks
// that its accounted size stays within cacheBytes, that it keeps working, and that a piece in
// constant use survives the churn.
func TestCacheBounded(t *testing.T) {
	base := gpt2(t)
	tok := *base
	tok.cache = newPieceCache()
	hot := " " + strings.Repeat("Hello", 100)
	want := tok.Encode(hot)
	r := rand.New(rand.NewPCG(7, 8))
	for i := range 15000 {
		word := make([]byte, 100+r.IntN(200))
		for j := range word {
			word[j] = 'a' + byte(r.IntN(26))
		}
		tok.Encode(string(word))
		if i%1000 == 0 {
			if got := tok.Encode(hot); !slices.Equal(got, want) {
				t.Fatalf("hot piece changed after %d inserts", i)
			}
		}
	}
	if got := tok.cache.bytes(); got > cacheBytes {
		t.Errorf("cache holds %d accounted bytes, budget %d", got, cacheBytes)
	}
	if tok.cache.len() < 1000 {
		t.Errorf("cache holds %d pieces; it should be well used", tok.cache.len())
	}
	if _, hit := tok.cache.appendCached(nil, hot); !hit {
		t.Errorf("a piece used every 1000 encodes was evicted")
	}
}

// TestConcurrentCache encodes the same long pieces from many goroutines at once, so that under
// -race the cache's locking is exercised on hits, misses, promotions and generation turnover.
func TestConcurrentCache(t *testing.T) {
	base := gpt2(t)
	ref := gpt2Reference(t)
	tok := *base
	tok.cache = newPieceCache()
	texts := make([]string, 64)
	wants := make([][]int32, len(texts))
	for i := range texts {
		texts[i] = "in " + strings.Repeat(string(rune('a'+i%26))+"ello", 30+i)
		wants[i] = ref(texts[i])
	}
	const workers = 8
	errs := make(chan string, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := range 4 * len(texts) {
				k := (i*7 + w*13) % len(texts)
				if got := tok.Encode(texts[k]); !slices.Equal(got, wants[k]) {
					errs <- texts[k]
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for text := range errs {
		t.Errorf("concurrent Encode(%.40q...) differs from tiktoken-go", text)
	}
}

// TestDifferentialSpecialTokens compares Encode with tiktoken-go for a vocabulary with several
// special tokens, two of which overlap ("xyz" and "zw": in "xyzw" the leftmost wins).
func TestDifferentialSpecialTokens(t *testing.T) {
	raw, err := readGzipAsset("assets/gpt2-vocab.json.gz")
	if err != nil {
		t.Fatal(err)
	}
	vocab, err := parseVocabJSON(raw, "vocab.json")
	if err != nil {
		t.Fatal(err)
	}
	specials := map[string]int{EndOfText: idFromVocab, "<|im_start|>": 50257, "<|im_end|>": 50258, "xyz": 50259, "zw": 50260}
	tok, err := build(source{vocabFile: "vocab.json", vocab: vocab, special: specials})
	if err != nil {
		t.Fatal(err)
	}
	ref, err := reference(tok)
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(10, 11))
	pieces := []string{"<|im_start|>", "<|im_end|>", "xyz", "zw", "xyzw", "zwxyz", "<|im_", "<|endoftext|>", "user\n",
		" Hello", "HelloHelloHelloHelloHelloHello", "  ", "x", "z", "y", "\xff"}
	for range 300 {
		var b strings.Builder
		for range r.IntN(12) {
			b.WriteString(pieces[r.IntN(len(pieces))])
		}
		checkSame(t, tok, ref, b.String())
	}
	if got, want := tok.Encode("xyzw"), []int32{50259, 86}; !slices.Equal(got, want) {
		t.Errorf(`Encode("xyzw") = %v, want %v (the leftmost special token, then "w")`, got, want)
	}
}
