// Opens libcublasLt with dlopen; plans and runs GEMMs through it (see lt.h).
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lt.h"

#define LTSYM(field, sym)                                                              \
	do {                                                                               \
		*(void **)(&l->field) = dlsym(l->lib, sym);                                    \
		if (l->field == NULL) {                                                        \
			snprintf(err, errlen, "%s: symbol %s not found", l->name, sym);             \
			goto fail;                                                                 \
		}                                                                              \
	} while (0)

// cublasLt.h constants: matmul descriptor attributes, preference attributes, types.
enum {
	LT_DESC_TRANSA = 3,
	LT_DESC_TRANSB = 4,
	LT_DESC_EPILOGUE = 7,
	LT_DESC_BIAS_POINTER = 8,
	LT_DESC_BIAS_DATA_TYPE = 26,
	LT_PREF_MAX_WORKSPACE_BYTES = 1,
	LT_EPILOGUE_DEFAULT = 1,
	LT_R_16F = 2,
	LT_R_32F = 0,
	LT_COMPUTE_32F = 68,
};

lt_api *lt_open(char *err, int errlen) {
	lt_api *l = calloc(1, sizeof(lt_api));
	if (l == NULL) {
		snprintf(err, errlen, "out of host memory");
		return NULL;
	}
	static const char *names[] = {"libcublasLt.so.13", "libcublasLt.so.12", "libcublasLt.so.11"};
	for (int i = 0; i < 3 && l->lib == NULL; i++) {
		l->lib = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
		if (l->lib != NULL) snprintf(l->name, sizeof l->name, "%s", names[i]);
	}
	if (l->lib == NULL) {
		snprintf(err, errlen, "no cuBLASLt (libcublasLt.so.13, .12 and .11 not found)");
		goto fail;
	}
	LTSYM(create, "cublasLtCreate");
	LTSYM(destroy, "cublasLtDestroy");
	LTSYM(descCreate, "cublasLtMatmulDescCreate");
	LTSYM(descDestroy, "cublasLtMatmulDescDestroy");
	LTSYM(descSet, "cublasLtMatmulDescSetAttribute");
	LTSYM(layoutCreate, "cublasLtMatrixLayoutCreate");
	LTSYM(layoutDestroy, "cublasLtMatrixLayoutDestroy");
	LTSYM(prefCreate, "cublasLtMatmulPreferenceCreate");
	LTSYM(prefDestroy, "cublasLtMatmulPreferenceDestroy");
	LTSYM(prefSet, "cublasLtMatmulPreferenceSetAttribute");
	LTSYM(heuristic, "cublasLtMatmulAlgoGetHeuristic");
	LTSYM(matmul, "cublasLtMatmul");
	cublasStatus_t s = l->create(&l->h);
	if (s != 0) {
		snprintf(err, errlen, "cublasLtCreate: status %d", s);
		goto fail;
	}
	return l;
fail:
	lt_close(l);
	return NULL;
}

void lt_close(lt_api *l) {
	if (l == NULL) return;
	if (l->h != NULL) l->destroy(l->h);
	free(l); // the library stays loaded, like libcublas (see rt_close)
}

void lt_plan_free(lt_api *l, lt_plan *p) {
	if (p->desc != NULL) l->descDestroy(p->desc);
	if (p->a != NULL) l->layoutDestroy(p->a);
	if (p->b != NULL) l->layoutDestroy(p->b);
	if (p->d != NULL) l->layoutDestroy(p->d);
	memset(p, 0, sizeof *p);
}

cublasStatus_t lt_plan_new(lt_api *l, lt_plan *p, int m, int n, int k, int dtype, int epilogue, size_t ws) {
	memset(p, 0, sizeof *p);
	cublasLtMatmulPreference_t pref = NULL;
	int op = 0, bt = LT_R_16F;
	cublasStatus_t s = l->descCreate(&p->desc, LT_COMPUTE_32F, LT_R_32F);
	if (s == 0) s = l->descSet(p->desc, LT_DESC_TRANSA, &op, sizeof op);
	if (s == 0) s = l->descSet(p->desc, LT_DESC_TRANSB, &op, sizeof op);
	if (s == 0) s = l->descSet(p->desc, LT_DESC_EPILOGUE, &epilogue, sizeof epilogue);
	if (s == 0 && epilogue != LT_EPILOGUE_DEFAULT) s = l->descSet(p->desc, LT_DESC_BIAS_DATA_TYPE, &bt, sizeof bt);
	if (s == 0) s = l->layoutCreate(&p->a, LT_R_16F, m, k, m);
	if (s == 0) s = l->layoutCreate(&p->b, LT_R_16F, k, n, k);
	if (s == 0) s = l->layoutCreate(&p->d, dtype, m, n, m);
	if (s == 0) s = l->prefCreate(&pref);
	if (s == 0) s = l->prefSet(pref, LT_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws);
	if (s == 0) s = l->heuristic(l->h, p->desc, p->a, p->b, p->d, p->d, pref, LT_MAX_ALGOS, p->algos, &p->count);
	if (pref != NULL) l->prefDestroy(pref);
	if (s == 0 && p->count < 1) s = 15; // CUBLAS_STATUS_NOT_SUPPORTED: no algorithm for this shape
	if (s != 0) lt_plan_free(l, p);
	return s;
}

cublasStatus_t lt_matmul(lt_api *l, lt_plan *p, int algo, CUdeviceptr A, CUdeviceptr B, CUdeviceptr D,
                         CUdeviceptr bias, CUdeviceptr ws, size_t wsBytes, CUstream st) {
	const float alpha = 1.f, beta = 0.f;
	if (bias != 0) {
		void *bp = (void *)bias;
		cublasStatus_t s = l->descSet(p->desc, LT_DESC_BIAS_POINTER, &bp, sizeof bp);
		if (s != 0) return s;
	}
	return l->matmul(l->h, p->desc, &alpha, (const void *)A, p->a, (const void *)B, p->b, &beta, (const void *)D, p->d,
	                 (void *)D, p->d, &p->algos[algo].algo, (void *)ws, wsBytes, st);
}
