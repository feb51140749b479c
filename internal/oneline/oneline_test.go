package oneline

import "testing"

func TestFold(t *testing.T) {
	for in, want := range map[string]string{
		"a\n\tb  c":                "a b c",
		"x\x1b[2Jy":                "x [2Jy",
		"left\u202eright":          "left right",
		"bad\xffbyte":              "bad\uFFFDbyte",
		"\u0085next line\u2066end": "next line end",
		"para\u2028graph\u061c!":   "para graph !",
		"  ":                       "",
	} {
		if got := Fold(in); got != want {
			t.Errorf("Fold(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestClip(t *testing.T) {
	for _, c := range []struct {
		in   string
		n    int
		want string
	}{
		{"short", 10, "short"},
		{"abcdef", 3, "abc..."},
		{"aé", 2, "a..."}, // é is two bytes: the cut moves before it
		{"é", 1, "..."},
	} {
		if got := Clip(c.in, c.n); got != c.want {
			t.Errorf("Clip(%q, %d) = %q, want %q", c.in, c.n, got, c.want)
		}
	}
}
