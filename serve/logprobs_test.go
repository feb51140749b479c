package serve

import (
	"bytes"
	"encoding/json"
	"math"
	"slices"
	"testing"

	"rosetop/engine"
	"rosetop/engine/tokenizer"
)

// gpt2 is GPT-2's tokenizer, with the ids of the tokens these tests use.
func gpt2(t *testing.T) *tokenizer.Tokenizer {
	t.Helper()
	tok, err := tokenizer.GPT2()
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// GPT-2 ids: whole tokens, and single-byte tokens that are part of a character.
const (
	idWorld int32 = 995   // " world"
	idComma int32 = 11    // ","
	idBang  int32 = 0     // "!"
	idThe   int32 = 262   // " the"
	idDot   int32 = 13    // "."
	idEAcut int32 = 2634  // "é" (C3 A9)
	idC3    int32 = 127   // the byte C3: the first half of "é"
	idA9    int32 = 102   // the byte A9: the second half
	idE2    int32 = 158   // the byte E2: the first of three
	idF0    int32 = 172   // the byte F0: the first of four
	idEOS   int32 = 50256 // "<|endoftext|>"
)

func lp(id int32, x float32) engine.Logprob { return engine.Logprob{Token: id, Logprob: x} }

func tlp(sampled engine.Logprob, top ...engine.Logprob) engine.TokenLogprobs {
	return engine.TokenLogprobs{Sampled: sampled, Top: top}
}

// marshal encodes v as the stream does (no HTML escaping).
func marshal(t *testing.T, v any) string {
	t.Helper()
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		t.Fatal(err)
	}
	return string(bytes.TrimSuffix(b.Bytes(), []byte("\n")))
}

func positions(tok Tokenizer, lps ...engine.TokenLogprobs) []lpPosition {
	d := newLPDecoder(tok)
	out := make([]lpPosition, len(lps))
	for i, x := range lps {
		out[i] = d.position(x)
	}
	return out
}

// TestTokenIDs: the ids these tests name are the tokens they say.
func TestTokenIDs(t *testing.T) {
	tok := gpt2(t)
	for id, want := range map[int32]string{idWorld: " world", idComma: ",", idBang: "!", idThe: " the", idDot: ".",
		idEAcut: "é", idC3: "\xc3", idA9: "\xa9", idE2: "\xe2", idF0: "\xf0", idEOS: "<|endoftext|>"} {
		if got := string(tok.TokenBytes(id)); got != want {
			t.Fatalf("token %d is %q, want %q", id, got, want)
		}
	}
}

// TestCompletionLogprobsFormat: vLLM's _create_completion_logprobs. Each token's text and
// logprob; top_logprobs holds the sampled token first and the top ones after it, keyed by text
// (top entries when the sampled token is among them, top+1 when not); text_offset starts at the
// given offset and adds each token's length in code points ("é" is 1); -inf is -9999.
func TestCompletionLogprobsFormat(t *testing.T) {
	tok := gpt2(t)
	inf := float32(math.Inf(-1))
	ps := positions(tok,
		tlp(lp(idWorld, -1.5), lp(idWorld, -1.5), lp(idComma, -2)),            // sampled among the top: 2 entries
		tlp(lp(idBang, -5), lp(idThe, -0.5), lp(idDot, -1)),                   // sampled not among them: 3
		tlp(lp(idEAcut, inf), lp(idThe, -0.25), lp(idComma, inf)),             // -inf floors at -9999
		tlp(lp(idEOS, -3), lp(idDot, -0.5), lp(idEOS, -3)),                    // EOS spelled out, among the top
		tlp(lp(idComma, float32(math.NaN())), lp(idDot, -0.5), lp(idThe, -1)), // NaN, which JSON cannot hold, as -inf
	)
	got := marshal(t, completionLogprobsOf(ps, 2, 7, false))
	want := `{"text_offset":[7,13,14,15,28],` +
		`"token_logprobs":[-1.5,-5,-9999,-3,-9999],` +
		`"tokens":[" world","!","é","<|endoftext|>",","],` +
		`"top_logprobs":[{" world":-1.5,",":-2},{"!":-5," the":-0.5,".":-1},{"é":-9999," the":-0.25,",":-9999},` +
		`{"<|endoftext|>":-3,".":-0.5},{",":-9999,".":-0.5," the":-1}]}`
	if got != want {
		t.Fatalf("logprobs\n%s\nwant\n%s", got, want)
	}
	// logprobs 0: the sampled token alone (entries 0..0 of the dict).
	got = marshal(t, completionLogprobsOf(positions(tok, tlp(lp(idBang, -5))), 0, 0, false))
	if want := `{"text_offset":[0],"token_logprobs":[-5],"tokens":["!"],"top_logprobs":[{"!":-5}]}`; got != want {
		t.Fatalf("logprobs 0: %s, want %s", got, want)
	}
	// No tokens (a chunk that carries none): empty lists, not nulls.
	if got, want := marshal(t, completionLogprobsOf(nil, 2, 5, false)), `{"text_offset":[],"token_logprobs":[],"tokens":[],"top_logprobs":[]}`; got != want {
		t.Fatalf("no tokens: %s, want %s", got, want)
	}
}

// TestCompletionLogprobsTextCollapse: the top_logprobs object is keyed by text, so tokens that
// decode alike are one key: in the first place any of them took, with the last one's logprob (a
// Python dict comprehension). Parts of characters decode to "" once corrected.
func TestCompletionLogprobsTextCollapse(t *testing.T) {
	tok := gpt2(t)
	ps := positions(tok, tlp(lp(idE2, -4), lp(idF0, -1), lp(idC3, -2), lp(idDot, -3)))
	got := marshal(t, completionLogprobsOf(ps, 3, 0, false))
	want := `{"text_offset":[0],"token_logprobs":[-4],"tokens":[""],"top_logprobs":[{"":-2,".":-3}]}`
	if got != want {
		t.Fatalf("logprobs\n%s\nwant\n%s", got, want)
	}
}

// TestLogprobsPartialCharacters: a token whose text alone ends in U+FFFD (part of a character)
// is decoded as vLLM's LogprobsProcessor._verify_tokens does: with the entry before it in the
// same position's list, else with the previous position's sampled token (and that entry), else "".
func TestLogprobsPartialCharacters(t *testing.T) {
	tok := gpt2(t)
	texts := func(p lpPosition) []string {
		var out []string
		for _, e := range p {
			out = append(out, e.text)
		}
		return out
	}
	ps := positions(tok,
		// No earlier position and nothing before it: C3 alone is "".
		tlp(lp(idC3, -1)),
		// The previous sampled token C3 completes this A9: "é". E2 after "." in the list, or after
		// C3 and ".", stays unfinished: "".
		tlp(lp(idA9, -1), lp(idDot, -0.5), lp(idE2, -2)),
		// A whole token is left as it is.
		tlp(lp(idWorld, -1)),
	)
	for i, want := range [][]string{{""}, {"é", ".", ""}, {" world"}} {
		if got := texts(ps[i]); !slices.Equal(got, want) {
			t.Fatalf("position %d: texts %q, want %q", i, got, want)
		}
	}
	// A sampled A9 with nothing before it is "", but it is also a top entry after C3, which
	// decodes to "é": the dict keeps its first place and that last text. C3 after A9 stays "".
	if got := texts(positions(tok, tlp(lp(idA9, -1), lp(idC3, -0.5), lp(idA9, -1)))[0]); !slices.Equal(got, []string{"é", ""}) {
		t.Fatalf("sampled among the top: %q", got)
	}
	// Chat bytes are the corrected text's: [] for "", the two bytes of "é".
	got := marshal(t, chatLogprobsOf(ps[:2], 2, false))
	want := `{"content":[` +
		`{"token":"","logprob":-1,"bytes":[],"top_logprobs":[{"token":"","logprob":-1,"bytes":[]}]},` +
		`{"token":"é","logprob":-1,"bytes":[195,169],"top_logprobs":[{"token":"é","logprob":-1,"bytes":[195,169]},{"token":".","logprob":-0.5,"bytes":[46]}]}]}`
	if got != want {
		t.Fatalf("chat logprobs\n%s\nwant\n%s", got, want)
	}
}

// TestChatLogprobsFormat: vLLM's _create_chat_logprobs. Each token, its logprob and its text's
// UTF-8 bytes; top_logprobs the dict's first top entries, the sampled token first: the top ones
// when it is among them, it and the top-1 first ones when not; top_logprobs 0: [].
func TestChatLogprobsFormat(t *testing.T) {
	tok := gpt2(t)
	ps := positions(tok,
		tlp(lp(idWorld, -1.5), lp(idWorld, -1.5), lp(idComma, -2)),
		tlp(lp(idBang, -5), lp(idThe, -0.5), lp(idDot, -1)),
		tlp(lp(idEAcut, float32(math.Inf(-1))), lp(idThe, -0.25), lp(idComma, -1)),
	)
	got := marshal(t, chatLogprobsOf(ps, 2, false))
	want := `{"content":[` +
		`{"token":" world","logprob":-1.5,"bytes":[32,119,111,114,108,100],"top_logprobs":[` +
		`{"token":" world","logprob":-1.5,"bytes":[32,119,111,114,108,100]},{"token":",","logprob":-2,"bytes":[44]}]},` +
		`{"token":"!","logprob":-5,"bytes":[33],"top_logprobs":[` +
		`{"token":"!","logprob":-5,"bytes":[33]},{"token":" the","logprob":-0.5,"bytes":[32,116,104,101]}]},` +
		`{"token":"é","logprob":-9999,"bytes":[195,169],"top_logprobs":[` +
		`{"token":"é","logprob":-9999,"bytes":[195,169]},{"token":" the","logprob":-0.25,"bytes":[32,116,104,101]}]}]}`
	if got != want {
		t.Fatalf("chat logprobs\n%s\nwant\n%s", got, want)
	}
	got = marshal(t, chatLogprobsOf(ps[:1], 0, false))
	want = `{"content":[{"token":" world","logprob":-1.5,"bytes":[32,119,111,114,108,100],"top_logprobs":[]}]}`
	if got != want {
		t.Fatalf("top_logprobs 0: %s, want %s", got, want)
	}
	if got, want := marshal(t, chatLogprobsOf(nil, 2, false)), `{"content":[]}`; got != want {
		t.Fatalf("no tokens: %s, want %s", got, want)
	}
}

// TestLogprobsAsTokenIDs: return_tokens_as_token_ids spells every token "token_id:N" (so tokens
// of one text are distinct keys), text_offset counts those spellings, and a chat token's bytes stay
// its text's while its top entries' are the spelling's (vLLM's _create_chat_logprobs).
func TestLogprobsAsTokenIDs(t *testing.T) {
	tok := gpt2(t)
	ps := positions(tok, tlp(lp(idEAcut, -1), lp(idE2, -0.5), lp(idF0, -0.75)), tlp(lp(idBang, -2)))
	got := marshal(t, completionLogprobsOf(ps, 2, 3, true))
	want := `{"text_offset":[3,16],"token_logprobs":[-1,-2],"tokens":["token_id:2634","token_id:0"],` +
		`"top_logprobs":[{"token_id:2634":-1,"token_id:158":-0.5,"token_id:172":-0.75},{"token_id:0":-2}]}`
	if got != want {
		t.Fatalf("completion\n%s\nwant\n%s", got, want)
	}
	got = marshal(t, chatLogprobsOf(ps[:1], 2, true))
	want = `{"content":[{"token":"token_id:2634","logprob":-1,"bytes":[195,169],"top_logprobs":[` +
		`{"token":"token_id:2634","logprob":-1,"bytes":[116,111,107,101,110,95,105,100,58,50,54,51,52]},` +
		`{"token":"token_id:158","logprob":-0.5,"bytes":[116,111,107,101,110,95,105,100,58,49,53,56]}]}]}`
	if got != want {
		t.Fatalf("chat\n%s\nwant\n%s", got, want)
	}
}
