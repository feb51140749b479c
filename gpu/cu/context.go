//go:build cgo

package cu

/*
#include <stdlib.h>
#include "api.h"
*/
import "C"

import (
	"fmt"
	"time"
	"unsafe"
)

// Ptr is a device address.
type Ptr uint64

// WorkspaceBytes is the cuBLAS (and cuBLASLt) workspace, set before any capture so that GEMMs
// capture without allocating.
const WorkspaceBytes = 32 << 20

// Context is a CUDA context of its own on device 0 with one non-blocking stream, the modules
// loaded into it, and (after OpenBLAS) a cuBLAS handle. Every method runs on the worker goroutine
// (Worker); nothing here is touched from anywhere else.
//
// Not the device's primary context: there, every user after the first in a process (a dashboard
// that rebuilds its engine) ran its kernels slower; a context of its own, destroyed on Close,
// leaves nothing behind for the next.
type Context struct {
	a      *api
	info   DeviceInfo
	ctx    C.CUcontext
	stream C.CUstream // copies, cuBLAS, launches, graph launches, synchronization
	mods   []C.CUmodule
	blas   C.cublasHandle_t
	ws     Ptr // the cuBLAS workspace
	args   *C.rt_args

	// Allocation accounting (Stats).
	deviceAllocs, hostAllocs int   // calls to cuMemAlloc / cuMemAllocHost so far
	deviceLive, hostLive     int64 // bytes currently allocated
	graphs                   int   // instantiated graphs alive
	live                     map[Ptr]int64
	liveHost                 map[unsafe.Pointer]int64
}

// Stats count a Context's allocations and graphs.
type Stats struct {
	DeviceAllocs, HostAllocs int   // cuMemAlloc / cuMemAllocHost calls so far
	DeviceBytes, HostBytes   int64 // live bytes
	Graphs                   int   // instantiated graphs alive
}

// Open loads the driver and cuBLAS, creates a context of its own on device 0 and its stream. It
// must run on the worker thread; the context stays current there. took is the time from the
// libraries' loading to the stream's creation (the device's own cold start).
func Open() (c *Context, took time.Duration, err error) {
	a, err := openAPI(true)
	if err != nil {
		return nil, 0, err
	}
	t0 := time.Now()
	c = &Context{a: a, live: map[Ptr]int64{}, liveHost: map[unsafe.Pointer]int64{}}
	if c.info, err = a.initDevice(); err != nil {
		c.Close()
		return nil, 0, err
	}
	if err = a.check(C.w_ctxCreate(a.c, &c.ctx, c.info.dev), "cuCtxCreate"); err != nil {
		c.ctx = nil
		c.Close()
		return nil, 0, err
	}
	if err = a.check(C.w_ctxSetCurrent(a.c, c.ctx), "cuCtxSetCurrent"); err != nil {
		c.Close()
		return nil, 0, err
	}
	if err = a.check(C.w_streamCreate(a.c, &c.stream), "cuStreamCreate"); err != nil {
		c.stream = nil
		c.Close()
		return nil, 0, err
	}
	took = time.Since(t0)
	if c.args = C.args_new(); c.args == nil {
		c.Close()
		return nil, 0, fmt.Errorf("cu: out of host memory for kernel arguments")
	}
	return c, took, nil
}

// OpenBLAS creates the cuBLAS handle on the stream with its workspace. It returns the name of the
// libcublas found.
func (c *Context) OpenBLAS() (string, error) {
	a := c.a
	if err := a.checkBLAS(C.w_blasCreate(a.c, &c.blas), "cublasCreate"); err != nil {
		c.blas = nil
		return "", err
	}
	if err := a.checkBLAS(C.w_blasSetStream(a.c, c.blas, c.stream), "cublasSetStream"); err != nil {
		return "", err
	}
	var err error
	if c.ws, err = c.Alloc(WorkspaceBytes, "cuBLAS workspace"); err != nil {
		return "", err
	}
	if err = a.checkBLAS(C.w_blasSetWorkspace(a.c, c.blas, C.CUdeviceptr(c.ws), WorkspaceBytes), "cublasSetWorkspace"); err != nil {
		return "", err
	}
	return a.cublasName, nil
}

// Info describes the context's device.
func (c *Context) Info() DeviceInfo { return c.info }

// HasLaunchEx reports whether the driver has cuLaunchKernelEx (CUDA 11.8+), which LaunchEx needs.
func (c *Context) HasLaunchEx() bool { return C.w_haveLaunchEx(c.a.c) != 0 }

// Stats reports the allocations so far.
func (c *Context) Stats() Stats {
	return Stats{c.deviceAllocs, c.hostAllocs, c.deviceLive, c.hostLive, c.graphs}
}

// Close frees everything the context holds and destroys it; safe on a partly opened Context.
// Graphs and events must have been destroyed.
func (c *Context) Close() error {
	var first error
	keep := func(err error) {
		if first == nil {
			first = err
		}
	}
	a := c.a
	if a == nil {
		return nil
	}
	if c.stream != nil {
		keep(c.Sync())
	}
	if c.blas != nil {
		keep(a.checkBLAS(C.w_blasDestroy(a.c, c.blas), "cublasDestroy"))
		c.blas = nil
	}
	for p := range c.live {
		keep(c.Free(p))
	}
	for p := range c.liveHost {
		keep(c.FreeHost(p))
	}
	for _, m := range c.mods {
		keep(a.check(C.w_moduleUnload(a.c, m), "cuModuleUnload"))
	}
	c.mods = nil
	if c.stream != nil {
		keep(a.check(C.w_streamDestroy(a.c, c.stream), "cuStreamDestroy"))
		c.stream = nil
	}
	if c.ctx != nil {
		keep(a.check(C.w_ctxDestroy(a.c, c.ctx), "cuCtxDestroy"))
		c.ctx = nil
	}
	if c.args != nil {
		C.args_free(c.args)
		c.args = nil
	}
	a.close()
	c.a = nil
	return first
}

// Alloc returns n bytes of device memory; what names them in an error.
func (c *Context) Alloc(n int64, what string) (Ptr, error) {
	var p C.CUdeviceptr
	if err := c.a.check(C.w_memAlloc(c.a.c, &p, C.size_t(n)), "cuMemAlloc(%s, %d MiB)", what, n>>20); err != nil {
		return 0, err
	}
	c.deviceAllocs++
	c.deviceLive += n
	c.live[Ptr(p)] = n
	return Ptr(p), nil
}

// Free frees device memory from Alloc; other addresses are ignored.
func (c *Context) Free(p Ptr) error {
	n, ok := c.live[p]
	if !ok {
		return nil
	}
	delete(c.live, p)
	c.deviceLive -= n
	return c.a.check(C.w_memFree(c.a.c, C.CUdeviceptr(p)), "cuMemFree")
}

// Zero enqueues setting n bytes at p to 0.
func (c *Context) Zero(p Ptr, n int64) error {
	return c.a.check(C.w_memset(c.a.c, C.CUdeviceptr(p), C.size_t(n), c.stream), "cuMemsetD8Async")
}

// AllocHost returns n bytes of page-locked host memory (for async copies), mapped into the
// device's address space (HostDevPtr).
func (c *Context) AllocHost(n int64, what string) (unsafe.Pointer, error) {
	var p unsafe.Pointer
	if err := c.a.check(C.w_hostAlloc(c.a.c, &p, C.size_t(n)), "cuMemAllocHost(%s, %d KiB)", what, n>>10); err != nil {
		return nil, err
	}
	c.hostAllocs++
	c.hostLive += n
	c.liveHost[p] = n
	return p, nil
}

// HostDevPtr is the device address of pinned host memory from AllocHost: kernels write there
// directly, with no copy node.
func (c *Context) HostDevPtr(p unsafe.Pointer) (Ptr, error) {
	var d C.CUdeviceptr
	err := c.a.check(C.w_hostDevPtr(c.a.c, &d, p), "cuMemHostGetDevicePointer")
	return Ptr(d), err
}

// FreeHost frees pinned memory from AllocHost; other addresses are ignored.
func (c *Context) FreeHost(p unsafe.Pointer) error {
	n, ok := c.liveHost[p]
	if !ok {
		return nil
	}
	delete(c.liveHost, p)
	c.hostLive -= n
	return c.a.check(C.w_hostFree(c.a.c, p), "cuMemFreeHost")
}

// MemInfo returns the device's free and total memory.
func (c *Context) MemInfo() (free, total int64, err error) {
	var f, t C.size_t
	err = c.a.check(C.w_memInfo(c.a.c, &f, &t), "cuMemGetInfo")
	return int64(f), int64(t), err
}

// Upload copies n host bytes to the device asynchronously on the stream. The source must stay
// unchanged until the stream is synchronized (pinned) or is copied by the driver before return
// (pageable memory: the driver stages it, so the call returns once the source was read).
func (c *Context) Upload(dst Ptr, src unsafe.Pointer, n int64) error {
	if n == 0 {
		return nil
	}
	// The result is tested before check: boxing n for the message would allocate every step.
	if res := C.w_htod(c.a.c, C.CUdeviceptr(dst), C.uintptr_t(uintptr(src)), C.size_t(n), c.stream); res != 0 {
		return c.a.check(res, "cuMemcpyHtoDAsync(%d bytes)", n)
	}
	return nil
}

// Download copies n device bytes to host memory asynchronously on the stream.
func (c *Context) Download(dst unsafe.Pointer, src Ptr, n int64) error {
	if res := C.w_dtoh(c.a.c, C.uintptr_t(uintptr(dst)), C.CUdeviceptr(src), C.size_t(n), c.stream); res != 0 {
		return c.a.check(res, "cuMemcpyDtoHAsync(%d bytes)", n)
	}
	return nil
}

// DownloadRows copies rows rows of width bytes, srcPitch bytes apart on the device, to host memory
// dstPitch bytes apart, asynchronously on the stream (one pitched copy: rows padded on the device
// arrive packed).
func (c *Context) DownloadRows(dst unsafe.Pointer, dstPitch int64, src Ptr, srcPitch, width int64, rows int) error {
	if rows == 0 {
		return nil
	}
	res := C.w_dtoh2d(c.a.c, C.uintptr_t(uintptr(dst)), C.size_t(dstPitch), C.CUdeviceptr(src), C.size_t(srcPitch),
		C.size_t(width), C.size_t(rows), c.stream)
	if res != 0 {
		return c.a.check(res, "cuMemcpy2DAsync(%d rows of %d bytes)", rows, width)
	}
	return nil
}

// Sync waits for everything enqueued on the stream.
func (c *Context) Sync() error {
	return c.a.check(C.w_streamSync(c.a.c, c.stream), "cuStreamSynchronize")
}
