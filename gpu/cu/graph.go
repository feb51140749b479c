//go:build cgo

package cu

/*
#include "api.h"
*/
import "C"

// Graph is an instantiated CUDA graph.
type Graph struct{ e C.CUgraphExec }

// Capture records what body enqueues on the stream into a graph and instantiates it. Capture is
// thread-local: only this (locked) thread's calls on the stream are recorded, and nothing in the
// body may synchronize. cuBLAS has its workspace set (OpenBLAS), so its calls capture without
// allocating.
func (c *Context) Capture(body func() error) (Graph, error) {
	a := c.a
	if err := a.check(C.w_beginCapture(a.c, c.stream), "cuStreamBeginCapture"); err != nil {
		return Graph{}, err
	}
	berr := body()
	var g C.CUgraph
	if err := a.check(C.w_endCapture(a.c, c.stream, &g), "cuStreamEndCapture"); err != nil {
		if berr != nil {
			return Graph{}, berr
		}
		return Graph{}, err
	}
	defer func() { _ = a.check(C.w_graphDestroy(a.c, g), "cuGraphDestroy") }()
	if berr != nil {
		return Graph{}, berr
	}
	var e C.CUgraphExec
	if err := a.check(C.w_instantiate(a.c, &e, g), "cuGraphInstantiateWithFlags"); err != nil {
		return Graph{}, err
	}
	c.graphs++
	return Graph{e}, nil
}

// Replay enqueues g on the stream.
func (c *Context) Replay(g Graph) error {
	return c.a.check(C.w_graphLaunch(c.a.c, g.e, c.stream), "cuGraphLaunch")
}

// DestroyGraph frees g; the zero Graph is ignored.
func (c *Context) DestroyGraph(g Graph) error {
	if g.e == nil {
		return nil
	}
	c.graphs--
	return c.a.check(C.w_graphExecDestroy(c.a.c, g.e), "cuGraphExecDestroy")
}
