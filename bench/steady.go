package bench

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"rosetop/sched"
)

// liveRun is a dashboard session's steady state: after its cold and measured runs the load stays
// continuous, in the job's shape (its arrival schedule, at most --max-concurrency or else
// NumRequests in flight, which c/C change: a burst job becomes a fixed concurrency), instead of
// restarting in bursts. Every NumRequests finished
// requests are filed as a window, a steady run like a measured one, so the cold-vs-steady
// comparison and the summaries mean the same whatever the engine's speed. Guarded by Session.mu.
type liveRun struct {
	meta     map[sched.RequestID]liveReq       // submitted, not finished: what its result needs
	early    map[sched.RequestID]*sched.Record // finished before the submitter registered it
	inflight int                               // slots taken: submitted (or being submitted), not finished
	limit    int                               // most requests in flight (Session.concurrency)
	stopping bool                              // cancelling: what finishes joins the partial window
	wake     chan struct{}                     // recorder -> submitter and runLive: a request finished (cap 1)
}

// liveReq is what a live request's result needs besides its record.
type liveReq struct {
	index  int
	target time.Duration
	has    bool
}

func newLiveRun(limit int) *liveRun {
	return &liveRun{meta: map[sched.RequestID]liveReq{}, early: map[sched.RequestID]*sched.Record{}, limit: limit, wake: make(chan struct{}, 1)}
}

// runLive keeps the load continuous on g until a restart, a stop or a failure, then cancels the
// requests in flight and files the window being filled (partial, with what finished).
func (s *Session) runLive(ctx context.Context, g *generation) (outcome, error) {
	s.mu.Lock()
	lr := newLiveRun(s.concurrency)
	s.liveRun, s.phase, s.runLabel = lr, PhaseLive, "live"
	s.mu.Unlock()
	s.publish(true)

	subCtx, subCancel := context.WithCancel(ctx)
	defer subCancel()
	subDone := make(chan struct{})
	var subErr error // written by the submitter goroutine, read after subDone
	sub := submitter{clock: s.clock, settings: s.arrivals, waitResume: s.waitResume, seed: s.cfg.Arrivals.Seed}
	go func() {
		defer close(subDone)
		_, subErr = sub.run(subCtx, math.MaxInt, func(i int, target time.Duration, has bool) error {
			return s.submitLive(subCtx, g, lr, liveReq{index: i % s.cfg.Workload.NumRequests, target: target, has: has})
		})
	}()
	why := s.awaitEnd(ctx, g, subDone)
	subCancel()
	<-subDone
	s.cancelLive(g, lr)
	s.mu.Lock()
	s.liveRun = nil
	s.fileWindow(g, windowLive, true)
	s.mu.Unlock()
	s.publish(true)
	switch {
	case why != runFailed:
		return why, nil
	case subErr != nil && !errors.Is(subErr, context.Canceled):
		return why, subErr
	case g.loopErr != nil:
		return why, fmt.Errorf("scheduler: %w", g.loopErr)
	}
	return why, errors.New("scheduler loop stopped")
}

// awaitEnd waits until the engine's open-ended load (the steady state, or an external
// session's) is to end: a rebuild taken, a stop, a failed loop or submitter (subDone; nil: none).
func (s *Session) awaitEnd(ctx context.Context, g *generation, subDone <-chan struct{}) outcome {
	for {
		select {
		case <-s.restartCh:
			if s.takeRebuild(ctx) {
				return runRestart
			}
		case <-ctx.Done():
			return runStopped
		case <-g.loopDone:
			return runFailed
		case <-subDone:
			if ctx.Err() == nil {
				return runFailed
			}
			return runStopped
		}
	}
}

// submitLive waits for a free slot, submits one request and registers it.
func (s *Session) submitLive(ctx context.Context, g *generation, lr *liveRun, r liveReq) error {
	for {
		s.mu.Lock()
		if lr.inflight < lr.limit {
			lr.inflight++
			s.mu.Unlock()
			break
		}
		s.mu.Unlock()
		select {
		case <-lr.wake:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	id, err := g.srv.Submit(s.wl.request(r.index))
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil {
		lr.inflight--
		return fmt.Errorf("submit request %d: %w", r.index, err)
	}
	if rec, ok := lr.early[id]; ok {
		delete(lr.early, id)
		s.fileLive(g, lr, RequestResult{Index: r.index, Target: r.target, HasTarget: r.has, Record: rec})
		return nil
	}
	lr.meta[id] = r
	return nil
}

// finishLive files a finished live request into the window; the recorder calls it with s.mu held.
func (s *Session) finishLive(g *generation, lr *liveRun, rec *sched.Record) {
	lr.inflight = max(0, lr.inflight-1)
	select {
	case lr.wake <- struct{}{}:
	default:
	}
	r, ok := lr.meta[rec.ID]
	if !ok {
		lr.early[rec.ID] = rec
		return
	}
	delete(lr.meta, rec.ID)
	s.fileLive(g, lr, RequestResult{Index: r.index, Target: r.target, HasTarget: r.has, Record: rec})
}

// fileLive adds a finished live request to the window; the caller holds s.mu.
func (s *Session) fileLive(g *generation, lr *liveRun, rr RequestResult) {
	if lr.stopping { // the window is cut short: runLive files it partial once every request is back
		g.finished++
		rr.Index = len(s.window)
		s.window = append(s.window, rr)
		return
	}
	s.addToWindow(g, rr, windowLive)
}

// cancelLive cancels the live requests in flight and waits for their records, so their KV
// blocks are released before the engine stops and the partial window counts them.
func (s *Session) cancelLive(g *generation, lr *liveRun) {
	s.mu.Lock()
	lr.stopping = true
	open := make([]sched.RequestID, 0, len(lr.meta))
	for id := range lr.meta {
		open = append(open, id)
	}
	s.mu.Unlock()
	s.cancelAndWait(g, open, func() int { return len(lr.meta) }, lr.wake)
}

// windowKind says where a window's requests came from.
type windowKind int

const (
	windowExternal windowKind = iota // rosetop serve: the first window of an engine is its cold run
	windowLive                       // the dashboard's steady state: its engine's cold run came before
)

// addToWindow files a finished request into the window being filled, and the window as a run
// once it holds Workload.NumRequests requests. The caller holds s.mu and owns g's counters.
func (s *Session) addToWindow(g *generation, r RequestResult, kind windowKind) {
	g.finished++
	r.Index = len(s.window)
	s.window = append(s.window, r)
	if len(s.window) >= s.cfg.Workload.NumRequests {
		s.fileWindow(g, kind, false)
	}
}

// fileWindow files the window as a run (partial: the engine stopped before it filled); the
// caller holds s.mu. A window is logged only when it is an engine's cold run or partial; the
// others are counted in the View's LiveCounts.
func (s *Session) fileWindow(g *generation, kind windowKind, partial bool) {
	if len(s.window) == 0 {
		return
	}
	first := kind == windowExternal && g.windows == 0
	var label string
	switch {
	case kind == windowLive:
		label = fmt.Sprintf("live %d", g.windows+1)
	case first:
		label = fmt.Sprintf("requests %d-%d (cold, engine %d)", g.finished-len(s.window)+1, g.finished, g.index)
	default:
		label = fmt.Sprintf("requests %d-%d", g.finished-len(s.window)+1, g.finished)
	}
	hdr := s.reportHeader(g.info)
	info := runInfo{Label: label, Index: g.windows + 1, Warmup: first, Partial: partial, LagPrinted: hdr.lagPrinted(), Since: g.windowEnd}
	res := s.fileRun(hdr, info, s.window, first, !first && !partial)
	for _, r := range s.window {
		if r.Record != nil {
			g.windowEnd = max(g.windowEnd, r.Record.Times.Finished)
		}
	}
	res.engine, res.live = g.index, !first
	if !first && !partial {
		s.live.counts.Windows++
		s.live.counts.Requests += res.sum.Requests
	}
	g.windows++
	s.window = nil
}
