package tui

import (
	"errors"
	"fmt"
	"io"
	"math"
	"sync"
	"time"

	"rosetop/bench"
)

// fakeSession is a deterministic Session: a fixed View whose header Do changes the way the real
// session would, a record of every Action, and the real session's refusals.
type fakeSession struct {
	mu      sync.Mutex  // guards everything below; Do runs on Bubble Tea's command goroutines
	v       *bench.View // replaced (never mutated) on each Do: views are immutable
	actions []bench.Action
	closed  bool
}

func newFakeSession(v *bench.View) *fakeSession { return &fakeSession{v: v} }

func (f *fakeSession) View() *bench.View {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.v
}

func (f *fakeSession) Actions() []bench.Action {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]bench.Action(nil), f.actions...)
}

// Do mimics the real session: engine toggles restart into a cold run, CUDA Graph is refused on
// a CPU, live knobs change the header at once.
func (f *fakeSession) Do(a bench.Action) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.actions = append(f.actions, a)
	nv := *f.v
	h := &nv.Header
	var msg string
	coldRun := func() {
		h.Phase, h.RunLabel = bench.PhaseCold, "cold run"
		nv.Cold, nv.Steady, nv.Compare = nil, nil, nil
		msg = "restarting engine"
	}
	switch a {
	case bench.ActTogglePaged:
		h.Paged = !h.Paged
		coldRun()
		msg = fmt.Sprintf("paged attention %s: restarting engine", map[bool]string{true: "on", false: "off"}[h.Paged])
	case bench.ActToggleGraph:
		if h.Device == "cpu" {
			return "", errors.New("CUDA Graph needs a GPU (device: cpu)")
		}
		h.CUDAGraph = !h.CUDAGraph
		coldRun()
	case bench.ActToggleSchedule:
		h.Schedule = map[string]string{"relative": "absolute", "absolute": "relative"}[h.Schedule]
		msg = "submit schedule " + h.Schedule
	case bench.ActPrefillBatchDown:
		h.PrefillMaxBatch = max(1, h.PrefillMaxBatch-1)
		msg = fmt.Sprintf("prefill max batch %d", h.PrefillMaxBatch)
	case bench.ActPrefillBatchUp:
		h.PrefillMaxBatch = min(h.MaxBatch, h.PrefillMaxBatch+1)
		msg = fmt.Sprintf("prefill max batch %d", h.PrefillMaxBatch)
	case bench.ActMaxBatchDown:
		h.MaxBatch = max(1, h.MaxBatch-1)
		h.PrefillMaxBatch = min(h.PrefillMaxBatch, h.MaxBatch)
		msg = fmt.Sprintf("max batch %d", h.MaxBatch)
	case bench.ActMaxBatchUp:
		h.MaxBatch++
		msg = fmt.Sprintf("max batch %d", h.MaxBatch)
	case bench.ActIntervalDown:
		h.IntervalMs = max(0, h.IntervalMs-5)
		msg = fmt.Sprintf("submit interval %gms", h.IntervalMs)
	case bench.ActIntervalUp:
		h.IntervalMs += 5
		msg = fmt.Sprintf("submit interval %gms", h.IntervalMs)
	case bench.ActRestart:
		coldRun()
	case bench.ActTogglePause:
		h.Paused = !h.Paused
		msg = map[bool]string{true: "arrivals paused", false: "arrivals resumed"}[h.Paused]
	default:
		return "", fmt.Errorf("action %d: unknown", a)
	}
	nv.Events = append(append([]bench.LogEvent(nil), nv.Events...), bench.LogEvent{At: nv.Now, Kind: bench.LogConfig, Text: msg})
	f.v = &nv
	return msg, nil
}

func (f *fakeSession) Report(w io.Writer) error {
	_, err := io.WriteString(w, "=== streaming benchmark ===\n")
	return err
}

func (f *fakeSession) Close() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.closed = true
	return nil
}

// timeline is pts as bench publishes a series: a fine track over the last 2 minutes, a coarser
// one over 10, and one over the whole session (the same points here: 90 s of data).
func timeline(name string, pts []bench.Point) bench.Timeline {
	cp := func() []bench.Point { return append([]bench.Point(nil), pts...) }
	return bench.Timeline{Name: name, Tracks: []bench.Track{
		{Width: 200 * time.Millisecond, Span: 2 * time.Minute, Points: cp()},
		{Width: time.Second, Span: 10 * time.Minute, Points: cp()},
		{Width: time.Second, Points: cp()},
	}}
}

// testView is a steady-state view 90 s into a session on a CPU: deterministic, every pane full.
func testView() *bench.View {
	sec := func(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }
	v := &bench.View{
		Start: time.Date(2026, 11, 21, 6, 0, 0, 0, time.UTC),
		Now:   sec(90),
		Header: bench.Header{
			Model: "gpt2-tiny", RandomWeights: true, Device: "cpu", DeviceNote: "auto: no CUDA driver",
			Job: "decode-heavy", Paged: true, CUDAGraph: false, Schedule: "absolute", IntervalMs: 20,
			MaxBatch: 64, PrefillMaxBatch: 16, Phase: bench.PhaseLive, RunLabel: "live 3",
			Elapsed: sec(90), TokensPerSec: 1843.5,
		},
		KVUsed: 312, KVTotal: 1024, LatencyWindow: 30 * time.Second,
		Live: bench.LiveCounts{Windows: 12, Requests: 768},
	}
	var waiting, running []bench.Point
	for i := 0; i <= 300; i++ { // a bucket every 0.2 s over the last 60 s
		t := 30 + float64(i)*0.2
		waiting = append(waiting, bench.Point{At: sec(t), Value: float64(int(20 + 18*math.Sin(t/4)))})
		running = append(running, bench.Point{At: sec(t), Value: float64(int(40 + 20*math.Cos(t/9)))})
	}
	v.Queue = []bench.Timeline{timeline("waiting", waiting), timeline("running", running)}
	v.QueueLast = bench.QueuePoint{At: sec(90), Waiting: int(waiting[300].Value), Running: int(running[300].Value)}
	for i := 0; i < 90; i++ {
		size := 4 + (i*7)%13
		limit := 16
		if i >= 60 {
			limit = 12
		}
		v.Admissions = append(v.Admissions, bench.Admission{Step: uint64(1000 + i*3), At: sec(60 + float64(i)/3),
			Size: min(size, limit), Limit: limit})
	}
	d := func(p50, p95, p99 float64, n int) bench.Dist {
		return bench.Dist{P50: p50, P95: p95, P99: p99, Mean: p50 * 1.1, Max: p99 * 1.3, N: n}
	}
	v.Latency = []bench.LatencyRow{
		{Name: "TTFT", Dist: d(182.4, 611.0, 843.2, 200)},
		{Name: "Queue wait", Dist: d(120.3, 540.7, 760.1, 200)},
		{Name: "Prefill->first", Dist: d(58.2, 71.9, 80.4, 200)},
		{Name: "TPOT", Dist: d(21.4, 25.1, 27.9, 200)},
		{Name: "ITL", Dist: d(20.8, 31.2, 48.7, 12800)},
	}
	for k, name := range []string{"TTFT p99", "Queue wait p99", "Prefill->first p99", "TPOT p99", "ITL p99"} {
		var pts []bench.Point
		for i := 0; i <= 60; i++ {
			t := 30 + float64(i)
			base := []float64{800, 700, 80, 28, 48}[k]
			pts = append(pts, bench.Point{At: sec(t), Value: base * (1 + 0.3*math.Sin(t/7+float64(k)))})
		}
		v.P99 = append(v.P99, timeline(name, pts))
	}
	for i := 0; i < 400; i++ {
		v.ITL = append(v.ITL, 18+6*math.Sin(float64(i)/5)+float64((i*37)%11))
	}
	for r := 0; r < 3; r++ {
		req := bench.RequestITL{ID: uint64(4100 + r*17)}
		for i := 0; i < 120; i++ {
			req.ITL = append(req.ITL, 30+float64(r*8)+12*math.Sin(float64(i+r*9)/6)+float64((i*13)%7))
		}
		v.SlowITL = append(v.SlowITL, req)
	}
	cold := bench.Summary{Index: 1, Warmup: true, Label: "warmup 1/1"}
	v.Cold = &cold
	v.Steady = []bench.Summary{{Index: 1, Label: "run 1/3"}, {Index: 2, Label: "run 2/3"}, {Index: 3, Label: "live 3"}}
	v.Compare = []bench.Comparison{
		{Metric: "TTFT p99 (ms)", Cold: 2412.7, Steady: 843.2, Ratio: 2412.7 / 843.2},
		{Metric: "Queue wait p99 (ms)", Cold: 1930.2, Steady: 760.1, Ratio: 1930.2 / 760.1},
		{Metric: "TPOT p50 (ms)", Cold: 24.9, Steady: 21.4, Ratio: 24.9 / 21.4},
		{Metric: "Throughput (tok/s)", Cold: 1210, Steady: 1843.5, Ratio: 1210 / 1843.5, HigherIsBetter: true},
	}
	at := v.Start
	v.Ledger = []bench.LedgerEntry{
		{What: "model load", Detail: "gpt2-tiny (embedded): 4 layers, 4 heads, 32 channels, mmap", Took: 41 * time.Millisecond, At: at},
		{What: "KV cache alloc", Detail: "paged, 1024 blocks", Took: 3 * time.Millisecond, At: at},
		{What: "first forward", Detail: "batch 16", Took: 212 * time.Millisecond, At: at},
		{What: "first forward", Detail: "batch 64", Took: 388 * time.Millisecond, At: at},
	}
	ev := func(s float64, k bench.LogKind, text string) bench.LogEvent {
		return bench.LogEvent{At: sec(s), Kind: k, Text: text}
	}
	v.Events = []bench.LogEvent{
		ev(0, bench.LogInfo, "model gpt2-tiny loaded on cpu (auto: no CUDA driver)"),
		ev(0.4, bench.LogRun, "cold run started: 64 requests"),
		ev(0.9, bench.LogCapture, "first forward batch 16: 212 ms"),
		ev(21.2, bench.LogRun, "cold run done: TTFT p99 2413 ms"),
		ev(21.2, bench.LogRun, "run 1/3 started"),
		ev(44.0, bench.LogPreempt, "preempted request 1733 (KV full)"),
		ev(48.8, bench.LogRun, "run 1/3 done: TTFT p99 861 ms"),
		ev(70.0, bench.LogConfig, "prefill max batch 16 -> 12"),
		ev(75.3, bench.LogRun, "run 2/3 done: TTFT p99 843 ms"),
		ev(88.1, bench.LogError, "request 4188 cancelled: client gone"),
	}
	v.Markers = []bench.Marker{
		{At: sec(45), Label: "run 1/3"}, {At: sec(70), Label: "prefill max batch 12"}, {At: sec(76), Label: "run 2/3"},
	}
	return v
}

// remoteView makes v a session's against a remote vLLM server: the header names it, the
// server-side parts are n/a, and the server panel has its gauges and histograms beside the
// client's figures.
func remoteView(v *bench.View) {
	ep := "http://10.0.0.7:8000/v1"
	v.Header.Model, v.Header.RandomWeights, v.Header.Device, v.Header.DeviceNote = "meta-llama/Llama-3.1-8B-Instruct", false, "vllm at "+ep, ""
	v.Header.Remote, v.Header.Concurrency = &bench.RemoteInfo{Endpoint: ep, API: "completions", Kind: "vllm", ServerFirsts: true}, 64
	v.KVUsed, v.KVTotal = 0, 0
	for i := range v.Admissions {
		v.Admissions[i].Limit = 0 // no prefill limit of rosetop's
	}
	nan := math.NaN()
	none := bench.Dist{P50: nan, P95: nan, P99: nan, Mean: nan, Max: nan}
	v.Latency[1].Dist, v.Latency[2].Dist = none, none
	srv := func(p50, p99 float64, n int) bench.Dist {
		return bench.Dist{P50: p50, P95: p99 * 0.9, P99: p99, Mean: p50, Max: nan, N: n}
	}
	v.Server = &bench.ServerPanel{
		ServerMetrics: bench.ServerMetrics{Kind: "vllm", Source: "http://10.0.0.7:8000/metrics", At: v.Now, Window: 30 * time.Second,
			Waiting: bench.Gauge{V: 3, Known: true}, Running: bench.Gauge{V: 61, Known: true}, KVUsage: bench.Gauge{V: 0.4375, Known: true}},
		Rows: []bench.ServerRow{
			{Name: "TTFT", Server: bench.ServerLatency{Name: "TTFT", Known: true, Dist: srv(170, 800, 200)}, Client: v.Latency[0].Dist, DiffP50: 12.4, DiffP99: 43.2},
			{Name: "ITL", Server: bench.ServerLatency{Name: "ITL", Known: true, Dist: srv(20.1, 45.3, 12800)}, Client: v.Latency[4].Dist, DiffP50: 0.7, DiffP99: 3.4},
			{Name: "E2E latency", Server: bench.ServerLatency{Name: "E2E latency", Known: true, Dist: srv(5400, 6100, 200)}, Client: srv(5431, 6188, 200), DiffP50: 31, DiffP99: 88},
			{Name: "Queue", Server: bench.ServerLatency{Name: "Queue", Known: true, Dist: srv(110, 720, 200), FirstBound: 300}, Client: none, DiffP50: nan, DiffP99: nan},
			{Name: "Prefill", Server: bench.ServerLatency{Name: "Prefill"}, Client: none, DiffP50: nan, DiffP99: nan},
		},
	}
}
