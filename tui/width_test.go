package tui

import (
	"testing"

	"github.com/charmbracelet/lipgloss"
	"github.com/charmbracelet/x/ansi"
)

// Every rune widthOf counts itself is one cell to ansi too, alone and between neighbours.
func TestNarrowRanges(t *testing.T) {
	for _, rg := range narrowRanges() {
		for r := rg[0]; r <= rg[1]; r++ {
			s := string(r)
			if w := ansi.StringWidth(s); w != 1 {
				t.Errorf("%U %q: ansi width %d, want 1", r, s, w)
			}
			if w := ansi.StringWidth("a" + s + s + "b"); w != 4 {
				t.Errorf("%U %q: ansi width of a..b %d, want 4", r, s, w)
			}
		}
	}
}

func TestWidthOf(t *testing.T) {
	tests := []struct {
		name string
		s    string
	}{
		{"empty", ""},
		{"ascii", "queue depth · last 60s"},
		{"sgr", "\x1b[38;2;95;175;255m▬ \x1b[0m\x1b[1mwaiting\x1b[0m"},
		{"braille and boxes", "╭─ p99 ─╮⣿⡇┊┄▁▂█│╰╯"},
		{"marks", "✓ ✗ ◆ ◇ ▸ ↺ – … ×"},
		{"wide falls back", "日本語 ok"},
		{"emoji falls back", "ok ✅"},
		{"combining falls back", "e\u0301 x"},
		{"multi-line falls back", "ab\nabcd"},
		{"tab falls back", "a\tb"},
		{"unterminated escape", "ab\x1b[38;2"},
		{"osc falls back", "\x1b]8;;http://x\x1b\\link\x1b]8;;\x1b\\"},
		{"invalid utf8", "a\xffb"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got, want := widthOf(tc.s), lipgloss.Width(tc.s); got != want {
				t.Fatalf("widthOf(%q) = %d, lipgloss.Width = %d", tc.s, got, want)
			}
		})
	}
}

// narrow is true exactly on narrowRanges (its fast path agrees with the table).
func TestNarrowFastPath(t *testing.T) {
	for r := rune(0); r < 0x3000; r++ {
		want := false
		for _, rg := range narrowRanges() {
			want = want || (r >= rg[0] && r <= rg[1])
		}
		if got := narrow(r); got != want {
			t.Fatalf("narrow(%U) = %v, want %v", r, got, want)
		}
	}
}
