package tui

import (
	"strings"
	"testing"
	"time"

	"github.com/charmbracelet/x/ansi"

	"rosetop/bench"
)

// A run's progress out of range (a damaged or crafted recording: tokens below zero or past the
// most, negative counts and times) draws a whole frame with the bar clamped to empty or full
// and its share to 0-100%, rather than panicking.
func TestRunProgressOutOfRange(t *testing.T) {
	for _, c := range []struct {
		p    bench.RunProgress
		bar  string
		pct  string
		name string
	}{
		{bench.RunProgress{Tokens: -1 << 40, MaxTokens: 64}, "░░░░░░░░░░░░", "  0%", "tokens far below zero"},
		{bench.RunProgress{Tokens: -1, MaxTokens: 64}, "░░░░░░░░░░░░", "  0%", "tokens -1"},
		{bench.RunProgress{Tokens: 1 << 40, MaxTokens: 64}, "████████████", "100%", "tokens past the most"},
		{bench.RunProgress{Tokens: 5, MaxTokens: -64}, "░░░░░░░░░░░░", "  0%", "a negative most"},
		{bench.RunProgress{Finished: -3, Requests: -4, Tokens: 32, MaxTokens: 64, Elapsed: -time.Hour, ETA: -time.Minute}, "██████░░░░░░", " 50%", "negative counts"},
	} {
		t.Run(strings.ReplaceAll(c.name, " ", "_"), func(t *testing.T) {
			line := ansi.Strip(runProgress(&paint{}, &c.p))
			if want := c.bar + " " + c.pct; !strings.HasPrefix(line, want) {
				t.Errorf("runProgress = %q, want it to start %q", line, want)
			}
			v := testView()
			p := c.p
			v.Header.Phase, v.Header.RunLabel, v.Header.Run = bench.PhaseCold, "cold run", &p
			const w, h = 120, 40
			m := sized(t, newFakeSession(v), "dark", w, h)
			out := ansi.Strip(m.View())
			checkFrame(t, out, w, h)
			if !strings.Contains(out, c.bar+" "+c.pct) {
				t.Errorf("the status line lacks %q:\n%s", c.bar+" "+c.pct, lastLines(out, 2))
			}
		})
	}
}

func lastLines(s string, n int) string {
	ls := strings.Split(s, "\n")
	return strings.Join(ls[max(0, len(ls)-n):], "\n")
}
