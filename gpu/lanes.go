//go:build cgo

package gpu

/*
#include "api.h"
*/
import "C"

import "fmt"

// Split decode steps. A decode step's GPU time at 32-64 rows is mostly latency: each of its ~90
// kernels waits for the previous one to finish and flush, and most of them use a fraction of the
// GPU while they run (bench/RESULTS.md: the batch-64 step is 3.8x the time its DRAM bytes need).
// So a decode step can run as two independent chains of kernels ("lanes") over the two halves of
// its rows, on two streams, each lane on small_gemm with programmatic dependent launch at half
// the rows; the GPU overlaps one lane's kernels with the other's. The embedding runs once before
// the fork, the LM head and the sampler once after the join. Both lanes read every weight (the
// second read can hit L2: a layer is 14 MB).
//
// Measured on the H200 (bench/RESULTS.md), the overlap is partial: a 64-row step as two lanes of
// 32 took 473.5 us against 404.2 us for one 32-row chain alone and 464.5 us for one 64-row chain
// on cuBLAS. No batch size ran faster as two lanes than as one, so lanes are off unless
// Options.SplitDecodeRows asks for them (split.go).

// lanes are the runtime's second stream and the events that fork it from and join it to the main
// stream. Owned by the worker goroutine, like the rest of cudaRuntime.
type lanes struct {
	side       C.CUstream
	fork, join C.CUevent
}

func (r *cudaRuntime) openLanes() error {
	a := r.a
	if err := a.check(C.w_streamCreate(a.c, &r.lanes.side), "cuStreamCreate"); err != nil {
		r.lanes.side = nil
		return err
	}
	if err := a.check(C.w_eventCreateNoTiming(a.c, &r.lanes.fork), "cuEventCreate"); err != nil {
		r.lanes.fork = nil
		return err
	}
	if err := a.check(C.w_eventCreateNoTiming(a.c, &r.lanes.join), "cuEventCreate"); err != nil {
		r.lanes.join = nil
		return err
	}
	return nil
}

// closeLanes frees the side stream and the events; safe on partly opened lanes.
func (r *cudaRuntime) closeLanes(keep func(error)) {
	a, l := r.a, &r.lanes
	if l.side != nil {
		keep(a.check(C.w_streamSync(a.c, l.side), "cuStreamSynchronize"))
		keep(a.check(C.w_streamDestroy(a.c, l.side), "cuStreamDestroy"))
		l.side = nil
	}
	for _, e := range []*C.CUevent{&l.fork, &l.join} {
		if *e != nil {
			keep(a.check(C.w_eventDestroy(a.c, *e), "cuEventDestroy"))
			*e = nil
		}
	}
}

// fork makes the side stream wait for everything enqueued on the main stream so far (inside a
// capture this brings the side stream into the capture). Launches still go to the main stream.
func (r *cudaRuntime) fork() error {
	a, l := r.a, &r.lanes
	if err := a.check(C.w_eventRecord(a.c, l.fork, r.stream), "cuEventRecord(fork)"); err != nil {
		return err
	}
	return a.check(C.w_streamWaitEvent(a.c, l.side, l.fork), "cuStreamWaitEvent(fork)")
}

// onSide sends later launches to the side stream, until join.
func (r *cudaRuntime) onSide() { r.cur = r.lanes.side }

// join makes the main stream wait for everything enqueued on the side stream and sends later
// launches to the main stream again.
func (r *cudaRuntime) join() error {
	a, l := r.a, &r.lanes
	r.cur = r.stream
	if err := a.check(C.w_eventRecord(a.c, l.join, l.side), "cuEventRecord(join)"); err != nil {
		return err
	}
	return a.check(C.w_streamWaitEvent(a.c, r.stream, l.join), "cuStreamWaitEvent(join)")
}

// mainOnly fails a cuBLAS call made while launches go to the side stream: the cuBLAS handles are
// bound to the main stream, so the call would run outside its lane's order.
func (r *cudaRuntime) mainOnly(what string) error {
	if r.cur != r.stream {
		return fmt.Errorf("gpu: %s enqueued on the side stream; only gpt2.cu and gemm.cu kernels run there", what)
	}
	return nil
}
