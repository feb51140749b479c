// rosetop's declarations of the few cuBLASLt entry points package cu uses (cublasLt.h ABI, stable
// across 11.x-13.x), opened with dlopen like api.h's. cuBLASLt gives what cublasGemmEx does not:
// a list of candidate algorithms to time (cublasGemmEx takes the heuristic's first) and fused
// epilogues (bias + GELU written as fp16 by the GEMM itself).
#ifndef ROSETOP_GPU_LT_H
#define ROSETOP_GPU_LT_H

#include <stddef.h>
#include <stdint.h>

#include "api.h"

typedef void *cublasLtHandle_t;
typedef void *cublasLtMatmulDesc_t;
typedef void *cublasLtMatrixLayout_t;
typedef void *cublasLtMatmulPreference_t;
typedef struct { uint64_t data[8]; } cublasLtMatmulAlgo_t;
typedef struct {
	cublasLtMatmulAlgo_t algo;
	size_t workspaceSize;
	cublasStatus_t state;
	float wavesCount;
	int reserved[4];
} cublasLtMatmulHeuristicResult_t;

// LT_MAX_ALGOS candidates are asked of the heuristic per shape.
#define LT_MAX_ALGOS 8

typedef struct lt_api {
	void *lib;
	char name[32];
	cublasLtHandle_t h;
	cublasStatus_t (*create)(cublasLtHandle_t *);
	cublasStatus_t (*destroy)(cublasLtHandle_t);
	cublasStatus_t (*descCreate)(cublasLtMatmulDesc_t *, int, int);
	cublasStatus_t (*descDestroy)(cublasLtMatmulDesc_t);
	cublasStatus_t (*descSet)(cublasLtMatmulDesc_t, int, const void *, size_t);
	cublasStatus_t (*layoutCreate)(cublasLtMatrixLayout_t *, int, uint64_t, uint64_t, int64_t);
	cublasStatus_t (*layoutDestroy)(cublasLtMatrixLayout_t);
	cublasStatus_t (*prefCreate)(cublasLtMatmulPreference_t *);
	cublasStatus_t (*prefDestroy)(cublasLtMatmulPreference_t);
	cublasStatus_t (*prefSet)(cublasLtMatmulPreference_t, int, const void *, size_t);
	cublasStatus_t (*heuristic)(cublasLtHandle_t, cublasLtMatmulDesc_t, cublasLtMatrixLayout_t, cublasLtMatrixLayout_t,
	                            cublasLtMatrixLayout_t, cublasLtMatrixLayout_t, cublasLtMatmulPreference_t, int,
	                            cublasLtMatmulHeuristicResult_t *, int *);
	cublasStatus_t (*matmul)(cublasLtHandle_t, cublasLtMatmulDesc_t, const void *, const void *, cublasLtMatrixLayout_t,
	                         const void *, cublasLtMatrixLayout_t, const void *, const void *, cublasLtMatrixLayout_t,
	                         void *, cublasLtMatrixLayout_t, const cublasLtMatmulAlgo_t *, void *, size_t, CUstream);
} lt_api;

// lt_plan is one GEMM shape: column-major D(m,n) = A(m,k) B(k,n) (+ epilogue), A and B fp16,
// fp32 compute, D fp32 or fp16; algos are the heuristic's candidates, best first.
typedef struct lt_plan {
	cublasLtMatmulDesc_t desc;
	cublasLtMatrixLayout_t a, b, d;
	cublasLtMatmulHeuristicResult_t algos[LT_MAX_ALGOS];
	int count;
} lt_plan;

lt_api *lt_open(char *err, int errlen);
void lt_close(lt_api *l);
// lt_plan_new fills p; epilogue is 1 (none), 4 (bias) or 36 (bias then GELU); dtype 0 (fp32) or
// 2 (fp16) for D. On failure the plan holds nothing to free.
cublasStatus_t lt_plan_new(lt_api *l, lt_plan *p, int m, int n, int k, int dtype, int epilogue, size_t ws);
void lt_plan_free(lt_api *l, lt_plan *p);
// lt_matmul runs candidate algo of p; bias (fp16, m values) is read when the epilogue has one.
cublasStatus_t lt_matmul(lt_api *l, lt_plan *p, int algo, CUdeviceptr A, CUdeviceptr B, CUdeviceptr D,
                         CUdeviceptr bias, CUdeviceptr ws, size_t wsBytes, CUstream s);

#endif
