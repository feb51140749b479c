//go:build cgo

package gpu

import (
	"runtime"
	"sync/atomic"
	"time"
)

// worker runs functions on one goroutine locked to its OS thread: the CUDA context is current
// on that thread and stream capture runs in thread-local mode there.
//
// The handoff avoids OS thread wake-ups on the decode path: a call is published in an atomic;
// the worker, which keeps polling for workerSpin after each call before it parks, picks it up at
// once, and the caller polls (yielding) for the result for up to callerSpin before it parks. On
// the GPU machine (a VM) a futex wake-up of a parked thread cost tens of microseconds each way,
// per decode step. Parking uses the Dekker pattern on sequentially consistent atomics: the
// sleeper sets its parked flag, then re-checks; the waker publishes, then checks the flag and
// sends a token on a one-slot channel, so no wake-up is lost and a stale token costs one extra
// loop.
type worker struct {
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

// workerSpin outlasts the pauses of a loaded engine: the host's work between two steps, a
// benchmark's bookkeeping between two runs (about 3 ms), the gap between requests arriving 1 ms
// apart. On the H200 machine (a VM), a worker parked for 1 ms or more took 150-230 us to answer
// an empty call (TestProfileIdle), which a 500 us spin had added to the first step of every
// benchmark run. The cost is one busy core for at most workerSpin after the engine's last call.
const (
	workerSpin = 20 * time.Millisecond
	callerSpin = 5 * time.Millisecond // longer than a decode step
)

func startWorker() *worker { return startWorkerSpin(workerSpin, callerSpin) }

func startWorkerSpin(workerFor, callerFor time.Duration) *worker {
	w := &worker{wake: make(chan struct{}, 1), finished: make(chan struct{}, 1), exited: make(chan struct{}),
		workerSpin: workerFor, callerSpin: callerFor}
	go w.loop()
	return w
}

func (w *worker) loop() {
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
func (w *worker) next() bool {
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

// do runs f on the worker thread and waits for it. Calls must come from one goroutine at a time.
func (w *worker) do(f func()) {
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
func (w *worker) nudge() {
	if w.parked.Load() {
		select {
		case w.wake <- struct{}{}:
		default:
		}
	}
}

// stop ends the worker goroutine once it is idle and waits for it to return.
func (w *worker) stop() {
	w.stopped.Store(true)
	w.nudge()
	<-w.exited
}
