package record_test

import (
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/lipgloss"
	"github.com/charmbracelet/x/ansi"
	"github.com/charmbracelet/x/exp/golden"
	"github.com/muesli/termenv"

	"rosetop/bench"
	"rosetop/record"
	"rosetop/tui"
)

// stepSession is a live Session whose view the test sets: the dashboard draws whatever it holds.
type stepSession struct {
	mu sync.Mutex
	v  *bench.View
}

func (s *stepSession) set(v *bench.View) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.v = v
}

func (s *stepSession) View() *bench.View {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.v
}

func (s *stepSession) Do(bench.Action) (string, error) { return "", nil }
func (s *stepSession) Report(io.Writer) error          { return nil }
func (s *stepSession) Close() error                    { return nil }

// dashboard is the real dashboard over s at w x h, in truecolor, so that frames compare byte for
// byte with every colour.
type dashboard struct {
	m tea.Model
	w int
	h int
}

func newDashboard(t testing.TB, s tui.Session, w, h int) *dashboard {
	r := lipgloss.NewRenderer(io.Discard)
	r.SetColorProfile(termenv.TrueColor)
	r.SetHasDarkBackground(true)
	m, err := tui.New(s, r, "dark")
	if err != nil {
		panic(err) // the dark theme exists
	}
	return &dashboard{m: m, w: w, h: h}
}

// frame has the dashboard read its session's view and returns what it draws.
func (d *dashboard) frame() string {
	d.m, _ = d.m.Update(tea.WindowSizeMsg{Width: d.w, Height: d.h})
	return d.m.View()
}

func (d *dashboard) key(k string) {
	msg := tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune(k)}
	d.m, _ = d.m.Update(msg)
}

// recordSynth records n synthetic views and returns the recording and the views.
func recordSynth(t *testing.T, n int) (*record.Recording, []*bench.View) {
	t.Helper()
	s := record.NewSynth(11)
	views := make([]*bench.View, n)
	for i := range views {
		views[i] = s.Next()
	}
	path := filepath.Join(t.TempDir(), "synth.rec")
	keys := map[int]record.KeyPress{40: {At: views[40].Now, OK: true, Text: "prefill max batch 9"}, 90: {At: views[90].Now, Text: "prefill max batch is already 1"}}
	meta := record.Meta{Tool: "rosetop test", Command: "dashboard", Start: views[0].Start}
	if err := record.WriteViews(path, meta, views, keys); err != nil {
		t.Fatal(err)
	}
	rec, err := record.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rec.Close() })
	return rec, views
}

// The acceptance round trip: at each size, the dashboard drawing the views decoded from a
// recording draws every frame byte for byte as it drew the live views, colours included, with
// the chart window keys pressed on the way.
func TestReplayedFramesIdentical(t *testing.T) {
	n := 700
	if testing.Short() {
		n = 200
	}
	rec, views := recordSynth(t, n)
	for _, size := range [][2]int{{80, 24}, {120, 40}, {200, 60}} {
		t.Run(fmt.Sprintf("%dx%d", size[0], size[1]), func(t *testing.T) {
			live, replayed := &stepSession{}, &stepSession{}
			dl, dr := newDashboard(t, live, size[0], size[1]), newDashboard(t, replayed, size[0], size[1])
			cur := rec.NewCursor()
			for i, v := range views {
				live.set(v)
				rv, err := cur.View(i)
				if err != nil {
					t.Fatal(err)
				}
				replayed.set(rv)
				if i%150 == 149 {
					dl.key("w")
					dr.key("w")
				}
				want, got := dl.frame(), dr.frame()
				if want != got {
					t.Fatalf("view %d: the replayed frame differs from the live one at line %d:\nlive:     %q\nreplayed: %q", i, diffLine(want, got)+1,
						lineOf(want, diffLine(want, got)), lineOf(got, diffLine(want, got)))
				}
			}
		})
	}
}

// A replay draws the recorded view's panes as the live dashboard drew them; its header says
// REPLAY and when, its status line where playback is, its footer the replay keys (golden files;
// rewrite with go test ./record/ -update).
func TestReplayScreen(t *testing.T) {
	rec, views := recordSynth(t, 200)
	for _, size := range [][2]int{{80, 24}, {120, 40}} {
		t.Run(fmt.Sprintf("%dx%d", size[0], size[1]), func(t *testing.T) {
			clock := time.Unix(0, 0)
			rp, err := record.NewReplay(rec, record.ReplayOptions{Now: func() time.Time { return clock }})
			if err != nil {
				t.Fatal(err)
			}
			clock = clock.Add(12 * time.Second) // 12 s of playback at 1x: the view of 12 s in
			if msg, err := rp.Do(bench.ActTogglePause); err != nil || msg != "paused at 0:12" {
				t.Fatalf("pause: %q, %v", msg, err)
			}
			dr := newDashboard(t, rp, size[0], size[1])
			live := &stepSession{}
			dl := newDashboard(t, live, size[0], size[1])
			v := rp.View()
			live.set(views[v.Now/(100*time.Millisecond)])
			got, want := strings.Split(dr.frame(), "\n"), strings.Split(dl.frame(), "\n")
			// Line 1 is the header's what-runs-where line, the last two the status and the keys.
			if a, b := strings.Join(got[1:len(got)-2], "\n"), strings.Join(want[1:len(want)-2], "\n"); a != b {
				t.Fatalf("the replay's panes differ from the live ones at line %d:\nlive:   %q\nreplay: %q", diffLine(b, a)+2, lineOf(b, diffLine(b, a)), lineOf(a, diffLine(b, a)))
			}
			golden.RequireEqual(t, []byte(ansi.Strip(strings.Join(got, "\n"))))
		})
	}
}

func diffLine(a, b string) int {
	la, lb := strings.Split(a, "\n"), strings.Split(b, "\n")
	for i := range min(len(la), len(lb)) {
		if la[i] != lb[i] {
			return i
		}
	}
	return min(len(la), len(lb))
}

func lineOf(s string, i int) string {
	if ls := strings.Split(s, "\n"); i < len(ls) {
		return ls[i]
	}
	return ""
}
