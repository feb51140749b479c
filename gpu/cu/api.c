// Opens libcuda and libcublas with dlopen and fills an rt_api with their entry points.
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api.h"

#define SYM(lib, field, name)                                                          \
	do {                                                                               \
		*(void **)(&a->field) = dlsym(a->lib, name);                                   \
		if (a->field == NULL) {                                                        \
			snprintf(err, errlen, "%s: symbol %s not found", #lib, name);               \
			goto fail;                                                                 \
		}                                                                              \
	} while (0)

// rt_open returns a filled rt_api, or NULL with a reason in err. with_cublas = 0 stops after the
// driver (used by the probe, which must not pay for loading cuBLAS).
rt_api *rt_open(char *err, int errlen, int with_cublas) {
	rt_api *a = calloc(1, sizeof(rt_api));
	if (a == NULL) {
		snprintf(err, errlen, "out of host memory");
		return NULL;
	}
	a->libcuda = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
	if (a->libcuda == NULL) {
		snprintf(err, errlen, "no CUDA driver (libcuda.so.1 not found)");
		goto fail;
	}
	SYM(libcuda, cuInit, "cuInit");
	SYM(libcuda, cuGetErrorName, "cuGetErrorName");
	SYM(libcuda, cuDriverGetVersion, "cuDriverGetVersion");
	SYM(libcuda, cuDeviceGetCount, "cuDeviceGetCount");
	SYM(libcuda, cuDeviceGet, "cuDeviceGet");
	SYM(libcuda, cuDeviceGetName, "cuDeviceGetName");
	SYM(libcuda, cuDeviceGetAttribute, "cuDeviceGetAttribute");
	SYM(libcuda, cuCtxSetCurrent, "cuCtxSetCurrent");
	SYM(libcuda, cuCtxCreate, "cuCtxCreate_v2");
	SYM(libcuda, cuCtxDestroy, "cuCtxDestroy_v2");
	SYM(libcuda, cuMemGetInfo, "cuMemGetInfo_v2");
	SYM(libcuda, cuMemAlloc, "cuMemAlloc_v2");
	SYM(libcuda, cuMemFree, "cuMemFree_v2");
	SYM(libcuda, cuMemAllocHost, "cuMemAllocHost_v2");
	SYM(libcuda, cuMemFreeHost, "cuMemFreeHost");
	SYM(libcuda, cuMemHostGetDevicePointer, "cuMemHostGetDevicePointer_v2");
	SYM(libcuda, cuMemcpyHtoDAsync, "cuMemcpyHtoDAsync_v2");
	SYM(libcuda, cuMemcpyDtoHAsync, "cuMemcpyDtoHAsync_v2");
	SYM(libcuda, cuMemcpy2DAsync, "cuMemcpy2DAsync_v2");
	SYM(libcuda, cuMemsetD8Async, "cuMemsetD8Async");
	SYM(libcuda, cuStreamCreate, "cuStreamCreate");
	SYM(libcuda, cuStreamDestroy, "cuStreamDestroy_v2");
	SYM(libcuda, cuStreamSynchronize, "cuStreamSynchronize");
	SYM(libcuda, cuModuleLoadData, "cuModuleLoadData");
	SYM(libcuda, cuModuleUnload, "cuModuleUnload");
	SYM(libcuda, cuModuleGetFunction, "cuModuleGetFunction");
	SYM(libcuda, cuFuncSetAttribute, "cuFuncSetAttribute");
	SYM(libcuda, cuLaunchKernel, "cuLaunchKernel");
	*(void **)(&a->cuLaunchKernelEx) = dlsym(a->libcuda, "cuLaunchKernelEx"); // optional (CUDA 11.8+)
	*(void **)(&a->cuTensorMapEncodeTiled) = dlsym(a->libcuda, "cuTensorMapEncodeTiled"); // optional (CUDA 12.0+)
	SYM(libcuda, cuStreamBeginCapture, "cuStreamBeginCapture_v2");
	SYM(libcuda, cuStreamEndCapture, "cuStreamEndCapture");
	SYM(libcuda, cuGraphInstantiateWithFlags, "cuGraphInstantiateWithFlags");
	SYM(libcuda, cuGraphLaunch, "cuGraphLaunch");
	SYM(libcuda, cuGraphExecDestroy, "cuGraphExecDestroy");
	SYM(libcuda, cuGraphDestroy, "cuGraphDestroy");
	SYM(libcuda, cuEventCreate, "cuEventCreate");
	SYM(libcuda, cuEventDestroy, "cuEventDestroy_v2");
	SYM(libcuda, cuEventRecord, "cuEventRecord");
	SYM(libcuda, cuEventSynchronize, "cuEventSynchronize");
	SYM(libcuda, cuEventElapsedTime, "cuEventElapsedTime");
	if (!with_cublas) {
		return a;
	}
	static const char *names[] = {"libcublas.so.13", "libcublas.so.12", "libcublas.so.11"};
	for (int i = 0; i < 3 && a->libcublas == NULL; i++) {
		a->libcublas = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
		if (a->libcublas != NULL) {
			snprintf(a->cublas_name, sizeof a->cublas_name, "%s", names[i]);
		}
	}
	if (a->libcublas == NULL) {
		snprintf(err, errlen, "no cuBLAS (libcublas.so.13, .12 and .11 not found)");
		goto fail;
	}
	SYM(libcublas, cublasCreate, "cublasCreate_v2");
	SYM(libcublas, cublasDestroy, "cublasDestroy_v2");
	SYM(libcublas, cublasSetStream, "cublasSetStream_v2");
	SYM(libcublas, cublasSetWorkspace, "cublasSetWorkspace_v2");
	SYM(libcublas, cublasGemmEx, "cublasGemmEx");
	SYM(libcublas, cublasGemmStridedBatchedEx, "cublasGemmStridedBatchedEx");
	// cublasGetStatusName exists from cuBLAS 11.4 on; without it errors show the number.
	*(void **)(&a->cublasGetStatusName) = dlsym(a->libcublas, "cublasGetStatusName");
	return a;
fail:
	rt_close(a);
	return NULL;
}

// rt_close frees a. The libraries stay loaded: libcuda and libcublas register process-wide state
// (atexit handlers, the JIT cache) and unloading them under a live process is not supported by
// NVIDIA; a later rt_open gets the same resident copies back from dlopen.
void rt_close(rt_api *a) {
	free(a);
}

// Call wrappers: cgo cannot call through C function pointers.
CUresult w_cuInit(rt_api *a) { return a->cuInit(0); }
const char *w_errName(rt_api *a, CUresult r) {
	const char *s = NULL;
	if (a->cuGetErrorName(r, &s) != 0 || s == NULL) return "CUDA_ERROR_UNKNOWN_CODE";
	return s;
}
CUresult w_driverVersion(rt_api *a, int *v) { return a->cuDriverGetVersion(v); }
CUresult w_deviceCount(rt_api *a, int *n) { return a->cuDeviceGetCount(n); }
CUresult w_deviceGet(rt_api *a, CUdevice *d, int i) { return a->cuDeviceGet(d, i); }
CUresult w_deviceName(rt_api *a, char *s, int n, CUdevice d) { return a->cuDeviceGetName(s, n, d); }
CUresult w_deviceAttr(rt_api *a, int *v, int attr, CUdevice d) { return a->cuDeviceGetAttribute(v, attr, d); }
CUresult w_ctxSetCurrent(rt_api *a, CUcontext c) { return a->cuCtxSetCurrent(c); }
CUresult w_ctxCreate(rt_api *a, CUcontext *c, CUdevice d) { return a->cuCtxCreate(c, 0, d); }
CUresult w_ctxDestroy(rt_api *a, CUcontext c) { return a->cuCtxDestroy(c); }
CUresult w_memInfo(rt_api *a, size_t *f, size_t *t) { return a->cuMemGetInfo(f, t); }
CUresult w_memAlloc(rt_api *a, CUdeviceptr *p, size_t n) { return a->cuMemAlloc(p, n); }
CUresult w_memFree(rt_api *a, CUdeviceptr p) { return a->cuMemFree(p); }
CUresult w_hostAlloc(rt_api *a, void **p, size_t n) { return a->cuMemAllocHost(p, n); }
CUresult w_hostFree(rt_api *a, void *p) { return a->cuMemFreeHost(p); }
CUresult w_hostDevPtr(rt_api *a, CUdeviceptr *d, void *p) { return a->cuMemHostGetDevicePointer(d, p, 0); }
CUresult w_htod(rt_api *a, CUdeviceptr d, uintptr_t h, size_t n, CUstream s) { return a->cuMemcpyHtoDAsync(d, (const void *)h, n, s); }
CUresult w_dtoh(rt_api *a, uintptr_t h, CUdeviceptr d, size_t n, CUstream s) { return a->cuMemcpyDtoHAsync((void *)h, d, n, s); }
CUresult w_dtoh2d(rt_api *a, uintptr_t h, size_t hpitch, CUdeviceptr d, size_t dpitch, size_t width, size_t rows, CUstream s) {
	CUDA_MEMCPY2D c = {0};
	c.srcMemoryType = 2; // CU_MEMORYTYPE_DEVICE
	c.srcDevice = d;
	c.srcPitch = dpitch;
	c.dstMemoryType = 1; // CU_MEMORYTYPE_HOST
	c.dstHost = (void *)h;
	c.dstPitch = hpitch;
	c.WidthInBytes = width;
	c.Height = rows;
	return a->cuMemcpy2DAsync(&c, s);
}
CUresult w_memset(rt_api *a, CUdeviceptr d, size_t n, CUstream s) { return a->cuMemsetD8Async(d, 0, n, s); }
CUresult w_streamCreate(rt_api *a, CUstream *s) { return a->cuStreamCreate(s, 1); } // CU_STREAM_NON_BLOCKING
CUresult w_streamDestroy(rt_api *a, CUstream s) { return a->cuStreamDestroy(s); }
CUresult w_streamSync(rt_api *a, CUstream s) { return a->cuStreamSynchronize(s); }
CUresult w_moduleLoad(rt_api *a, CUmodule *m, const void *img) { return a->cuModuleLoadData(m, img); }
CUresult w_moduleUnload(rt_api *a, CUmodule m) { return a->cuModuleUnload(m); }
CUresult w_moduleFunc(rt_api *a, CUfunction *f, CUmodule m, const char *n) { return a->cuModuleGetFunction(f, m, n); }
CUresult w_funcAttr(rt_api *a, CUfunction f, int attr, int v) { return a->cuFuncSetAttribute(f, attr, v); }
// args_bind points the tensor map slots at their maps for a launch; args_unbind points them back
// at their values and clears the marks, so that between launches every slot is a plain value.
static void args_bind(rt_args *a) {
	for (int i = 0; i < 24; i++)
		if (a->maps_used >> i & 1) a->ptrs[i] = a->maps + 128 * a->vals[i];
}
static void args_unbind(rt_args *a) {
	for (int i = 0; i < 24; i++)
		if (a->maps_used >> i & 1) a->ptrs[i] = &a->vals[i];
	a->maps_used = 0;
}

CUresult w_launch(rt_api *a, CUfunction f, unsigned gx, unsigned gy, unsigned bx, unsigned shmem, CUstream s, rt_args *args) {
	args_bind(args);
	CUresult r = a->cuLaunchKernel(f, gx, gy, 1, bx, 1, 1, shmem, s, args->ptrs, NULL);
	args_unbind(args);
	return r;
}

// cuLaunchKernelEx's configuration (cuda.h, CUDA 11.8+): the attribute is an 8-byte id slot and a
// 64-byte value union; the two used here are CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION (4, value
// {x, y, z}) and CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION (6, value int).
typedef struct {
	int id;
	int pad;
	union {
		char pad[64];
		struct { unsigned x, y, z; } cluster;
		int pss;
	} value;
} launch_attr;
typedef struct {
	unsigned gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ, sharedMemBytes;
	CUstream hStream;
	launch_attr *attrs;
	unsigned numAttrs;
} launch_config;

int w_haveLaunchEx(rt_api *a) { return a->cuLaunchKernelEx != NULL; }

// w_launchEx launches f with programmatic dependent launch (pdl: the kernel may start before the
// previous kernel on the stream ends, and waits for it with griddepcontrol.wait) and/or in
// clusters of (clusterX, clusterY, 1) blocks (more than one).
CUresult w_launchEx(rt_api *a, CUfunction f, unsigned gx, unsigned gy, unsigned bx, unsigned shmem, CUstream s, rt_args *args,
                    int pdl, unsigned clusterX, unsigned clusterY) {
	launch_attr at[2];
	memset(at, 0, sizeof at);
	unsigned n = 0;
	if (pdl) {
		at[n].id = 6;
		at[n].value.pss = 1;
		n++;
	}
	if (clusterX * clusterY > 1) {
		at[n].id = 4;
		at[n].value.cluster.x = clusterX;
		at[n].value.cluster.y = clusterY;
		at[n].value.cluster.z = 1;
		n++;
	}
	launch_config c = {gx, gy, 1, bx, 1, 1, shmem, s, at, n};
	args_bind(args);
	CUresult r = a->cuLaunchKernelEx(&c, f, args->ptrs, NULL);
	args_unbind(args);
	return r;
}

int w_haveTensorMaps(rt_api *a) { return a->cuTensorMapEncodeTiled != NULL; }

// w_encodeMap encodes map i of args: the row-major fp16 matrix at base (rows x cols, rows
// 2 cols bytes apart) copied in boxes of boxCols x boxRows with the 128-byte swizzle
// (CU_TENSOR_MAP_DATA_TYPE_FLOAT16 6, CU_TENSOR_MAP_SWIZZLE_128B 3, CU_TENSOR_MAP_L2_PROMOTION_L2_128B
// 2); rows past the matrix land as zeros (CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE 0).
CUresult w_encodeMap(rt_api *a, rt_args *args, int i, CUdeviceptr base, unsigned long long cols, unsigned long long rows,
                     unsigned boxCols, unsigned boxRows) {
	const unsigned long long dims[2] = {cols, rows}, strides[1] = {2 * cols};
	const unsigned box[2] = {boxCols, boxRows}, estr[2] = {1, 1};
	return a->cuTensorMapEncodeTiled(args->maps + 128 * i, 6, 2, (void *)base, dims, strides, box, estr, 0, 3, 2, 0);
}

CUresult w_beginCapture(rt_api *a, CUstream s) { return a->cuStreamBeginCapture(s, 1); } // CU_STREAM_CAPTURE_MODE_THREAD_LOCAL
CUresult w_endCapture(rt_api *a, CUstream s, CUgraph *g) { return a->cuStreamEndCapture(s, g); }
CUresult w_instantiate(rt_api *a, CUgraphExec *e, CUgraph g) { return a->cuGraphInstantiateWithFlags(e, g, 0); }
CUresult w_graphLaunch(rt_api *a, CUgraphExec e, CUstream s) { return a->cuGraphLaunch(e, s); }
CUresult w_graphExecDestroy(rt_api *a, CUgraphExec e) { return a->cuGraphExecDestroy(e); }
CUresult w_graphDestroy(rt_api *a, CUgraph g) { return a->cuGraphDestroy(g); }
CUresult w_eventCreate(rt_api *a, CUevent *e) { return a->cuEventCreate(e, 0); } // CU_EVENT_DEFAULT: timing on
CUresult w_eventDestroy(rt_api *a, CUevent e) { return a->cuEventDestroy(e); }
CUresult w_eventRecord(rt_api *a, CUevent e, CUstream s) { return a->cuEventRecord(e, s); }
CUresult w_eventSync(rt_api *a, CUevent e) { return a->cuEventSynchronize(e); }
CUresult w_eventCreateNoTiming(rt_api *a, CUevent *e) { return a->cuEventCreate(e, 2); } // CU_EVENT_DISABLE_TIMING
CUresult w_eventElapsed(rt_api *a, float *ms, CUevent start, CUevent end) { return a->cuEventElapsedTime(ms, start, end); }

cublasStatus_t w_blasCreate(rt_api *a, cublasHandle_t *h) { return a->cublasCreate(h); }
cublasStatus_t w_blasDestroy(rt_api *a, cublasHandle_t h) { return a->cublasDestroy(h); }
cublasStatus_t w_blasSetStream(rt_api *a, cublasHandle_t h, CUstream s) { return a->cublasSetStream(h, s); }
cublasStatus_t w_blasSetWorkspace(rt_api *a, cublasHandle_t h, CUdeviceptr w, size_t n) { return a->cublasSetWorkspace(h, (void *)w, n); }
// w_gemm: column-major C(m,n) = alpha op(A)(m,k) op(B)(k,n) + beta C; A and B fp16, compute fp32.
cublasStatus_t w_gemm(rt_api *a, cublasHandle_t h, int transA, int m, int n, int k,
                             CUdeviceptr A, int lda, CUdeviceptr B, int ldb, CUdeviceptr C, int ctype, int ldc) {
	const float alpha = 1.0f, beta = 0.0f;
	// CUDA_R_16F = 2, CUBLAS_COMPUTE_32F = 68, CUBLAS_GEMM_DEFAULT = -1, CUBLAS_OP_N = 0, CUBLAS_OP_T = 1.
	return a->cublasGemmEx(h, transA, 0, m, n, k, &alpha, (const void *)A, 2, lda, (const void *)B, 2, ldb,
	                       &beta, (void *)C, ctype, ldc, 68, -1);
}
// w_gemmSplitK: column-major C_s(m,n) = A_s(m,k/splits) B_s(k/splits,n) for s < splits, the
// K dimension cut into slices run as one strided batch (more blocks for a long K and a short n);
// each slice's fp32 partial sum C_s lands at C + s*ldc*n for the consumer to add. A is the
// row-major weight (k, m): A_s is its rows [s*ks, (s+1)*ks), ks*lda further on; B is the
// row-major input (n, k): B_s is its columns [s*ks, (s+1)*ks), ks further on.
cublasStatus_t w_gemmSplitK(rt_api *a, cublasHandle_t h, int m, int n, int k, int splits, CUdeviceptr A, int lda,
                            CUdeviceptr B, int ldb, CUdeviceptr C, int ldc) {
	const float alpha = 1.0f, beta = 0.0f;
	int ks = k / splits;
	return a->cublasGemmStridedBatchedEx(h, 0, 0, m, n, ks, &alpha, (const void *)A, 2, lda, (long long)ks * lda,
	                                     (const void *)B, 2, ldb, (long long)ks, &beta, (void *)C, 0, ldc,
	                                     (long long)ldc * n, splits, 68, -1);
}
const char *w_blasStatusName(rt_api *a, cublasStatus_t s) {
	if (a->cublasGetStatusName == NULL) return "CUBLAS_STATUS";
	return a->cublasGetStatusName(s);
}

rt_args *args_new(void) {
	rt_args *a = calloc(1, sizeof(rt_args));
	if (a) for (int i = 0; i < 24; i++) a->ptrs[i] = &a->vals[i];
	return a;
}

void args_free(rt_args *a) {
	free(a->maps);
	free(a);
}

// args_maps makes room for n tensor maps (zeroed), dropping any before; 0 when out of memory.
int args_maps(rt_args *a, int n) {
	free(a->maps);
	a->nmaps = 0;
	a->maps = aligned_alloc(64, 128 * (size_t)(n > 0 ? n : 1));
	if (a->maps == NULL) return 0;
	memset(a->maps, 0, 128 * (size_t)(n > 0 ? n : 1));
	a->nmaps = n;
	return 1;
}
