package tui

import (
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"rosetop/bench"
	"rosetop/themes"
)

func TestNum(t *testing.T) {
	tests := []struct {
		name string
		v    float64
		want string
	}{
		{"small", 0.0712, "  0.07"},
		{"ones", 9.994, "  9.99"},
		{"tens", 58.24, "  58.2"},
		{"hundreds", 843.2, "   843"},
		{"thousands", 12345.4, " 12345"},
		{"huge", 2.5e6, " 2500k"},
		{"negative", -3.5, " -3.50"},
		{"nan", math.NaN(), "     –"},
		{"inf", math.Inf(1), "     –"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := num(tc.v); got != tc.want || widthOf(got) != numW {
				t.Fatalf("num(%v) = %q, want %q (%d cells)", tc.v, got, tc.want, numW)
			}
		})
	}
}

func TestClock(t *testing.T) {
	tests := []struct {
		d    time.Duration
		want string
	}{
		{0, "0:00"}, {-time.Second, "0:00"}, {90 * time.Second, "1:30"}, {3725 * time.Second, "1:02:05"},
	}
	for _, tc := range tests {
		if got := clock(tc.d); got != tc.want {
			t.Errorf("clock(%v) = %q, want %q", tc.d, got, tc.want)
		}
	}
}

func TestAllocate(t *testing.T) {
	tests := []struct {
		name  string
		total int
		slots []slot
		want  []int
	}{
		{"all fit, flex shares the rest", 30, []slot{{min: 5}, {min: 5, max: 8}, {min: 5}}, []int{11, 8, 11}},
		{"lowest priority hidden", 12, []slot{{min: 5, prio: 0}, {min: 5, prio: 2}, {min: 5, prio: 1}}, []int{6, 0, 6}},
		{"bounded only: leftover to the last shown", 20, []slot{{min: 4, max: 6}, {min: 4, max: 6}}, []int{6, 14}},
		{"nothing fits", 3, []slot{{min: 5}}, []int{0}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := allocate(tc.total, tc.slots)
			if !slices.Equal(got, tc.want) {
				t.Fatalf("allocate = %v, want %v", got, tc.want)
			}
			sum := 0
			for _, n := range got {
				sum += n
			}
			if sum != tc.total && sum != 0 {
				t.Fatalf("rows %d, want all %d used", sum, tc.total)
			}
		})
	}
}

// Every pane shows from 120x40 up; at the 80x24 minimum only the ITL sparklines give way. The
// server pane shows only against a remote server; at 80x24 the cold-vs-steady table and the
// events give way to it.
func TestLayoutTiers(t *testing.T) {
	st, err := themes.NewFor(asciiRenderer(), "none")
	if err != nil {
		t.Fatal(err)
	}
	remote := testView()
	remoteView(remote)
	for _, tc := range []struct {
		v      *bench.View
		w, h   int
		hidden []paneID
	}{
		{testView(), 200, 60, []paneID{pServer}}, {testView(), 120, 40, []paneID{pServer}}, {testView(), 80, 24, []paneID{pITL, pServer}},
		{remote, 200, 60, nil}, {remote, 120, 40, nil}, {remote, 80, 24, []paneID{pCold, pEvents}},
	} {
		l := computeLayout(newPaint(st), tc.w, tc.h, 2, tc.v)
		for id := range nPanes {
			if hid := l.heights[id] == 0; hid != slices.Contains(tc.hidden, id) {
				t.Errorf("%dx%d (remote %v): pane %d hidden = %v", tc.w, tc.h, tc.v.Server != nil, id, hid)
			}
		}
	}
}

// Axis labels only at round values, so they do not jitter as the range moves.
func TestAxisLabels(t *testing.T) {
	tl := timeLabel(30, 90, 60) // 1 s per column: 15 s steps
	for _, tc := range []struct {
		v    float64
		want string
	}{{45, "0:45"}, {45.4, "0:45"}, {46, ""}, {60, "1:00"}} {
		if got := tl(tc.v); got != tc.want {
			t.Errorf("timeLabel(%v) = %q, want %q", tc.v, got, tc.want)
		}
	}
	ll := linLabel(100, 8) // 12.5 per row, labels >= 2 rows apart: every 50
	for _, tc := range []struct {
		v    float64
		want string
	}{{0, "0"}, {25, ""}, {50, "50"}, {100, "100"}} {
		if got := ll(tc.v); got != tc.want {
			t.Errorf("linLabel(%v) = %q, want %q", tc.v, got, tc.want)
		}
	}
	lg := logLabel(1, 3, 8) // 10..1000 ms over 8 rows: decades only
	for _, tc := range []struct {
		v    float64
		want string
	}{{1, "10"}, {2, "100"}, {3, "1000"}, {1.5, ""}} {
		if got := lg(tc.v); got != tc.want {
			t.Errorf("logLabel(%v) = %q, want %q", tc.v, got, tc.want)
		}
	}
}

// eachLine yields what strings.Split yields, cut or padded with "" to n lines.
func TestEachLine(t *testing.T) {
	tests := []struct {
		name string
		s    string
		n    int
	}{
		{"empty has no lines", "", 3},
		{"one line padded", "ab", 3},
		{"trailing newline is an empty line", "a\n", 3},
		{"cut", "a\nb\nc\nd", 2},
		{"blank lines kept", "\n\nx", 4},
		{"zero", "a\nb", 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var want []string
			if tc.s != "" {
				want = strings.Split(tc.s, "\n")
			}
			for len(want) < tc.n {
				want = append(want, "")
			}
			want = want[:tc.n]
			var got []string
			eachLine(tc.s, tc.n, func(i int, l string) {
				if i != len(got) {
					t.Fatalf("line index %d, want %d", i, len(got))
				}
				got = append(got, l)
			})
			if strings.Join(got, "|") != strings.Join(want, "|") || len(got) != len(want) {
				t.Fatalf("eachLine(%q, %d) = %q, want %q", tc.s, tc.n, got, want)
			}
		})
	}
}

func TestRowName(t *testing.T) {
	tests := []struct {
		name, in string
		w        int
		want     string
	}{
		{"fits", "Prefill->first", 16, "Prefill->first"},
		{"abbreviated", "Prefill->first", 12, "Prefill→1st"},
		{"queue abbreviated", "Queue wait", 8, "Queue"},
		{"short name kept", "TTFT", 4, "TTFT"},
		{"unknown kept (fit truncates)", "Something long", 8, "Something long"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := rowName(tc.in, tc.w); got != tc.want {
				t.Fatalf("rowName(%q, %d) = %q, want %q", tc.in, tc.w, got, tc.want)
			}
		})
	}
}

// TestFitWide: fit gives exactly w cells when a wide rune (CJK, emoji) straddles the cut: a cell
// it cannot fill is blank, never left out.
func TestFitWide(t *testing.T) {
	for _, s := range []string{"a模型", "ab模", "模型模型", "a🚀b", "x👩‍👩‍👧y", "\x1b[1m模型\x1b[0m模"} {
		for w := 1; w <= 6; w++ {
			if got := widthOf(fit(s, w)); got != w {
				t.Errorf("fit(%q, %d) = %q: %d cells", s, w, fit(s, w), got)
			}
		}
	}
}

// TestOverlayWide: the help box drawn over rows with wide runes where its edges fall keeps
// every row exactly w cells (a wide rune it half covers is blanked).
func TestOverlayWide(t *testing.T) {
	box := "+---+\n|abc|\n+---+"
	for _, row := range []string{"模型模型模型模型模型", "a模型模型模型模型模b", "\x1b[1ma模型\x1b[0m模型模型模型模b"} {
		const w, h = 20, 3
		frame := strings.Repeat(row+"\n", h-1) + row
		for i, l := range strings.Split(overlay(frame, box, w, h), "\n") {
			if got := widthOf(l); got != w || !strings.Contains(l, "|abc|") && i == 1 {
				t.Errorf("row %q, line %d: %q is %d cells, want %d with the box in it", row, i, l, got, w)
			}
		}
	}
}
