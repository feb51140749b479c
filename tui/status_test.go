package tui

import (
	"errors"
	"strings"
	"testing"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/x/ansi"

	"rosetop/bench"
)

// The status line between key results says where the session is, the engine change under way
// or pending, and what was changed last; a key's result flashes first, then stays as "last
// change".
func TestIdleStatus(t *testing.T) {
	cold := testView()
	cold.Header.Phase, cold.Header.RunLabel = bench.PhaseCold, "warmup 1/1"
	paused := testView()
	paused.Header.Paused = true
	stopped := testView()
	stopped.Header.Phase, stopped.Header.Stopped = bench.PhaseDone, "warmup 1/1: all 4 requests failed (http 404: 4)"
	done := testView()
	done.Header.Phase = bench.PhaseDone
	pending := testView()
	pending.Header.Pending = &bench.EnginePlan{Engine: 2}
	restart := testView()
	restart.Header.Phase, restart.Header.RunLabel = bench.PhaseCold, "warmup 1/1"
	restart.Header.Pending = &bench.EnginePlan{Engine: 2, Paged: true, Restart: true}
	building := testView()
	building.Header.Phase, building.Header.RunLabel = bench.PhaseStarting, "building engine 2"
	building.Header.Building = &bench.EnginePlan{Engine: 2, Paged: true}
	superseded := testView()
	superseded.Header.Phase, superseded.Header.RunLabel = bench.PhaseStarting, "building engine 2"
	superseded.Header.Building, superseded.Header.Pending = &bench.EnginePlan{Engine: 2, Paged: true}, &bench.EnginePlan{Engine: 3}
	tests := []struct {
		name  string
		v     *bench.View
		msgs  []tea.Msg
		ticks int // ticks after msgs
		want  string
	}{
		{"steady, no change yet", testView(), nil, 0, "steady state · p g r: new engine, cold run · other keys apply live"},
		{"cold run", cold, nil, 0, "cold run on a fresh engine · p g r"},
		{"paused", paused, nil, 0, "steady state · arrivals paused (space resumes)"},
		{"done", done, nil, 0, "done: q quits and prints the summaries"},
		{"rebuild pending", pending, nil, 0, "rebuild pending: engine 2, paged attention off, CUDA Graph off · steady state · p g r"},
		{"restart pending", restart, nil, 0, "restart pending: engine 2, paged attention on, CUDA Graph off · cold run on a fresh engine"},
		{"building", building, nil, 0, "building engine 2: paged attention on, CUDA Graph off · p g r"},
		{"building, then another", superseded, nil, 0,
			"building engine 2: paged attention on, CUDA Graph off; then engine 3: paged attention off, CUDA Graph off · p g r"},
		{"flash of an engine key", pending, []tea.Msg{actionMsg{a: bench.ActTogglePaged, msg: "paged attention off: restarting engine"}}, 0,
			"✓ paged attention off: restarting engine · rebuild pending: engine 2, paged attention off, CUDA Graph off"},
		{"stopped by an error", stopped, nil, 0, "✗ stopped: warmup 1/1: all 4 requests failed (http 404: 4) · q quits"},
		{"flash", testView(), []tea.Msg{actionMsg{a: bench.ActPrefillBatchDown, msg: "prefill max batch 15"}}, 0, "✓ prefill max batch 15"},
		{"after the flash", testView(), []tea.Msg{actionMsg{a: bench.ActPrefillBatchDown, msg: "prefill max batch 15"}}, flashTicks,
			"steady state · last change at 1:30: prefill max batch 15"},
		{"refusal after its flash", testView(), []tea.Msg{actionMsg{a: bench.ActToggleGraph, err: errors.New("CUDA Graph needs a GPU")}}, 2 * flashTicks,
			"steady state · last key at 1:30: ✗ CUDA Graph needs a GPU"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := sized(t, newFakeSession(tc.v), "dark", 120, 40)
			for _, msg := range tc.msgs {
				tm, _ := m.Update(msg)
				m = tm.(Model)
			}
			for range tc.ticks {
				tm, _ := m.Update(tickMsg{id: m.id})
				m = tm.(Model)
			}
			lines := strings.Split(ansi.Strip(m.View()), "\n")
			if status := lines[len(lines)-2]; !strings.HasPrefix(status, tc.want) {
				t.Fatalf("status line = %q, want it to start with %q", status, tc.want)
			}
		})
	}
}
