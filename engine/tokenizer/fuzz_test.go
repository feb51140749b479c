package tokenizer

import (
	"testing"
	"unicode/utf8"
)

// FuzzRoundTrip checks, for any input string s:
//   - Encode gives ids in range, and Decode(Encode(s)) == s when s is valid UTF-8 (otherwise it is s
//     with each bad byte read as U+FFFD, Go's []rune rule, which Encode documents);
//   - Decode always returns valid UTF-8, and the Stream equals Decode, both for Encode(s) and for
//     s's bytes read as an arbitrary id sequence (two bytes an id, out-of-range ids included).
//
// The committed corpus is in testdata/fuzz/FuzzRoundTrip.
func FuzzRoundTrip(f *testing.F) {
	tok := gpt2(f)
	for _, s := range []string{
		"", "Hello, world!", "<|endoftext|>", "a<|endoftext|>b", "<|endoftext", "I'm you're 's",
		"😀👨‍👩‍👧‍👦🇩🇪", "日本語のテキスト", "  \t\n\r\n  x  ", "\xF0\x9F\x98", "\xED\xA0\x80\xFF", "12345.678",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		ids := tok.Encode(s)
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
