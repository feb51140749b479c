package tokenizer

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"
)

// FuzzRoundTrip checks, for any input string s:
//   - Encode gives tiktoken-go's ids (the reference: the same rank-based BPE and pattern), in
//     range, and Decode(Encode(s)) == s when s is valid UTF-8 (otherwise it is s
//     with each bad byte read as U+FFFD, Go's []rune rule, which Encode documents);
//   - Decode always returns valid UTF-8, and the Stream equals Decode, both for Encode(s) and for
//     s's bytes read as an arbitrary id sequence (two bytes an id, out-of-range ids included).
//
// The committed corpus is in testdata/fuzz/FuzzRoundTrip.
func FuzzRoundTrip(f *testing.F) {
	tok, ref := gpt2(f), gpt2Reference(f)
	for _, s := range []string{
		"", "Hello, world!", "<|endoftext|>", "a<|endoftext|>b", "<|endoftext", "I'm you're 's",
		"😀👨‍👩‍👧‍👦🇩🇪", "日本語のテキスト", "  \t\n\r\n  x  ", "\xF0\x9F\x98", "\xED\xA0\x80\xFF", "12345.678",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		ids := tok.Encode(s)
		// The reference is quadratic in a word's length: a 100 KB input would take minutes.
		if len(s) <= maxRefText {
			if want := ref(s); !slices.Equal(ids, want) {
				t.Fatalf("Encode(%q) = %v, tiktoken-go gives %v", s, ids, want)
			}
		}
		for _, id := range ids {
			if id < 0 || int(id) >= tok.VocabSize() {
				t.Fatalf("Encode(%q) gave id %d, outside the vocabulary", s, id)
			}
		}
		got := tok.Decode(ids)
		want := s
		if !utf8.ValidString(s) {
			want = string([]rune(s))
		}
		if got != want {
			t.Fatalf("Decode(Encode(%q)) = %q, want %q (ids %v)", s, got, want, ids)
		}
		checkStream(t, tok, ids, got)

		raw := make([]int32, 0, len(s)/2)
		for i := 0; i+1 < len(s); i += 2 {
			// 16 bits cover 0..65535: every token plus out-of-range ids; bias into the vocabulary.
			raw = append(raw, int32(uint16(s[i])<<8|uint16(s[i+1]))%int32(tok.VocabSize()+16))
		}
		dec := tok.Decode(raw)
		if !utf8.ValidString(dec) {
			t.Fatalf("Decode(%v) = %q: not valid UTF-8", raw, dec)
		}
		checkStream(t, tok, raw, dec)
	})
}

// maxRefText bounds the texts given to the reference encoder, whose merge is quadratic in a word's
// length (4 KB: about 10 ms).
const maxRefText = 4096

// FuzzEncodeLong checks Encode against tiktoken-go on long pieces made from small inputs: s
// repeated 1 to 256 times, with an optional prefix, so that the words reach mergeHeap and the
// cache (the second Encode of a text reads its long pieces from the cache).
//
// The committed corpus is in testdata/fuzz/FuzzEncodeLong.
func FuzzEncodeLong(f *testing.F) {
	tok, ref := gpt2(f), gpt2Reference(f)
	f.Add("Hello", uint8(255), "in ")
	f.Add("ab", uint8(17), " ")
	f.Add("é日1", uint8(40), "")
	f.Add(" ", uint8(100), "x")
	f.Add("'s", uint8(20), "it")
	f.Add("9", uint8(60), "$")
	f.Fuzz(func(t *testing.T, s string, reps uint8, prefix string) {
		n := 1 + int(reps)
		if len(s) > 0 {
			n = min(n, 1+maxRefText/len(s))
		}
		text := prefix + strings.Repeat(s, n)
		if len(text) > 2*maxRefText {
			return
		}
		want := ref(text)
		for pass := range 2 {
			if got := tok.Encode(text); !slices.Equal(got, want) {
				t.Fatalf("Encode(%.300q) (pass %d) = %v, tiktoken-go gives %v", text, pass, got, want)
			}
		}
	})
}

// FuzzFiles feeds arbitrary vocab.json, merges.txt and tokenizer.json contents to the loaders: each
// either fails with a one-line error naming its file and wrapping ErrInvalid, or gives a tokenizer
// whose ids are in range and that encodes text and decodes it back (a byte-level vocabulary
// spells every byte).
//
// The committed corpus is in testdata/fuzz/FuzzFiles.
func FuzzFiles(f *testing.F) {
	f.Add([]byte(vocabJSON(f, nil)), []byte(tinyMergesTxt()), []byte(tinyTokenizerJSON(f, false, nil)), "hello world<|endoftext|>")
	f.Add([]byte(vocabJSON(f, nil)), []byte(strings.ReplaceAll(tinyMergesTxt(), "\n", "\r\n")+"\n"), []byte(tinyTokenizerJSON(f, true, nil)), " wor\xffld 😀")
	f.Add([]byte(`{"a":0}`), []byte("#version: 0.2\na b\n"), []byte(`{"model":{"type":"BPE","vocab":{"a":0},"merges":[["a","b"]]},"added_tokens":[{"id":1,"content":"<|x|>"}]}`), "")
	f.Add([]byte(`{}`), []byte(""), []byte(`{"model":{"vocab":{}}}`), "x")
	f.Fuzz(func(t *testing.T, vocab, merges, tj []byte, text string) {
		check := func(tok *Tokenizer, err error, file string) {
			if err != nil {
				if msg := err.Error(); !errors.Is(err, ErrInvalid) || !strings.Contains(msg, file) || strings.Contains(msg, "\n") {
					t.Fatalf("error %q: want one line wrapping ErrInvalid and naming %s", msg, file)
				}
				return
			}
			ids := tok.Encode(text)
			for _, id := range ids {
				if id < 0 || int(id) >= tok.VocabSize() {
					t.Fatalf("Encode(%q) gave id %d of %d", text, id, tok.VocabSize())
				}
			}
			want := text
			if !utf8.ValidString(text) {
				want = string([]rune(text))
			}
			if got := tok.Decode(ids); got != want {
				t.Fatalf("Decode(Encode(%q)) = %q (ids %v)", text, got, ids)
			}
		}
		tok, err := fromTokenizerJSON(tj, "tokenizer.json")
		check(tok, err, "tokenizer.json")
		v, err := parseVocabJSON(vocab, "vocab.json")
		if err != nil {
			check(nil, err, "vocab.json")
			return
		}
		m, err := parseMerges(merges, "merges.txt")
		if err != nil {
			check(nil, err, "merges.txt")
			return
		}
		src := source{vocabFile: "vocab.json", vocab: v, mergesFile: "merges.txt", merges: m, special: map[string]int{EndOfText: idFromVocab}}
		tok, err = build(src)
		file := "vocab.json"
		if err != nil && strings.Contains(err.Error(), "merges.txt") {
			file = "merges.txt"
		}
		check(tok, err, file)
	})
}
