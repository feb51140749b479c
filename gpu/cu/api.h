// rosetop's own declarations of the few CUDA driver and cuBLAS entry points package cu uses.
// No CUDA header is needed to build: the libraries are opened with dlopen at run time and every
// function is called through a pointer in rt_api. Types and constants follow the public CUDA
// driver API (cuda.h) and cuBLAS API (cublas_api.h) ABIs, which are stable across 11.x-13.x.
#ifndef ROSETOP_GPU_API_H
#define ROSETOP_GPU_API_H

#include <stddef.h>
#include <stdint.h>

typedef int CUresult;          // 0 = CUDA_SUCCESS
typedef int CUdevice;
typedef void *CUcontext;
typedef void *CUstream;
typedef void *CUmodule;
typedef void *CUfunction;
typedef void *CUevent;
typedef void *CUgraph;
typedef void *CUgraphExec;
typedef unsigned long long CUdeviceptr;
typedef int cublasStatus_t;    // 0 = CUBLAS_STATUS_SUCCESS
typedef void *cublasHandle_t;

// CUDA_MEMCPY2D (cuda.h, the _v2 layout): a pitched copy between host and device memory.
typedef struct {
	size_t srcXInBytes, srcY;
	int srcMemoryType; // CUmemorytype: 1 host, 2 device
	const void *srcHost;
	CUdeviceptr srcDevice;
	void *srcArray;
	size_t srcPitch;
	size_t dstXInBytes, dstY;
	int dstMemoryType;
	void *dstHost;
	CUdeviceptr dstDevice;
	void *dstArray;
	size_t dstPitch;
	size_t WidthInBytes, Height;
} CUDA_MEMCPY2D;

typedef struct rt_api {
	void *libcuda;
	void *libcublas;
	char cublas_name[32];

	CUresult (*cuInit)(unsigned int);
	CUresult (*cuGetErrorName)(CUresult, const char **);
	CUresult (*cuDriverGetVersion)(int *);
	CUresult (*cuDeviceGetCount)(int *);
	CUresult (*cuDeviceGet)(CUdevice *, int);
	CUresult (*cuDeviceGetName)(char *, int, CUdevice);
	CUresult (*cuDeviceGetAttribute)(int *, int, CUdevice);
	CUresult (*cuCtxSetCurrent)(CUcontext);
	CUresult (*cuCtxCreate)(CUcontext *, unsigned int, CUdevice);
	CUresult (*cuCtxDestroy)(CUcontext);
	CUresult (*cuMemGetInfo)(size_t *, size_t *);
	CUresult (*cuMemAlloc)(CUdeviceptr *, size_t);
	CUresult (*cuMemFree)(CUdeviceptr);
	CUresult (*cuMemAllocHost)(void **, size_t);
	CUresult (*cuMemFreeHost)(void *);
	CUresult (*cuMemHostGetDevicePointer)(CUdeviceptr *, void *, unsigned int);
	CUresult (*cuMemcpyHtoDAsync)(CUdeviceptr, const void *, size_t, CUstream);
	CUresult (*cuMemcpyDtoHAsync)(void *, CUdeviceptr, size_t, CUstream);
	CUresult (*cuMemcpy2DAsync)(const CUDA_MEMCPY2D *, CUstream);
	CUresult (*cuMemsetD8Async)(CUdeviceptr, unsigned char, size_t, CUstream);
	CUresult (*cuStreamCreate)(CUstream *, unsigned int);
	CUresult (*cuStreamDestroy)(CUstream);
	CUresult (*cuStreamSynchronize)(CUstream);
	CUresult (*cuModuleLoadData)(CUmodule *, const void *);
	CUresult (*cuModuleUnload)(CUmodule);
	CUresult (*cuModuleGetFunction)(CUfunction *, CUmodule, const char *);
	CUresult (*cuFuncSetAttribute)(CUfunction, int, int);
	CUresult (*cuLaunchKernel)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
	                           unsigned, CUstream, void **, void **);
	CUresult (*cuLaunchKernelEx)(const void *, CUfunction, void **, void **); // NULL before CUDA 11.8
	CUresult (*cuTensorMapEncodeTiled)(void *, int, unsigned, void *, const unsigned long long *,
	                                   const unsigned long long *, const unsigned *, const unsigned *, int, int, int,
	                                   int); // NULL before CUDA 12.0
	CUresult (*cuStreamBeginCapture)(CUstream, int);
	CUresult (*cuStreamEndCapture)(CUstream, CUgraph *);
	CUresult (*cuGraphInstantiateWithFlags)(CUgraphExec *, CUgraph, unsigned long long);
	CUresult (*cuGraphLaunch)(CUgraphExec, CUstream);
	CUresult (*cuGraphExecDestroy)(CUgraphExec);
	CUresult (*cuGraphDestroy)(CUgraph);
	CUresult (*cuEventCreate)(CUevent *, unsigned int);
	CUresult (*cuEventDestroy)(CUevent);
	CUresult (*cuEventRecord)(CUevent, CUstream);
	CUresult (*cuEventSynchronize)(CUevent);
	CUresult (*cuEventElapsedTime)(float *, CUevent, CUevent);

	cublasStatus_t (*cublasCreate)(cublasHandle_t *);
	cublasStatus_t (*cublasDestroy)(cublasHandle_t);
	cublasStatus_t (*cublasSetStream)(cublasHandle_t, CUstream);
	cublasStatus_t (*cublasSetWorkspace)(cublasHandle_t, void *, size_t);
	cublasStatus_t (*cublasGemmEx)(cublasHandle_t, int, int, int, int, int, const void *,
	                               const void *, int, int, const void *, int, int, const void *,
	                               void *, int, int, int, int);
	cublasStatus_t (*cublasGemmStridedBatchedEx)(cublasHandle_t, int, int, int, int, int, const void *,
	                                             const void *, int, int, long long, const void *, int, int,
	                                             long long, const void *, void *, int, int, long long, int, int,
	                                             int);
	const char *(*cublasGetStatusName)(cublasStatus_t);
} rt_api;

rt_api *rt_open(char *err, int errlen, int with_cublas);
void rt_close(rt_api *a);

// Kernel parameters live in C memory: cuLaunchKernel takes an array of pointers to the values,
// and Go memory holding pointers must not be handed to C. Each slot is 8 bytes; 4-byte parameters
// use the low half (little endian). A slot whose bit is set in maps_used holds the index of a
// tensor map (CUtensorMap: 128 bytes, 64-byte aligned) in maps instead, which the launch passes.
typedef struct {
	unsigned long long vals[24];
	void *ptrs[24];
	unsigned maps_used;
	int nmaps;
	unsigned char *maps;
} rt_args;
rt_args *args_new(void);
void args_free(rt_args *a);
int args_maps(rt_args *a, int n);

CUresult w_cuInit(rt_api *a);
const char *w_errName(rt_api *a, CUresult r);
CUresult w_driverVersion(rt_api *a, int *v);
CUresult w_deviceCount(rt_api *a, int *n);
CUresult w_deviceGet(rt_api *a, CUdevice *d, int i);
CUresult w_deviceName(rt_api *a, char *s, int n, CUdevice d);
CUresult w_deviceAttr(rt_api *a, int *v, int attr, CUdevice d);
CUresult w_ctxSetCurrent(rt_api *a, CUcontext c);
CUresult w_ctxCreate(rt_api *a, CUcontext *c, CUdevice d);
CUresult w_ctxDestroy(rt_api *a, CUcontext c);
CUresult w_memInfo(rt_api *a, size_t *f, size_t *t);
CUresult w_memAlloc(rt_api *a, CUdeviceptr *p, size_t n);
CUresult w_memFree(rt_api *a, CUdeviceptr p);
CUresult w_hostAlloc(rt_api *a, void **p, size_t n);
CUresult w_hostFree(rt_api *a, void *p);
CUresult w_hostDevPtr(rt_api *a, CUdeviceptr *d, void *p);
CUresult w_htod(rt_api *a, CUdeviceptr d, uintptr_t h, size_t n, CUstream s);
CUresult w_dtoh(rt_api *a, uintptr_t h, CUdeviceptr d, size_t n, CUstream s);
CUresult w_dtoh2d(rt_api *a, uintptr_t h, size_t hpitch, CUdeviceptr d, size_t dpitch, size_t width, size_t rows, CUstream s);
CUresult w_memset(rt_api *a, CUdeviceptr d, size_t n, CUstream s);
CUresult w_streamCreate(rt_api *a, CUstream *s);
CUresult w_streamDestroy(rt_api *a, CUstream s);
CUresult w_streamSync(rt_api *a, CUstream s);
CUresult w_moduleLoad(rt_api *a, CUmodule *m, const void *img);
CUresult w_moduleUnload(rt_api *a, CUmodule m);
CUresult w_moduleFunc(rt_api *a, CUfunction *f, CUmodule m, const char *n);
CUresult w_funcAttr(rt_api *a, CUfunction f, int attr, int v);
CUresult w_launch(rt_api *a, CUfunction f, unsigned gx, unsigned gy, unsigned bx, unsigned shmem, CUstream s, rt_args *args);
int w_haveLaunchEx(rt_api *a);
CUresult w_launchEx(rt_api *a, CUfunction f, unsigned gx, unsigned gy, unsigned bx, unsigned shmem, CUstream s, rt_args *args,
                    int pdl, unsigned clusterX, unsigned clusterY);
int w_haveTensorMaps(rt_api *a);
CUresult w_encodeMap(rt_api *a, rt_args *args, int i, CUdeviceptr base, unsigned long long cols, unsigned long long rows,
                     unsigned boxCols, unsigned boxRows);
CUresult w_beginCapture(rt_api *a, CUstream s);
CUresult w_endCapture(rt_api *a, CUstream s, CUgraph *g);
CUresult w_instantiate(rt_api *a, CUgraphExec *e, CUgraph g);
CUresult w_graphLaunch(rt_api *a, CUgraphExec e, CUstream s);
CUresult w_graphExecDestroy(rt_api *a, CUgraphExec e);
CUresult w_graphDestroy(rt_api *a, CUgraph g);
CUresult w_eventCreate(rt_api *a, CUevent *e);
CUresult w_eventDestroy(rt_api *a, CUevent e);
CUresult w_eventRecord(rt_api *a, CUevent e, CUstream s);
CUresult w_eventCreateNoTiming(rt_api *a, CUevent *e);
CUresult w_eventSync(rt_api *a, CUevent e);
CUresult w_eventElapsed(rt_api *a, float *ms, CUevent start, CUevent end);
cublasStatus_t w_blasCreate(rt_api *a, cublasHandle_t *h);
cublasStatus_t w_blasDestroy(rt_api *a, cublasHandle_t h);
cublasStatus_t w_blasSetStream(rt_api *a, cublasHandle_t h, CUstream s);
cublasStatus_t w_blasSetWorkspace(rt_api *a, cublasHandle_t h, CUdeviceptr w, size_t n);
cublasStatus_t w_gemm(rt_api *a, cublasHandle_t h, int transA, int m, int n, int k,
                             CUdeviceptr A, int lda, CUdeviceptr B, int ldb, CUdeviceptr C, int ctype, int ldc);
cublasStatus_t w_gemmSplitK(rt_api *a, cublasHandle_t h, int m, int n, int k, int splits, CUdeviceptr A, int lda,
                            CUdeviceptr B, int ldb, CUdeviceptr C, int ldc);
const char *w_blasStatusName(rt_api *a, cublasStatus_t s);

#endif
