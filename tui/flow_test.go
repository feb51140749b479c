package tui

import (
	"bytes"
	"context"
	"io"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/x/exp/teatest"
	"github.com/charmbracelet/x/term"
	"go.uber.org/goleak"

	"rosetop/bench"
)

func keyMsg(k string) tea.KeyMsg {
	if k == " " {
		return tea.KeyMsg{Type: tea.KeySpace, Runes: []rune{' '}}
	}
	return tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune(k)}
}

// startProgram runs the dashboard over f in teatest at 120x40.
func startProgram(t *testing.T, f *fakeSession) *teatest.TestModel {
	t.Helper()
	m, err := New(f, asciiRenderer(), "dark")
	if err != nil {
		t.Fatal(err)
	}
	return teatest.NewTestModel(t, m, teatest.WithInitialTermSize(120, 40))
}

func waitOutput(t *testing.T, tm *teatest.TestModel, want ...string) {
	t.Helper()
	teatest.WaitFor(t, tm.Output(), func(b []byte) bool {
		for _, w := range want {
			if !bytes.Contains(b, []byte(w)) {
				return false
			}
		}
		return true
	}, teatest.WithDuration(5*time.Second), teatest.WithCheckInterval(10*time.Millisecond))
}

// Each key sends its Action through Session.Do, and the new value shows in the header (and the
// Session's message or refusal in the status line).
func TestKeysDriveSession(t *testing.T) {
	tests := []struct {
		name string
		key  string
		act  bench.Action
		want []string
	}{
		{"paged", "p", bench.ActTogglePaged, []string{"paged off", "cold run", "✓ paged attention off: restarting engine"}},
		{"graph on cpu", "g", bench.ActToggleGraph, []string{"✗ CUDA Graph needs a GPU (device: cpu)"}},
		{"schedule", "s", bench.ActToggleSchedule, []string{"submit relative", "✓ submit schedule relative"}},
		{"prefill down", "[", bench.ActPrefillBatchDown, []string{"prefill batch 15"}},
		{"prefill up", "]", bench.ActPrefillBatchUp, []string{"prefill batch 17"}},
		{"batch down", "{", bench.ActMaxBatchDown, []string{"max batch 63"}},
		{"batch up", "}", bench.ActMaxBatchUp, []string{"max batch 65"}},
		{"interval down", "-", bench.ActIntervalDown, []string{"absolute 15ms"}},
		{"interval up", "+", bench.ActIntervalUp, []string{"absolute 25ms"}},
		{"restart", "r", bench.ActRestart, []string{"cold run", "✓ restarting engine"}},
		{"pause", " ", bench.ActTogglePause, []string{"paused", "✓ arrivals paused"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeSession(testView())
			tm := startProgram(t, f)
			waitOutput(t, tm, "live 3")
			tm.Send(keyMsg(tc.key))
			waitOutput(t, tm, tc.want...)
			tm.Send(keyMsg("q"))
			tm.WaitFinished(t, teatest.WithFinalTimeout(5*time.Second))
			if got := f.Actions(); !slices.Equal(got, []bench.Action{tc.act}) {
				t.Fatalf("actions = %v, want [%v]", got, tc.act)
			}
			final := tm.FinalModel(t).View()
			for _, w := range tc.want {
				if !strings.Contains(final, w) {
					t.Fatalf("final frame lacks %q", w)
				}
			}
		})
	}
}

// `?` shows every key; `t` cycles the theme and says so; neither touches the Session.
func TestHelpAndTheme(t *testing.T) {
	f := newFakeSession(testView())
	tm := startProgram(t, f)
	waitOutput(t, tm, "live 3")
	tm.Send(keyMsg("?"))
	waitOutput(t, tm, "max batch to the power of two", "T Q P O I", "close this help")
	tm.Send(tea.KeyMsg{Type: tea.KeyEsc})
	tm.Send(keyMsg("t"))
	waitOutput(t, tm, "✓ theme light")
	tm.Send(tea.KeyMsg{Type: tea.KeyCtrlC})
	tm.WaitFinished(t, teatest.WithFinalTimeout(5*time.Second))
	if got := f.Actions(); len(got) != 0 {
		t.Fatalf("actions = %v, want none", got)
	}
}

// A tick carrying another model's ID is ignored: no redraw and no new tick.
func TestForeignTicksIgnored(t *testing.T) {
	f := newFakeSession(testView())
	m := sized(t, f, "dark", 120, 40)
	other, _ := New(f, asciiRenderer(), "dark")
	if _, err := f.Do(bench.ActMaxBatchUp); err != nil {
		t.Fatal(err)
	}
	tm, cmd := m.Update(tickMsg{id: other.id})
	if cmd != nil || strings.Contains(tm.View(), "max batch 65") {
		t.Fatal("a foreign tick was answered")
	}
	if _, cmd := m.Update(tickMsg{id: m.id}); cmd == nil {
		t.Fatal("own tick did not re-arm the loop")
	}
}

// The frame follows the Session: a new view on the next tick is drawn, the old one is not reread.
func TestTickReadsLatestView(t *testing.T) {
	f := newFakeSession(testView())
	m := sized(t, f, "dark", 120, 40)
	if _, err := f.Do(bench.ActMaxBatchUp); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(m.View(), "max batch 65") {
		t.Fatal("frame changed before a tick")
	}
	tm, _ := m.Update(tickMsg{id: m.id})
	if !strings.Contains(tm.View(), "max batch 65") {
		t.Fatal("tick did not draw the new view")
	}
}

// Before the first view the dashboard draws its frame and says it is waiting.
func TestNilView(t *testing.T) {
	m := sized(t, &fakeSession{}, "none", 80, 24)
	out := m.View()
	checkFrame(t, out, 80, 24)
	if !strings.Contains(out, "waiting for the session") {
		t.Fatalf("no waiting note:\n%s", out)
	}
}

// Run returns on q, on Ctrl-C and on ctx cancellation, and leaves no goroutine behind.
func TestRunQuitsCleanly(t *testing.T) {
	tests := []struct {
		name   string
		input  string
		cancel bool
	}{
		{"q", "q", false},
		{"ctrl-c", "\x03", false},
		{"context", "", true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			pr, pw := io.Pipe()
			var out bytes.Buffer
			done := make(chan error, 1)
			f := newFakeSession(testView())
			go func() { done <- Run(ctx, f, Options{Theme: "none", Input: pr, Output: &out}) }()
			if tc.cancel {
				cancel()
			} else if _, err := pw.Write([]byte(tc.input)); err != nil {
				t.Fatal(err)
			}
			select {
			case err := <-done:
				if err != nil {
					t.Fatalf("Run = %v, want nil", err)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("Run did not return")
			}
			pw.Close() // unblocks the program's input reader, which cannot be cancelled on a pipe
			if len(f.Actions()) != 0 {
				t.Fatalf("quitting sent actions %v", f.Actions())
			}
		})
	}
}

func TestUnknownThemeRefused(t *testing.T) {
	if _, err := New(&fakeSession{}, asciiRenderer(), "neon"); err == nil || !strings.Contains(err.Error(), "neon") {
		t.Fatalf("err = %v, want one naming the theme", err)
	}
}

// Keys typed faster than the input is read come as one message with several runes: every one
// acts, in order (ten { in one write used to move the max batch once).
func TestKeysInOneWrite(t *testing.T) {
	f := newFakeSession(testView())
	tm := startProgram(t, f)
	waitOutput(t, tm, "live 3")
	tm.Send(tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune("{{{}")})
	waitOutput(t, tm, "max batch 62")
	tm.Send(keyMsg("q"))
	tm.WaitFinished(t, teatest.WithFinalTimeout(5*time.Second))
	want := []bench.Action{bench.ActMaxBatchDown, bench.ActMaxBatchDown, bench.ActMaxBatchDown, bench.ActMaxBatchUp}
	if got := f.Actions(); !slices.Equal(got, want) {
		t.Fatalf("actions = %v, want %v", got, want)
	}
}

// The help overlay opens over the dashboard without moving a pane, and ? or Esc closes it.
func TestHelpOverlay(t *testing.T) {
	m := sized(t, newFakeSession(testView()), "none", 120, 40)
	before := strings.Split(m.View(), "\n")
	for _, closeKey := range []tea.KeyMsg{keyMsg("?"), {Type: tea.KeyEsc}} {
		tm, _ := m.Update(keyMsg("?"))
		open := strings.Split(tm.View(), "\n")
		if !strings.Contains(tm.View(), "glossary") || !strings.Contains(tm.View(), "T Q P O I") {
			t.Fatal("no glossary in the overlay")
		}
		// The rows above and below the box, and the footer, are the dashboard's unchanged.
		for _, i := range []int{0, 1, 2, len(before) - 2, len(before) - 1} {
			if open[i] != before[i] {
				t.Errorf("row %d moved under the overlay:\n%q\n%q", i, before[i], open[i])
			}
		}
		tm, _ = tm.Update(closeKey)
		if got := tm.View(); got != m.View() {
			t.Errorf("%s did not close the overlay", closeKey)
		}
	}
}

// w cycles the time charts' window; the titles say which.
func TestChartWindowKey(t *testing.T) {
	m := sized(t, newFakeSession(testView()), "none", 120, 40)
	for _, want := range []string{"last 2m", "last 10m", "whole session", "last 30s", "last 60s"} {
		tm, _ := m.Update(keyMsg("w"))
		m = tm.(Model)
		if v := m.View(); !strings.Contains(v, "queue depth · "+want) || !strings.Contains(v, "✓ time charts: "+want) {
			t.Fatalf("after w: no %q in the titles and the status", want)
		}
	}
}

// ↑ scrolls the events pane into the past and says so; ↓ comes back.
func TestEventsScroll(t *testing.T) {
	m := sized(t, newFakeSession(testView()), "none", 120, 40)
	if strings.Contains(m.View(), "model gpt2-tiny loaded") {
		t.Fatal("the oldest event shows before scrolling")
	}
	for range 20 {
		tm, _ := m.Update(tea.KeyMsg{Type: tea.KeyUp})
		m = tm.(Model)
	}
	if v := m.View(); !strings.Contains(v, "model gpt2-tiny loaded") || !strings.Contains(v, "lines back (↓)") {
		t.Fatalf("scrolled up, the oldest event or the note is missing:\n%s", v)
	}
	for range 5 { // a page at a time
		tm, _ := m.Update(tea.KeyMsg{Type: tea.KeyPgDown})
		m = tm.(Model)
	}
	if v := m.View(); strings.Contains(v, "lines back") || !strings.Contains(v, "request 4188 cancelled") {
		t.Fatalf("PgDn did not return to the newest events")
	}
}

// When the program fails after it took the terminal (here: an input it cannot wait on), Run
// still leaves the alternate screen and shows the cursor, and says why it failed.
func TestRunRestoresOnFailure(t *testing.T) {
	in, err := os.Open(os.DevNull) // Bubble Tea cannot poll /dev/null: it fails after entering the alternate screen
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	var out bytes.Buffer
	err = Run(context.Background(), newFakeSession(testView()), Options{Theme: "none", Input: in, Output: &out, AltScreen: true})
	if err == nil {
		t.Skip("this platform's Bubble Tea reads /dev/null: no failure to restore from")
	}
	s := out.String()
	enter, leave := strings.LastIndex(s, "\x1b[?1049h"), strings.LastIndex(s, "\x1b[?1049l")
	if enter < 0 || leave < enter || !strings.HasSuffix(s[leave-len("\x1b[?25h")-len("\x1b[?2004l"):], "\x1b[?2004l\x1b[?25h\x1b[?1049l") {
		t.Errorf("after the failure (%v) the terminal was left on the alternate screen or without a cursor: %q", err, s[max(0, len(s)-64):])
	}
}

// Bubble Tea runs each command on its own goroutine, in no set order: a key pressed while the
// previous key's action is still running waits for it, so the Session gets the actions in the
// order they were typed ({ then } used to reach it as } then {, refused at the capacity, then {).
func TestActionsReachSessionInOrder(t *testing.T) {
	f := newFakeSession(testView())
	m := sized(t, f, "none", 120, 40)
	var pending []tea.Cmd // commands not run yet
	for _, k := range []string{"{", "}", "[", "]"} {
		tm, cmd := m.Update(keyMsg(k))
		m = tm.(Model)
		if cmd != nil {
			pending = append(pending, cmd)
		}
	}
	// Run the newest command first, as Bubble Tea's goroutines may, feeding each result back.
	for len(pending) > 0 {
		cmd := pending[len(pending)-1]
		pending = pending[:len(pending)-1]
		tm, next := m.Update(cmd())
		m = tm.(Model)
		if next != nil {
			pending = append(pending, next)
		}
	}
	want := []bench.Action{bench.ActMaxBatchDown, bench.ActMaxBatchUp, bench.ActPrefillBatchDown, bench.ActPrefillBatchUp}
	if got := f.Actions(); !slices.Equal(got, want) {
		t.Fatalf("the Session got %v, want %v (the keys' order)", got, want)
	}
	if !strings.Contains(m.View(), "✓ prefill max batch 16") {
		t.Errorf("the status line does not show the last key's result")
	}
}

// Keys pressed while the Session does not answer wait up to maxQueued; past that they are
// refused and the status line says so, instead of queueing without bound.
func TestQueuedActionsBounded(t *testing.T) {
	m := sized(t, newFakeSession(testView()), "none", 120, 40)
	cmds := 0
	for range maxQueued + 3 {
		tm, cmd := m.Update(keyMsg("{"))
		m = tm.(Model)
		if cmd != nil {
			cmds++
		}
	}
	if cmds != 1 || len(m.queued) != maxQueued {
		t.Fatalf("%d commands, %d queued; want 1 running and %d waiting", cmds, len(m.queued), maxQueued)
	}
	if !strings.Contains(m.View(), "key ignored") {
		t.Error("the status line does not say the key was ignored")
	}
}

// TestGate: once closed, the program's output takes no more writes (a renderer left running by
// a failed program draws nothing after the reset), and a terminal passed through it is still a
// terminal file with its descriptor, so Bubble Tea reads its size.
func TestGate(t *testing.T) {
	var out bytes.Buffer
	g := &gate{w: &out}
	w := g.writer()
	io.WriteString(w, "frame 1")
	g.close("reset")
	io.WriteString(w, "frame 2")
	g.close("reset again")
	if out.String() != "frame 1reset" {
		t.Errorf("output %q, want the frame before the reset and nothing after", out.String())
	}
	r, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer pw.Close()
	f, ok := (&gate{w: pw}).writer().(term.File)
	if !ok || f.Fd() != pw.Fd() {
		t.Errorf("a file through the gate: %T, want a term.File of descriptor %d", f, pw.Fd())
	}
}
