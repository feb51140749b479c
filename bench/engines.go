package bench

import (
	"context"
	"fmt"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"rosetop/sched"
)

// generation is one engine's life: its server, the scheduler loop and the recorder.
type generation struct {
	index    int // 1-based: the session's n-th engine
	srv      Server
	info     ServerInfo
	cancel   context.CancelFunc    // stops the scheduler loop
	out      chan sched.StepOutput // scheduler loop -> recorder
	loopDone chan struct{}         // closed when srv.Run returned
	loopErr  error                 // srv.Run's result; read after loopDone
	recDone  chan struct{}         // closed when the recorder returned
	// ledgerSeen is how many of srv's ledger entries are in the events log; owned by the
	// recorder goroutine until recDone, by stopEngine after.
	ledgerSeen int
	// Requests finished (External sessions) and windows filed on this engine, and the last finish
	// of the latest window (where the next one's wall clock starts); owned like ledgerSeen.
	finished, windows int
	windowEnd         time.Duration
}

// startEngine builds the next engine with the wanted options and starts its goroutines. Engine
// keys pressed while it builds are weighed against the options it was built with.
func (s *Session) startEngine(index int) (*generation, error) {
	s.mu.Lock()
	want, knobs := s.want, s.knobs
	s.engine, s.engineOpts, s.rebuild = index, want, rebuildBuilding
	s.mu.Unlock()
	spec := ServerSpec{Engine: want, MaxBatch: s.cfg.Sched.MaxBatch, MaxSeqLen: s.seqs, Sched: knobs, Clock: s.clock, Window: s.opts.Window, SLOs: s.cfg.Goodput}
	srv, err := s.prov.NewServer(context.Background(), spec)
	if err != nil {
		return nil, err
	}
	info := srv.Info()
	// The knobs tuned while the engine was being built are the ones it starts with: they are
	// read again, and set with s.srv under one lock, so that no Do falls between.
	s.mu.Lock()
	knobs = s.knobs
	knobs.MaxBatch = min(knobs.MaxBatch, info.MaxBatch)
	knobs.PrefillMaxBatch = min(knobs.PrefillMaxBatch, knobs.MaxBatch)
	if err := srv.SetConfig(knobs); err != nil {
		s.mu.Unlock()
		srv.Close()
		return nil, fmt.Errorf("scheduler config: %w", err)
	}
	// The loop's context is not the session's: on Ctrl-C the loop keeps stepping until the
	// cancelled requests have handed back their records.
	ctx, cancel := context.WithCancel(context.Background())
	g := &generation{
		index: index, srv: srv, info: info, cancel: cancel, out: make(chan sched.StepOutput, 64),
		loopDone: make(chan struct{}), recDone: make(chan struct{}),
	}
	go func() {
		defer close(g.loopDone)
		// A panic in the scheduler or the engine ends the session with an error, as a failed
		// step does, so that the dashboard restores the terminal and the results are written.
		defer func() {
			if r := recover(); r != nil {
				g.loopErr = panicError(r)
			}
		}()
		g.loopErr = srv.Run(ctx, g.out)
	}()
	go s.record(g)
	s.srv, s.info, s.knobs, s.rebuild = srv, info, knobs, rebuildNone
	s.live.cold = nil
	s.live.steady = newRing[Summary](steadyCap)
	s.live.resetRequests() // the stopped engine's recorder has returned: its requests are over
	s.live.counts = LiveCounts{}
	if info.Remote != nil && info.Remote.Watch { // no engine of rosetop's starts, nor any run
		s.live.mark(s.clock.Now(), "watch start")
	} else {
		s.live.mark(s.clock.Now(), fmt.Sprintf("cold start (engine %d)", index))
	}
	if info.Remote != nil {
		s.logf(LogInfo, "remote server: %s on %s", modelName(info), info.DeviceDetail)
	} else {
		s.logf(LogInfo, "engine %d: %s on %s, paged attention %s, CUDA Graph %s", index, modelName(info), info.DeviceDetail, onOff(info.Paged), onOff(info.CUDAGraph))
	}
	if info.DeviceNote != "" {
		s.logf(LogInfo, "%s", info.DeviceNote)
	}
	if want.CUDAGraph && !info.CUDAGraph && info.Remote == nil && !s.graphNoted {
		// Said once: the dashboard's jobs ask for graphs and run on any device. A remote
		// server's own engine decides, so a job's preset says nothing there.
		s.graphNoted = true
		s.logf(LogInfo, "CUDA Graph asked for, but the engine runs on %s: graphs are off", info.DeviceDetail)
		fmt.Fprintf(s.opts.Progress, "rosetop: CUDA Graphs (--cuda-graph) are off: the engine runs on %s, and they need a GPU\n", info.DeviceDetail)
	}
	s.noteLedger(g)
	s.mu.Unlock()
	return g, nil
}

// stopEngine stops the scheduler loop and the recorder and closes the server.
func (s *Session) stopEngine(g *generation) error {
	g.cancel()
	<-g.loopDone
	<-g.recDone
	s.mu.Lock()
	s.srv = nil
	s.lastLedger = g.srv.Ledger(0) // the cold-start block and the dashboard still show it
	s.mu.Unlock()
	return g.srv.Close()
}

// record consumes the scheduler's step outputs until the loop has returned.
func (s *Session) record(g *generation) {
	defer close(g.recDone)
	for {
		select {
		case so := <-g.out:
			s.onStep(g, so)
		case <-g.loopDone:
			for {
				select {
				case so := <-g.out:
					s.onStep(g, so)
				default:
					return
				}
			}
		}
	}
}

// onStep files one step's events: every event goes to the rolling windows (token events as
// they come), records to the current run.
func (s *Session) onStep(g *generation, so sched.StepOutput) {
	if s.opts.OnStep != nil {
		s.opts.OnStep(&so)
	}
	if s.opts.External {
		s.ext.dispatch(so.Events)
	}
	tokens := 0
	s.mu.Lock()
	filed := s.filed // a run or window filed in this step is published at once
	for i := range so.Events {
		ev := &so.Events[i]
		s.live.addEvent(so.Snapshot.At, ev)
		switch ev.Kind {
		case sched.EventTokens:
			tokens += len(ev.Tokens)
		case sched.EventFinished:
			if ev.Record == nil {
				continue
			}
			failed := !(&RequestResult{Record: ev.Record}).completed() && ev.Record.Reason != sched.FinishCancelled
			if rs := s.cur; rs != nil {
				if _, dup := rs.records[ev.ID]; !dup {
					if rs.inFlight != nil {
						select {
						case <-rs.inFlight: // a slot for the submitter (--max-concurrency)
						default:
						}
					}
					if failed {
						rs.failed++
					}
				}
				rs.records[ev.ID] = ev.Record
				select {
				case rs.progress <- struct{}{}:
				default:
				}
			}
			if failed {
				s.logf(LogError, "request %d: %s: %v", ev.ID, ev.Record.Reason, ev.Record.Err)
			}
			switch {
			case s.opts.External:
				s.addToWindow(g, RequestResult{Record: ev.Record}, windowExternal)
			case s.liveRun != nil:
				s.finishLive(g, s.liveRun, ev.Record)
			}
		}
	}
	if s.cur != nil {
		s.cur.tokens += tokens
		s.noteLongRun(s.cur, so.Snapshot.At)
	}
	s.live.addStep(so.Snapshot, tokens)
	s.noteLedger(g)
	filed = s.filed - filed
	s.mu.Unlock()
	s.publish(filed != 0)
}

func onOff(b bool) string {
	if b {
		return "on"
	}
	return "off"
}

// modelName is the model as reports show it, flagged when its weights are random.
func modelName(info ServerInfo) string {
	switch {
	case !info.RandomWeights || strings.Contains(info.Model, "random"):
		return info.Model
	case strings.HasSuffix(info.Model, ")"): // "tiny-gpt2 (embedded)" -> "tiny-gpt2 (embedded, random weights)"
		return strings.TrimSuffix(info.Model, ")") + ", random weights)"
	}
	return info.Model + " (random weights)"
}

// noteLedger logs the engine's ledger entries not logged yet: costs paid at build time and those
// paid later, like a CUDA Graph captured on a batch size's first use. In the steady state (after
// the engine's cold run) they are routine, a capture for each new step shape, and are counted in
// LiveCounts instead. The caller holds s.mu.
func (s *Session) noteLedger(g *generation) {
	steady := s.liveRun != nil || (s.opts.External && g.windows > 0)
	for _, e := range g.srv.Ledger(g.ledgerSeen) {
		g.ledgerSeen++
		if steady {
			s.live.counts.Costs++
			s.live.counts.CostTook += e.Took
			continue
		}
		s.logf(LogCapture, "%s %s: %v", e.What, e.Detail, e.Took.Round(10*time.Microsecond))
	}
}

// panicError is the error for a panic recovered in the scheduler loop: its value and where it
// happened, the first frame outside the runtime, on one line.
func panicError(r any) error {
	pcs := make([]uintptr, 32)
	frames := runtime.CallersFrames(pcs[:runtime.Callers(3, pcs)]) // past Callers, panicError, the deferred func
	for {
		f, more := frames.Next()
		if !strings.HasPrefix(f.Function, "runtime.") {
			return fmt.Errorf("panic: %v (in %s at %s:%d; a bug in rosetop)", r, f.Function, filepath.Base(f.File), f.Line)
		}
		if !more {
			return fmt.Errorf("panic: %v (a bug in rosetop)", r)
		}
	}
}
