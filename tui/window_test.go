package tui

import (
	"strings"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/x/ansi"

	"rosetop/bench"
	"rosetop/themes"
)

// The time charts' window scrolls with the clock (it fills from the left until the session is
// that old) and is drawn from the finest track that covers it.
func TestChartWindow(t *testing.T) {
	tl := bench.Timeline{Tracks: []bench.Track{
		{Width: 100 * time.Millisecond, Span: 2 * time.Minute, Points: []bench.Point{{At: 1}}},
		{Width: time.Second, Span: 10 * time.Minute, Points: []bench.Point{{At: 2}}},
		{Width: time.Second, Points: []bench.Point{{At: 3}}},
	}}
	tests := []struct {
		span           int // index into chartSpans
		now            time.Duration
		x0, x1         float64
		track          time.Duration // the At of the track's point
		name, spanName string
	}{
		{0, 10 * time.Second, 0, 30, 1, "30s early", "last 30s"},
		{1, 10 * time.Minute, 540, 600, 1, "60s", "last 60s"},
		{2, 10 * time.Minute, 480, 600, 1, "2m", "last 2m"},
		{3, time.Hour, 3000, 3600, 2, "10m", "last 10m"},
		{4, time.Hour, 0, 3600, 3, "all", "whole session"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := newCharts()
			c.span = tc.span
			x0, x1 := c.window(&bench.View{Now: tc.now})
			if x0 != tc.x0 || x1 != tc.x1 {
				t.Errorf("window = [%v, %v], want [%v, %v]", x0, x1, tc.x0, tc.x1)
			}
			if p := c.points(tl); len(p) != 1 || p[0].At != tc.track {
				t.Errorf("drawn from track %v, want %v", p, tc.track)
			}
			if got := spanName(chartSpans[tc.span]); got != tc.spanName {
				t.Errorf("name %q, want %q", got, tc.spanName)
			}
		})
	}
}

// Ten minutes into a session on a fast engine, the queue chart's axis covers its window and the
// data fills it from edge to edge: the axis never claims time the data does not hold.
func TestChartAxisMatchesData(t *testing.T) {
	v := testView()
	v.Now, v.Header.Elapsed = 10*time.Minute, 10*time.Minute
	var pts []bench.Point
	for at := 8 * time.Minute; at < 10*time.Minute; at += 100 * time.Millisecond {
		pts = append(pts, bench.Point{At: at, Value: 32})
	}
	for i := range v.Queue {
		v.Queue[i] = bench.Timeline{Tracks: []bench.Track{{Width: 100 * time.Millisecond, Span: 2 * time.Minute, Points: pts}}}
	}
	v.Markers, v.P99 = nil, nil
	m := sized(t, newFakeSession(v), "none", 120, 40)
	lines := strings.Split(ansi.Strip(m.View()), "\n")
	leftW := m.lay.leftW
	var plot []string
	axis := ""
	for _, l := range lines[4:] { // the queue chart's rows, below its legend line
		left := string([]rune(l)[:leftW])
		if strings.Contains(left, "└") {
			axis = string([]rune(lines[len(plot)+5])[:leftW])
			break
		}
		_, data, _ := strings.Cut(left, "│")
		_, data, _ = strings.Cut(data, "│") // past the y axis
		plot = append(plot, strings.TrimSuffix(data, "│"))
	}
	if !strings.Contains(axis, "9:15") || !strings.Contains(axis, "9:45") || strings.Contains(axis, "8:") {
		t.Errorf("axis %q, want 9:00-10:00", axis)
	}
	first, last := -1, -1
	for _, row := range plot {
		for i, r := range []rune(row) {
			if r >= 0x2800 && r <= 0x28FF {
				if first < 0 || i < first {
					first = i
				}
				last = max(last, i)
			}
		}
	}
	if first != 0 || last < len([]rune(plot[0]))-4 {
		t.Errorf("data spans columns %d..%d of %d: it must fill the window", first, last, len([]rune(plot[0])))
	}
}

// The p99 legend never leaves a series out, however narrow; without colour the lines are told
// apart by the letters at their ends.
func TestLegendNeverLies(t *testing.T) {
	items := []legendItem{{"T", "TTFT", "843"}, {"Q", "queue", "760"}, {"P", "prefill", "80.4"}, {"O", "TPOT", "27.9"}, {"I", "ITL", "48.7"}}
	for _, w := range []int{80, 40, 28, 10} {
		got := legend(items, w)
		for _, it := range items {
			if !strings.Contains(got, it.key) {
				t.Errorf("width %d: %q leaves %s out", w, got, it.key)
			}
		}
	}
	m := sized(t, newFakeSession(testView()), "none", 80, 24)
	out := m.View()
	for _, want := range []string{"T869 Q902 P98.0 O26.8 I34.9", "W waiting", "R running"} {
		if !strings.Contains(out, want) {
			t.Errorf("80x24 without colour lacks %q", want)
		}
	}
}

// Pausing keeps the header whole: the job stays, PAUSED takes the arrivals' slot.
func TestPausedHeader(t *testing.T) {
	v := testView()
	v.Header.Model, v.Header.Device = "tiny-gpt2 (embedded)", "cpu (2 threads, avx2+fma)"
	running := headerView(newPaint(mustStyles(t)), v, 140)
	v.Header.Paused = true
	paused := ansi.Strip(headerView(newPaint(mustStyles(t)), v, 140))
	line1, line2, _ := strings.Cut(paused, "\n")
	if line1 != strings.SplitN(ansi.Strip(running), "\n", 2)[0] || !strings.Contains(line1, "job decode-heavy") {
		t.Errorf("pausing changed the first line:\n%s\n%s", ansi.Strip(running), paused)
	}
	if !strings.Contains(line2, "PAUSED") || !strings.Contains(line1, "tiny-gpt2 (embedded, random weights)") {
		t.Errorf("header %q", paused)
	}
}

// A planned run shows its progress and the time left in the status line.
func TestRunProgressStatus(t *testing.T) {
	v := testView()
	v.Header.Phase, v.Header.RunLabel = bench.PhaseCold, "warmup 1/1"
	v.Header.Run = &bench.RunProgress{Finished: 3, Requests: 64, Tokens: 4096, MaxTokens: 16384, Elapsed: time.Minute, ETA: 3 * time.Minute}
	m := sized(t, newFakeSession(v), "none", 140, 45)
	lines := strings.Split(m.View(), "\n")
	if status := lines[len(lines)-2]; !strings.HasPrefix(status, "warmup 1/1 ███░░░░░░░░░  25% · 3/64 requests · 4096/16384 tokens · about 3:00 left") {
		t.Errorf("status = %q", status)
	}
	tm, _ := m.Update(tea.WindowSizeMsg{Width: 80, Height: 24})
	checkFrame(t, tm.View(), 80, 24)
}

func mustStyles(t *testing.T) themes.Styles {
	t.Helper()
	st, err := themes.NewFor(asciiRenderer(), themes.None)
	if err != nil {
		t.Fatal(err)
	}
	return st
}
