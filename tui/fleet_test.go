package tui

import (
	"fmt"
	"io"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/charmbracelet/lipgloss"
	"github.com/charmbracelet/x/ansi"
	"github.com/muesli/termenv"

	"rosetop/bench"
	"rosetop/themes"
)

// fleetView makes v a watch session's over three vLLM servers, the third not answering: the
// panes show the fleet's sums, the servers table each server as itself.
func fleetView(v *bench.View) {
	watchView(v)
	eps := []string{"http://gpu-a:8000/v1", "http://gpu-b:8000/v1", "http://gpu-c:8001/v1"}
	r := v.Header.Remote
	r.Endpoint, r.Fleet = eps[0], eps
	agg := &v.Server.ServerMetrics
	agg.Source = "3 /metrics pages"
	member := func(i int, waiting, running, kv, gen, ttft, e2e float64) bench.ServerMetrics {
		m := *agg
		m.Source = strings.TrimSuffix(eps[i], "/v1") + "/metrics"
		m.Waiting, m.Running, m.KVUsage = bench.Gauge{V: waiting, Known: true}, bench.Gauge{V: running, Known: true}, bench.Gauge{V: kv, Known: true}
		m.GenRate, m.ReqRate = bench.Gauge{V: gen, Known: true}, bench.Gauge{V: gen / 100, Known: true}
		m.Latency = []bench.ServerLatency{
			{Name: "TTFT", Known: true, Dist: bench.Dist{P50: ttft / 3, P95: ttft * 0.9, P99: ttft, N: 90}, FirstBound: 1},
			{Name: "ITL", Known: true, Dist: bench.Dist{P50: 20, P95: 40, P99: 45, N: 6000}},
			{Name: "E2E latency", Known: true, Dist: bench.Dist{P50: e2e / 2, P95: e2e * 0.9, P99: e2e, N: 90}, FirstBound: 300},
		}
		return m
	}
	down := *agg
	down.Source, down.Note = "http://gpu-c:8001/metrics", "last scrape failed: GET http://gpu-c:8001/metrics: remote: connect: refused"
	down.Waiting, down.Running, down.KVUsage, down.GenRate, down.PromptRate, down.Latency = bench.Gauge{}, bench.Gauge{}, bench.Gauge{}, bench.Gauge{}, bench.Gauge{}, nil
	agg.Members = []bench.ServerMetrics{member(0, 1, 33, 0.41, 1512.3, 812, 6120), member(1, 2, 28, 0.465, 1198, 655, 250), down}
}

// mixedFleetView is fleetView with servers of two kinds, every one answering.
func mixedFleetView(v *bench.View) {
	fleetView(v)
	ms := v.Server.Members
	ms[1].Kind, v.Server.Kind = "sglang", "mixed"
	ms[2] = ms[0]
	ms[2].Source = "http://gpu-c:8001/metrics"
}

// paneLines are the body lines of the right-column pane titled title in a frame w wide.
func paneLines(frame string, w int, title string) []string {
	leftW := w - min(max(w*45/100, 44), 100) // computeLayout's
	var out []string
	in := false
	for _, l := range strings.Split(frame, "\n") {
		r := string([]rune(l)[leftW:])
		switch {
		case strings.Contains(r, title):
			in = true
		case in && strings.HasPrefix(r, "╰"):
			return out
		case in:
			out = append(out, r)
		}
	}
	return out
}

// rowWith is the line holding s, "" when none does.
func rowWith(lines []string, s string) string {
	for _, l := range lines {
		if strings.Contains(l, s) {
			return l
		}
	}
	return ""
}

// TestFleetTable: watching a fleet, the header names it and how many of its servers do not
// answer, the ITL pane lists every server with its own figures (the one not answering by its
// note), narrow panes drop columns rather than wrap, and nothing prints NaN.
func TestFleetTable(t *testing.T) {
	for _, tc := range []struct {
		name  string
		w, h  int
		wants []string
		rows  map[string][]string // a server's row and what it holds
		heads []string            // the table's head: the columns drawn
		mod   func(*bench.View)
	}{
		{"80 columns", 80, 40,
			[]string{"WATCH 3 × vllm · 1 not answering", "servers · 3 watched", "fleet 3 × vllm · last 30s",
				"W waiting 3     R running 61", "watching 3 servers' /metrics"},
			map[string][]string{"gpu-a:8000": {"1", "33", "812"}, "gpu-b:8000": {"2", "28", "655"}},
			[]string{"server", "wait", "run", "TTFT99"}, nil},
		{"200 columns", 200, 60,
			[]string{"WATCH 3 × vllm · 1 not answering", "servers · 3 watched", "fleet 3 × vllm · last 30s", "W waiting 3     R running 61    KV 43.8%",
				"first tokens per scrape of a server (servers' count)"},
			map[string][]string{
				"gpu-a:8000": {"vllm", "1", "33", "41.0", "1512", "15.1", "812", "6120"},
				"gpu-b:8000": {"vllm", "2", "28", "46.5", "1198", "12.0", "655", "≤300"}},
			[]string{"server", "kind", "wait", "run", "KV%", "gen/s", "req/s", "TTFT99", "E2E99"}, nil},
		{"frontends", 200, 60, []string{"WATCH 3 servers (mixed) · 1 not answering"}, // every kind's name whole
			map[string][]string{"gpu-a:8000": {"dynamo", "1", "33"}, "gpu-b:8000": {"sgl-router", "n/a", "28", "n/a"}},
			[]string{"server", "kind", "wait", "run", "KV%", "gen/s", "req/s", "TTFT99", "E2E99"}, func(v *bench.View) {
				a, b := &v.Server.Members[0], &v.Server.Members[1]
				v.Server.Kind, a.Kind, b.Kind = "mixed", "dynamo", "sgl-router"
				a.KVUsage, b.KVUsage, b.Waiting = bench.Gauge{}, bench.Gauge{}, bench.Gauge{} // neither knows the KV cache; the router counts no waiting
			}},
		{"vllm router", 200, 60, []string{"WATCH 3 servers (mixed) · 1 not answering"}, // its kind's name whole
			map[string][]string{"gpu-a:8000": {"vllm-router", "n/a", "33", "n/a"}, "gpu-b:8000": {"vllm", "2", "28"}},
			[]string{"server", "kind", "wait", "run", "KV%", "gen/s", "req/s", "TTFT99", "E2E99"}, func(v *bench.View) {
				a := &v.Server.Members[0]
				v.Server.Kind, a.Kind = "mixed", "vllm-router"
				a.KVUsage, a.Waiting, a.Latency = bench.Gauge{}, bench.Gauge{}, a.Latency[2:] // running and E2E latency alone
			}},
		{"not numbers", 200, 60, nil, // what a damaged recording may hold: n/a, never NaN
			map[string][]string{"gpu-a:8000": {"vllm", "1", "33", "n/a", "n/a", "812", "n/a"}, "gpu-b:8000": {"2", "28", "n/a"}},
			[]string{"server", "kind", "wait", "run", "KV%", "gen/s", "req/s", "TTFT99", "E2E99"}, func(v *bench.View) {
				a, b := &v.Server.Members[0], &v.Server.Members[1]
				a.KVUsage, a.GenRate = bench.Gauge{V: math.NaN(), Known: true}, bench.Gauge{V: math.Inf(1), Known: true}
				a.Latency[2].Dist.P99 = math.NaN()
				b.Latency = b.Latency[:2] // no E2E histogram
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := testView()
			fleetView(v)
			if tc.mod != nil {
				tc.mod(v)
			}
			out := ansi.Strip(sized(t, newFakeSession(v), "dark", tc.w, tc.h).View())
			checkFrame(t, out, tc.w, tc.h)
			for _, w := range tc.wants {
				if !strings.Contains(out, w) {
					t.Errorf("frame lacks %q:\n%s", w, out)
				}
			}
			table := paneLines(out, tc.w, "servers · 3 watched")
			if len(table) != 4 {
				t.Fatalf("servers table of %d lines, want a head and 3 rows: %q", len(table), table)
			}
			if heads := strings.Fields(strings.Trim(table[0], "│")); strings.Join(heads, " ") != strings.Join(tc.heads, " ") {
				t.Errorf("columns %q, want %q", heads, tc.heads)
			}
			for host, cells := range tc.rows {
				row := rowWith(table, host)
				for _, c := range cells {
					if !strings.Contains(row, " "+c+" ") {
						t.Errorf("%s's row lacks %q: %q", host, c, row)
					}
				}
			}
			if row := rowWith(table, "gpu-c:8001"); !strings.Contains(row, " last scrape failed") || strings.Contains(row, "GET ") ||
				(tc.w >= 200 && !strings.Contains(row, " last scrape failed: remote: connect: refused")) || strings.Contains(row, "n/a") || strings.Contains(row, " 0 ") {
				t.Errorf("the server not answering shows figures, not its note: %q", row)
			}
			for _, b := range []string{"NaN", "Inf", "inter-token latency", "not measured"} {
				if strings.Contains(out, b) {
					t.Errorf("frame has %q:\n%s", b, out)
				}
			}
		})
	}
}

// TestFleetHeader: the header names the fleet by its size and its servers' kind, or says they
// are of several kinds; it counts those not answering only when there are some.
func TestFleetHeader(t *testing.T) {
	for _, tc := range []struct {
		name string
		mod  func(*bench.View)
		want string
		bad  string
	}{
		{"one kind", fleetView, "WATCH 3 × vllm · 1 not answering  generation", ""},
		{"mixed", mixedFleetView, "WATCH 3 servers (mixed)  generation", "not answering"},
		{"no scrape yet", func(v *bench.View) { fleetView(v); v.Server = nil }, "WATCH 3 × vllm  generation    n/a", "not answering"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := testView()
			tc.mod(v)
			out := ansi.Strip(sized(t, newFakeSession(v), "dark", 140, 45).View())
			checkFrame(t, out, 140, 45)
			line2 := strings.Split(out, "\n")[1]
			if !strings.HasPrefix(line2, tc.want) {
				t.Errorf("header line %q, want it to start %q", line2, tc.want)
			}
			if tc.bad != "" && strings.Contains(line2, tc.bad) {
				t.Errorf("header line %q has %q", line2, tc.bad)
			}
		})
	}
}

// TestFleetTableHeight: rows past the pane's height are counted on its last line, with those
// of them not answering; every line is the pane's width, and there are never more than its
// height.
func TestFleetTableHeight(t *testing.T) {
	v := testView()
	fleetView(v)
	for _, tc := range []struct {
		ih    int
		last  string
		hosts int
	}{
		{5, "gpu-c:8001", 3},
		{4, "gpu-c:8001", 3},
		{3, "+2 more (1 not answering)", 1},
		{2, "+3 more (1 not answering)", 0},
		{1, "+3 more (1 not answering)", 0},
	} {
		t.Run(fmt.Sprint(tc.ih), func(t *testing.T) {
			const iw = 60
			lines := strings.Split(fleetBody(&paint{}, v, iw, tc.ih), "\n")
			if len(lines) != min(tc.ih, 4) {
				t.Fatalf("%d lines in a pane of %d rows for 3 servers:\n%s", len(lines), tc.ih, strings.Join(lines, "\n"))
			}
			hosts := 0
			for _, l := range lines {
				if widthOf(l) != iw {
					t.Errorf("line %q is %d cells, want %d", l, widthOf(l), iw)
				}
				if strings.Contains(l, "gpu-") {
					hosts++
				}
			}
			if !strings.Contains(lines[len(lines)-1], tc.last) || hosts != tc.hosts {
				t.Errorf("last line %q (want %q), %d servers shown (want %d)", lines[len(lines)-1], tc.last, hosts, tc.hosts)
			}
		})
	}
	// A fleet taller than its pane in a whole frame: the count ends the pane.
	many := testView()
	fleetView(many)
	r, ms := many.Header.Remote, many.Server.Members
	for i := 3; i < 14; i++ {
		r.Fleet = append(r.Fleet, fmt.Sprintf("http://gpu-%d:8000/v1", i))
		ms = append(ms, ms[0])
	}
	ms[13].Note = "last scrape failed: timeout"
	many.Server.Members = ms
	out := ansi.Strip(sized(t, newFakeSession(many), "dark", 120, 40).View())
	checkFrame(t, out, 120, 40)
	table := paneLines(out, 120, "servers · 14 watched")
	shown, hidden := 0, 0
	for _, l := range table {
		if strings.Contains(l, "gpu-") {
			shown++
		}
	}
	last := strings.TrimSpace(strings.Trim(table[len(table)-1], "│"))
	if _, err := fmt.Sscanf(last, "+%d more (1 not answering)", &hidden); err != nil || shown < 1 || shown+hidden != 14 || !strings.Contains(table[1], "gpu-a:8000") {
		t.Errorf("a fleet of 14 in a short pane: %d shown, last line %q (%v):\n%s", shown, last, err, out)
	}
}

// TestFleetOutsideText: an endpoint, a kind and a note carrying escape sequences and control
// characters reach the terminal as text, their sequences dropped, in colour and without.
func TestFleetOutsideText(t *testing.T) {
	for _, profile := range []termenv.Profile{termenv.Ascii, termenv.TrueColor} {
		v := testView()
		fleetView(v)
		v.Header.Remote.Fleet[1] = "http://gpu-b:8000/v1\x1b]52;c;cHduZWQ=\x07\x1b[2J"
		ms := v.Server.Members
		ms[0].Kind = "vllm\x1b[31m\u009b2J"
		ms[2].Note = "last scrape failed: " + badText
		r := lipgloss.NewRenderer(io.Discard)
		r.SetColorProfile(profile)
		m, err := New(newFakeSession(v), r, "dark")
		if err != nil {
			t.Fatal(err)
		}
		for _, size := range [][2]int{{80, 40}, {200, 60}} {
			tm, _ := m.Update(sizeMsg(size[0], size[1]))
			raw := tm.View()
			checkTerminalSafe(t, raw, size[0], size[1])
			out := ansi.Strip(raw)
			for _, b := range []string{"52;c;", "cHduZWQ", "[2J", "[31m"} {
				if strings.Contains(out, b) {
					t.Errorf("%v %v: an escape sequence's text is on screen (%q):\n%s", profile, size, b, out)
				}
			}
			if !strings.Contains(out, "│ gpu-b:8000 ") || !strings.Contains(out, "last scrape failed") {
				t.Errorf("%v %v: the endpoint or the note is gone:\n%s", profile, size, out)
			}
		}
	}
}

// TestEndpointNames: a server is named by its host and port, with what tells it apart from the
// others sharing them (its scheme, its path, or both); an endpoint that is not a URL with a host
// is named whole; a name still another's is numbered.
func TestEndpointNames(t *testing.T) {
	for _, tc := range []struct {
		name string
		eps  []string
		want []string
	}{
		{"hosts", []string{"http://gpu-a:8000/v1", "https://gpu-b/v1"}, []string{"gpu-a:8000", "gpu-b"}},
		{"shared host", []string{"http://h:8000/a/v1", "http://h:8000/b/v1/", "http://k:9000/v1"}, []string{"h:8000/a/v1", "h:8000/b/v1", "k:9000"}},
		{"no host", []string{"gpu-a:8000", "/v1"}, []string{"gpu-a:8000", "/v1"}},
		{"credentials", []string{"http://user:secret@gpu-a:8000/v1"}, []string{"gpu-a:8000"}},
		{"escaped path", []string{"http://h:8000/%1b%5b2J/v1", "http://h:8000/b"}, []string{"h:8000//v1", "h:8000/b"}},
		{"schemes", []string{"http://h:8000/v1", "https://h:8000/v1", "http://k:9000/v1"}, []string{"h:8000", "https://h:8000", "k:9000"}},
		{"schemes and paths", []string{"http://h:8000/a/v1", "https://h:8000/a/v1", "http://h:8000/b/v1", "https://k/v1"},
			[]string{"h:8000/a/v1", "https://h:8000/a/v1", "h:8000/b/v1", "k"}},
		{"the same twice", []string{"http://h:8000/v1", "http://h:8000/v1/", "h:8000 #2"}, []string{"h:8000", "h:8000 #3", "h:8000 #2"}},
		{"a name another's whole", []string{"http://h:8000/a", "http://h:8000/b", "h:8000/a"}, []string{"h:8000/a", "h:8000/b", "h:8000/a #2"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := endpointNames(tc.eps)
			if strings.Join(got, "|") != strings.Join(tc.want, "|") {
				t.Errorf("endpointNames(%q) = %q, want %q", tc.eps, got, tc.want)
			}
		})
	}
}

// TestFleetHelp: the help overlay explains the servers table's columns watching a fleet, and
// only then.
func TestFleetHelp(t *testing.T) {
	for _, tc := range []struct {
		name string
		mod  func(*bench.View)
		want bool
	}{{"fleet", fleetView, true}, {"one server", watchView, false}} {
		t.Run(tc.name, func(t *testing.T) {
			v := testView()
			tc.mod(v)
			tm, _ := sized(t, newFakeSession(v), "dark", 140, 45).Update(keyMsg("?"))
			out := ansi.Strip(tm.View())
			if got := strings.Contains(out, "TTFT99     servers table: its p99 TTFT"); got != tc.want {
				t.Errorf("help explains the servers table: %v, want %v:\n%s", got, tc.want, out)
			}
		})
	}
}

// TestFleetTableOnASmallTerminal: at 80x24 the servers table keeps its place (before the fleet's
// merged histograms, whose p99s the p99 chart shows too): a head and a row a server.
func TestFleetTableOnASmallTerminal(t *testing.T) {
	v := testView()
	fleetView(v)
	out := ansi.Strip(sized(t, newFakeSession(v), "dark", 80, 24).View())
	checkFrame(t, out, 80, 24)
	table := paneLines(out, 80, "servers · 3 watched")
	if len(table) < 3 || rowWith(table, "gpu-a:8000") == "" {
		t.Errorf("servers table at 80x24: %q\n%s", table, out)
	}
}

// TestFleetTableSchemes: two servers on one host and port, one over http and one over https,
// have a row each, the second's name starting with its scheme.
func TestFleetTableSchemes(t *testing.T) {
	v := testView()
	fleetView(v)
	v.Header.Remote.Fleet[1] = "https://gpu-a:8000/v1"
	v.Server.Members[1].Source = "https://gpu-a:8000/metrics"
	out := ansi.Strip(sized(t, newFakeSession(v), "dark", 120, 40).View())
	table := paneLines(out, 120, "servers · 3 watched")
	if a, b := rowWith(table, "│ gpu-a:8000 "), rowWith(table, "│ https://gpu-a:"); a == "" || b == "" || !strings.Contains(a, " 812 ") || !strings.Contains(b, " 655 ") {
		t.Errorf("rows of http://gpu-a:8000 %q and https://gpu-a:8000 %q:\n%s", a, b, out)
	}
}

// restarted adds to v what bench files when server name of v restarted at: an event and a
// chart marker.
func restarted(v *bench.View, name string, at time.Duration) {
	v.Events = append(v.Events, bench.LogEvent{At: at, Kind: bench.LogRestart,
		Text: name + " restarted between the scrapes at 1:16 and 1:18: a new process start time"})
	v.Markers = append(v.Markers, bench.Marker{At: at, Label: "restart " + name})
}

// TestFleetRestartNote: a server of the fleet that restarted lately says so in its row, as much
// of the note as fits beside its name, its figures kept; the other servers' rows, and its own
// once restartShown has passed, say nothing of it. The events pane tells of it with its glyph,
// and the help explains the glyph.
func TestFleetRestartNote(t *testing.T) {
	for _, tc := range []struct {
		name  string
		w, h  int
		since time.Duration // the restart's age
		note  string        // in gpu-b's row; "": none
		cells []string      // its figures, still there
	}{
		{"80x24", 80, 24, 12 * time.Second, "gpu-b:8000 ↻ 12s", []string{"2", "28", "655"}},
		{"80 columns", 80, 40, 75 * time.Second, "gpu-b:8000 ↻ 1m15s", []string{"2", "28", "655"}},
		{"200 columns", 200, 60, 12 * time.Second, "gpu-b:8000 ↻ 12s ago", []string{"vllm", "2", "28", "46.5", "1198", "655"}},
		{"234 columns", 234, 60, 12 * time.Second, "gpu-b:8000 ↻ restarted 12s ago", []string{"vllm", "2", "28", "46.5", "1198", "655"}},
		{"long ago", 234, 60, restartShown, "", []string{"vllm", "2", "28"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := testView()
			fleetView(v)
			restarted(v, "gpu-b:8000", v.Now-tc.since)
			out := ansi.Strip(sized(t, newFakeSession(v), "dark", tc.w, tc.h).View())
			checkFrame(t, out, tc.w, tc.h)
			table := paneLines(out, tc.w, "servers · 3 watched")
			row := rowWith(table, "gpu-b:8000")
			if tc.note != "" && !strings.Contains(row, "│ "+tc.note+" ") {
				t.Errorf("gpu-b's row %q lacks %q", row, tc.note)
			}
			if tc.note == "" && strings.Contains(row, "↻") {
				t.Errorf("gpu-b's row %q tells of a restart %v ago", row, tc.since)
			}
			for _, c := range tc.cells {
				if !strings.Contains(row, " "+c+" ") {
					t.Errorf("gpu-b's row %q lacks %q", row, c)
				}
			}
			for _, other := range []string{"gpu-a:8000", "gpu-c:8001"} {
				if r := rowWith(table, other); r == "" || strings.Contains(r, "↻") {
					t.Errorf("%s's row %q", other, r)
				}
			}
		})
	}
	v := testView()
	fleetView(v)
	restarted(v, "gpu-b:8000", v.Now)
	if body, _ := eventsBody(&paint{}, v.Events[len(v.Events)-1:], 60, 3, 0); !strings.HasPrefix(body, " 1:30 ↻ gpu-b:8000 restarted between the scrapes") {
		t.Errorf("the events pane tells of the restart as %q", body)
	}
	tm, _ := sized(t, newFakeSession(v), "dark", 160, 50).Update(keyMsg("?"))
	if out := ansi.Strip(tm.View()); !strings.Contains(out, "↻          events, servers table, server pane: a server restarted") {
		t.Errorf("the help does not explain ↻:\n%s", out)
	}
}

// TestServerNameRestartNote: the note takes the longest form that fits beside the whole name,
// down to the glyph alone; where none does, the name alone (never cut for the note: the names
// tell the rows apart).
func TestServerNameRestartNote(t *testing.T) {
	for _, tc := range []struct {
		name  string
		nameW int
		want  string
	}{
		{"gpu-b:8000", 40, "gpu-b:8000 ↻ restarted 9s ago"},
		{"gpu-b:8000", 20, "gpu-b:8000 ↻ 9s ago"},
		{"gpu-b:8000", 16, "gpu-b:8000 ↻ 9s"},
		{"gpu-b:8000", 14, "gpu-b:8000 ↻"},
		{"gpu-b:8000", 11, "gpu-b:8000"},
		{"gpu-b:8000", 8, "gpu-b:8…"},
	} {
		got := serverName(&paint{}, tc.name, tc.nameW, 9*time.Second, true)
		if widthOf(got) != tc.nameW || strings.TrimRight(got, " ") != tc.want {
			t.Errorf("serverName(%q, %d) = %q, want %q padded to %d cells", tc.name, tc.nameW, got, tc.want, tc.nameW)
		}
	}
}

// TestServerPaneRestartNote: one server watched or driven, its pane's first line says how long
// ago it restarted, as far as the line has room, within restartShown; a fleet's pane, whose
// figures are the sums, leaves that to the servers table.
func TestServerPaneRestartNote(t *testing.T) {
	for _, tc := range []struct {
		name  string
		mod   func(*bench.View)
		title string
		w, h  int
		since time.Duration
		want  string // the pane's first line holds it; "": no ↻
	}{
		{"watch 80x24", watchView, "server vllm", 80, 24, 12 * time.Second, "waiting 3  running 61  KV 43.8%  ↻ 12s"},
		{"watch 120x40", watchView, "server vllm", 120, 40, 12 * time.Second, "waiting 3  running 61  KV 43.8%  ↻ 12s ago"},
		{"watch 200x60", watchView, "server vllm", 200, 60, 12 * time.Second, "waiting 3  running 61  KV 43.8%  ↻ restarted 12s ago"},
		{"driven", remoteView, "server vllm", 120, 40, 90 * time.Second, "waiting 3  running 61  KV 43.8%  ↻ 1m30s ago"},
		{"long ago", watchView, "server vllm", 120, 40, 3 * time.Minute, ""},
		{"a router's queue note, 80x24", func(v *bench.View) {
			watchView(v)
			v.Server.Note = "queue not known: the server's waiting is absent"
		}, "server vllm", 80, 24, 12 * time.Second, "  ↻ 12s"},
		{"fleet", fleetView, "fleet 3 × vllm", 120, 40, 12 * time.Second, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := testView()
			tc.mod(v)
			name := "10.0.0.7:8000"
			if fleet(v) != nil {
				name = "gpu-a:8000"
			}
			restarted(v, name, v.Now-tc.since)
			out := ansi.Strip(sized(t, newFakeSession(v), "dark", tc.w, tc.h).View())
			checkFrame(t, out, tc.w, tc.h)
			lines := paneLines(out, tc.w, tc.title)
			if len(lines) == 0 {
				t.Fatalf("no pane %q:\n%s", tc.title, out)
			}
			if got := lines[0]; (tc.want == "" && strings.Contains(got, "↻")) || !strings.Contains(got, tc.want) {
				t.Errorf("the pane's first line %q, want %q", got, tc.want)
			}
		})
	}
}

// TestServerNameRestartColour: where no note fits beside the whole name, a recent restart shows
// as the name in the warning colour; an old one, or none, in the text colour.
func TestServerNameRestartColour(t *testing.T) {
	r := lipgloss.NewRenderer(io.Discard)
	r.SetColorProfile(termenv.TrueColor)
	th, err := themes.NewFor(r, themes.Dark)
	if err != nil {
		t.Fatal(err)
	}
	st := newPaint(th)
	name := "127.0.0.1:44369"
	if got, want := serverName(st, name, 16, 9*time.Second, true), st.Warn.Render(fit(name, 16)); got != want {
		t.Errorf("a recent restart without room for a note: %q, want the name in the warning colour %q", got, want)
	}
	if got, want := serverName(st, name, 16, 0, false), st.Text.Render(fit(name, 16)); got != want {
		t.Errorf("no recent restart: %q, want the name in the text colour %q", got, want)
	}
}
