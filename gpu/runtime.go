//go:build cgo

package gpu

/*
#include <stdlib.h>
#include "api.h"
*/
import "C"

import (
	"fmt"
	"math"
	"time"
	"unsafe"
)

// devPtr is a device address.
type devPtr = C.CUdeviceptr

// runtime is one device's context, stream, module and cuBLAS handle. Every method runs on the
// worker goroutine (see worker); nothing here is touched from anywhere else.
type cudaRuntime struct {
	a      *api
	info   deviceInfo
	ctx    C.CUcontext
	stream C.CUstream // the main stream: copies, cuBLAS, graph launches, synchronization
	// cur is the stream kernel launches go to: stream, or lanes.side while a split decode step
	// enqueues its second lane (lanes.go).
	cur    C.CUstream
	lanes  lanes
	mods   [numModules]C.CUmodule // gpt2, sample, gemm
	blas   C.cublasHandle_t
	ws     devPtr // cuBLAS workspace, set before any capture
	ownCtx bool
	args   *C.rt_args
	fn     kernels
	// ex: compute capability 9.x and a driver with cuLaunchKernelEx, so launchEx works and the
	// sm_90-only kernels (gemm.cu) run.
	ex bool

	// Allocation accounting: the steady-state test asserts these stop moving.
	deviceAllocs, hostAllocs int   // calls to cuMemAlloc / cuMemAllocHost so far
	deviceLive, hostLive     int64 // bytes currently allocated through this runtime
	graphs                   int   // instantiated graphs alive
	live                     map[devPtr]int64
	liveHost                 map[unsafe.Pointer]int64

	// Profiling (tests only): calls counts kernel launches and GEMM calls; when only is set,
	// call i is enqueued only if only[i], so a graph can hold one kind of op of a step.
	calls int
	only  []bool
}

// skip counts a launch or GEMM call and reports whether the profiling filter drops it.
func (r *cudaRuntime) skip() bool {
	i := r.calls
	r.calls++
	return r.only != nil && (i >= len(r.only) || !r.only[i])
}

// timed is one cold-start cost measured while opening: what, detail, took.
type timed struct {
	What, Detail string
	Took         time.Duration
}

const workspaceBytes = 32 << 20

// openRuntime loads the driver and cuBLAS, creates a context of its own on device 0, creates the
// stream, loads the kernels and creates the cuBLAS handle. It must run on the worker thread.
//
// Not the device's primary context: in it, every Runner opened after the first in a process ran
// slower (H200: a batch-64 decode step 482 -> 513 us, every kernel a little, at the same
// allocation addresses; why is not known), so a dashboard that rebuilds its engine was 6% slower
// from then on. With a context per Runner, destroyed with it, every Runner measured as fast as
// the first (bench/RESULTS.md).
func openRuntime(costs *[]timed) (*cudaRuntime, error) {
	a, err := openAPI(true)
	if err != nil {
		return nil, err
	}
	r := &cudaRuntime{a: a, live: map[devPtr]int64{}, liveHost: map[unsafe.Pointer]int64{}}
	t0 := time.Now()
	if r.info, err = a.initDevice(); err != nil {
		r.close()
		return nil, err
	}
	if err = a.check(C.w_ctxCreate(a.c, &r.ctx, r.info.dev), "cuCtxCreate"); err != nil {
		r.ctx = nil
		r.close()
		return nil, err
	}
	if err = a.check(C.w_ctxSetCurrent(a.c, r.ctx), "cuCtxSetCurrent"); err != nil {
		r.close()
		return nil, err
	}
	if err = a.check(C.w_streamCreate(a.c, &r.stream), "cuStreamCreate"); err != nil {
		r.close()
		return nil, err
	}
	r.cur = r.stream
	if err = r.openLanes(); err != nil {
		r.close()
		return nil, err
	}
	*costs = append(*costs, timed{"CUDA context", r.info.Name, time.Since(t0)})
	t0 = time.Now()
	from, err := r.loadKernels()
	if err != nil {
		r.close()
		return nil, err
	}
	*costs = append(*costs, timed{"kernel module load", fmt.Sprintf("%d kernels from %s", numKernels, from), time.Since(t0)})
	r.ex = r.info.CC/10 == 9 && C.w_haveLaunchEx(a.c) != 0
	t0 = time.Now()
	if err = a.checkBLAS(C.w_blasCreate(a.c, &r.blas), "cublasCreate"); err != nil {
		r.blas = nil
		r.close()
		return nil, err
	}
	if err = a.checkBLAS(C.w_blasSetStream(a.c, r.blas, r.stream), "cublasSetStream"); err != nil {
		r.close()
		return nil, err
	}
	if r.ws, err = r.alloc(workspaceBytes, "cuBLAS workspace"); err != nil {
		r.close()
		return nil, err
	}
	if err = a.checkBLAS(C.w_blasSetWorkspace(a.c, r.blas, r.ws, workspaceBytes), "cublasSetWorkspace"); err != nil {
		r.close()
		return nil, err
	}
	*costs = append(*costs, timed{"cuBLAS init", a.cublasName, time.Since(t0)})
	if r.args = C.args_new(); r.args == nil {
		r.close()
		return nil, fmt.Errorf("gpu: out of host memory for kernel arguments")
	}
	return r, nil
}

// close frees everything the runtime holds; safe on a partly opened runtime.
func (r *cudaRuntime) close() error {
	var first error
	keep := func(err error) {
		if first == nil {
			first = err
		}
	}
	a := r.a
	if a == nil {
		return nil
	}
	if r.stream != nil {
		keep(a.check(C.w_streamSync(a.c, r.stream), "cuStreamSynchronize"))
	}
	r.closeLanes(keep)
	if r.blas != nil {
		keep(a.checkBLAS(C.w_blasDestroy(a.c, r.blas), "cublasDestroy"))
		r.blas = nil
	}
	for p := range r.live {
		keep(r.free(p))
	}
	for p := range r.liveHost {
		keep(r.freeHost(p))
	}
	for i, m := range r.mods {
		if m != nil {
			keep(a.check(C.w_moduleUnload(a.c, m), "cuModuleUnload"))
			r.mods[i] = nil
		}
	}
	if r.stream != nil {
		keep(a.check(C.w_streamDestroy(a.c, r.stream), "cuStreamDestroy"))
		r.stream = nil
	}
	if r.ctx != nil {
		keep(a.check(C.w_ctxDestroy(a.c, r.ctx), "cuCtxDestroy"))
		r.ctx = nil
	}
	if r.args != nil {
		C.free(unsafe.Pointer(r.args))
		r.args = nil
	}
	a.close()
	r.a = nil
	return first
}

func (r *cudaRuntime) alloc(n int64, what string) (devPtr, error) {
	var p devPtr
	if err := r.a.check(C.w_memAlloc(r.a.c, &p, C.size_t(n)), "cuMemAlloc(%s, %d MiB)", what, n>>20); err != nil {
		return 0, err
	}
	r.deviceAllocs++
	r.deviceLive += n
	r.live[p] = n
	return p, nil
}

func (r *cudaRuntime) free(p devPtr) error {
	n, ok := r.live[p]
	if !ok {
		return nil
	}
	delete(r.live, p)
	r.deviceLive -= n
	return r.a.check(C.w_memFree(r.a.c, p), "cuMemFree")
}

// zero enqueues setting n bytes at p to 0.
func (r *cudaRuntime) zero(p devPtr, n int64) error {
	return r.a.check(C.w_memset(r.a.c, p, C.size_t(n), r.stream), "cuMemsetD8Async")
}

// allocHost returns n bytes of page-locked host memory (for async copies).
func (r *cudaRuntime) allocHost(n int64, what string) (unsafe.Pointer, error) {
	var p unsafe.Pointer
	if err := r.a.check(C.w_hostAlloc(r.a.c, &p, C.size_t(n)), "cuMemAllocHost(%s, %d KiB)", what, n>>10); err != nil {
		return nil, err
	}
	r.hostAllocs++
	r.hostLive += n
	r.liveHost[p] = n
	return p, nil
}

// hostDevPtr is the device address of pinned host memory (cuMemAllocHost memory is mapped into
// the device's address space): kernels write there directly, with no copy node.
func (r *cudaRuntime) hostDevPtr(p unsafe.Pointer) (devPtr, error) {
	var d devPtr
	err := r.a.check(C.w_hostDevPtr(r.a.c, &d, p), "cuMemHostGetDevicePointer")
	return d, err
}

func (r *cudaRuntime) freeHost(p unsafe.Pointer) error {
	n, ok := r.liveHost[p]
	if !ok {
		return nil
	}
	delete(r.liveHost, p)
	r.hostLive -= n
	return r.a.check(C.w_hostFree(r.a.c, p), "cuMemFreeHost")
}

// memInfo returns the device's free and total memory.
func (r *cudaRuntime) memInfo() (free, total int64, err error) {
	var f, t C.size_t
	err = r.a.check(C.w_memInfo(r.a.c, &f, &t), "cuMemGetInfo")
	return int64(f), int64(t), err
}

// upload copies host bytes to the device asynchronously on the stream. The source must stay
// unchanged until the stream is synchronized (pinned) or is copied by the driver before return
// (pageable memory: the driver stages it, so the call returns once the source was read).
func (r *cudaRuntime) upload(dst devPtr, src unsafe.Pointer, n int64) error {
	if n == 0 {
		return nil
	}
	// The result is tested before check: boxing n for the message would allocate every step.
	if res := C.w_htod(r.a.c, dst, C.uintptr_t(uintptr(src)), C.size_t(n), r.stream); res != 0 {
		return r.a.check(res, "cuMemcpyHtoDAsync(%d bytes)", n)
	}
	return nil
}

func (r *cudaRuntime) download(dst unsafe.Pointer, src devPtr, n int64) error {
	if res := C.w_dtoh(r.a.c, C.uintptr_t(uintptr(dst)), src, C.size_t(n), r.stream); res != 0 {
		return r.a.check(res, "cuMemcpyDtoHAsync(%d bytes)", n)
	}
	return nil
}

func (r *cudaRuntime) sync() error {
	return r.a.check(C.w_streamSync(r.a.c, r.stream), "cuStreamSynchronize")
}

// arg is one kernel parameter, already encoded into its 8-byte slot.
type arg uint64

func pArg(p devPtr) arg  { return arg(p) }
func iArg(v int) arg     { return arg(uint32(int32(v))) }
func fArg(v float32) arg { return arg(math.Float32bits(v)) }

// setArgs copies a launch's arguments into the runtime's C argument block. It returns false (and
// enqueues nothing) when the profiling filter drops the launch or the arguments do not fit.
func (r *cudaRuntime) setArgs(f kernel, args []arg) (bool, error) {
	if r.skip() {
		return false, nil
	}
	if len(args) > len(r.args.vals) {
		return false, fmt.Errorf("gpu: %s: %d arguments, at most %d", f.name, len(args), len(r.args.vals))
	}
	for i, v := range args {
		r.args.vals[i] = C.ulonglong(v)
	}
	return true, nil
}

// launch runs kernel f on the stream with grid (gx, gy), bx threads and shmem bytes of dynamic
// shared memory. The arguments are copied into the runtime's C argument block: no allocation.
func (r *cudaRuntime) launch(f kernel, gx, gy, bx, shmem int, args ...arg) error {
	if run, err := r.setArgs(f, args); !run {
		return err
	}
	res := C.w_launch(r.a.c, f.f, C.uint(gx), C.uint(gy), C.uint(bx), C.uint(shmem), r.cur, &r.args.ptrs[0])
	if res != 0 {
		return r.a.check(res, "cuLaunchKernel(%s, grid %dx%d, block %d)", f.name, gx, gy, bx)
	}
	return nil
}

// launchEx is launch through cuLaunchKernelEx: with pdl, the kernel may start while the previous
// kernel on the stream is still running (programmatic dependent launch: every such kernel waits
// with griddepcontrol.wait before it reads anything an earlier kernel wrote); with clusterY > 1,
// in thread block clusters of (1, clusterY, 1). Only when r.ex (compute capability 9.x and a
// driver with cuLaunchKernelEx).
func (r *cudaRuntime) launchEx(f kernel, gx, gy, bx, shmem int, pdl bool, clusterY int, args ...arg) error {
	if run, err := r.setArgs(f, args); !run {
		return err
	}
	p := C.int(0)
	if pdl {
		p = 1
	}
	res := C.w_launchEx(r.a.c, f.f, C.uint(gx), C.uint(gy), C.uint(bx), C.uint(shmem), r.cur, &r.args.ptrs[0], p, C.uint(clusterY))
	if res != 0 {
		return r.a.check(res, "cuLaunchKernelEx(%s, grid %dx%d, block %d, cluster 1x%d, pdl %v)", f.name, gx, gy, bx, clusterY, pdl)
	}
	return nil
}

// setMaxShared lets f use up to bytes of dynamic shared memory
// (CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES = 8).
func (r *cudaRuntime) setMaxShared(f kernel, bytes int) error {
	return r.a.check(C.w_funcAttr(r.a.c, f.f, 8, C.int(bytes)), "cuFuncSetAttribute(%s, %d bytes of shared memory)", f.name, bytes)
}

// allowBigClusters lets f run in clusters of more than 8 blocks
// (CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED = 14).
func (r *cudaRuntime) allowBigClusters(f kernel) error {
	return r.a.check(C.w_funcAttr(r.a.c, f.f, 14, 1), "cuFuncSetAttribute(%s, non-portable cluster size)", f.name)
}

// gemm computes row-major Y(n, out) = X(n, in) W(in, out) with fp16 X and W, fp32 accumulation,
// and Y in fp16 (yF32 false) or fp32. Column-major cuBLAS sees Y^T = W^T X^T: no transposes.
func (r *cudaRuntime) gemm(y, x, w devPtr, n, in, out int, yF32 bool) error {
	return r.gemmLayout(y, x, w, n, in, out, yF32, false)
}

// gemmSplitK is gemm (fp32 Y, weight [in, out]) with K cut into splits slices run as one
// strided batch: Y_s(n, out) at y + s*n*out (floats) holds slice s's partial sum.
func (r *cudaRuntime) gemmSplitK(y, x, w devPtr, n, in, out, splits int) error {
	if err := r.mainOnly("cublasGemmStridedBatchedEx"); err != nil {
		return err
	}
	if r.skip() {
		return nil
	}
	s := C.w_gemmSplitK(r.a.c, r.blas, C.int(out), C.int(n), C.int(in), C.int(splits), w, C.int(out), x, C.int(in), y, C.int(out))
	if s != 0 {
		return r.a.checkBLAS(s, fmt.Sprintf("cublasGemmStridedBatchedEx(%dx%d @ %dx%d, %d K slices)", n, in, in, out, splits))
	}
	return nil
}

// gemmLayout is gemm with the weight stored as W (in, out) row-major, or transposed as
// W^T (out, in) row-major when wT (cuBLAS's "TN" case, PyTorch's nn.Linear layout).
func (r *cudaRuntime) gemmLayout(y, x, w devPtr, n, in, out int, yF32, wT bool) error {
	if err := r.mainOnly("cublasGemmEx"); err != nil {
		return err
	}
	if r.skip() {
		return nil
	}
	ct := C.int(2) // CUDA_R_16F
	if yF32 {
		ct = 0 // CUDA_R_32F
	}
	trans, lda := C.int(0), C.int(out)
	if wT {
		trans, lda = 1, C.int(in)
	}
	s := C.w_gemm(r.a.c, r.blas, trans, C.int(out), C.int(n), C.int(in), w, lda, x, C.int(in), y, ct, C.int(out))
	if s != 0 {
		return r.a.checkBLAS(s, fmt.Sprintf("cublasGemmEx(%dx%d @ %dx%d)", n, in, in, out))
	}
	return nil
}
