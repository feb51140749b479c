package tui

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/x/exp/teatest"

	"rosetop/bench"
	"rosetop/sched"
)

// The dashboard over a real session on the embedded tiny model: keys pressed in bursts during
// the first run (paged attention twice, a restart, the max batch to its ends and back, a pause)
// all act, in order, the frame follows (the last refused at the capacity), q quits while paused,
// and the session closes with its summary table.
func TestKeysOnRealSession(t *testing.T) {
	cfg := bench.Config{
		Workload:   bench.Workload{Prompt: "Hello", PromptRepeats: 1, NumRequests: 8, MaxNewTokens: 16, StreamInterval: 1},
		Arrivals:   bench.Arrivals{Schedule: "relative"},
		Sched:      sched.Config{MaxBatch: 16, PrefillMaxBatch: 16, Policy: sched.Mixed},
		WarmupRuns: 1, RepeatRuns: 1,
	}
	prov := bench.NewInProcess(bench.InProcessOptions{Device: "cpu", Threads: 2})
	s, err := bench.NewSession(context.Background(), cfg, bench.SessionOptions{Provider: prov})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	m, err := New(s, asciiRenderer(), "none")
	if err != nil {
		t.Fatal(err)
	}
	tm := teatest.NewTestModel(t, m, teatest.WithInitialTermSize(120, 40))
	for _, k := range []string{"p", "p", "r", "{{{{{", "{", "}}}}}", "}"} {
		tm.Send(tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune(k)})
	}
	waitOutput(t, tm, "✗ max batch is already the engine's capacity, 16")
	tm.Send(keyMsg(" "))
	waitOutput(t, tm, "PAUSED")
	tm.Send(keyMsg("q"))
	tm.WaitFinished(t, teatest.WithFinalTimeout(10*time.Second))
	if h := s.View().Header; h.MaxBatch != 16 || h.PrefillMaxBatch != 16 || !h.Paused {
		t.Errorf("header after the keys: %+v; want max batch 16/16, paused", h)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	var b bytes.Buffer
	if err := s.Report(&b); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "=== rosetop session: ") || !strings.Contains(b.String(), "engine 1: tiny-gpt2") {
		t.Errorf("summary table:\n%s", b.String())
	}
}
