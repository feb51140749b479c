//go:build cgo

package cu

import (
	"runtime"
	"sync/atomic"
	"time"
)

// Worker runs functions on one goroutine locked to its OS thread: the CUDA context is current
// on that thread and stream capture runs in thread-local mode there.
//
// The handoff keeps OS thread wake-ups (a futex each way) off the decode path: a call is
// published in an atomic; the worker, which keeps polling for workerSpin after each call before
// it parks, picks it up at once, and the caller polls (yielding) for the result for up to
// callerSpin before it parks. Parking uses the Dekker pattern on sequentially consistent atomics:
// the sleeper sets its parked flag, then re-checks; the waker publishes, then checks the flag and
// sends a token on a one-slot channel, so no wake-up is lost and a stale token costs one extra
// loop.
type Worker struct {
	// fn is the call in flight: written by the caller before it sets pending, read by the worker
	// after it sees pending (a field, not an atomic pointer to the func: that would allocate).
	fn           func()
	pending      atomic.Bool   // a call is waiting: set by the caller, cleared by the worker
	done         atomic.Bool   // the call in flight has returned: set by the worker
	stopped      atomic.Bool   // set by stop; the worker exits at its next poll
	parked       atomic.Bool   // the worker is (about to be) blocked on wake
	callerParked atomic.Bool   // the caller is (about to be) blocked on finished
	wake         chan struct{} // one slot: wakes the parked worker
	finished     chan struct{} // one slot: wakes the parked caller
	exited       chan struct{} // closed when the worker goroutine returns
	workerSpin   time.Duration // read-only after start
	callerSpin   time.Duration // read-only after start
}

// workerSpin outlasts the pauses of a loaded engine (the host's work between two steps, a
// benchmark's bookkeeping between two runs, the gap between requests arriving a millisecond
// apart), so that a parked worker's slow wake-up stays out of the steps after them. The cost is
// one busy core for at most workerSpin after the engine's last call.
const (
	workerSpin = 20 * time.Millisecond
	callerSpin = 5 * time.Millisecond // longer than a decode step
)

// StartWorker starts a worker goroutine; Stop ends it.
func StartWorker() *Worker { return startWorkerSpin(workerSpin, callerSpin) }

func startWorkerSpin(workerFor, callerFor time.Duration) *Worker {
	w := &Worker{wake: make(chan struct{}, 1), finished: make(chan struct{}, 1), exited: make(chan struct{}),
		workerSpin: workerFor, callerSpin: callerFor}
	go w.loop()
	return w
}

func (w *Worker) loop() {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	defer close(w.exited)
	for {
		if !w.next() {
			return
		}
		f := w.fn
		w.pending.Store(false)
		f()
		w.done.Store(true)
		if w.callerParked.Load() {
			select {
			case w.finished <- struct{}{}:
			default:
			}
		}
	}
}

// next polls for a call for workerSpin, then parks until one comes; false after stop.
func (w *Worker) next() bool {
	deadline := time.Now().Add(w.workerSpin)
	for polls := 0; ; polls++ {
		if w.pending.Load() {
			return true
		}
		if w.stopped.Load() {
			return false
		}
		if polls%64 != 0 || time.Now().Before(deadline) {
			continue
		}
		w.parked.Store(true)
		if !w.pending.Load() && !w.stopped.Load() {
			<-w.wake
		}
		w.parked.Store(false)
		deadline = time.Now().Add(w.workerSpin)
	}
}

// Do runs f on the worker thread and waits for it. Calls must come from one goroutine at a time.
func (w *Worker) Do(f func()) {
	w.done.Store(false)
	w.fn = f
	w.pending.Store(true)
	w.nudge()
	deadline := time.Now().Add(w.callerSpin)
	for polls := 0; !w.done.Load(); polls++ {
		if polls%64 != 0 || time.Now().Before(deadline) {
			runtime.Gosched()
			continue
		}
		w.callerParked.Store(true)
		if !w.done.Load() {
			<-w.finished
		}
		w.callerParked.Store(false)
	}
}

// nudge wakes the worker if it is parked.
func (w *Worker) nudge() {
	if w.parked.Load() {
		select {
		case w.wake <- struct{}{}:
		default:
		}
	}
}

// Stop ends the worker goroutine once it is idle and waits for it to return.
func (w *Worker) Stop() {
	w.stopped.Store(true)
	w.nudge()
	<-w.exited
}
