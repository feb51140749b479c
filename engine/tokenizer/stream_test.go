package tokenizer

import (
	"math/rand/v2"
	"slices"
	"testing"
	"unicode/utf8"
)

// checkStream pushes ids one at a time and checks the Stream's contract: every piece is valid
// UTF-8, and the pieces plus Flush equal want (Decode of all the ids).
func checkStream(t *testing.T, src ByteSource, ids []int32, want string) {
	t.Helper()
	s := NewStream(src)
	var got []byte
	for i, id := range ids {
		piece := s.Push(id)
		if !utf8.ValidString(piece) {
			t.Fatalf("Push(%d) (token %d of %v) = %q: not valid UTF-8", id, i, ids, piece)
		}
		got = append(got, piece...)
	}
	got = append(got, s.Flush()...)
	if string(got) != want {
		t.Fatalf("stream of %v = %q, Decode = %q", ids, got, want)
	}
}

func TestStreamGolden(t *testing.T) {
	tok := gpt2(t)
	for _, c := range loadGolden(t) {
		checkStream(t, tok, c.IDs, c.Decoded)
	}
}

// fakeSource serves token i as bytes[i], so tests can split characters exactly where they like.
type fakeSource [][]byte

func (f fakeSource) TokenBytes(id int32) []byte {
	if id < 0 || int(id) >= len(f) {
		return nil
	}
	return f[id]
}

func TestStreamPieces(t *testing.T) {
	for _, tc := range []struct {
		name   string
		tokens []string // token i's bytes; pushed in order
		pushes []string // what each Push returns
		flush  string
	}{
		{"ascii", []string{"ab", "c"}, []string{"ab", "c"}, ""},
		{"emoji over three tokens", []string{"\xF0\x9F", "\x98", "\x80!"}, []string{"", "", "😀!"}, ""},
		{"cjk over two tokens", []string{"a\xE4\xB8", "\xAD"}, []string{"a", "中"}, ""},
		{"held until complete", []string{"\xE4", "\xB8", "\xAD\xE6\x96", "\x87"}, []string{"", "", "中", "文"}, ""},
		{"broken off by ascii", []string{"\xE2\x82", "A"}, []string{"", "\uFFFDA"}, ""},
		{"invalid lead emitted at once", []string{"\xFF", "x"}, []string{"\uFFFD", "x"}, ""},
		{"stray continuation emitted at once", []string{"\x80\x80"}, []string{"\uFFFD\uFFFD"}, ""},
		{"surrogate prefix never held", []string{"\xED\xA0"}, []string{"\uFFFD\uFFFD"}, ""},
		{"unfinished at the end", []string{"ok\xF0\x9F"}, []string{"ok"}, "\uFFFD"},
		{"new lead ends the old one", []string{"\xE4\xB8", "\xE4\xB8\xAD"}, []string{"", "\uFFFD中"}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := make(fakeSource, len(tc.tokens))
			ids := make([]int32, len(tc.tokens))
			var all []byte
			for i, s := range tc.tokens {
				src[i], ids[i] = []byte(s), int32(i)
				all = append(all, s...)
			}
			s := NewStream(src)
			var got []string
			for _, id := range ids {
				got = append(got, s.Push(id))
			}
			if !slices.Equal(got, tc.pushes) {
				t.Errorf("pushes = %q, want %q", got, tc.pushes)
			}
			if f := s.Flush(); f != tc.flush {
				t.Errorf("Flush() = %q, want %q", f, tc.flush)
			}
			want, _ := appendLossy(nil, all, true)
			checkStream(t, src, ids, string(want))
		})
	}
}

func TestStreamFlushResets(t *testing.T) {
	tok := gpt2(t)
	s := NewStream(tok)
	s.Push(47249) // F0 9F 98: three bytes of an emoji
	if got := s.Flush(); got != "\uFFFD" {
		t.Fatalf("Flush() = %q, want U+FFFD", got)
	}
	if got := s.Flush(); got != "" {
		t.Fatalf("second Flush() = %q, want empty", got)
	}
	if got := s.Push(15496); got != "Hello" {
		t.Fatalf("Push after Flush = %q, want Hello", got)
	}
}

// TestStreamRandomIDs checks the Stream against Decode on random id sequences, drawn half from
// the tokens that are not whole UTF-8 on their own (lead bytes and pieces of emoji and CJK), so
// characters are split across tokens, broken off, and left unfinished at the end.
func TestStreamRandomIDs(t *testing.T) {
	tok := gpt2(t)
	var partial []int32
	for id := range int32(tok.VocabSize()) {
		if !utf8.Valid(tok.TokenBytes(id)) {
			partial = append(partial, id)
		}
	}
	if len(partial) < 128 {
		t.Fatalf("only %d tokens are partial UTF-8; want at least the 128 lone high bytes", len(partial))
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 2000 {
		ids := make([]int32, rng.IntN(12))
		for i := range ids {
			switch r := rng.IntN(20); {
			case r < 10:
				ids[i] = partial[rng.IntN(len(partial))]
			case r == 10:
				ids[i] = int32(tok.VocabSize()) + rng.Int32N(3) - 1 // EOS or out of range
			default:
				ids[i] = rng.Int32N(int32(tok.VocabSize()))
			}
		}
		checkStream(t, tok, ids, tok.Decode(ids))
	}
}
