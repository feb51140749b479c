package tokenizer

import (
	"unicode"
	"unicode/utf8"
)

// The pre-tokenizer, hand-written: it returns the pieces that gpt2Pattern,
//
//	's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
//
// matches, leftmost first, under a backtracking engine (regexp2, which tiktoken-go and Hugging
// Face's onig both are). regexp2 decides \s with unicode.IsSpace and \p{L}, \p{N} with
// unicode.Is over Go's own tables, so the classes below are the same sets by construction;
// TestPieceEndMatchesRegexp2 checks every code point and random texts against regexp2 itself.
// A matcher by hand does without regexp2's backtracking program over a []rune copy of the text.

// runeClass is the class of a character as far as gpt2Pattern can tell them apart.
type runeClass uint8

const (
	classOther  runeClass = iota // [^\s\p{L}\p{N}]
	classLetter                  // \p{L}
	classNumber                  // \p{N}
	classSpace                   // \s
)

// asciiClass is the class of each ASCII byte, so that prose never reaches the Unicode tables.
var asciiClass = func() (c [utf8.RuneSelf]runeClass) {
	for b := range rune(utf8.RuneSelf) {
		c[b] = unicodeClass(b)
	}
	return c
}()

func unicodeClass(r rune) runeClass {
	switch {
	case unicode.IsSpace(r):
		return classSpace
	case unicode.Is(unicode.L, r):
		return classLetter
	case unicode.Is(unicode.N, r):
		return classNumber
	}
	return classOther
}

// classAt returns the class and byte length of the character at s[i] (s is valid UTF-8).
func classAt(s string, i int) (runeClass, int) {
	if b := s[i]; b < utf8.RuneSelf {
		return asciiClass[b], 1
	}
	r, n := utf8.DecodeRuneInString(s[i:])
	return unicodeClass(r), n
}

// runEnd returns where the run of characters of class c that starts at s[i] ends.
func runEnd(s string, i int, c runeClass) int {
	for i < len(s) {
		ci, n := classAt(s, i)
		if ci != c {
			break
		}
		i += n
	}
	return i
}

// pieceEnd returns the end of the piece that starts at s[i] (i < len(s), s valid UTF-8): the
// match of gpt2Pattern at i, which always exists and is never empty.
func pieceEnd(s string, i int) int {
	if s[i] == '\'' && i+1 < len(s) { // 's 't 'm 'd 're 've 'll, tried first
		switch s[i+1] {
		case 's', 't', 'm', 'd':
			return i + 2
		case 'r', 'v':
			if i+2 < len(s) && s[i+2] == 'e' {
				return i + 3
			}
		case 'l':
			if i+2 < len(s) && s[i+2] == 'l' {
				return i + 3
			}
		}
	}
	c, n := classAt(s, i)
	j := i // where the run of c starts, after an optional leading space
	if s[i] == ' ' && i+1 < len(s) {
		if c2, _ := classAt(s, i+1); c2 != classSpace {
			c, j = c2, i+1
		}
	}
	if c != classSpace {
		return runEnd(s, j, c)
	}
	// \s+(?!\S): the whole run of whitespace when the text ends with it, else the run less its last
	// character (which stays to lead the next piece); \s+ when that leaves nothing.
	end, last := i+n, i
	for end < len(s) {
		ce, ne := classAt(s, end)
		if ce != classSpace {
			break
		}
		last = end
		end += ne
	}
	if end == len(s) || last == i {
		return end
	}
	return last
}
