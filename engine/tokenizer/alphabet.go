package tokenizer

import "fmt"

// GPT-2's vocabulary files spell each token's bytes in a printable alphabet (encoder.py's
// bytes_to_unicode): the 188 bytes that are printable Latin-1 ('!'..'~', '¡'..'¬', '®'..'ÿ') stand
// for themselves, and the other 68 (0x00..0x20, 0x7F..0xA0, 0xAD), in increasing order, are
// U+0100..U+0143. So a space is 'Ġ' (U+0120) and a newline 'Ċ' (U+010A).

// printableByte reports whether b stands for itself in the alphabet.
func printableByte(b byte) bool {
	return (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE
}

// alphabetByte returns the byte that character r of the alphabet stands for.
func alphabetByte(r rune) (byte, bool) {
	if r >= 0 && r < 0x100 {
		return byte(r), printableByte(byte(r))
	}
	switch k := r - 0x100; {
	case k < 0 || k > 67:
		return 0, false
	case k <= 0x20: // 0x00..0x20
		return byte(k), true
	case k <= 66: // 0x7F..0xA0
		return byte(0x7F + k - 33), true
	default: // k == 67
		return 0xAD, true
	}
}

// alphabetToBytes returns the raw bytes of a token written in the alphabet.
func alphabetToBytes(tok string) ([]byte, error) {
	if tok == "" {
		return nil, fmt.Errorf("empty token")
	}
	out := make([]byte, 0, len(tok))
	for _, r := range tok {
		b, ok := alphabetByte(r)
		if !ok {
			return nil, fmt.Errorf("character %U is outside GPT-2's byte alphabet", r)
		}
		out = append(out, b)
	}
	return out, nil
}

// alphabetRune returns the character of the alphabet that byte b is written as.
func alphabetRune(b byte) rune {
	switch {
	case printableByte(b):
		return rune(b)
	case b <= 0x20: // 0x00..0x20: U+0100..U+0120
		return 0x100 + rune(b)
	case b <= 0xA0: // 0x7F..0xA0: U+0121..U+0142
		return 0x100 + 33 + rune(b-0x7F)
	}
	return 0x143 // 0xAD
}

// Spell writes a token's raw bytes in the alphabet, as the vocabulary files and transformers'
// convert_ids_to_tokens spell tokens: "Ġworld" for " world".
func Spell(raw []byte) string {
	out := make([]rune, len(raw))
	for i, b := range raw {
		out[i] = alphabetRune(b)
	}
	return string(out)
}
