//go:build cgo

package gpu

/*
#include "api.h"
*/
import "C"

import "fmt"

// The profiling mode (tests only): CUDA events recorded on the stream after each op of an eager
// step time the GPU work per op kind. A spin kernel holds the stream at the start of the step
// while the host enqueues all of it, so the events measure kernels back to back, as a graph
// replay runs them, and not the host's launch gaps.

// event is a CUDA event with timing on.
type event struct{ e C.CUevent }

func (r *cudaRuntime) newEvent() (event, error) {
	var e C.CUevent
	if err := r.a.check(C.w_eventCreate(r.a.c, &e), "cuEventCreate"); err != nil {
		return event{}, err
	}
	return event{e}, nil
}

func (r *cudaRuntime) destroyEvent(e event) error {
	return r.a.check(C.w_eventDestroy(r.a.c, e.e), "cuEventDestroy")
}

func (r *cudaRuntime) record(e event) error {
	return r.a.check(C.w_eventRecord(r.a.c, e.e, r.stream), "cuEventRecord")
}

// elapsed is the GPU time between two completed events, in milliseconds.
func (r *cudaRuntime) elapsed(from, to event) (float64, error) {
	var ms C.float
	err := r.a.check(C.w_eventElapsed(r.a.c, &ms, from.e, to.e), "cuEventElapsedTime")
	return float64(ms), err
}

// profileSpinNs holds the stream long enough for the host to enqueue an eager step (~1 ms).
const profileSpinNs = 5_000_000

// opProfile accumulates GPU time per op kind over profiled steps.
type opProfile struct {
	rt     *cudaRuntime
	events []event  // events[0] starts the step; events[i] ends op names[i]
	names  []string // op of each event (names[0] unused)
	n      int      // events recorded in the current step
	ops    []string // first-seen order
	ms     map[string]float64
	count  map[string]int // launches of each op per step, from the last step
	steps  int
	err    error // first failure; later marks do nothing
	// kinds[i] is the op of the step's i-th launch or GEMM call (cudaRuntime.calls from the
	// step's start), for graphs of one kind (cudaRuntime.only).
	kinds     []string
	callsFrom int
}

func newOpProfile(rt *cudaRuntime, maxOps int) (*opProfile, error) {
	p := &opProfile{rt: rt, names: make([]string, maxOps+1), ms: map[string]float64{}, count: map[string]int{}}
	for range maxOps + 1 {
		e, err := rt.newEvent()
		if err != nil {
			p.close()
			return nil, err
		}
		p.events = append(p.events, e)
	}
	return p, nil
}

func (p *opProfile) close() {
	for _, e := range p.events {
		_ = p.rt.destroyEvent(e)
	}
	p.events = nil
}

// begin holds the stream with the spin kernel and records the step's start event.
func (p *opProfile) begin() {
	if p.err != nil {
		return
	}
	p.n = 0
	if p.err = p.rt.launch(p.rt.fn.spin, 1, 1, 1, 0, arg(profileSpinNs)); p.err != nil {
		return
	}
	p.kinds, p.callsFrom = p.kinds[:0], p.rt.calls
	p.mark("")
}

// mark records the end of op.
func (p *opProfile) mark(op string) {
	if p.err != nil {
		return
	}
	if p.n >= len(p.events) {
		p.err = fmt.Errorf("gpu: profile: more than %d ops in a step", len(p.events)-1)
		return
	}
	p.names[p.n] = op
	for len(p.kinds) < p.rt.calls-p.callsFrom {
		p.kinds = append(p.kinds, op)
	}
	p.err = p.rt.record(p.events[p.n])
	p.n++
}

// end adds the finished step's op times; the stream must have been synchronized.
func (p *opProfile) end() {
	if p.err != nil || p.n == 0 {
		return
	}
	clear(p.count)
	for i := 1; i < p.n; i++ {
		ms, err := p.rt.elapsed(p.events[i-1], p.events[i])
		if err != nil {
			p.err = err
			return
		}
		op := p.names[i]
		if _, ok := p.ms[op]; !ok {
			p.ops = append(p.ops, op)
		}
		p.ms[op] += ms
		p.count[op]++
	}
	p.steps++
	p.n = 0
}

// mark attributes the GPU time since the previous mark to op when profiling.
func (s *state) mark(op string) {
	if s.prof != nil {
		s.prof.mark(op)
	}
}
