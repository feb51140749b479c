package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"rosetop/sched"
)

// ErrStopped is returned by Submit once the session is closing, and ends the streams of requests
// an engine could not finish before it stopped. It wraps sched.ErrClosed.
var ErrStopped = fmt.Errorf("session stopped: %w", sched.ErrClosed)

// drainTimeout bounds how long an engine rebuild waits for external requests in flight to finish
// before it cancels them.
const drainTimeout = 30 * time.Second

// Stream is one externally submitted request (Session.Submit): its token events as the scheduler
// produces them, then one finished event carrying the record. The recorder goroutine delivers;
// the caller's goroutine takes them with Next. Delivery never blocks: a request has at most one
// token event a step and one finished event.
type Stream struct {
	id  sched.RequestID
	srv Server // the engine it runs on; read-only

	mu     sync.Mutex    // guards events, done, first
	events []sched.Event // delivered, not yet taken
	done   bool          // the finished event was delivered
	first  bool          // a token event was delivered: the request is past its queue and prefill
	wake   chan struct{} // capacity 1: an event was delivered
}

// ID is the request's id on its engine.
func (st *Stream) ID() sched.RequestID { return st.id }

// Next returns the request's next event, waiting for one or for ctx. After the finished event it
// returns io.EOF.
func (st *Stream) Next(ctx context.Context) (sched.Event, error) {
	for {
		st.mu.Lock()
		if len(st.events) > 0 {
			e := st.events[0]
			st.events[0] = sched.Event{}
			st.events = st.events[1:]
			st.mu.Unlock()
			return e, nil
		}
		done := st.done
		st.mu.Unlock()
		if done {
			return sched.Event{}, io.EOF
		}
		select {
		case <-st.wake:
		case <-ctx.Done():
			return sched.Event{}, ctx.Err()
		}
	}
}

// Cancel ends the request at the scheduler's next step, which returns its KV blocks; its finished
// event (reason cancelled) still follows. Safe from any goroutine, any number of times.
func (st *Stream) Cancel() { st.srv.Cancel(st.id) }

// stopper is a Server that can end a request as finished on its caller's stop condition
// (sched.Scheduler.Stopped); the in-process engine is one.
type stopper interface {
	Stopped(id sched.RequestID)
}

// Stop ends the request as Cancel does, for a caller that found its own stop condition (a stop
// string) in the output: its record reads sched.FinishStop, a finished request, where the Server
// can tell the two apart, else cancelled. Safe from any goroutine, any number of times.
func (st *Stream) Stop() {
	if s, ok := st.srv.(stopper); ok {
		s.Stopped(st.id)
		return
	}
	st.srv.Cancel(st.id)
}

// deliver appends e; the caller holds the session's ext.mu (so delivery and registration are
// ordered), never st.mu.
func (st *Stream) deliver(e sched.Event) {
	st.mu.Lock()
	st.events = append(st.events, e)
	switch e.Kind {
	case sched.EventFinished:
		st.done = true
	case sched.EventTokens:
		st.first = true
	}
	st.mu.Unlock()
	select {
	case st.wake <- struct{}{}:
	default:
	}
}

func (st *Stream) started() bool {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.first
}

// externalState routes the events of externally submitted requests to their streams.
type externalState struct {
	mu         sync.Mutex                        // guards the fields below
	gen        *generation                       // the engine taking submissions; nil while one is built or drained
	ready      chan struct{}                     // closed when gen is set; replaced when it is cleared
	stopped    bool                              // the session is closing: Submit refuses
	submitting int                               // Submit calls between choosing gen and registering their stream
	streams    map[sched.RequestID]*Stream       // requests in flight on gen
	pending    map[sched.RequestID][]sched.Event // events that came before their stream was registered
	idle       chan struct{}                     // closed when streams and submitting drop to zero; nil when nobody waits
}

func newExternalState() *externalState {
	return &externalState{ready: make(chan struct{}), streams: map[sched.RequestID]*Stream{}, pending: map[sched.RequestID][]sched.Event{}}
}

// Submit queues r on the current engine and returns its stream. While an engine is being rebuilt
// it waits for the new one, as long as ctx allows. Errors: the scheduler's (sched.ErrBadRequest
// for a prompt that cannot fit), ErrStopped once the session is closing, ctx's.
func (s *Session) Submit(ctx context.Context, r sched.Request) (*Stream, error) {
	x := s.ext
	var g *generation
	for g == nil {
		x.mu.Lock()
		if x.stopped {
			x.mu.Unlock()
			return nil, ErrStopped
		}
		if g = x.gen; g == nil {
			ready := x.ready
			x.mu.Unlock()
			select {
			case <-ready:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
			continue
		}
		x.submitting++
		x.mu.Unlock()
	}
	id, err := g.srv.Submit(r)
	x.mu.Lock()
	defer x.mu.Unlock()
	x.submitting--
	if err != nil {
		x.notifyIdle()
		return nil, err
	}
	st := &Stream{id: id, srv: g.srv, wake: make(chan struct{}, 1)}
	x.streams[id] = st
	for _, e := range x.pending[id] {
		x.route(st, e)
	}
	delete(x.pending, id)
	return st, nil
}

// Waiting is how many external requests wait for their first token: queued or in prefill.
func (s *Session) Waiting() int {
	x := s.ext
	x.mu.Lock()
	defer x.mu.Unlock()
	n := x.submitting
	for _, st := range x.streams {
		if !st.started() {
			n++
		}
	}
	return n
}

// dispatch hands a step's events to their streams; the recorder calls it for every step of an
// external session.
func (x *externalState) dispatch(events []sched.Event) {
	x.mu.Lock()
	defer x.mu.Unlock()
	for _, e := range events {
		if st, ok := x.streams[e.ID]; ok {
			x.route(st, e)
		} else {
			x.pending[e.ID] = append(x.pending[e.ID], e)
		}
	}
}

// route delivers e to st and forgets st after its finished event; the caller holds x.mu.
func (x *externalState) route(st *Stream, e sched.Event) {
	st.deliver(e)
	if e.Kind == sched.EventFinished {
		delete(x.streams, st.id)
		x.notifyIdle()
	}
}

// notifyIdle wakes a drain waiting for the last request; the caller holds x.mu.
func (x *externalState) notifyIdle() {
	if x.idle != nil && len(x.streams) == 0 && x.submitting == 0 {
		close(x.idle)
		x.idle = nil
	}
}

// open makes g the engine that takes submissions.
func (x *externalState) open(g *generation) {
	x.mu.Lock()
	x.gen = g
	close(x.ready)
	x.mu.Unlock()
}

// drain stops new submissions reaching g (they wait for the next engine, or are refused when
// final), waits up to timeout for the requests in flight to finish, then cancels the rest and
// waits for their records (or g's loop to end). It returns how many it cancelled.
func (x *externalState) drain(g *generation, timeout time.Duration, final bool) int {
	x.mu.Lock()
	x.gen, x.ready, x.stopped = nil, make(chan struct{}), final
	idle := make(chan struct{})
	x.idle = idle
	x.notifyIdle()
	x.mu.Unlock()
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-idle:
		return 0
	case <-g.loopDone:
		return 0
	case <-t.C:
	}
	x.mu.Lock()
	left := make([]*Stream, 0, len(x.streams))
	for _, st := range x.streams {
		left = append(left, st)
	}
	x.mu.Unlock()
	for _, st := range left {
		st.Cancel()
	}
	grace := time.NewTimer(cancelGrace)
	defer grace.Stop()
	select {
	case <-idle:
	case <-g.loopDone:
	case <-grace.C:
	}
	return len(left)
}

// abandon ends the streams of a stopped engine that never got their finished event, so that no
// caller waits forever; the caller has stopped the engine's recorder.
func (x *externalState) abandon(err error) {
	x.mu.Lock()
	defer x.mu.Unlock()
	for _, st := range x.streams {
		x.route(st, sched.Event{Kind: sched.EventFinished, ID: st.id, Record: &sched.Record{ID: st.id, Reason: sched.FinishError, Err: err}})
	}
	clear(x.pending)
}

// serveExternal is an external session's life with one engine: it takes submissions until a
// restart, a stop or a failed loop, then drains.
func (s *Session) serveExternal(ctx context.Context, g *generation) (outcome, error) {
	label := "serving"
	if s.watching() {
		label = "watching"
	}
	s.setPhase(PhaseLive, label)
	s.ext.open(g)
	why := s.awaitEnd(ctx, g, nil)
	timeout := drainTimeout
	if why != runRestart {
		timeout = 0 // stopping: the server has already let its requests finish
	}
	if why == runRestart {
		s.mu.Lock()
		s.logf(LogInfo, "engine rebuild: new requests wait while those in flight finish (at most %v)", drainTimeout)
		s.mu.Unlock()
	}
	if n := s.ext.drain(g, timeout, why != runRestart); n > 0 {
		s.mu.Lock()
		s.logf(LogError, "%d requests still in flight after %v were cancelled", n, timeout)
		s.mu.Unlock()
	}
	if why == runFailed {
		if g.loopErr != nil {
			return why, fmt.Errorf("scheduler: %w", g.loopErr)
		}
		return why, errors.New("scheduler loop stopped")
	}
	return why, nil
}
