package record

import (
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"time"

	"rosetop/bench"
)

// EngineRuns is what one engine of a recorded session finished: its cold run and its steady
// runs or windows, each once, and its cold-start ledger as last shown.
type EngineRuns struct {
	Index  int          // the engine's number in the session (engine 1 is the first)
	Header bench.Header // the dashboard's header when its first run finished
	Cold   *bench.Summary
	Steady []bench.Summary
	Ledger []bench.LedgerEntry
}

// runLog collects EngineRuns from the views in order. A view's Cold and Steady are its engine's,
// which engineOf names: the views are samples (the dashboard's ~10 Hz), so an engine may show a
// finished cold run in its first view, and its steady windows' labels ("live 1", ...) repeat the
// previous engine's. Without a name, a view whose Cold and Steady are empty again is the next.
type runLog struct {
	engines    []EngineRuns
	seen       map[string]bool // the current engine's steady runs, by label
	lastCold   *bench.Summary  // the last view's, to skip views that share them unchanged
	lastSteady []bench.Summary
}

func (l *runLog) add(v *bench.View) {
	if v.Cold == l.lastCold && sameList(v.Steady, l.lastSteady) {
		if cur := l.cur(); cur != nil {
			cur.Ledger = v.Ledger
		}
		return
	}
	l.lastCold, l.lastSteady = v.Cold, v.Steady
	cur, n := l.cur(), engineOf(v)
	switch {
	case cur == nil:
		l.start(max(n, 1))
	case n != 0 && n != cur.Index:
		l.start(n)
	case n == 0 && v.Cold == nil && len(v.Steady) == 0 && ran(cur):
		l.start(cur.Index + 1)
	}
	cur = l.cur()
	if !ran(cur) {
		cur.Header = v.Header
	}
	if v.Cold != nil && cur.Cold == nil {
		c := *v.Cold
		cur.Cold = &c
	}
	for _, s := range v.Steady {
		if !l.seen[s.Label] {
			l.seen[s.Label] = true
			cur.Steady = append(cur.Steady, s)
		}
	}
	cur.Ledger = v.Ledger
}

// start begins engine n's runs, in place of the current engine's when it finished none (an
// engine stopped before it ran, or one built as the session ended).
func (l *runLog) start(n int) {
	if cur := l.cur(); cur == nil || ran(cur) {
		l.engines = append(l.engines, EngineRuns{})
	}
	*l.cur() = EngineRuns{Index: n}
	l.seen = map[string]bool{}
}

// ran reports whether e finished a run.
func ran(e *EngineRuns) bool { return e.Cold != nil || len(e.Steady) > 0 }

// engineOf is the session's number of the engine whose runs v shows: its newest "cold start
// (engine N)" marker's (bench marks each engine in the view that first clears the last one's
// runs), else the one its cold run's label names ("cold run (engine 3)"); 0 when v names none.
func engineOf(v *bench.View) int {
	for i := len(v.Markers) - 1; i >= 0; i-- {
		if l := v.Markers[i].Label; strings.HasPrefix(l, "cold start (") {
			if n := engineIn(l); n > 0 {
				return n
			}
		}
	}
	if v.Cold != nil {
		return engineIn(v.Cold.Label)
	}
	return 0
}

// engineIn is N of a label that ends "engine N)"; 0 for another.
func engineIn(label string) int {
	rest, ok := strings.CutSuffix(label, ")")
	i := strings.LastIndex(rest, "engine ")
	if !ok || i < 0 {
		return 0
	}
	n, err := strconv.Atoi(rest[i+len("engine "):])
	if err != nil || n < 1 {
		return 0
	}
	return n
}

// sameList reports whether a and b are the same list in memory (the decoder shares a list that
// did not change).
func sameList[T any](a, b []T) bool { return len(a) == len(b) && (len(a) == 0 || &a[0] == &b[0]) }

func (l *runLog) cur() *EngineRuns {
	if len(l.engines) == 0 {
		return nil
	}
	return &l.engines[len(l.engines)-1]
}

// WriteSummary writes what the recording holds, headless: its header, per engine the runs it
// finished with its cold-start ledger, the key presses and what they answered, and where the
// recording stops when it was cut short.
func WriteSummary(w io.Writer, r *Recording) error {
	m := r.Meta
	lines := []string{
		fmt.Sprintf("=== rosetop recording: %s, %s of %s on %s ===", orDash(m.Command), r.Length().Round(100*time.Millisecond), orDash(m.Model), orDash(m.Device)),
		fmt.Sprintf("recorded %s by %s", m.Start.UTC().Format("2006-01-02 15:04:05 UTC"), orDash(m.Tool)),
	}
	if m.GPU != "" {
		lines = append(lines, "GPU: "+m.GPU)
	}
	if len(m.Args) > 0 {
		lines = append(lines, "flags: "+strings.Join(m.Args, " "))
	}
	lines = append(lines, fmt.Sprintf("%d views, %d key presses", r.Frames(), len(r.keys)))
	engines := 0
	for _, e := range r.Engine {
		if !ran(&e) {
			continue
		}
		engines++
		h := e.Header
		lines = append(lines, fmt.Sprintf("engine %d: %s on %s, paged attention %s, CUDA Graph %s", e.Index, h.Model, h.Device, onOff(h.Paged), onOff(h.CUDAGraph)),
			fmt.Sprintf("  %-32s %8s %9s %9s %9s %9s %9s", "", "requests", "TTFT p50", "TTFT p99", "TPOT p50", "ITL p99", "tok/s"))
		lines = append(lines, engineRows(e)...)
		if gs := bench.GroupLedger(e.Ledger); len(gs) > 0 {
			lines = append(lines, "  engine ledger (one-time costs):")
			for _, g := range gs {
				what := g.What
				switch {
				case g.N > 1:
					what += fmt.Sprintf(" ×%d", g.N)
				case g.Detail != "":
					what += " [" + g.Detail + "]"
				}
				lines = append(lines, fmt.Sprintf("    %s: %s", what, g.Took.Round(time.Microsecond)))
			}
		}
	}
	if engines == 0 {
		lines = append(lines, "No run finished in the recording.")
	}
	if len(r.keys) > 0 {
		lines = append(lines, "key presses:")
		for _, k := range r.keys {
			mark := "✓"
			if !k.OK {
				mark = "✗"
			}
			lines = append(lines, fmt.Sprintf("  %7s %s %s", clock(k.At), mark, k.Text))
		}
	}
	if r.Stop != nil {
		lines = append(lines, StopNote(r))
	}
	_, err := io.WriteString(w, strings.Join(lines, "\n")+"\n")
	return err
}

// StopNote says in one line where a recording that was not closed cleanly stops; "" when it was.
func StopNote(r *Recording) string {
	switch {
	case r.Stop == nil:
		return ""
	case r.Frames() == 0 && errors.Is(r.Stop, ErrNoEnd):
		return "the recording has no end mark (the session was killed or crashed) and holds no view"
	case r.Frames() == 0:
		return fmt.Sprintf("the recording stops after its header: %v; it holds no view", r.Stop)
	case errors.Is(r.Stop, ErrNoEnd):
		return fmt.Sprintf("the recording has no end mark (the session was killed or crashed): it replays to %s, its last whole view", clock(r.Length()))
	}
	return fmt.Sprintf("the recording stops at %s, after view %d: %v; what comes before replays", clock(r.Length()), r.Frames(), r.Stop)
}

// engineRows are an engine's runs as the quit summary table shows them (bench.SummaryRows); the
// first run is the cold one, and without --warmup-runs a measured run.
func engineRows(e EngineRuns) []string {
	var runs []bench.Summary
	if e.Cold != nil {
		runs = append(runs, finite(*e.Cold))
	}
	for _, s := range e.Steady {
		runs = append(runs, finite(s))
	}
	return bench.SummaryRows(runs, 32)
}

// finite is s with the figures the table shows marked absent (n/a) where they are NaN or
// infinite: a damaged recording's, which a live session never files.
func finite(s bench.Summary) bench.Summary {
	bad := func(vs ...float64) bool {
		for _, v := range vs {
			if math.IsNaN(v) || math.IsInf(v, 0) {
				return true
			}
		}
		return false
	}
	if bad(s.TTFT.P50, s.TTFT.P99) {
		s.TTFT.N = 0
	}
	if bad(s.TPOT.P50) {
		s.TPOT.N = 0
	}
	if bad(s.ITL.P99) {
		s.ITL.N = 0
	}
	if bad(s.CutTTFT.P50, s.CutTTFT.P99) {
		s.CutTTFT.N = 0
	}
	if bad(s.Throughput) {
		s.Wall = 0
	}
	return s
}

// stopShort is StopNote for the replay's status line: "ends at 2:13: the session was killed".
func stopShort(r *Recording) string {
	var fe *frameError
	switch {
	case r.Stop == nil:
		return ""
	case errors.Is(r.Stop, ErrNoEnd):
		return "ends at " + clock(r.Length()) + ": the session was killed"
	case errors.As(r.Stop, &fe) && errors.Is(fe.Err, ErrTruncated):
		return fmt.Sprintf("ends at %s: cut off at byte %d", clock(r.Length()), fe.Offset)
	case errors.As(r.Stop, &fe):
		return fmt.Sprintf("ends at %s: damaged at byte %d", clock(r.Length()), fe.Offset)
	}
	return "ends at " + clock(r.Length()) + ": " + r.Stop.Error()
}

func onOff(b bool) string {
	if b {
		return "on"
	}
	return "off"
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// clock formats a recording time as m:ss (h:mm:ss from an hour).
func clock(d time.Duration) string {
	s := int(d / time.Second)
	if s >= 3600 {
		return fmt.Sprintf("%d:%02d:%02d", s/3600, s/60%60, s%60)
	}
	return fmt.Sprintf("%d:%02d", s/60, s%60)
}
