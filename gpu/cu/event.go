//go:build cgo

package cu

/*
#include "api.h"
*/
import "C"

// Event is a CUDA event; the zero Event is none.
type Event struct{ e C.CUevent }

// IsZero reports whether e is the zero Event.
func (e Event) IsZero() bool { return e.e == nil }

// NewEvent creates an event, with timing (Elapsed) or without (cheaper to record and wait for).
func (c *Context) NewEvent(timing bool) (Event, error) {
	var e C.CUevent
	var res C.CUresult
	if timing {
		res = C.w_eventCreate(c.a.c, &e)
	} else {
		res = C.w_eventCreateNoTiming(c.a.c, &e)
	}
	if err := c.a.check(res, "cuEventCreate"); err != nil {
		return Event{}, err
	}
	return Event{e}, nil
}

// DestroyEvent frees e; the zero Event is ignored.
func (c *Context) DestroyEvent(e Event) error {
	if e.e == nil {
		return nil
	}
	return c.a.check(C.w_eventDestroy(c.a.c, e.e), "cuEventDestroy")
}

// Record enqueues e on the stream.
func (c *Context) Record(e Event) error {
	return c.a.check(C.w_eventRecord(c.a.c, e.e, c.stream), "cuEventRecord")
}

// WaitEvent waits until the work enqueued before e's last Record has finished.
func (c *Context) WaitEvent(e Event) error {
	return c.a.check(C.w_eventSync(c.a.c, e.e), "cuEventSynchronize")
}

// Elapsed is the GPU time between two completed timing events, in milliseconds.
func (c *Context) Elapsed(from, to Event) (float64, error) {
	var ms C.float
	err := c.a.check(C.w_eventElapsed(c.a.c, &ms, from.e, to.e), "cuEventElapsedTime")
	return float64(ms), err
}
