package tokenizer

import "unicode/utf8"

// replacement is U+FFFD encoded as UTF-8.
const replacement = "\uFFFD"

// appendLossy appends the text of b to dst the way Rust's String::from_utf8_lossy (and so Hugging
// Face's decode) does: well-formed characters are copied and each maximal ill-formed subpart (a
// byte that cannot start a character, or the longest prefix of a character that breaks off) becomes
// one U+FFFD (Unicode 15, section 3.9, "U+FFFD Substitution of Maximal Subparts"). Go's own
// conversions differ: []rune and range yield one U+FFFD per bad byte, strings.ToValidUTF8 one per run.
//
// When final is false, a trailing sequence that is still a valid prefix of some character is not
// decoded; its length is returned as rest so a streaming caller can wait for the bytes that
// complete it. The decision at every other position never looks past the bytes it consumes plus
// the one that breaks them off, so decoding in pieces this way equals decoding all at once.
func appendLossy(dst, b []byte, final bool) (out []byte, rest int) {
	for i := 0; i < len(b); {
		if c := b[i]; c < utf8.RuneSelf {
			dst = append(dst, c)
			i++
			continue
		}
		if r, size := utf8.DecodeRune(b[i:]); r != utf8.RuneError || size > 1 {
			dst = append(dst, b[i:i+size]...)
			i += size
			continue
		}
		n, need := maximalSubpart(b[i:])
		if !final && i+n == len(b) && n < need {
			return dst, n
		}
		dst = append(dst, replacement...)
		i += n
	}
	return dst, 0
}

// maximalSubpart reports, for p starting with a byte that does not begin a well-formed character
// within p, how many bytes form the longest prefix of a well-formed character (at least 1) and how
// many bytes that character would need (need == 0 when p[0] can never start one).
func maximalSubpart(p []byte) (n, need int) {
	// The second byte's range depends on the lead (Unicode Table 3-7): it excludes overlong forms,
	// surrogates (ED A0..BF) and code points above U+10FFFF.
	lo, hi := byte(0x80), byte(0xBF)
	switch lead := p[0]; {
	case lead >= 0xC2 && lead <= 0xDF:
		need = 2
	case lead == 0xE0:
		need, lo = 3, 0xA0
	case lead == 0xED:
		need, hi = 3, 0x9F
	case lead >= 0xE1 && lead <= 0xEF:
		need = 3
	case lead == 0xF0:
		need, lo = 4, 0x90
	case lead == 0xF4:
		need, hi = 4, 0x8F
	case lead >= 0xF1 && lead <= 0xF3:
		need = 4
	default: // 0x80..0xC1, 0xF5..0xFF: never a lead byte
		return 1, 0
	}
	n = 1
	if len(p) < 2 || p[1] < lo || p[1] > hi {
		return n, need
	}
	for n = 2; n < need && n < len(p) && p[n] >= 0x80 && p[n] <= 0xBF; n++ {
	}
	return n, need
}
