package tui

import (
	"errors"
	"io"
	"math"
	"strconv"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/charmbracelet/lipgloss"
	"github.com/charmbracelet/x/ansi"
	"github.com/muesli/termenv"

	"rosetop/bench"
)

// badText holds what a server's model id, an error message or a directory name may carry and
// a terminal would act on: a newline, a carriage return, a tab, a bell, an erase-screen
// sequence, a C1 CSI, a bidirectional override and a byte that is not UTF-8.
const badText = "a\nb\rc\td\a\x1b[2Je\u009b2Jf\u202eg\xffh"

// checkTerminalSafe fails when the raw frame holds anything but text, newlines between its h
// rows and SGR colour sequences.
func checkTerminalSafe(t *testing.T, raw string, w, h int) {
	t.Helper()
	checkFrame(t, ansi.Strip(raw), w, h)
	for i, l := range strings.Split(raw, "\n") {
		for j := 0; j < len(l); {
			if l[j] == 0x1b {
				k := j + 1
				if k < len(l) && l[k] == '[' {
					k++
					for k < len(l) && l[k] >= 0x30 && l[k] <= 0x3f {
						k++
					}
				}
				if k >= len(l) || l[k] != 'm' || l[j+1] != '[' {
					t.Fatalf("row %d: an escape that is not SGR at byte %d: %q", i, j, l)
				}
				j = k + 1
				continue
			}
			r, n := utf8.DecodeRuneInString(l[j:])
			if r == utf8.RuneError && n == 1 || unicode.IsControl(r) || unicode.Is(unicode.Bidi_Control, r) {
				t.Fatalf("row %d: %q at byte %d: %q", i, r, j, l)
			}
			j += n
		}
	}
}

// Text from outside (a model name, events, the ledger, a server's note, a refusal) reaches the
// terminal as text: its control characters neither add rows nor move the cursor nor act.
func TestControlCharactersDrawAsText(t *testing.T) {
	for _, profile := range []termenv.Profile{termenv.Ascii, termenv.TrueColor} {
		v := testView()
		remoteView(v)
		v.Header.Model, v.Header.Job, v.Header.RunLabel = badText, badText, badText
		v.Events[len(v.Events)-1].Text = badText
		v.Ledger[0].Detail, v.Ledger[1].What = badText, badText
		v.Server.Note = badText
		v.Markers[len(v.Markers)-1].Label = badText
		r := lipgloss.NewRenderer(io.Discard)
		r.SetColorProfile(profile)
		m, err := New(newFakeSession(v), r, "dark")
		if err != nil {
			t.Fatal(err)
		}
		const w, h = 140, 45
		tm, _ := m.Update(sizeMsg(w, h))
		checkTerminalSafe(t, tm.View(), w, h)
		tm, _ = tm.Update(actionMsg{a: bench.ActToggleGraph, err: errors.New(badText)})
		checkTerminalSafe(t, tm.View(), w, h)
		tm, _ = tm.Update(keyMsg("?"))
		checkTerminalSafe(t, tm.View(), w, h)
	}
}

// num keeps to its column however large the value (a damaged recording, a broken server page):
// the latency, server and cold-vs-steady tables never shift.
func TestNumFitsItsColumn(t *testing.T) {
	for _, v := range []float64{9999.4e6, 9999.6e6, 1e10, 1.5e11, 1e15, 1e100, math.MaxFloat64} {
		for _, x := range []float64{v, -v} {
			if got := num(x); widthOf(got) != numW {
				t.Errorf("num(%g) = %q: %d cells, want %d", x, got, widthOf(got), numW)
			}
		}
	}
	if got := numRaw(1.5e11); got != "2e11" {
		t.Errorf("numRaw(1.5e11) = %q, want 2e11", got)
	}
}

// The header's SLO attainment and the server pane's gauges never print NaN or Inf, even when a
// damaged recording marks such a value as known.
func TestNonFiniteAttainmentAndGauges(t *testing.T) {
	for _, bad := range []float64{math.NaN(), math.Inf(1), math.Inf(-1)} {
		v := testView()
		remoteView(v)
		v.Header.SLOs = []bench.SLO{{Metric: "ttft", Ms: 500}}
		v.Header.Attainment, v.Header.AttainmentN = bad, 12
		v.Server.Waiting = bench.Gauge{V: bad, Known: true}
		v.Server.KVUsage = bench.Gauge{V: bad, Known: true}
		const w, h = 140, 45
		m := sized(t, newFakeSession(v), "dark", w, h)
		out := ansi.Strip(m.View())
		checkFrame(t, out, w, h)
		if strings.Contains(out, "NaN") || strings.Contains(out, "Inf") {
			t.Errorf("%v: shown as a number:\n%s", bad, out)
		}
		if !strings.Contains(out, "SLO met --") || !strings.Contains(out, "waiting –") || !strings.Contains(out, "KV –") {
			t.Errorf("%v: not shown as unknown:\n%s", bad, out)
		}
	}
}

// Against a remote server the engine keys only explain that they do nothing: the footer offers
// the load keys that work there instead, and the help overlay says so of the engine keys.
func TestRemoteHelpOffersLoadKeys(t *testing.T) {
	for _, w := range []int{80, 120} {
		v := testView()
		remoteView(v)
		m := sized(t, newFakeSession(v), "dark", w, 40)
		lines := strings.Split(ansi.Strip(m.View()), "\n")
		footer := lines[len(lines)-1]
		for _, want := range []string{"-+", "cC", "spc pause", "? help", "q quit"} {
			if !strings.Contains(footer, want) {
				t.Errorf("%d columns: footer %q lacks %q", w, footer, want)
			}
		}
		for _, engine := range []string{"paged", "graph", "prefill", "restart"} {
			if strings.Contains(footer, engine) {
				t.Errorf("%d columns: footer %q offers %q, which does nothing against a server", w, footer, engine)
			}
		}
		tm, _ := m.Update(keyMsg("?"))
		help := ansi.Strip(tm.View())
		if strings.Contains(help, "a new engine and a cold run") || !strings.Contains(help, "engine keys do nothing") {
			t.Errorf("%d columns: help overlay offers the engine keys:\n%s", w, help)
		}
	}
}

// A slow request's ITL row names it whole and apart from its sparkline however long the
// session has run (request ids of seven digits and more).
func TestITLRowNamesLongIDs(t *testing.T) {
	for _, id := range []uint64{4100, 123456, 1234567, 123456789, math.MaxUint64} {
		v := testView()
		v.SlowITL = v.SlowITL[:1]
		v.SlowITL[0].ID = id
		body := ansi.Strip(newITLChart().body(&paint{}, v, 60, 4))
		row := strings.Split(body, "\n")[3]
		label := []rune(row)[:itlLabelW]
		digits := strconv.FormatUint(id, 10)
		if label[itlLabelW-1] != ' ' {
			t.Errorf("id %d: label %q runs into the sparkline: %q", id, string(label), row)
		}
		if got := strings.TrimLeft(strings.TrimSpace(string(label)), "req #…"); !strings.HasSuffix(digits, got) || len(got) < min(len(digits), 7) {
			t.Errorf("id %d: label %q does not show the id's digits: %q", id, string(label), row)
		}
	}
}

// The header's submit interval never prints NaN or Inf (a damaged recording's header).
func TestNonFiniteInterval(t *testing.T) {
	for _, bad := range []float64{math.NaN(), math.Inf(1), math.Inf(-1)} {
		v := testView()
		v.Header.IntervalMs = bad
		m := sized(t, newFakeSession(v), "dark", 120, 40)
		header := strings.Split(ansi.Strip(m.View()), "\n")[1]
		if strings.Contains(header, "NaN") || strings.Contains(header, "Inf") {
			t.Errorf("%v: %q", bad, header)
		}
	}
}
