package serve

import (
	"math/rand/v2"
	"strings"
	"testing"
	"unicode/utf8"

	"rosetop/engine/tokenizer"
	"rosetop/sched"
)

// stopReference is the rule stopText implements, computed on the whole text at once: after piece
// i (when checked) a stop string counts if it ends in piece i's text; the first such step wins,
// and within it the earliest match. It returns the text up to the match and whether there was one.
func stopReference(pieces []string, checks []bool, stops []string) (string, bool) {
	text := ""
	for i, p := range pieces {
		old := len(text)
		text += p
		if !checks[i] {
			continue
		}
		cut := -1
		for _, s := range stops {
			from := max(0, old-len(s)+1)
			if k := strings.Index(text[from:], s); k >= 0 && (cut < 0 || from+k < cut) {
				cut = from + k
			}
		}
		if cut >= 0 {
			return text[:cut], true
		}
	}
	return text, false
}

// runStop feeds pieces to a stopText as a stream does and returns what it sent.
func runStop(t *testing.T, pieces []string, checks []bool, stops []string) (string, bool) {
	t.Helper()
	s := newStopText(stops)
	var out strings.Builder
	for i, p := range pieces {
		matched := s.push(p, checks[i])
		got := s.take(matched)
		if !utf8.ValidString(got) {
			t.Fatalf("piece %d: sent %q, not whole characters", i, got)
		}
		out.WriteString(got)
		if matched {
			return out.String(), true
		}
		if total := out.Len() + len(s.pending); len(s.pending) < min(s.hold, total) {
			t.Fatalf("piece %d: holds %d bytes of %d, want at least %d", i, len(s.pending), total, s.hold)
		}
	}
	out.WriteString(s.take(true))
	return out.String(), false
}

func TestStopText(t *testing.T) {
	cases := []struct {
		name    string
		pieces  []string
		checks  []bool // nil: every piece checked
		stops   []string
		want    string
		matched bool
	}{
		{"no stops", []string{"ab", "cd"}, nil, nil, "abcd", false},
		{"inside one piece", []string{"hello world"}, nil, []string{"o w"}, "hell", true},
		{"across pieces", []string{"hel", "lo wo", "rld"}, nil, []string{"o w"}, "hell", true},
		{"at the very start", []string{"stop here"}, nil, []string{"stop"}, "", true},
		{"earliest of two", []string{"abcdef"}, nil, []string{"de", "bc"}, "a", true},
		{"never found", []string{"abc", "def"}, nil, []string{"xyz"}, "abcdef", false},
		{"not checked before min_tokens", []string{"ab", "cd"}, []bool{false, true}, []string{"ab"}, "abcd", false},
		{"straddling min_tokens", []string{"ab", "cd"}, []bool{false, true}, []string{"bc"}, "a", true},
		{"multi-byte text held whole", []string{"é", "ü", "x"}, nil, []string{"üx"}, "é", true},
		{"multi-byte stop", []string{"aé", "b"}, nil, []string{"éb"}, "a", true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if c.checks == nil {
				c.checks = make([]bool, len(c.pieces))
				for i := range c.checks {
					c.checks[i] = true
				}
			}
			got, matched := runStop(t, c.pieces, c.checks, c.stops)
			if got != c.want || matched != c.matched {
				t.Fatalf("sent %q (matched %v), want %q (%v)", got, matched, c.want, c.matched)
			}
			if ref, refMatched := stopReference(c.pieces, c.checks, c.stops); ref != got || refMatched != matched {
				t.Fatalf("the reference rule gives %q (%v)", ref, refMatched)
			}
		})
	}
}

// FuzzStopText: for any pieces of whole characters and any stops, what a stream sends equals the
// reference rule on the whole text, and every piece sent is whole characters.
func FuzzStopText(f *testing.F) {
	f.Add("hello world", "o w", "zz", uint8(3), uint16(0xffff))
	f.Add("aébücd", "üc", "é", uint8(2), uint16(0xfffe))
	f.Add("abcabcabc", "cab", "", uint8(1), uint16(0x00f0))
	f.Fuzz(func(t *testing.T, text, stop1, stop2 string, size uint8, checkBits uint16) {
		if !utf8.ValidString(text) || !utf8.ValidString(stop1) || !utf8.ValidString(stop2) || len(text) > 256 {
			t.Skip()
		}
		var stops []string
		for _, s := range []string{stop1, stop2} {
			if s != "" {
				stops = append(stops, s)
			}
		}
		n := int(size%7) + 1 // characters per piece
		var pieces []string
		var checks []bool
		for rest := []rune(text); len(rest) > 0; {
			k := min(n, len(rest))
			pieces = append(pieces, string(rest[:k]))
			checks = append(checks, checkBits&(1<<(len(checks)%16)) != 0)
			rest = rest[k:]
		}
		got, matched := runStop(t, pieces, checks, stops)
		if want, wantMatched := stopReference(pieces, checks, stops); got != want || matched != wantMatched {
			t.Fatalf("pieces %q checks %v stops %q: sent %q (%v), want %q (%v)", pieces, checks, stops, got, matched, want, wantMatched)
		}
	})
}

// TestStopCheckAgrees: the scheduler's stopCheck, which keeps only the text's tail, ends a request
// at the very token where the handler's stopRule finds the stop string (or by EOS, or at the
// length limit with the final flush), on random GPT-2 token ids (partial UTF-8 characters
// included), stop strings taken from their text, min_tokens, EOS and skip_special_tokens.
func TestStopCheckAgrees(t *testing.T) {
	tok, err := tokenizer.GPT2()
	if err != nil {
		t.Fatal(err)
	}
	m := &Model{Tokenizer: tok, EOS: tok.EOS()}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 3000 {
		ids := make([]int32, 1+rng.IntN(40))
		for i := range ids {
			switch rng.IntN(10) {
			case 0:
				ids[i] = m.EOS
			case 1, 2: // byte tokens: often a piece of a multi-byte character
				ids[i] = int32(rng.IntN(256))
			default:
				ids[i] = int32(rng.IntN(int(m.EOS)))
			}
		}
		full := tok.Decode(ids)
		var stops []string
		for range 1 + rng.IntN(3) {
			if full == "" {
				break
			}
			i := rng.IntN(len(full))
			s := full[i:min(len(full), i+1+rng.IntN(8))]
			if utf8.ValidString(s) {
				stops = append(stops, s)
			}
		}
		if len(stops) == 0 {
			stops = []string{"\x00"}
		}
		j := &job{stops: stops, skipSpecial: rng.IntN(2) == 0,
			req: sched.Request{MaxNewTokens: len(ids), StopOnEOS: rng.IntN(2) == 0, MinNewTokens: rng.IntN(4)}}
		j.req.MinNewTokens = min(j.req.MinNewTokens, len(ids))
		handler := func() (string, int) {
			r := newStopRule(j, m)
			for k, id := range ids {
				end, matched := r.push(id)
				switch {
				case end:
					return "eos", k
				case matched:
					return "stop", k
				}
			}
			if r.flush() {
				return "stop", len(ids) - 1
			}
			return "length", len(ids) - 1
		}
		loop := func() (string, int) {
			c := j.request(m).Stop
			for k, id := range ids {
				if id == m.EOS && j.req.StopOnEOS && k+1 >= j.req.MinNewTokens {
					return "eos", k // the scheduler's rule, before the check
				}
				if c.Check(id, k+1 == len(ids)) {
					return "stop", k
				}
			}
			return "length", len(ids) - 1
		}
		hr, hk := handler()
		lr, lk := loop()
		if hr != lr || hk != lk {
			t.Fatalf("ids %v stops %q (min %d, EOS stops %v, skip %v): handler %s at %d, scheduler %s at %d",
				ids, stops, j.req.MinNewTokens, j.req.StopOnEOS, j.skipSpecial, hr, hk, lr, lk)
		}
	}
}
