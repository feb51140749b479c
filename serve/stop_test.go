package serve

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"rosetop/engine/tokenizer"
	"rosetop/sched"
)

// stopReference is the rule stopText implements, computed on the whole text at once: after piece
// i (when checked) a stop string counts if it ends in piece i's text; the first such step wins,
// and within it the first listed stop string that counts (its first occurrence), as vLLM's
// check_stop_strings. It returns the text up to the match (through it with include) and whether
// there was one.
func stopReference(pieces []string, checks []bool, stops []string, include bool) (string, bool) {
	text := ""
	for i, p := range pieces {
		old := len(text)
		text += p
		if !checks[i] {
			continue
		}
		start, end := -1, -1
		for _, s := range stops { // the first listed that ends in this piece
			for e := max(old+1, len(s)); e <= len(text); e++ {
				if text[e-len(s):e] == s {
					start, end = e-len(s), e
					break
				}
			}
			if end >= 0 {
				break
			}
		}
		if end >= 0 {
			if include {
				return text[:end], true
			}
			return text[:start], true
		}
	}
	return text, false
}

// runStop feeds pieces to a stopText as a stream does and returns what it sent. It checks the
// hold-back: all but the last longest-stop-1 bytes are sent after each piece, none held with
// include.
func runStop(t *testing.T, pieces []string, checks []bool, stops []string, include bool) (string, bool) {
	t.Helper()
	s := newStopText(stops, include)
	hold := 0
	for _, x := range stops {
		hold = max(hold, len(x)-1)
	}
	if include {
		hold = 0
	}
	var out strings.Builder
	total := 0
	for i, p := range pieces {
		total += len(p)
		matched := s.push(p, checks[i])
		got := s.take(matched)
		if !utf8.ValidString(got) {
			t.Fatalf("piece %d: sent %q, not whole characters", i, got)
		}
		out.WriteString(got)
		if matched {
			return out.String(), true
		}
		if held := total - out.Len(); held < min(hold, total) || held >= hold+utf8.UTFMax {
			t.Fatalf("piece %d: holds %d bytes of %d, want %d (whole characters)", i, held, total, hold)
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
		// vLLM's check_stop_strings: of the stop strings found in one token's text, the first listed.
		{"first listed of two", []string{"abcdef"}, nil, []string{"de", "bc"}, "abc", true},
		{"first listed, ending later", []string{"abcdef"}, nil, []string{"bcde", "bc"}, "a", true},
		{"first listed, starting later", []string{"abcdef"}, nil, []string{"cd", "abcd"}, "ab", true},
		{"a later piece's earlier match", []string{"ab", "cdef"}, nil, []string{"ef", "bc"}, "abcd", true},
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
			got, matched := runStop(t, c.pieces, c.checks, c.stops, false)
			if got != c.want || matched != c.matched {
				t.Fatalf("sent %q (matched %v), want %q (%v)", got, matched, c.want, c.matched)
			}
			if ref, refMatched := stopReference(c.pieces, c.checks, c.stops, false); ref != got || refMatched != matched {
				t.Fatalf("the reference rule gives %q (%v)", ref, refMatched)
			}
		})
	}
}

// TestStopTextInclude: with include_stop_str_in_output the text is cut after the first listed
// stop string found (anything after it in the same piece dropped), and a stream holds nothing back.
func TestStopTextInclude(t *testing.T) {
	cases := []struct {
		name    string
		pieces  []string
		stops   []string
		want    string
		matched bool
	}{
		{"inside one piece", []string{"hello world"}, []string{"o w"}, "hello w", true},
		{"across pieces", []string{"hel", "lo wo", "rld"}, []string{"o w"}, "hello w", true},
		{"first listed of two", []string{"abcdef"}, []string{"abcd", "bc"}, "abcd", true},
		{"at the very end", []string{"ab", "cd"}, []string{"cd"}, "abcd", true},
		{"never found", []string{"abc", "def"}, []string{"xyz"}, "abcdef", false},
		{"multi-byte stop", []string{"aé", "bc"}, []string{"éb"}, "aéb", true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			checks := make([]bool, len(c.pieces))
			for i := range checks {
				checks[i] = true
			}
			got, matched := runStop(t, c.pieces, checks, c.stops, true)
			if got != c.want || matched != c.matched {
				t.Fatalf("sent %q (matched %v), want %q (%v)", got, matched, c.want, c.matched)
			}
			if ref, refMatched := stopReference(c.pieces, checks, c.stops, true); ref != got || refMatched != matched {
				t.Fatalf("the reference rule gives %q (%v)", ref, refMatched)
			}
		})
	}
}

// FuzzStopText: for any pieces of whole characters and any stops, with
// include_stop_str_in_output and without, what a stream sends equals the reference rule on the
// whole text, and every piece sent is whole characters.
func FuzzStopText(f *testing.F) {
	f.Add("hello world", "o w", "zz", uint8(3), uint16(0xffff))
	f.Add("aébücd", "üc", "é", uint8(2), uint16(0xfffe))
	f.Add("abcabcabc", "cab", "", uint8(1), uint16(0x00f0))
	f.Add("abcdefgh", "bcdef", "cd", uint8(4), uint16(0xffff))
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
		for _, include := range []bool{false, true} {
			got, matched := runStop(t, pieces, checks, stops, include)
			if want, wantMatched := stopReference(pieces, checks, stops, include); got != want || matched != wantMatched {
				t.Fatalf("pieces %q checks %v stops %q include %v: sent %q (%v), want %q (%v)", pieces, checks, stops, include, got, matched, want, wantMatched)
			}
		}
	})
}

// TestStopCheckAgrees: the scheduler's stopCheck, which keeps only the text's tail (none without
// stop strings), ends a request at the very token where the handler's stopRule finds a stop
// string or a stop id (or by EOS, or at the length limit with the final flush), on random GPT-2
// token ids (partial UTF-8 characters included), stop strings taken from their text, stop ids
// among them, min_tokens, EOS, skip_special_tokens and include_stop_str_in_output.
func TestStopCheckAgrees(t *testing.T) {
	tok, err := tokenizer.GPT2()
	if err != nil {
		t.Fatal(err)
	}
	m := &Model{Tokenizer: tok, EOS: tok.EOS()}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 5000 {
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
		for range rng.IntN(4) {
			if full == "" {
				break
			}
			i := rng.IntN(len(full))
			s := full[i:min(len(full), i+1+rng.IntN(8))]
			if utf8.ValidString(s) {
				stops = append(stops, s)
			}
		}
		var stopIDs []int32
		for range rng.IntN(3) {
			stopIDs = append(stopIDs, ids[rng.IntN(len(ids))])
		}
		slices.Sort(stopIDs)
		stopIDs = slices.Compact(stopIDs)
		if len(stops) == 0 && len(stopIDs) == 0 {
			stops = []string{"\x00"}
		}
		j := &job{stops: stops, stopIDs: stopIDs, includeStop: rng.IntN(2) == 0, skipSpecial: rng.IntN(2) == 0,
			req: sched.Request{MaxNewTokens: len(ids), StopOnEOS: rng.IntN(2) == 0, MinNewTokens: rng.IntN(4)}}
		j.req.MinNewTokens = min(j.req.MinNewTokens, len(ids))
		handler := func() (string, int) {
			r := newStopRule(j, m)
			for k, id := range ids {
				switch r.push(id) {
				case endEOS:
					return "eos", k
				case endStop:
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
				if id == m.EOS && j.req.StopOnEOS && k+1 > j.req.MinNewTokens {
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
			t.Fatalf("ids %v stops %q stop ids %v (min %d, EOS stops %v, skip %v, include %v): handler %s at %d, scheduler %s at %d",
				ids, stops, stopIDs, j.req.MinNewTokens, j.req.StopOnEOS, j.skipSpecial, j.includeStop, hr, hk, lr, lk)
		}
	}
}

// TestStopRuleStopIDs: a stop token id ends the request at its first occurrence after min_tokens
// outputs, as vLLM's check_stop ends it (the EOS first: its own rule, unless ignore_eos); the
// token stays among the outputs, its text is left out unless include_stop_str_in_output (where
// skip_special_tokens still drops an EOS's), and with include a stop string completed by its text
// cuts the text after the stop string. Earlier occurrences keep their text.
func TestStopRuleStopIDs(t *testing.T) {
	tok, err := tokenizer.GPT2()
	if err != nil {
		t.Fatal(err)
	}
	m := &Model{Tokenizer: tok, EOS: tok.EOS()}
	ids := tok.Encode("one and two and three")
	and := tok.Encode(" and")[0]
	if len(ids) != 5 || ids[1] != and || ids[3] != and {
		t.Fatalf("ids %v: want one and two and three, \" and\" = %d", ids, and)
	}
	withEOS := append(slices.Clone(ids[:3]), m.EOS, ids[3], ids[4])
	cases := []struct {
		name      string
		ids       []int32
		stopIDs   []int32
		stops     []string
		include   bool
		ignoreEOS bool
		keepEOS   bool // skip_special_tokens false
		minNew    int
		verdict   verdict
		at        int // the output that ends the request (0-based); len(ids): none
		text      string
	}{
		{name: "stop id", ids: ids, stopIDs: []int32{and}, verdict: endStop, at: 1, text: "one"},
		{name: "stop id kept", ids: ids, stopIDs: []int32{and}, include: true, verdict: endStop, at: 1, text: "one and"},
		{name: "stop id before min_tokens", ids: ids, stopIDs: []int32{and}, minNew: 3, verdict: endStop, at: 3, text: "one and two"},
		{name: "stop id as output min_tokens", ids: ids, stopIDs: []int32{and}, minNew: 2, verdict: endStop, at: 3, text: "one and two"},
		{name: "stop id just past min_tokens", ids: ids, stopIDs: []int32{and}, minNew: 1, verdict: endStop, at: 1, text: "one"},
		{name: "one of two ids", ids: ids, stopIDs: []int32{ids[2], ids[4]}, verdict: endStop, at: 2, text: "one and"},
		{name: "never sampled", ids: ids, stopIDs: []int32{m.EOS - 1}, verdict: goOn, at: len(ids), text: "one and two and three"},
		{name: "EOS first", ids: withEOS, stopIDs: []int32{ids[4]}, verdict: endEOS, at: 3, text: "one and two"},
		{name: "EOS as a stop id under ignore_eos", ids: withEOS, stopIDs: []int32{m.EOS}, ignoreEOS: true, verdict: endStop, at: 3, text: "one and two"},
		{name: "EOS kept, special tokens skipped", ids: withEOS, stopIDs: []int32{m.EOS}, ignoreEOS: true, include: true, verdict: endStop, at: 3, text: "one and two"},
		{name: "EOS kept with its text", ids: withEOS, stopIDs: []int32{m.EOS}, ignoreEOS: true, include: true, keepEOS: true, verdict: endStop, at: 3,
			text: "one and two<|endoftext|>"},
		{name: "ending EOS kept with its text", ids: withEOS, include: true, keepEOS: true, verdict: endEOS, at: 3, text: "one and two<|endoftext|>"},
		{name: "ending EOS left out", ids: withEOS, keepEOS: true, verdict: endEOS, at: 3, text: "one and two"},
		{name: "stop string in a stop id's text, kept", ids: ids, stopIDs: []int32{and}, stops: []string{"e a"}, include: true, verdict: endStop, at: 1, text: "one a"},
		{name: "stop string in a stop id's text, left out", ids: ids, stopIDs: []int32{and}, stops: []string{"e a"}, verdict: endStop, at: 1, text: "one"},
		{name: "stop string first", ids: ids, stopIDs: []int32{ids[3]}, stops: []string{"tw"}, minNew: 2, verdict: endStop, at: 2, text: "one and "},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			j := &job{stops: c.stops, stopIDs: c.stopIDs, includeStop: c.include, skipSpecial: !c.keepEOS,
				req: sched.Request{MaxNewTokens: len(c.ids), StopOnEOS: !c.ignoreEOS, MinNewTokens: c.minNew}}
			r := newStopRule(j, m)
			got, at := goOn, len(c.ids)
			for k, id := range c.ids {
				if got = r.push(id); got != goOn {
					at = k
					break
				}
			}
			if got != endStop {
				r.flush()
			}
			text := r.text.take(true)
			if got != c.verdict || at != c.at || text != c.text {
				t.Fatalf("verdict %d at output %d, text %q; want %d at %d, %q", got, at, text, c.verdict, c.at, c.text)
			}
		})
	}
}

// TestLoopStopBound: the scheduler's loop searches a request's stop strings only while they hold
// at most maxLoopStopBytes in all (past that the handler alone matches them); stop ids it checks
// whatever the strings.
func TestLoopStopBound(t *testing.T) {
	tok, err := tokenizer.GPT2()
	if err != nil {
		t.Fatal(err)
	}
	m := &Model{Tokenizer: tok, EOS: tok.EOS()}
	ids := tok.Encode("one and two and three")
	long := []string{" two", strings.Repeat("x", maxLoopStopBytes)} // " two" ends at output 3
	cases := []struct {
		name    string
		stops   []string
		stopIDs []int32
		ends    int // the output the loop ends the request at (0-based); -1: never, nil Stop
	}{
		{"strings within the bound", []string{" two"}, nil, 2},
		{"strings past the bound", long, nil, -1},
		{"stop ids with strings past the bound", long, []int32{ids[4]}, 4},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			j := &job{stops: c.stops, stopIDs: c.stopIDs, req: sched.Request{MaxNewTokens: len(ids), StopOnEOS: true}}
			check := j.request(m).Stop
			if check == nil {
				if c.ends >= 0 {
					t.Fatal("no loop check")
				}
				return
			}
			for k, id := range ids {
				if check.Check(id, k+1 == len(ids)) {
					if k != c.ends {
						t.Fatalf("the loop ends the request at output %d, want %d", k, c.ends)
					}
					return
				}
			}
			t.Fatalf("the loop never ends the request, want at output %d", c.ends)
		})
	}
}
