// lab.cuh: what the labs share: CUDA error checks, fp16 conversions on the host, packWG's weight
// order, tensor maps (wg_gemm's X among them) and a graph timer.
#pragma once
#include <cuda.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <utility>

#define CK(x)                                                                                   \
	do {                                                                                        \
		cudaError_t e_ = (x);                                                                   \
		if (e_ != cudaSuccess) {                                                                \
			fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
			exit(1);                                                                            \
		}                                                                                       \
	} while (0)

// Rand is the labs' fixed sequence of uniform numbers in [-0.5, 0.5) (an LCG), so that every
// run draws the same weights and inputs.
struct Rand {
	unsigned s = 12345;
	float operator()() {
		s = s * 1664525u + 1013904223u;
		return (s >> 8) / 16777216.f - 0.5f;
	}
};

// lab_start reads a lab's ROWS argument (1..64, default 64; else the usage line and exit 2),
// prints the GPU and makes the stream the lab runs on.
static int lab_start(int argc, char **argv, const char *name, cudaStream_t *st) {
	const int M = argc > 1 ? atoi(argv[1]) : 64;
	if (M < 1 || M > 64 || argc > 2) {
		fprintf(stderr, "usage: %s [ROWS (1..64)]\n", name);
		exit(2);
	}
	cudaDeviceProp prop;
	CK(cudaGetDeviceProperties(&prop, 0));
	printf("%s, %d SMs; M = %d rows; ", prop.name, prop.multiProcessorCount, M);
	CK(cudaStreamCreateWithFlags(st, cudaStreamNonBlocking));
	return M;
}

static uint16_t h16(float v) {
	half h = __float2half(v);
	uint16_t u;
	memcpy(&u, &h, 2);
	return u;
}

static float f16(uint16_t u) {
	half h;
	memcpy(&h, &u, 2);
	return __half2float(h);
}

// pack_wg: gpu/wg.go packWG's order of W (K x N, row-major): column block nb of 64 is K x 64
// halves from nb K 64 on, a k16 step 1024 of them: n8 group nc, k half kc and row n % 8 hold 8
// consecutive k at (nc * 2 + kc) * 64 + (n % 8) * 8. A K slice of a multiple of 16 is a run of it.
static void pack_wg(uint16_t *dst, const uint16_t *W, int K, int N) {
	for (int nb = 0; nb < N / 64; nb++)
		for (int k = 0; k < K; k++)
			for (int n = 0; n < 64; n++) {
				const size_t off = (size_t)nb * K * 64 + (size_t)(k / 16) * 1024 + (n / 8) * 128 + ((k % 16) / 8) * 64 +
				                   (n % 8) * 8 + (k % 8);
				dst[off] = W[(size_t)k * N + nb * 64 + n];
			}
}

// wg_shared is a gemm_wg block's dynamic shared memory at 64 rows, K slices of KS over S
// blocks, plain epilogue (gpu/wg.go wgShared).
static int wg_shared(int KS, int S) {
	const int xs = std::max((KS + 63) / 64 * 64 * 64 * 2, 64 * (KS + 8) * 2); // X's boxes or rows
	return KS * 64 * 2 + xs + S * ((64 + S - 1) / S) * 64 * 4 + 64 * 8 + 24;
}

// tensor_map_2d encodes a tensor map of the fp16 matrix at base (rows x cols, rowBytes apart), in
// boxes of boxCols x boxRows, through the driver's entry point (no -lcuda needed); exits on failure.
static CUtensorMap tensor_map_2d(const void *base, int cols, int rows, int rowBytes, int boxCols, int boxRows,
                                 CUtensorMapSwizzle swizzle, CUtensorMapL2promotion promotion) {
	static CUresult (*encode)(CUtensorMap *, CUtensorMapDataType, cuuint32_t, void *, const cuuint64_t *, const cuuint64_t *,
	                          const cuuint32_t *, const cuuint32_t *, CUtensorMapInterleave, CUtensorMapSwizzle,
	                          CUtensorMapL2promotion, CUtensorMapFloatOOBfill);
	if (encode == nullptr) {
		cudaDriverEntryPointQueryResult qr;
		void *fn = nullptr;
		CK(cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &fn, 12000, cudaEnableDefault, &qr));
		encode = reinterpret_cast<decltype(encode)>(fn);
	}
	CUtensorMap m;
	const cuuint64_t dims[2] = {(cuuint64_t)cols, (cuuint64_t)rows}, strides[1] = {(cuuint64_t)rowBytes};
	const cuuint32_t box[2] = {(cuuint32_t)boxCols, (cuuint32_t)boxRows}, estr[2] = {1, 1};
	if (encode(&m, CU_TENSOR_MAP_DATA_TYPE_FLOAT16, 2, const_cast<void *>(base), dims, strides, box, estr,
	           CU_TENSOR_MAP_INTERLEAVE_NONE, swizzle, promotion, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) != CUDA_SUCCESS) {
		fprintf(stderr, "cuTensorMapEncodeTiled failed (%d x %d in boxes of %d x %d)\n", rows, cols, boxRows, boxCols);
		exit(1);
	}
	return m;
}

// x_boxes_at reports whether the engine's wg_gemm takes X of M rows by tensor copies (its _box
// kernels) rather than row by row (gpu/xmaps.go xBoxes).
static bool x_boxes_at(int M) { return M >= 8; }

// launch_wg launches the engine's pick (x_boxes_at) of a wg_gemm kernel for M rows: rows, X by the
// pointer x, or boxes, X by the tensor map xm; rest are the parameters after X.
template <class... A, class... R>
static void launch_wg(const cudaLaunchConfig_t &cfg, void (*rows)(void *, const half *, A...),
                      void (*boxes)(void *, CUtensorMap, A...), int M, void *y, const half *x, const CUtensorMap &xm,
                      R &&...rest) {
	if (x_boxes_at(M))
		CK(cudaLaunchKernelEx(&cfg, boxes, y, xm, std::forward<R>(rest)...));
	else
		CK(cudaLaunchKernelEx(&cfg, rows, y, x, std::forward<R>(rest)...));
}

// x_map is wg_gemm's tensor map of X's first rows rows of cols, in boxes of 64 columns x rows
// (gpu/xmaps.go).
static CUtensorMap x_map(const void *x, int cols, int rows) {
	return tensor_map_2d(x, cols, rows, cols * 2, 64, rows, CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_128B);
}

// launch_config fills cfg for a launch of grid blocks of 128 threads on st with smem bytes of
// dynamic shared memory in clusters of (cx, cy), after the kernel before it with PDL when pdl.
static void launch_config(cudaLaunchConfig_t &cfg, cudaLaunchAttribute (&at)[2], cudaStream_t st, dim3 grid, int cx, int cy,
                          int smem, bool pdl) {
	cfg = {};
	cfg.gridDim = grid;
	cfg.blockDim = dim3(128);
	cfg.stream = st;
	cfg.dynamicSmemBytes = smem;
	at[0].id = cudaLaunchAttributeClusterDimension;
	at[0].val.clusterDim.x = cx;
	at[0].val.clusterDim.y = cy;
	at[0].val.clusterDim.z = 1;
	at[1].id = cudaLaunchAttributeProgrammaticStreamSerialization;
	at[1].val.programmaticStreamSerializationAllowed = 1;
	cfg.attrs = at;
	cfg.numAttrs = pdl ? 2 : 1;
}

// time_graph captures body on st into a graph, replays it 3 times, then reps times back to back,
// and returns the microseconds a replay.
static float time_graph(cudaStream_t st, int reps, const std::function<void()> &body) {
	cudaGraph_t g;
	cudaGraphExec_t ge;
	CK(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal));
	body();
	CK(cudaStreamEndCapture(st, &g));
	CK(cudaGraphInstantiateWithFlags(&ge, g, 0));
	for (int i = 0; i < 3; i++) CK(cudaGraphLaunch(ge, st));
	cudaEvent_t a, b;
	CK(cudaEventCreate(&a));
	CK(cudaEventCreate(&b));
	CK(cudaEventRecord(a, st));
	for (int i = 0; i < reps; i++) CK(cudaGraphLaunch(ge, st));
	CK(cudaEventRecord(b, st));
	CK(cudaEventSynchronize(b));
	float ms;
	CK(cudaEventElapsedTime(&ms, a, b));
	CK(cudaGraphExecDestroy(ge));
	CK(cudaGraphDestroy(g));
	CK(cudaEventDestroy(a));
	CK(cudaEventDestroy(b));
	return ms * 1000.f / reps;
}
