package tui

import (
	"errors"
	"io"
	"rosetop/bench"
	"strings"
	"testing"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/lipgloss"
	"github.com/charmbracelet/x/ansi"
	"github.com/charmbracelet/x/exp/golden"
	"github.com/muesli/termenv"
)

// asciiRenderer renders without colour, so output is deterministic whatever the terminal.
func asciiRenderer() *lipgloss.Renderer {
	r := lipgloss.NewRenderer(io.Discard)
	r.SetColorProfile(termenv.Ascii)
	r.SetHasDarkBackground(true)
	return r
}

// sized returns a model over s that has seen a window size and one tick.
func sized(t testing.TB, s Session, theme string, w, h int) Model {
	t.Helper()
	m, err := New(s, asciiRenderer(), theme)
	if err != nil {
		t.Fatal(err)
	}
	tm, _ := m.Update(tea.WindowSizeMsg{Width: w, Height: h})
	tm, _ = tm.Update(tickMsg{id: m.id})
	return tm.(Model)
}

// Golden views of the whole dashboard (ANSI stripped). Rewrite with: go test ./tui/ -update
func TestGoldenView(t *testing.T) {
	paused := func(v *bench.View) { v.Header.Paused = true }
	tests := []struct {
		name string
		w, h int
		msgs []tea.Msg // sent after the first tick
		mod  func(v *bench.View)
	}{
		{"120x40", 120, 40, nil, nil},
		{"80x24", 80, 24, nil, nil},
		{"200x60", 200, 60, nil, nil},
		{"too_small_79x30", 79, 30, nil, nil},
		{"too_small_100x23", 100, 23, nil, nil},
		{"120x40_full_help", 120, 40, []tea.Msg{keyMsg("?")}, nil},
		{"80x24_help", 80, 24, []tea.Msg{keyMsg("?")}, nil},
		{"140x45_paused_whole_session", 140, 45, []tea.Msg{keyMsg("w"), keyMsg("w"), keyMsg("w")}, paused},
		{"80x24_refusal", 80, 24, []tea.Msg{actionMsg{a: 1, err: errors.New("CUDA Graph needs a GPU (device: cpu)")}}, nil},
		{"120x40_remote", 120, 40, nil, remoteView},
		{"80x24_remote", 80, 24, nil, remoteView},
		{"120x40_watch", 120, 40, nil, watchView},
		{"80x24_watch", 80, 24, nil, watchView},
		{"80x24_watch_key", 80, 24, []tea.Msg{actionMsg{a: bench.ActIntervalUp, err: errors.New("watch mode sends no requests (vllm at http://10.0.0.7:8000/v1): the load and the engine keys do nothing; run without --watch to drive the server")}}, watchView},
		{"120x40_watch_help", 120, 40, []tea.Msg{keyMsg("?")}, watchView},
		{"120x40_watch_dp", 120, 40, nil, dpWatchView},
		{"80x24_watch_dp", 80, 24, nil, dpWatchView},
		{"200x60_remote_no_metrics", 200, 60, nil, func(v *bench.View) {
			remoteView(v)
			v.Server.Note, v.Server.Kind = "no server metrics (GET http://10.0.0.7:8000/metrics: remote: http-status 404: 404 page not found)", "unknown"
			v.Server.Waiting, v.Server.Running, v.Server.KVUsage, v.Server.Rows = bench.Gauge{}, bench.Gauge{}, bench.Gauge{}, nil
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			v := testView()
			if tc.mod != nil {
				tc.mod(v)
			}
			m := sized(t, newFakeSession(v), "dark", tc.w, tc.h)
			for _, msg := range tc.msgs {
				tm, _ := m.Update(msg)
				m = tm.(Model)
			}
			out := ansi.Strip(m.View())
			checkFrame(t, out, tc.w, tc.h)
			golden.RequireEqual(t, []byte(out))
		})
	}
}

// checkFrame asserts the frame is exactly w x h cells: nothing clipped or wrapped by the terminal.
func checkFrame(t *testing.T, out string, w, h int) {
	t.Helper()
	lines := strings.Split(out, "\n")
	if len(lines) != h {
		t.Fatalf("frame has %d lines, want %d", len(lines), h)
	}
	for i, l := range lines {
		if lw := lipgloss.Width(l); lw != w {
			t.Fatalf("line %d is %d cells wide, want %d: %q", i, lw, w, l)
		}
	}
}

func sizeMsg(w, h int) tea.WindowSizeMsg { return tea.WindowSizeMsg{Width: w, Height: h} }

// Every theme draws the same layout; dark and light colour it (differently), none has no colour.
func TestThemesColour(t *testing.T) {
	frames := map[string]string{}
	for _, name := range []string{"dark", "light", "none"} {
		r := lipgloss.NewRenderer(io.Discard)
		r.SetColorProfile(termenv.TrueColor)
		m, err := New(newFakeSession(testView()), r, name)
		if err != nil {
			t.Fatal(err)
		}
		tm, _ := m.Update(sizeMsg(120, 40))
		out := tm.View()
		frames[name] = out
		hasColour := strings.Contains(out, "\x1b[38;2;")
		if hasColour != (name != "none") {
			t.Fatalf("%s: colour escapes present = %v", name, hasColour)
		}
	}
	if frames["dark"] == frames["light"] {
		t.Fatal("dark and light render the same escapes")
	}
	plain := ansi.Strip(frames["none"])
	for name, f := range frames {
		if ansi.Strip(f) != plain {
			t.Fatalf("%s: layout differs from the no-colour one", name)
		}
	}
}

// Golden frames with their escapes: the pens and chart grids must style exactly as lipgloss
// would, run for run (the frames were checked byte for byte against per-cell Style.Render when
// the pens replaced it). Rewrite with: go test ./tui/ -update
func TestGoldenViewColour(t *testing.T) {
	tests := []struct {
		name    string
		theme   string
		profile termenv.Profile
		w, h    int
	}{
		{"dark_truecolor_120x40", "dark", termenv.TrueColor, 120, 40},
		{"light_ansi256_80x24", "light", termenv.ANSI256, 80, 24},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := lipgloss.NewRenderer(io.Discard)
			r.SetColorProfile(tc.profile)
			m, err := New(newFakeSession(testView()), r, tc.theme)
			if err != nil {
				t.Fatal(err)
			}
			tm, _ := m.Update(sizeMsg(tc.w, tc.h))
			out := tm.View()
			checkFrame(t, ansi.Strip(out), tc.w, tc.h)
			golden.RequireEqual(t, []byte(out))
		})
	}
}
