// Package oneline makes text from outside (a server's error body, an error's message) safe to
// print as one line of a message or a terminal.
package oneline

import (
	"strings"
	"unicode"
)

// Fold folds runs of white space (line separators too), control characters (C0, DEL and C1,
// whose CSI and OSC a terminal obeys) and bidirectional controls (which reorder what a terminal
// shows) into one space, and bytes that are not UTF-8 into U+FFFD.
func Fold(s string) string {
	return strings.Join(strings.FieldsFunc(strings.ToValidUTF8(s, "\uFFFD"), func(r rune) bool {
		return unicode.IsSpace(r) || unicode.IsControl(r) || unicode.Is(unicode.Bidi_Control, r)
	}), " ")
}

// Clip shortens s to at most n bytes on a rune boundary, marking a cut with "...".
func Clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && s[n]&0xC0 == 0x80 {
		n--
	}
	return s[:n] + "..."
}
