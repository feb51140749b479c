//go:build cgo

package gpu

/*
#include "api.h"
*/
import "C"

// graphExec is an instantiated CUDA graph.
type graphExec struct{ e C.CUgraphExec }

// capture records what body enqueues on the stream into a graph and instantiates it. Capture is
// thread-local: only this (locked) thread's calls on the stream are recorded, and nothing in the
// body may synchronize. cuBLAS has its workspace set, so its calls capture without allocating.
func (r *cudaRuntime) capture(body func() error) (graphExec, error) {
	a := r.a
	if err := a.check(C.w_beginCapture(a.c, r.stream), "cuStreamBeginCapture"); err != nil {
		return graphExec{}, err
	}
	berr := body()
	var g C.CUgraph
	if err := a.check(C.w_endCapture(a.c, r.stream, &g), "cuStreamEndCapture"); err != nil {
		if berr != nil {
			return graphExec{}, berr
		}
		return graphExec{}, err
	}
	defer func() { _ = a.check(C.w_graphDestroy(a.c, g), "cuGraphDestroy") }()
	if berr != nil {
		return graphExec{}, berr
	}
	var e C.CUgraphExec
	if err := a.check(C.w_instantiate(a.c, &e, g), "cuGraphInstantiateWithFlags"); err != nil {
		return graphExec{}, err
	}
	r.graphs++
	return graphExec{e}, nil
}

func (r *cudaRuntime) replay(g graphExec) error {
	return r.a.check(C.w_graphLaunch(r.a.c, g.e, r.stream), "cuGraphLaunch")
}

func (r *cudaRuntime) destroyGraph(g graphExec) error {
	if g.e == nil {
		return nil
	}
	r.graphs--
	return r.a.check(C.w_graphExecDestroy(r.a.c, g.e), "cuGraphExecDestroy")
}
