package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"rosetop/sched"
)

// gatedProvider holds every engine build after the first until the test lets it go: building
// receives a token when a build is held, release lets one build go on.
type gatedProvider struct {
	Provider
	building chan struct{}
	release  chan struct{}
	mu       sync.Mutex
	builds   int // guarded by mu
}

func newGatedProvider(p Provider) *gatedProvider {
	return &gatedProvider{Provider: p, building: make(chan struct{}), release: make(chan struct{})}
}

func (p *gatedProvider) NewServer(ctx context.Context, spec ServerSpec) (Server, error) {
	p.mu.Lock()
	p.builds++
	n := p.builds
	p.mu.Unlock()
	if n > 1 {
		p.building <- struct{}{}
		<-p.release
	}
	return p.Provider.NewServer(ctx, spec)
}

// newTinySession starts a dashboard session on the embedded tiny model; published receives a
// token after every new View.
func newTinySession(t *testing.T, prov Provider, cfg Config) (*Session, chan struct{}) {
	t.Helper()
	published := make(chan struct{}, 1)
	notify := func() {
		select {
		case published <- struct{}{}:
		default:
		}
	}
	s, err := NewSession(context.Background(), cfg, SessionOptions{Provider: prov, KeepRecords: true, onPublish: notify})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, published
}

// The batch sizes tuned while an engine is being rebuilt are the ones the new engine runs with:
// they were lost, the header going back to the values read when the build began.
func TestKnobsTunedDuringRebuildKept(t *testing.T) {
	gp := newGatedProvider(cpuEngine(2))
	s, published := newTinySession(t, gp, testConfig(requests(4, 4), runs(1, 1), func(c *Config) { c.Sched.MaxBatch, c.Sched.PrefillMaxBatch = 16, 16 }))
	if _, err := s.Do(ActRestart); err != nil {
		t.Fatal(err)
	}
	<-gp.building
	for _, a := range []Action{ActMaxBatchDown, ActMaxBatchDown, ActPrefillBatchDown} {
		if _, err := s.Do(a); err != nil {
			t.Fatalf("Do(%d) during the rebuild: %v", a, err)
		}
	}
	gp.release <- struct{}{}
	v := waitFor(t, s, published, "engine 2's cold run", func(v *View) bool { return v.Header.RunLabel == "cold run (engine 2)" })
	if h := v.Header; h.MaxBatch != 4 || h.PrefillMaxBatch != 3 {
		t.Errorf("header after the rebuild: max batch %d, prefill max batch %d; want 4 and 3 as tuned during it", h.MaxBatch, h.PrefillMaxBatch)
	}
	s.mu.Lock()
	cfg := s.srv.(*inProcServer).Config()
	s.mu.Unlock()
	if cfg.MaxBatch != 4 || cfg.PrefillMaxBatch != 3 {
		t.Errorf("new engine's scheduler runs max batch %d, prefill max batch %d; want 4 and 3", cfg.MaxBatch, cfg.PrefillMaxBatch)
	}
}

// Once the session has ended, every action is refused: none would take effect, and a restart
// said "restarting engine" with no engine to restart.
func TestActionsAfterEndRefused(t *testing.T) {
	s, _ := newTinySession(t, cpuEngine(2), testConfig(requests(4, 4), runs(1, 1)))
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	before := s.View().Header
	for a := ActTogglePaged; a <= ActConcurrencyUp; a++ {
		if msg, err := s.Do(a); !errors.Is(err, ErrSessionEnded) {
			t.Errorf("Do(%d) after Close = %q, %v; want ErrSessionEnded", a, msg, err)
		}
	}
	if after := s.View().Header; after.MaxBatch != before.MaxBatch || after.Paused != before.Paused || after.Concurrency != before.Concurrency {
		t.Errorf("a refused action changed the header: %+v -> %+v", before, after)
	}
	var b bytes.Buffer
	if err := s.Report(&b); err != nil || !strings.Contains(b.String(), "=== rosetop session:") {
		t.Errorf("Report after the refusals: %v\n%s", err, b.String())
	}
}

// serveBuilds lets every held engine build go on until stop is closed, first doing acts from
// inside the first k rebuilds (a restart among them asks for the next); acted is closed after
// the k-th.
func serveBuilds(t *testing.T, s *Session, gp *gatedProvider, stop <-chan struct{}, acted chan<- struct{}, k int, acts ...Action) {
	for {
		select {
		case <-gp.building:
			if k > 0 {
				for _, a := range acts {
					if _, err := s.Do(a); errors.Is(err, ErrSessionEnded) {
						t.Errorf("Do(%d) during a rebuild: %v", a, err)
					}
				}
				if k--; k == 0 {
					close(acted)
				}
			}
			gp.release <- struct{}{}
		case <-stop:
			return
		}
	}
}

// checkEveryRequestOnce checks the session's kept runs: every request an engine took is in
// exactly one run of that engine with its record (the scheduler numbers them 1, 2, ... per
// engine), each run's summary counts its requests, and a full steady window holds NumRequests.
func checkEveryRequestOnce(t *testing.T, s *Session, n int) (engines int) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	seen := map[int]map[sched.RequestID]string{}
	for _, res := range s.results {
		ids := seen[res.engine]
		if ids == nil {
			ids = map[sched.RequestID]string{}
			seen[res.engine] = ids
		}
		ended := 0
		for _, r := range res.reqs {
			if r.Record == nil {
				t.Errorf("%s (engine %d): request %d has no record", res.sum.Label, res.engine, r.Index)
				continue
			}
			if where, dup := ids[r.Record.ID]; dup {
				t.Errorf("engine %d: request %d filed in %q and in %q", res.engine, r.Record.ID, where, res.sum.Label)
			}
			ids[r.Record.ID] = res.sum.Label
			ended++
		}
		if sum := res.sum; sum.Requests+sum.Cancelled+sum.Failed != ended {
			t.Errorf("%s (engine %d): %d completed + %d cancelled + %d failed, of %d requests", sum.Label, res.engine, sum.Requests, sum.Cancelled, sum.Failed, ended)
		}
		if res.live && !res.sum.Partial && len(res.reqs) != n {
			t.Errorf("%s (engine %d): a full window of %d requests, want %d", res.sum.Label, res.engine, len(res.reqs), n)
		}
	}
	for e, ids := range seen {
		for id := sched.RequestID(1); id <= sched.RequestID(len(ids)); id++ {
			if _, ok := ids[id]; !ok {
				t.Errorf("engine %d: request %d of %d is in no run", e, id, len(ids))
			}
		}
		engines = max(engines, e)
	}
	return engines
}

// Actions fired together from several goroutines, while requests are in flight and while
// engines are being rebuilt, lose and double-count no request, and the session still settles
// into its steady state and closes with its summary.
func TestActionStormKeepsEveryRequest(t *testing.T) {
	const n = 8
	gp := newGatedProvider(cpuEngine(2))
	s, published := newTinySession(t, gp, testConfig(requests(n, 8), runs(1, 1), func(c *Config) { c.Sched.MaxBatch, c.Sched.PrefillMaxBatch = 8, 8 }))
	stop, acted, served := make(chan struct{}), make(chan struct{}), make(chan struct{})
	go func() {
		defer close(served)
		serveBuilds(t, s, gp, stop, acted, 3, ActTogglePaged, ActMaxBatchDown, ActRestart, ActConcurrencyDown, ActTogglePause, ActTogglePause)
	}()
	waitFor(t, s, published, "requests in flight", func(v *View) bool {
		return v.Header.Run != nil && v.Header.Run.Tokens > 0 || v.Header.Phase == PhaseLive
	})

	storm := [][]Action{
		{ActTogglePaged, ActTogglePaged, ActMaxBatchDown, ActMaxBatchDown, ActMaxBatchDown, ActMaxBatchDown, ActMaxBatchDown, ActRestart, ActMaxBatchUp, ActMaxBatchUp},
		{ActPrefillBatchDown, ActPrefillBatchDown, ActPrefillBatchDown, ActPrefillBatchDown, ActPrefillBatchDown, ActPrefillBatchDown, ActPrefillBatchDown, ActPrefillBatchDown, ActPrefillBatchUp, ActPrefillBatchUp},
		{ActTogglePause, ActRestart, ActTogglePause, ActToggleSchedule, ActIntervalUp, ActIntervalDown, ActIntervalDown, ActToggleSchedule, ActToggleGraph},
		{ActConcurrencyDown, ActConcurrencyDown, ActConcurrencyDown, ActConcurrencyDown, ActConcurrencyUp, ActTogglePaged, ActConcurrencyUp, ActConcurrencyDown},
	}
	var wg sync.WaitGroup
	for _, acts := range storm {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for _, a := range acts {
				if _, err := s.Do(a); errors.Is(err, ErrSessionEnded) {
					t.Errorf("Do(%d): %v", a, err)
				}
			}
		}()
	}
	wg.Wait()
	<-acted // each of the three rebuilds asked for the next: the storm rebuilt the engine at least 4 times
	// A known state, whatever order the storm ran in: arrivals running, no interval, the batch
	// sizes at the engine's capacity.
	if s.View().Header.Paused {
		s.Do(ActTogglePause)
	}
	for _, a := range []Action{ActIntervalDown, ActMaxBatchUp, ActConcurrencyDown} {
		for i := 0; i < 32; i++ {
			if _, err := s.Do(a); err != nil {
				break
			}
		}
	}
	for range 3 { // concurrency 1 -> 8
		if _, err := s.Do(ActConcurrencyUp); err != nil {
			t.Fatal(err)
		}
	}
	v := waitFor(t, s, published, "a steady window on the last engine", func(v *View) bool {
		return v.Header.Phase == PhaseLive && v.Live.Windows >= 1 && !v.Header.Paused
	})
	if h := v.Header; h.MaxBatch != 8 || h.PrefillMaxBatch < 1 || h.PrefillMaxBatch > 8 || h.Concurrency != 8 {
		t.Errorf("header %+v: want max batch 8, a prefill max batch in 1..8 and concurrency 8", h)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	close(stop)
	<-served
	engines := checkEveryRequestOnce(t, s, n)
	var b bytes.Buffer
	if err := s.Report(&b); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "=== rosetop session:") || !strings.Contains(b.String(), fmt.Sprintf("engine %d: ", engines)) {
		t.Errorf("the summary table lacks the session or engine %d:\n%s", engines, b.String())
	}
	gp.mu.Lock()
	builds := gp.builds
	gp.mu.Unlock()
	if engines != builds {
		t.Errorf("runs on %d engines, %d built", engines, builds)
	}
}

// Quitting while an engine is being rebuilt ends the session once the build returns: no run
// starts on the new engine (it filed an empty "cut short" cold run), and the summary keeps the
// run the restart interrupted.
func TestQuitDuringRebuild(t *testing.T) {
	gp := newGatedProvider(cpuEngine(2))
	s, published := newTinySession(t, gp, testConfig(requests(4, 8), runs(1, 1)))
	waitFor(t, s, published, "requests in flight", func(v *View) bool {
		return v.Header.Run != nil && v.Header.Run.Tokens > 0 || v.Header.Phase == PhaseLive
	})
	if _, err := s.Do(ActRestart); err != nil {
		t.Fatal(err)
	}
	<-gp.building
	s.stop() // q: what Close does first
	gp.release <- struct{}{}
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	checkEveryRequestOnce(t, s, 4)
	s.mu.Lock()
	for _, res := range s.results {
		if res.engine != 1 {
			t.Errorf("%s ran on engine %d, built after the quit", res.sum.Label, res.engine)
		}
	}
	s.mu.Unlock()
	var b bytes.Buffer
	if err := s.Report(&b); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "engine 1: ") || strings.Contains(b.String(), "engine 2: ") {
		t.Errorf("summary table, want engine 1's runs only:\n%s", b.String())
	}
	if _, err := s.Do(ActTogglePaged); !errors.Is(err, ErrSessionEnded) {
		t.Errorf("Do after the quit: %v, want ErrSessionEnded", err)
	}
}

// Pause, then a restart, then quit: the submitter waiting for the resume and the cold run
// waiting for requests both end, and what ran is kept.
func TestPauseRestartQuit(t *testing.T) {
	gp := newGatedProvider(cpuEngine(2))
	s, published := newTinySession(t, gp, testConfig(requests(6, 8), runs(1, 1), func(c *Config) {
		c.Arrivals = Arrivals{Schedule: "absolute", Interval: time.Millisecond}
	}))
	waitFor(t, s, published, "a first token", func(v *View) bool {
		return v.Header.Run != nil && v.Header.Run.Tokens > 0 || v.Header.Phase == PhaseLive
	})
	for _, a := range []Action{ActTogglePause, ActRestart} {
		if _, err := s.Do(a); err != nil {
			t.Fatal(err)
		}
	}
	<-gp.building
	gp.release <- struct{}{}
	waitFor(t, s, published, "engine 2's cold run, paused", func(v *View) bool {
		return v.Header.RunLabel == "cold run (engine 2)" && v.Header.Paused
	})
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	checkEveryRequestOnce(t, s, 6)
	var b bytes.Buffer
	if err := s.Report(&b); err != nil || !strings.Contains(b.String(), "engine 1: ") {
		t.Errorf("summary table (%v):\n%s", err, b.String())
	}
}

// The batch sizes driven to their ends and back, again and again while requests flow, stop
// with a refusal at each end and keep the engine's scheduler and the header in step.
func TestBatchSizesToTheirEnds(t *testing.T) {
	s, published := newTinySession(t, cpuEngine(2), testConfig(requests(8, 8), runs(1, 1), func(c *Config) { c.Sched.MaxBatch, c.Sched.PrefillMaxBatch = 16, 16 }))
	waitFor(t, s, published, "the steady state", func(v *View) bool { return v.Header.Phase == PhaseLive })
	steps := 0
	drive := func(a Action, wantMax, wantPrefill int) {
		t.Helper()
		for i := 0; ; i++ {
			if _, err := s.Do(a); err != nil {
				break
			}
			if steps++; i > 64 {
				t.Fatalf("Do(%d) never refused", a)
			}
		}
		h := s.View().Header
		s.mu.Lock()
		cfg := s.srv.(*inProcServer).Config()
		s.mu.Unlock()
		if h.MaxBatch != wantMax || h.PrefillMaxBatch != wantPrefill || cfg.MaxBatch != wantMax || cfg.PrefillMaxBatch != wantPrefill {
			t.Fatalf("after Do(%d) to its end: header %d/%d, scheduler %d/%d; want %d/%d", a, h.MaxBatch, h.PrefillMaxBatch, cfg.MaxBatch, cfg.PrefillMaxBatch, wantMax, wantPrefill)
		}
	}
	for range 3 {
		drive(ActMaxBatchDown, 1, 1)      // 4 steps
		drive(ActPrefillBatchUp, 1, 1)    // refused at once
		drive(ActMaxBatchUp, 16, 16)      // 4, the prefill max batch following
		drive(ActPrefillBatchDown, 16, 1) // 15
		drive(ActMaxBatchUp, 16, 1)       // refused at once
		drive(ActPrefillBatchUp, 16, 16)  // 15
	}
	if want := 3 * (4 + 4 + 15 + 15); steps != want {
		t.Errorf("%d steps taken, want %d", steps, want)
	}
	waitFor(t, s, published, "a steady window after the tuning", func(v *View) bool { return v.Live.Windows >= 1 })
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	checkEveryRequestOnce(t, s, 8)
}
