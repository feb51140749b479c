package tui

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/charmbracelet/lipgloss"
	"github.com/charmbracelet/x/ansi"
	"github.com/charmbracelet/x/exp/golden"
	"github.com/muesli/termenv"

	"rosetop/bench"
	"rosetop/themes"
)

// testPaint is the dark theme's paint on a renderer of the profile.
func testPaint(t *testing.T, profile termenv.Profile) *paint {
	t.Helper()
	r := lipgloss.NewRenderer(io.Discard)
	r.SetColorProfile(profile)
	r.SetHasDarkBackground(true)
	th, err := themes.NewFor(r, themes.Dark)
	if err != nil {
		t.Fatal(err)
	}
	return newPaint(th)
}

func g(v float64) bench.Gauge { return bench.Gauge{V: v, Known: true} }

// ranksOf makes ranks "0".."n-1" of these waiting, running and KV figures.
func ranksOf(waiting, running []float64, kv []float64) *bench.DPRanks {
	r := &bench.DPRanks{}
	for i := range waiting {
		r.Ranks = append(r.Ranks, bench.DPRank{ID: fmt.Sprint(i), Waiting: g(waiting[i]), Running: g(running[i]), KVUsage: g(kv[i])})
	}
	return r
}

// dpWatchView is a watch session's over vLLM run with --data-parallel-size 4, its engine 2
// backing up with its KV cache full: the server's gauges are the engines' sums and mean KV use.
func dpWatchView(v *bench.View) {
	watchView(v)
	m := &v.Server.ServerMetrics
	m.DP = ranksOf([]float64{0, 1, 41, 0}, []float64{16, 15, 16, 14}, []float64{0.31, 0.33, 0.97, 0.3})
	m.Waiting, m.Running, m.KVUsage = g(42), g(61), g(0.4775)
	v.QueueLast.Waiting = 42
}

// Golden ranks tables (ANSI stripped), framed as the pane draws them. Rewrite with:
// go test ./tui/ -run TestGoldenDPRanks -update
func TestGoldenDPRanks(t *testing.T) {
	four := ranksOf([]float64{0, 1, 41, 0}, []float64{8, 9, 8, 7}, []float64{0.31, 0.33, 0.97, 0.3})
	eight := ranksOf([]float64{2, 1, 3, 2, 1, 2, 2, 3}, []float64{16, 15, 16, 14, 16, 16, 15, 16}, []float64{0.4, 0.42, 0.41, 0.39, 0.4, 0.95, 0.4, 0.43})
	many := &bench.DPRanks{More: 44}
	for i := range 256 {
		many.Ranks = append(many.Ranks, bench.DPRank{ID: fmt.Sprint(i), Waiting: g(float64(i % 3)), Running: g(4), KVUsage: g(0.5)})
	}
	many.Ranks[200].Waiting = g(90)
	named := &bench.DPRanks{Ranks: []bench.DPRank{
		{ID: "replica-east-9", Waiting: g(0), Running: g(3), KVUsage: g(0.2)},
		{ID: "replica-east-10", Waiting: g(7), Running: g(3), KVUsage: bench.Gauge{}},
		{ID: "replica-east-11", Waiting: bench.Gauge{}, Running: bench.Gauge{}, KVUsage: g(0.25)},
	}}
	tests := []struct {
		name string
		r    *bench.DPRanks
		w, h int // the pane's outer size; h 0: as tall as the table
	}{
		{"4_ranks_44", four, 44, 0},
		{"4_ranks_80", four, 80, 0},
		{"8_ranks_kv_60", eight, 60, 0},
		{"8_ranks_cut_44x6", eight, 44, 6},
		{"300_ranks_44x8", many, 44, 8},
		{"300_ranks_44x3", many, 44, 3},
		{"named_ranks_44", named, 44, 0},
		{"named_ranks_30", named, 30, 0},
	}
	st := testPaint(t, termenv.Ascii)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := tc.h
			if h == 0 {
				h = paneFrameH(st) + dpRows(tc.r)
			}
			iw, ih := paneInner(st, tc.w, h)
			out := ansi.Strip(renderPane(st, dpTitle(tc.r), dpBody(st, tc.r, iw, ih), tc.w, h))
			checkFrame(t, out, tc.w, h)
			golden.RequireEqual(t, []byte(out))
		})
	}
}

// TestDPHot: a rank stands out where its queue is well past twice the others' mean, or its KV
// use well past theirs; ranks alike, or a lone rank with figures, do not.
func TestDPHot(t *testing.T) {
	tests := []struct {
		name      string
		r         *bench.DPRanks
		queue, kv int
	}{
		{"alike", ranksOf([]float64{5, 4, 5, 4}, []float64{8, 8, 8, 8}, []float64{0.5, 0.55, 0.5, 0.52}), -1, -1},
		{"one backing up, its cache full", ranksOf([]float64{0, 1, 41, 0}, []float64{8, 9, 8, 7}, []float64{0.31, 0.33, 0.97, 0.3}), 2, 2},
		{"one cache full, queues alike", ranksOf([]float64{2, 1, 3, 2}, []float64{8, 8, 8, 8}, []float64{0.4, 0.95, 0.41, 0.39}), -1, 1},
		{"a small queue is no outlier", ranksOf([]float64{3, 0}, []float64{1, 1}, []float64{0.1, 0.1}), -1, -1},
		{"a deep queue beside a deep one", ranksOf([]float64{30, 28, 0, 0}, []float64{1, 1, 1, 1}, []float64{0.1, 0.1, 0.1, 0.1}), -1, -1},
		{"only one rank with figures", &bench.DPRanks{Ranks: []bench.DPRank{{ID: "0", Waiting: g(50), KVUsage: g(1)}, {ID: "1"}}}, -1, -1},
	}
	for _, tc := range tests {
		if q, kv := dpHot(tc.r.Ranks); q != tc.queue || kv != tc.kv {
			t.Errorf("%s: hot queue %d KV %d, want %d %d", tc.name, q, kv, tc.queue, tc.kv)
		}
	}
}

// TestDPRanksWarn: the standing-out rank's id and figure are drawn in the warning colour, the
// others' not.
func TestDPRanksWarn(t *testing.T) {
	st := testPaint(t, termenv.TrueColor)
	body := dpBody(st, ranksOf([]float64{0, 1, 41, 0}, []float64{8, 9, 8, 7}, []float64{0.31, 0.33, 0.35, 0.3}), 40, 5)
	lines := strings.Split(body, "\n")
	warn := st.Warn.Render(fmt.Sprintf("%*s", numW, "41"))
	if !strings.Contains(lines[3], warn) || !strings.Contains(lines[3], st.Warn.Render(fit("2", 4))) {
		t.Errorf("rank 2's queue not in the warning colour: %q", lines[3])
	}
	for _, i := range []int{1, 2, 4} {
		if strings.Contains(lines[i], st.Warn.Render(fit(fmt.Sprint(i-1), 4))) {
			t.Errorf("rank %d drawn as standing out: %q", i-1, lines[i])
		}
	}
}

// TestDPRanksCut: where the rows do not fit, the standing-out rank is among those shown, in rank
// order, and the rest are counted; every line fits the width.
func TestDPRanksCut(t *testing.T) {
	st := testPaint(t, termenv.Ascii)
	r := ranksOf([]float64{0, 0, 0, 0, 0, 0, 0, 60}, []float64{1, 1, 1, 1, 1, 1, 1, 1}, []float64{0.1, 0.9, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1})
	for ih := 1; ih <= 10; ih++ {
		lines := strings.Split(dpBody(st, r, 40, ih), "\n")
		if len(lines) > ih {
			t.Fatalf("ih %d: %d lines", ih, len(lines))
		}
		for _, l := range lines {
			if widthOf(l) != 40 {
				t.Fatalf("ih %d: line %q is %d wide", ih, l, widthOf(l))
			}
		}
		if ih >= 4 && ih < 9 {
			var ids []int
			for _, l := range lines[1 : len(lines)-1] {
				var id int
				fmt.Sscan(l, &id)
				ids = append(ids, id)
			}
			if !slices.Contains(ids, 1) || !slices.Contains(ids, 7) || !slices.IsSorted(ids) {
				t.Errorf("ih %d: ranks %v shown, want 1 and 7 among them in order:\n%s", ih, ids, strings.Join(lines, "\n"))
			}
			if last := lines[len(lines)-1]; !strings.HasPrefix(last, fmt.Sprintf("+%d more ranks, less loaded", 8-(ih-2))) {
				t.Errorf("ih %d: last line %q", ih, last)
			}
		}
		if ih >= 9 && strings.Contains(strings.Join(lines, "\n"), "more") {
			t.Errorf("ih %d: every rank fits, yet some are counted", ih)
		}
	}
}

// TestDPSummary: a servers table's cell for a server run data parallel names its ranks and its
// most loaded rank's queue and KV use; nothing for a server of one rank or none.
func TestDPSummary(t *testing.T) {
	if s := dpSummary(ranksOf([]float64{0, 1, 41, 0}, []float64{8, 9, 8, 7}, []float64{0.31, 0.33, 0.97, 0.3})); s != "dp4 w41 97%" {
		t.Errorf("summary %q", s)
	}
	if s := dpSummary(ranksOf([]float64{0, 0}, []float64{8, 9}, []float64{0.2, 0.6})); s != "dp2 w0 60%" {
		t.Errorf("summary %q", s)
	}
	if s := dpSummary(&bench.DPRanks{Ranks: []bench.DPRank{{ID: "0"}}, More: 9}); s != "dp10" {
		t.Errorf("summary %q", s)
	}
	for _, r := range []*bench.DPRanks{nil, {}, ranksOf([]float64{1}, []float64{1}, []float64{0.5})} {
		if dpShown(r) || dpSummary(r) != "" {
			t.Errorf("%+v shown", r)
		}
	}
}

// TestDPPane: watching one server run data parallel, the ITL pane (which watch mode leaves
// empty) is its ranks table, as tall as its rows where there is room; where there is none the
// server pane's title sums the ranks up instead. A server of one rank, a fleet, and a session
// that sends requests keep their ITL pane.
func TestDPPane(t *testing.T) {
	st := testPaint(t, termenv.Ascii)
	for _, tc := range []struct {
		name   string
		mod    func(*bench.View)
		w, h   int
		table  bool   // the ranks table is drawn, its rows whole
		server string // the server pane's title holds this
	}{
		{"120x40", dpWatchView, 120, 40, true, "server vllm · last 30s"},
		{"80x30", dpWatchView, 80, 30, true, "server vllm · last 30s"},
		{"80x24", dpWatchView, 80, 24, false, "server vllm · dp4 w41 97% · last 30s"},
		{"one rank", func(v *bench.View) {
			dpWatchView(v)
			v.Server.DP = ranksOf([]float64{42}, []float64{61}, []float64{0.4775})
		}, 120, 40, false, "server vllm · last 30s"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := testView()
			tc.mod(v)
			m := sized(t, newFakeSession(v), "dark", tc.w, tc.h)
			out := ansi.Strip(m.View())
			checkFrame(t, out, tc.w, tc.h)
			if !strings.Contains(out, tc.server) {
				t.Errorf("no %q in\n%s", tc.server, out)
			}
			table := paneLines(out, tc.w, "data parallel · 4 ranks")
			if !tc.table {
				if table != nil || m.lay.heights[pITL] > 0 && !strings.Contains(out, "inter-token latency (client-side)") {
					t.Errorf("a ranks table, or no ITL pane, at %dx%d:\n%s", tc.w, tc.h, out)
				}
				return
			}
			fh, h := paneFrameH(st), m.lay.heights[pITL]
			if h < fh+3 || h > fh+dpRows(v.Server.DP) || len(table) != h-fh {
				t.Errorf("ranks pane %d rows (%d in the table), want %d to %d", h, len(table), fh+3, fh+dpRows(v.Server.DP))
			}
			if rowWith(table, " 2        41     16  97.0% ") == "" || len(table) < 5 && rowWith(table, "more ranks, less loaded") == "" {
				t.Errorf("ranks table %q", table)
			}
			if tc.w == 120 && h != fh+dpRows(v.Server.DP) {
				t.Errorf("ranks pane %d rows at 120x40, want all %d", h, fh+dpRows(v.Server.DP))
			}
		})
	}
	v := testView()
	remoteView(v)
	v.Server.DP = ranksOf([]float64{0, 1, 41, 0}, []float64{16, 15, 16, 14}, []float64{0.31, 0.33, 0.97, 0.3})
	if out := ansi.Strip(sized(t, newFakeSession(v), "dark", 120, 40).View()); strings.Contains(out, "data parallel") || !strings.Contains(out, "inter-token latency (ms)") {
		t.Errorf("a session that sends requests lost its ITL pane:\n%s", out)
	}
}

// TestFleetDPSummary: in the servers table a server run data parallel sums up its ranks after
// its name where they fit whole beside it, and after its restart note; else its row is as
// before, its name never cut for them.
func TestFleetDPSummary(t *testing.T) {
	dp := ranksOf([]float64{0, 1, 41, 0}, []float64{16, 15, 16, 14}, []float64{0.31, 0.33, 0.97, 0.3})
	for _, tc := range []struct {
		name string
		w, h int
		row  string // gpu-b's row begins so
	}{
		{"200x60", 200, 60, "│ gpu-b:8000 dp4 w41 97%    vllm "},
		{"80x24", 80, 24, "│ gpu-b:8000 "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := testView()
			fleetView(v)
			v.Server.Members[1].DP = dp
			out := ansi.Strip(sized(t, newFakeSession(v), "dark", tc.w, tc.h).View())
			checkFrame(t, out, tc.w, tc.h)
			table := paneLines(out, tc.w, "servers · 3 watched")
			row := rowWith(table, "gpu-b:8000")
			if !strings.HasPrefix(row, tc.row) || tc.w == 80 && strings.Contains(row, "dp4") {
				t.Errorf("gpu-b's row %q, want it to begin %q", row, tc.row)
			}
			if strings.Contains(out, "data parallel") || strings.Contains(rowWith(table, "gpu-a:8000"), "dp") {
				t.Errorf("a ranks table or another server's summary:\n%s", out)
			}
		})
	}

	p := &paint{}
	for _, tc := range []struct {
		nameW  int
		recent bool
		want   string
	}{
		{30, false, "gpu-b:8000 dp4 w41 97%"},
		{22, false, "gpu-b:8000 dp4 w41 97%"},
		{21, false, "gpu-b:8000"},
		{35, true, "gpu-b:8000 ↻ 9s ago dp4 w41 97%"},
		{20, true, "gpu-b:8000 ↻ 9s ago"},
		{28, true, "gpu-b:8000 ↻ 9s dp4 w41 97%"},
		{8, true, "gpu-b:8…"},
	} {
		got := serverCell(p, "gpu-b:8000", tc.nameW, 9*time.Second, tc.recent, dp)
		if widthOf(got) != tc.nameW || strings.TrimRight(got, " ") != tc.want {
			t.Errorf("serverCell(%d, %v) = %q, want %q padded to %d cells", tc.nameW, tc.recent, got, tc.want, tc.nameW)
		}
	}
	// Coloured: a rank standing out draws the summary in the warning colour; ranks alike, muted;
	// no ranks, serverName's cell.
	st := testPaint(t, termenv.TrueColor)
	if got := serverCell(st, "gpu-b:8000", 30, 0, false, dp); !strings.Contains(got, st.Warn.Render(fit(" dp4 w41 97%", 20))) {
		t.Errorf("a rank standing out: %q", got)
	}
	even := ranksOf([]float64{1, 1}, []float64{4, 4}, []float64{0.5, 0.5})
	if got := serverCell(st, "gpu-b:8000", 30, 0, false, even); !strings.Contains(got, st.Muted.Render(fit(" dp2 w1 50%", 20))) {
		t.Errorf("ranks alike: %q", got)
	}
	if got, want := serverCell(st, "gpu-b:8000", 30, 9*time.Second, true, nil), serverName(st, "gpu-b:8000", 30, 9*time.Second, true); got != want {
		t.Errorf("no ranks: %q, want serverName's %q", got, want)
	}
}
