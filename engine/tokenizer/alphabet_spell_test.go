package tokenizer

import "testing"

// TestSpell: tokens spelled as GPT-2's vocabulary spells them: " world" as "Ġworld", a newline
// as "Ċ", the end-of-text token as itself.
func TestSpell(t *testing.T) {
	tok, err := GPT2()
	if err != nil {
		t.Fatal(err)
	}
	for text, want := range map[string]string{" world": "Ġworld", "\n": "Ċ", "<|endoftext|>": "<|endoftext|>"} {
		ids := tok.Encode(text)
		if len(ids) != 1 || Spell(tok.TokenBytes(ids[0])) != want {
			t.Errorf("%q: ids %v, want one token spelled %q", text, ids, want)
		}
	}
}
