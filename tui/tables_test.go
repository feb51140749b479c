package tui

import (
	"strings"
	"testing"
	"time"

	"rosetop/bench"
)

// TestEventsTitle: the steady windows and one-time costs are counted in the events title; the
// costs go first when the title would not fit, and a scrolled pane says how far back it is.
func TestEventsTitle(t *testing.T) {
	steady := bench.LiveCounts{Windows: 483, Requests: 30912, Costs: 116, CostTook: 118 * time.Millisecond}
	for _, c := range []struct {
		name     string
		live     bench.LiveCounts
		scrolled int
		w        int
		want     string
	}{
		{"nothing yet", bench.LiveCounts{}, 0, 80, "events"},
		{"windows", bench.LiveCounts{Windows: 1, Requests: 64}, 0, 80, "events · steady: 1 window, 64 requests"},
		{"windows and costs", steady, 0, 80, "events · steady: 483 windows, 30912 requests, 116 one-time costs 118ms"},
		{"narrower", steady, 0, 57, "events · steady: 483 windows, 30912 reqs, 116 costs 118ms"},
		{"too narrow for the costs", steady, 0, 56, "events · steady: 483 windows, 30912 requests"},
		{"a cost before the first window", bench.LiveCounts{Costs: 1, CostTook: 900 * time.Microsecond}, 0, 80, "events · steady: 1 one-time cost 0.90ms"},
		{"scrolled", steady, 12, 80, "events · 12 lines back (↓)"},
	} {
		if got := eventsTitle(c.live, c.scrolled, c.w); got != c.want {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
	}
}

// TestLedgerCutKeepsTimes: a cold-vs-steady pane too short for the ledger's wrapped details
// shows one line an entry with its detail cut, and every entry's time still shows.
func TestLedgerCutKeepsTimes(t *testing.T) {
	v := &bench.View{Ledger: []bench.LedgerEntry{
		{What: "model load", Detail: "random:gpt2: 12 layers, 12 heads, 768 channels", Took: 158 * time.Millisecond},
		{What: "weight upload", Detail: "12 layers, 473 MB, with the layer matrices also packed for small_gemm", Took: 476 * time.Millisecond},
		{What: "KV pool allocation", Detail: "paged, 126186 blocks x 16 positions, 70980 MB", Took: 2 * time.Millisecond},
	}}
	const iw = 50
	body := coldBody(&paint{}, v, iw, 6) // header, waiting, ledger title: 3 rows for 3 entries
	lines := strings.Split(body, "\n")
	if len(lines) != 6 {
		t.Fatalf("%d lines, want 6:\n%s", len(lines), body)
	}
	for i, want := range []string{"158ms", "476ms", "2.00ms"} {
		l := strings.TrimRight(lines[3+i], " ")
		if !strings.HasSuffix(l, want) || !strings.Contains(l, "…") || widthOf(l) > iw {
			t.Errorf("ledger line %d: %q, want its detail cut and %s at its end within %d cells", i, l, want, iw)
		}
	}
}

// TestEventsPastAnHour: events logged after the first hour (h:mm:ss, wider than m:ss) keep
// every word of their text when it wraps, and the wrapped lines start under the text.
func TestEventsPastAnHour(t *testing.T) {
	text := "request 4188 cancelled: the client went away before its first token"
	for _, at := range []time.Duration{59 * time.Minute, 3*time.Hour + 7*time.Second, 101 * time.Hour} {
		es := []bench.LogEvent{{At: 30 * time.Second, Kind: bench.LogRun, Text: "run 1/3 started"}, {At: at, Kind: bench.LogError, Text: text}}
		const iw = 40
		body, _ := eventsBody(&paint{}, es, iw, 10, 0)
		var lines [][]rune // the glyphs are one cell each: a rune is a column
		for _, l := range strings.Split(body, "\n") {
			lines = append(lines, []rune(l))
		}
		if len(lines) < 3 {
			t.Fatalf("at %v: %d lines, want the event wrapped:\n%s", at, len(lines), body)
		}
		start := strings.Index(string(lines[1]), "request")
		start = len([]rune(string(lines[1])[:start])) // the column where the event's text starts
		var words []string
		for i, l := range lines {
			if len(l) != iw || strings.ContainsRune(string(l), '…') {
				t.Errorf("at %v: line %d %q is %d cells or cut, want %d whole", at, i, string(l), len(l), iw)
				continue
			}
			if i >= 2 && (strings.TrimSpace(string(l[:start])) != "" || l[start] == ' ') {
				t.Errorf("at %v: wrapped line %q does not start under the text (column %d)", at, string(l), start)
			}
			if i >= 1 {
				words = append(words, strings.Fields(string(l[start:]))...)
			}
		}
		if got := strings.Join(words, " "); got != text {
			t.Errorf("at %v: the event reads %q, want %q", at, got, text)
		}
		if first := string(lines[0]); !strings.HasPrefix(strings.TrimSpace(first), "0:30") || string(lines[0][start:start+3]) != "run" {
			t.Errorf("at %v: the earlier event %q is not in the same columns as the later one", at, first)
		}
	}
}
