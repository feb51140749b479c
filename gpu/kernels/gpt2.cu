// rosetop's GPT-2 kernels. fp16 weights and activations, fp32 accumulation; the residual stream
// stays in fp32. Built to PTX with `nvcc -arch=compute_80 -ptx` (scripts/gen-ptx.sh) and
// JIT-compiled by the driver at module load. Shapes: N tokens in the step, B sequences, C channels,
// NH heads of HD = C/NH, V vocabulary. Every kernel is launched on the runtime's one stream.
#include <cuda_fp16.h>
#include <stdint.h>

#include "rows.cuh"

#define WARP 32

__device__ __forceinline__ float warp_sum(float v) {
	for (int o = WARP / 2; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
	return v;
}

__device__ __forceinline__ float warp_max(float v) {
	for (int o = WARP / 2; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
	return v;
}

// pdl_wait: kernels after the first of a step are launched with programmatic dependent launch on
// Hopper (gpu/plan.go stepPlan.pdl): one may start while the previous kernel on the stream is still
// running, so before reading anything an earlier kernel wrote it waits here for that kernel to
// finish and flush; then it lets the next kernel launch, whose own prologue (weights, metadata)
// overlaps this kernel. Only the step's metadata (uploaded before the first kernel) and the
// weights may be read before it. Without PDL, and before sm_90, both are no-ops.
__device__ __forceinline__ void pdl_wait() {
#if __CUDA_ARCH__ >= 900
	asm volatile("griddepcontrol.wait;" ::: "memory");
	asm volatile("griddepcontrol.launch_dependents;");
#endif
}

// block_sum returns the sum of v over the block to every thread. red holds 32 floats; the
// trailing barrier lets the caller reuse red at once.
__device__ float block_sum(float v, float *red) {
	int lane = threadIdx.x % WARP, w = threadIdx.x / WARP, nw = (blockDim.x + WARP - 1) / WARP;
	v = warp_sum(v);
	if (lane == 0) red[w] = v;
	__syncthreads();
	float r = lane < nw ? red[lane] : 0.f;
	r = warp_sum(r);
	__syncthreads();
	return r;
}

__device__ float block_max(float v, float *red) {
	int lane = threadIdx.x % WARP, w = threadIdx.x / WARP, nw = (blockDim.x + WARP - 1) / WARP;
	v = warp_max(v);
	if (lane == 0) red[w] = v;
	__syncthreads();
	float r = lane < nw ? red[lane] : -INFINITY;
	r = warp_max(r);
	__syncthreads();
	return r;
}

// LN_PER_THREAD values of a row live in each thread's registers: C <= 256 * LN_PER_THREAD.
#define LN_PER_THREAD 8

// The row kernels below are latency-bound at decode sizes (one block per row, a few values per
// thread): every thread issues all its loads before its first store or reduction, so a kernel
// pays about one memory round trip instead of one per value (the pointers are __restrict__ so the
// compiler may hoist loads above stores).

// ln_params loads this thread's norm weights and biases up front, overlapping the row's loads.
__device__ __forceinline__ void ln_params(float (&w)[LN_PER_THREAD], float (&b)[LN_PER_THREAD],
                                          const float *__restrict__ lnw, const float *__restrict__ lnb, int C) {
#pragma unroll
	for (int k = 0; k < LN_PER_THREAD; k++) {
		int c = threadIdx.x + k * blockDim.x;
		w[k] = c < C ? lnw[c] : 0.f;
		b[k] = c < C ? lnb[c] : 0.f;
	}
}

// layernorm_regs normalizes the row held in v (thread-strided: v[k] is channel tid + k*blockDim)
// with the weights w and biases b (same layout) and writes it to out.
__device__ void layernorm_regs(const float (&v)[LN_PER_THREAD], const float (&w)[LN_PER_THREAD],
                               const float (&b)[LN_PER_THREAD], half *__restrict__ out, int C, float eps, float *red) {
	float s = 0.f;
#pragma unroll
	for (int k = 0; k < LN_PER_THREAD; k++) s += v[k]; // absent channels hold 0
	float mean = block_sum(s, red) / C;
	float q = 0.f;
#pragma unroll
	for (int k = 0; k < LN_PER_THREAD; k++) {
		int c = threadIdx.x + k * blockDim.x;
		float d = c < C ? v[k] - mean : 0.f;
		q += d * d;
	}
	float rstd = rsqrtf(block_sum(q, red) / C + eps);
#pragma unroll
	for (int k = 0; k < LN_PER_THREAD; k++) {
		int c = threadIdx.x + k * blockDim.x;
		if (c < C) out[c] = __float2half((v[k] - mean) * rstd * w[k] + b[k]);
	}
}

// embed_ln: x(N,C) = wte[ids] + wpe[pos]; xln(N,C) = LN1 of layer 0. Grid N, block 256.
extern "C" __global__ void embed_ln(float *__restrict__ x, half *__restrict__ xln, const int *__restrict__ ids,
                                    const int *__restrict__ pos, const half *__restrict__ wte,
                                    const half *__restrict__ wpe, const float *__restrict__ lnw,
                                    const float *__restrict__ lnb, int C, float eps) {
	pdl_wait();
	__shared__ float red[32];
	int t = blockIdx.x;
	const half *te = wte + (size_t)ids[t] * C, *pe = wpe + (size_t)pos[t] * C;
	float *xr = x + (size_t)t * C;
	float v[LN_PER_THREAD], w[LN_PER_THREAD], b[LN_PER_THREAD];
	ln_params(w, b, lnw, lnb, C);
#pragma unroll
	for (int k = 0; k < LN_PER_THREAD; k++) {
		int c = threadIdx.x + k * blockDim.x;
		v[k] = c < C ? __half2float(te[c]) + __half2float(pe[c]) : 0.f;
	}
#pragma unroll
	for (int k = 0; k < LN_PER_THREAD; k++) {
		int c = threadIdx.x + k * blockDim.x;
		if (c < C) xr[c] = v[k];
	}
	layernorm_regs(v, w, b, xln + (size_t)t * C, C, eps, red);
}

// The GEMMs feeding the kernels below (cuBLAS, fp32 output) leave y in fp32: the bias, GELU and
// residual adds then round once, when the result is stored.

// add_partials adds to this thread's values (channels tid + k*blockDim of a row) the S partial
// sums of the row's y, pstride floats apart (a split-K GEMM leaves one per K slice; S = 1
// otherwise). Slices outer, values inner and unrolled: 4 slices of loads are in flight at once.
__device__ __forceinline__ void add_partials(float (&v)[LN_PER_THREAD], const float *__restrict__ y, int S,
                                             size_t pstride, size_t row, int C) {
#pragma unroll 4
	for (int s = 0; s < S; s++) {
#pragma unroll
		for (int k = 0; k < LN_PER_THREAD; k++) {
			int c = threadIdx.x + k * blockDim.x;
			if (c < C) v[k] += y[s * pstride + row + c];
		}
	}
}

// residual_ln: x(N,C) += y(N,C) + bias(C), y the sum of S partials; xln = LN(x).
// Grid N, block 256.
extern "C" __global__ void residual_ln(float *__restrict__ x, const float *__restrict__ y, int S, size_t pstride,
                                       const float *__restrict__ bias, const float *__restrict__ lnw,
                                       const float *__restrict__ lnb, half *__restrict__ xln, int C, float eps) {
	pdl_wait();
	__shared__ float red[32];
	int t = blockIdx.x;
	float *xr = x + (size_t)t * C;
	float v[LN_PER_THREAD], w[LN_PER_THREAD], b[LN_PER_THREAD];
	ln_params(w, b, lnw, lnb, C);
#pragma unroll
	for (int k = 0; k < LN_PER_THREAD; k++) {
		int c = threadIdx.x + k * blockDim.x;
		v[k] = c < C ? xr[c] + bias[c] : 0.f;
	}
	add_partials(v, y, S, pstride, (size_t)t * C, C);
#pragma unroll
	for (int k = 0; k < LN_PER_THREAD; k++) {
		int c = threadIdx.x + k * blockDim.x;
		if (c < C) xr[c] = v[k];
	}
	layernorm_regs(v, w, b, xln + (size_t)t * C, C, eps, red);
}

// residual_ln_last: for each sequence b, row t = last[b]: out(B,C)[b] = LN(x[t] + y[t] + bias),
// y the sum of S partials. Only the last position of each sequence needs the final norm and the
// logits. Grid B, block 256.
extern "C" __global__ void residual_ln_last(const float *__restrict__ x, const float *__restrict__ y, int S,
                                            size_t pstride, const float *__restrict__ bias,
                                            const float *__restrict__ lnw, const float *__restrict__ lnb,
                                            half *__restrict__ out, const int *__restrict__ last, int C, float eps) {
	pdl_wait();
	__shared__ float red[32];
	int b = blockIdx.x, t = last[b];
	float v[LN_PER_THREAD], w[LN_PER_THREAD], bb[LN_PER_THREAD];
	ln_params(w, bb, lnw, lnb, C);
#pragma unroll
	for (int k = 0; k < LN_PER_THREAD; k++) {
		int c = threadIdx.x + k * blockDim.x;
		v[k] = c < C ? x[(size_t)t * C + c] + bias[c] : 0.f;
	}
	add_partials(v, y, S, pstride, (size_t)t * C, C);
	layernorm_regs(v, w, bb, out + (size_t)b * C, C, eps, red);
}

// Warp-per-row variants of the three row kernels, used when C % 128 == 0 and C <= 128 * LNW_VEC
// (GPT-2 small and medium): one warp owns a row (the layout of rows.cuh), with no block barrier.
// A block holds LNW_ROWS rows. At decode sizes the block-per-row kernels above paid two barrier
// round trips and 3 values per thread for 768 channels.
#define LNW_ROWS 2

// warp_stats writes the row v (layout above) to out in fp16 and, for each 64 channels (16 lanes'
// vectors of one k), their mean and the sum of squared deviations from it to stats[part].
__device__ __forceinline__ void warp_stats(const float4 (&v)[LNW_VEC], int nv, half *__restrict__ out,
                                           float2 *__restrict__ stats) {
	int lane = threadIdx.x % WARP;
#pragma unroll
	for (int k = 0; k < LNW_VEC; k++) {
		if (k < nv) {
			int c = 4 * (lane + k * WARP);
			half2 *o = reinterpret_cast<half2 *>(out + c);
			o[0] = __floats2half2_rn(v[k].x, v[k].y);
			o[1] = __floats2half2_rn(v[k].z, v[k].w);
			float s = v[k].x + v[k].y + v[k].z + v[k].w;
			for (int d = 8; d > 0; d >>= 1) s += __shfl_xor_sync(0xffffffffu, s, d); // within 16 lanes
			float mean = s / 64.f, dx = v[k].x - mean, dy = v[k].y - mean, dz = v[k].z - mean, dw = v[k].w - mean;
			float q = dx * dx + dy * dy + dz * dz + dw * dw;
			for (int d = 8; d > 0; d >>= 1) q += __shfl_xor_sync(0xffffffffu, q, d);
			if (lane % 16 == 0) stats[2 * k + lane / 16] = make_float2(mean, q);
		}
	}
}

// warp_residual loads row t of x plus bias plus the S partials of y (pstride floats apart).
__device__ __forceinline__ void warp_residual(float4 (&v)[LNW_VEC], int nv, const float *__restrict__ x,
                                              const float *__restrict__ y, int S, size_t pstride,
                                              const float *__restrict__ bias, size_t row) {
	int lane = threadIdx.x % WARP;
#pragma unroll
	for (int k = 0; k < LNW_VEC; k++) {
		if (k < nv) {
			int c = 4 * (lane + k * WARP);
			v[k] = add4(*reinterpret_cast<const float4 *>(x + row + c), *reinterpret_cast<const float4 *>(bias + c));
		}
	}
#pragma unroll 4
	for (int s = 0; s < S; s++) {
#pragma unroll
		for (int k = 0; k < LNW_VEC; k++) {
			if (k < nv) {
				int c = 4 * (lane + k * WARP);
				v[k] = add4(v[k], *reinterpret_cast<const float4 *>(y + s * pstride + row + c));
			}
		}
	}
}

// residual_ln_warp: residual_ln with a warp per row. Grid ceil(N/LNW_ROWS), block 32*LNW_ROWS.
extern "C" __global__ void residual_ln_warp(float *__restrict__ x, const float *__restrict__ y, int S, size_t pstride,
                                            const float *__restrict__ bias, const float *__restrict__ lnw,
                                            const float *__restrict__ lnb, half *__restrict__ xln, int C, float eps,
                                            int N) {
	pdl_wait();
	int t = blockIdx.x * LNW_ROWS + threadIdx.x / WARP, nv = C / (4 * WARP);
	if (t >= N) return;
	size_t row = (size_t)t * C;
	float4 v[LNW_VEC];
	warp_residual(v, nv, x, y, S, pstride, bias, row);
	warp_store(v, nv, x + row);
	warp_ln(v, nv, lnw, lnb, xln + row, C, eps);
}

// residual_ln_last_warp: residual_ln_last with a warp per row. Grid ceil(B/LNW_ROWS), block
// 32*LNW_ROWS.
extern "C" __global__ void residual_ln_last_warp(const float *__restrict__ x, const float *__restrict__ y, int S,
                                                 size_t pstride, const float *__restrict__ bias,
                                                 const float *__restrict__ lnw, const float *__restrict__ lnb,
                                                 half *__restrict__ out, const int *__restrict__ last, int C,
                                                 float eps, int B) {
	pdl_wait();
	int b = blockIdx.x * LNW_ROWS + threadIdx.x / WARP, nv = C / (4 * WARP);
	if (b >= B) return;
	float4 v[LNW_VEC];
	warp_residual(v, nv, x, y, S, pstride, bias, (size_t)last[b] * C);
	warp_ln(v, nv, lnw, lnb, out + (size_t)b * C, C, eps);
}

// embed_ln_warp: embed_ln with a warp per row. Grid ceil(N/LNW_ROWS), block 32*LNW_ROWS.
// With stats (the decode steps whose norms are folded into small_gemm, gpu/fold.go), xln gets
// the row itself in fp16 and stats, pstride pairs a row, the (mean, M2) of each 64 channels in
// its first C/64 (warp_stats); small_gemm's LN epilogue applies ln_1. Without, xln = ln_1(x).
extern "C" __global__ void embed_ln_warp(float *__restrict__ x, half *__restrict__ xln, const int *__restrict__ ids,
                                         const int *__restrict__ pos, const half *__restrict__ wte,
                                         const half *__restrict__ wpe, const float *__restrict__ lnw,
                                         const float *__restrict__ lnb, int C, float eps, int N,
                                         float2 *__restrict__ stats, int pstride) {
	pdl_wait();
	int t = blockIdx.x * LNW_ROWS + threadIdx.x / WARP, nv = C / (4 * WARP);
	if (t >= N) return;
	size_t row = (size_t)t * C;
	float4 v[LNW_VEC];
	uint2 pe[LNW_VEC];
	warp_wpe(pe, nv, wpe, pos[t], C);
	warp_embed_tok(v, pe, nv, wte, ids[t], C);
	warp_store(v, nv, x + row);
	if (stats)
		warp_stats(v, nv, xln + row, stats + (size_t)t * pstride);
	else
		warp_ln(v, nv, lnw, lnb, xln + row, C, eps);
}

// bias_gelu: h(N,F) = gelu_tanh(y(N,F) + bias(F)), two values per thread (F even).
// Grid ceil(N*F/2/256), block 256.
extern "C" __global__ void bias_gelu(half *__restrict__ h, const float *__restrict__ y, const float *__restrict__ bias,
                                     int F, int total) {
	pdl_wait();
	int i = 2 * (blockIdx.x * blockDim.x + threadIdx.x);
	if (i >= total) return;
	int f = i % F;
	float2 v = *reinterpret_cast<const float2 *>(y + i);
	v.x += bias[f];
	v.y += bias[f + 1];
	float ux = 0.7978845608028654f * (v.x + 0.044715f * v.x * v.x * v.x);
	float uy = 0.7978845608028654f * (v.y + 0.044715f * v.y * v.y * v.y);
	*reinterpret_cast<half2 *>(h + i) = __floats2half2_rn(0.5f * v.x * (1.f + tanhf(ux)), 0.5f * v.y * (1.f + tanhf(uy)));
}

// QKV_PER_THREAD values of a qkv row per thread: 3C <= 256 * QKV_PER_THREAD.
#define QKV_PER_THREAD 24

// qkv_bias_kv_write: y(N,3C) plus the bias is q, k, v of each token: q goes to qkv(N,3C) (its
// first C columns; attention reads it there), k and v into the token's cache slot: kc/vc are
// (slots, C) for this layer. Grid N, block 256.
extern "C" __global__ void qkv_bias_kv_write(half *__restrict__ qkv, const float *__restrict__ y,
                                             const float *__restrict__ bias, half *__restrict__ kc,
                                             half *__restrict__ vc, const int *__restrict__ slot, int C) {
	pdl_wait();
	int t = blockIdx.x;
	half *row = qkv + (size_t)t * 3 * C;
	size_t s = (size_t)slot[t] * C;
	float v[QKV_PER_THREAD];
#pragma unroll
	for (int k = 0; k < QKV_PER_THREAD; k++) {
		int c = threadIdx.x + k * blockDim.x;
		v[k] = c < 3 * C ? y[(size_t)t * 3 * C + c] + bias[c] : 0.f;
	}
#pragma unroll
	for (int k = 0; k < QKV_PER_THREAD; k++) {
		int c = threadIdx.x + k * blockDim.x;
		half h = __float2half(v[k]);
		if (c < C) row[c] = h;
		else if (c < 2 * C) kc[s + c - C] = h;
		else if (c < 3 * C) vc[s + c - 2 * C] = h;
	}
}

// attention: causal attention of each token over its sequence's cached keys and values,
// positions [0, pos[t]]. The token's own k and v are in the cache first (written by
// qkv_bias_kv_write, or by the block itself in the decode variant, FUSED below). The sequence's
// block table (maxBlocks entries) maps position j to slot table[j / bs] * bs + j % bs; contiguous
// KV is one block of bs = MaxSeqLen per batch slot.
// Decode is latency-bound, so the kernel keeps the memory system busy with few dependent round
// trips: the block table's used entries first move to shared memory (one round trip for all),
// then L = HD/8 lanes share a position, each loading 8 dims of its key and of its value with
// 16-byte loads. A block covers G = ATT_THREADS/L positions per lane-group step; a row is
// ATT_UNROLL such steps (32 positions at HD 64), and ATT_BUFS rows are in flight in a ring: a row
// is folded in while the next ones load, then reloads with the row ATT_BUFS further on (in a
// decode step, past the ATT_STAGED rows that follow the ring's first ones in shared memory). Each
// lane group keeps an online softmax (running max, sum and weighted values); the groups merge
// through shared memory, a thread per dim. 128 threads, at most 80 registers and 26 KB of shared
// memory (6 blocks an SM) keep a whole batch-64 decode step (768 blocks) resident in one wave. HD
// is a power of two from 8 to 256.
// The kernel is as much issue-bound as memory-bound at batch 64, so instructions count: hence the
// ring of rows, the copy with the 64-dim head compiled in (ATT_DISPATCH) and the merge through
// shared memory (bench/RESULTS.md has the variants and their times).
// Grid (N, NH), block ATT_THREADS; dynamic shared memory: maxBlocks ints.
#define ATT_THREADS 128
#define ATT_UNROLL 2
#define ATT_BUFS 2
#define ATT_STAGED 2 // decode: rows after the ring's first ones, in shared memory (16 KB)

// kv_slot is position j's cache slot: table[j / bs] * bs + j % bs when PAGED (bs = 1 << sh), else
// base + j. Slots and their offsets in 16-byte words fit 32 bits (buffers.go maxKVSlots).
template <bool PAGED>
__device__ __forceinline__ unsigned kv_slot(const int *table, unsigned base, int j, int sh) {
	return PAGED ? ((unsigned)table[j >> sh] << sh) | (unsigned)(j & ((1 << sh) - 1)) : base + j;
}

__device__ __forceinline__ float dot8(const float (&q)[8], uint4 u) {
	const half2 *k2 = reinterpret_cast<const half2 *>(&u);
	float s = 0.f;
#pragma unroll
	for (int e = 0; e < 4; e++) {
		float2 f = __half22float2(k2[e]);
		s += q[2 * e] * f.x + q[2 * e + 1] * f.y;
	}
	return s;
}

// kv_row loads this thread's keys and values of the row of positions starting at j0: position
// j0 + k*G + grp into ku[k], vu[k] (zero from lim on). kh and vh point at the thread's 8 dims of
// slot 0; a slot is C8 16-byte words. table and base as kv_slot's. Every slot is computed before
// the first load, with no branch (positions past lim read a valid entry and are not loaded), so
// a table in global memory costs one round trip, not one per position. The loads stream (evict
// first): a step reads each key once, and the L2 keeps the weights the GEMMs prefetched into it.
template <bool PAGED, int U>
__device__ __forceinline__ void kv_row(uint4 (&ku)[U], uint4 (&vu)[U], const uint4 *kh, const uint4 *vh,
                                       const int *table, unsigned base, int j0, int lim, int G, int grp, int sh,
                                       unsigned C8) {
	unsigned sl[U];
#pragma unroll
	for (int k = 0; k < U; k++) sl[k] = kv_slot<PAGED>(table, base, min(j0 + k * G + grp, max(lim - 1, 0)), sh) * C8;
#pragma unroll
	for (int k = 0; k < U; k++) {
		ku[k] = vu[k] = make_uint4(0, 0, 0, 0);
		if (j0 + k * G + grp < lim) {
			ku[k] = __ldcs(kh + sl[k]);
			vu[k] = __ldcs(vh + sl[k]);
		}
	}
}

// exp2_fast is 2^x by the special-function unit (ex2.approx: 2 ulp; 2^-inf = 0). The attention
// scores are kept in base 2 (q is pre-scaled by log2(e)), so the softmax needs no expf.
__device__ __forceinline__ float exp2_fast(float x) {
	float y;
	asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
	return y;
}


// load8 returns 8 consecutive fp32 values of y plus bias, rounded to fp16 (the cache's precision).
__device__ __forceinline__ uint4 load8(const float *__restrict__ y, const float *__restrict__ b) {
	float4 y0 = *reinterpret_cast<const float4 *>(y), y1 = *reinterpret_cast<const float4 *>(y + 4);
	float4 b0 = *reinterpret_cast<const float4 *>(b), b1 = *reinterpret_cast<const float4 *>(b + 4);
	uint4 u;
	half2 *h2 = reinterpret_cast<half2 *>(&u);
	h2[0] = __floats2half2_rn(y0.x + b0.x, y0.y + b0.y);
	h2[1] = __floats2half2_rn(y0.z + b0.z, y0.w + b0.w);
	h2[2] = __floats2half2_rn(y1.x + b1.x, y1.y + b1.y);
	h2[3] = __floats2half2_rn(y1.z + b1.z, y1.w + b1.w);
	return u;
}

// fold_row folds one row of keys and values (position j0 + k*G + grp in ku[k], vu[k]) into the
// lane group's online softmax: the row's scores first, then one rescale of the running state (m,
// l, acc) for all of them, not one per position. Uniform over the block: shuffles inside.
template <int U>
__device__ __forceinline__ void fold_row(const float (&q)[8], const uint4 (&ku)[U], const uint4 (&vu)[U], int j0,
                                         int G, int grp, int L, int ctx, float &m, float &l, float (&acc)[8]) {
	float sc[U], mn = m;
#pragma unroll
	for (int k = 0; k < U; k++) {
		float s = dot8(q, ku[k]);
		for (int o = L / 2; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
		sc[k] = j0 + k * G + grp < ctx ? s : -INFINITY;
		mn = fmaxf(mn, sc[k]);
	}
	if (mn == -INFINITY) return; // this lane group has no position in the row
	float c = exp2_fast(m - mn); // mn is finite; 0 while the state is empty (m = -inf)
	l *= c;
#pragma unroll
	for (int e = 0; e < 8; e++) acc[e] *= c;
#pragma unroll
	for (int k = 0; k < U; k++) {
		float p = exp2_fast(sc[k] - mn);
		l += p;
		const half2 *v2 = reinterpret_cast<const half2 *>(&vu[k]);
#pragma unroll
		for (int e = 0; e < 4; e++) {
			float2 f = __half22float2(v2[e]);
			acc[2 * e] += p * f.x;
			acc[2 * e + 1] += p * f.y;
		}
	}
	m = mn;
}

// own_kv puts the token's own key and value (position ctx - 1) into the row starting at j0 when
// the position is this lane group's in that row.
template <int U>
__device__ __forceinline__ void own_kv(uint4 (&ku)[U], uint4 (&vu)[U], uint4 k, uint4 v, int j0, int G, int grp,
                                       int ctx) {
#pragma unroll
	for (int j = 0; j < U; j++) {
		if (j0 + j * G + grp == ctx - 1) {
			ku[j] = k;
			vu[j] = v;
		}
	}
}

// FUSED (decode: every sequence of the step has one token, at position pos[t]): the block first
// does qkv_bias_kv_write's job for its head, from the QKV GEMM's fp32 output y(N,3C) and the
// bias: q stays in registers, k and v go to the token's slot; the barrier that publishes the
// block table also publishes them to the block's loads of later rows (kc and vc are therefore
// not __restrict__: the kernel writes and reads them). Otherwise q comes from qkv(N,3C).
template <bool PAGED, bool FUSED, int HDC>
__device__ __forceinline__ void attention(half *__restrict__ out, const half *__restrict__ qkv, const float *__restrict__ y,
                          const float *__restrict__ bias, const int *__restrict__ slot, half *kc, half *vc,
                          const int *__restrict__ tokSeq, const int *__restrict__ pos,
                          const int *__restrict__ tables, int maxBlocks, int bs, int C, int NH, float scale) {
	constexpr int U = ATT_UNROLL;
	// Each lane group's softmax state for the merge: G groups of HD dims are ATT_THREADS * 8.
	__shared__ __align__(16) float gacc[ATT_THREADS * 8];
	__shared__ float gm[ATT_THREADS], gl[ATT_THREADS];
	extern __shared__ int table[];
	int t = blockIdx.x, h = blockIdx.y, HD = HDC ? HDC : C / NH, L = HD / 8;
	int sub = threadIdx.x % L, grp = threadIdx.x / L, G = ATT_THREADS / L; // G positions per row
	int R = G * U;                                                          // positions per row
	int ctx = pos[t] + 1;
	const int *gtable = tables + (size_t)tokSeq[t] * maxBlocks;
	int sh = __ffs(bs) - 1; // PAGED: bs is a power of two (runner.go Options)
	int nblk = PAGED ? (ctx + bs - 1) >> sh : 1;
	for (int i = threadIdx.x; i < nblk; i += ATT_THREADS) table[i] = gtable[i]; // metadata: before the wait
	const uint4 *kh = reinterpret_cast<const uint4 *>(kc + h * HD + 8 * sub);
	const uint4 *vh = reinterpret_cast<const uint4 *>(vc + h * HD + 8 * sub);
	unsigned C8 = C / 8;
	// ATT_BUFS rows in flight, in a ring: while one is folded in, the others load, and it reloads
	// with the row ATT_BUFS further on. In a decode step every position of the first ATT_BUFS rows
	// but the token's own (ctx - 1) was cached by an earlier step, so they load before the wait,
	// overlapping the QKV GEMM this kernel waits for.
	uint4 ku[ATT_BUFS][U], vu[ATT_BUFS][U];
	// FUSED: the ATT_STAGED rows after those go to shared memory by cp.async, also before the
	// wait, so that a context of up to ATT_BUFS + ATT_STAGED rows waits for no load after it
	// (bench/RESULTS.md: faster at 1-48 sequences, the same at 64). A thread reads back only its own
	// slots; positions past the token's are zero, its own is stored by its lane group once
	// computed. Only the 64-dim copy stages (the memory is static, every copy's counts).
	constexpr int SR = FUSED && HDC ? ATT_STAGED : 0;
	__shared__ __align__(16) uint4 staged[SR ? SR : 1][U][2][ATT_THREADS];
	if (FUSED) {
		unsigned base = PAGED ? 0 : (unsigned)gtable[0] * bs;
		uint64_t first; // the staged rows stream past the L2 too (kv_row)
		asm("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(first));
#pragma unroll
		for (int r = 0; r < ATT_BUFS; r++)
			if (r == 0 || r * R < ctx) kv_row<PAGED, U>(ku[r], vu[r], kh, vh, gtable, base, r * R, ctx - 1, G, grp, sh, C8);
#pragma unroll
		for (int r = 0; r < (ctx > ATT_BUFS * R ? SR : 0); r++) {
#pragma unroll
			for (int k = 0; k < U; k++) {
				const int j = (ATT_BUFS + r) * R + k * G + grp;
				if (j < ctx - 1) {
					const unsigned sl = kv_slot<PAGED>(gtable, base, j, sh) * C8;
					const uint32_t dk = (uint32_t)__cvta_generic_to_shared(&staged[r][k][0][threadIdx.x]),
					               dv = (uint32_t)__cvta_generic_to_shared(&staged[r][k][1][threadIdx.x]);
					asm volatile("cp.async.cg.shared.global.L2::cache_hint [%0], [%1], 16, %2;" ::"r"(dk), "l"(kh + sl), "l"(first)
					             : "memory");
					asm volatile("cp.async.cg.shared.global.L2::cache_hint [%0], [%1], 16, %2;" ::"r"(dv), "l"(vh + sl), "l"(first)
					             : "memory");
				} else if (j > ctx - 1) {
					staged[r][k][0][threadIdx.x] = staged[r][k][1][threadIdx.x] = make_uint4(0, 0, 0, 0);
				}
			}
		}
		asm volatile("cp.async.commit_group;" ::: "memory");
	}
	pdl_wait();
	float q[8];
	{
		uint4 u;
		if (FUSED) {
			// The lane group that owns position ctx - 1 writes the token's k and v to the cache
			// and, when the position is in a row already loading, keeps them in its registers.
			const float *yr = y + (size_t)t * 3 * C + h * HD + 8 * sub;
			const float *br = bias + h * HD + 8 * sub;
			u = load8(yr, br);
			if (grp == (ctx - 1) % G) {
				uint4 k = load8(yr + C, br + C), v = load8(yr + 2 * C, br + 2 * C);
				size_t s = (size_t)slot[t] * C + h * HD + 8 * sub;
				*reinterpret_cast<uint4 *>(kc + s) = k;
				*reinterpret_cast<uint4 *>(vc + s) = v;
#pragma unroll
				for (int r = 0; r < ATT_BUFS; r++) own_kv<U>(ku[r], vu[r], k, v, r * R, G, grp, ctx);
				const int sr = (ctx - 1) / R - ATT_BUFS;
				if (sr >= 0 && sr < SR) {
					const int kk = (ctx - 1) % R / G;
					staged[sr][kk][0][threadIdx.x] = k;
					staged[sr][kk][1][threadIdx.x] = v;
				}
			}
		} else {
			u = *reinterpret_cast<const uint4 *>(qkv + (size_t)t * 3 * C + h * HD + 8 * sub);
		}
		const half2 *q2 = reinterpret_cast<const half2 *>(&u);
#pragma unroll
		for (int e = 0; e < 4; e++) {
			float2 f = __half22float2(q2[e]);
			q[2 * e] = f.x * scale * 1.4426950408889634f; // scores in base 2: log2(e)
			q[2 * e + 1] = f.y * scale * 1.4426950408889634f;
		}
	}
	__syncthreads(); // the table, and (FUSED) this token's k and v
	unsigned base = PAGED ? 0 : (unsigned)table[0] * bs;
	if (!FUSED) {
#pragma unroll
		for (int r = 0; r < ATT_BUFS; r++)
			if (r == 0 || r * R < ctx) kv_row<PAGED, U>(ku[r], vu[r], kh, vh, table, base, r * R, ctx, G, grp, sh, C8);
	}
	float m = -INFINITY, l = 0.f, acc[8] = {0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f};
	int first = 0; // the first row of the ring below
	if (SR > 0 && ctx > ATT_BUFS * R) {
		// The ring's rows, each reloaded with the first row past the staged ones; then the
		// staged rows while those load.
#pragma unroll
		for (int r = 0; r < ATT_BUFS; r++) {
			fold_row<U>(q, ku[r], vu[r], r * R, G, grp, L, ctx, m, l, acc);
			const int jn = (r + ATT_BUFS + SR) * R;
			if (jn < ctx) kv_row<PAGED, U>(ku[r], vu[r], kh, vh, table, base, jn, ctx, G, grp, sh, C8);
		}
		asm volatile("cp.async.wait_all;" ::: "memory");
#pragma unroll
		for (int r = 0; r < SR; r++) {
			const int j = (ATT_BUFS + r) * R;
			if (j >= ctx) break;
			uint4 tk[U], tv[U];
#pragma unroll
			for (int k = 0; k < U; k++) {
				tk[k] = staged[r][k][0][threadIdx.x];
				tv[k] = staged[r][k][1][threadIdx.x];
			}
			fold_row<U>(q, tk, tv, j, G, grp, L, ctx, m, l, acc);
		}
		first = (ATT_BUFS + SR) * R;
	}
	for (int j0 = first; j0 < ctx; j0 += ATT_BUFS * R) { // uniform over the block
#pragma unroll
		for (int r = 0; r < ATT_BUFS; r++) {
			int j = j0 + r * R; // the row in ku[r], vu[r]
			if (j >= ctx) break;
			fold_row<U>(q, ku[r], vu[r], j, G, grp, L, ctx, m, l, acc);
			if (j + ATT_BUFS * R < ctx) kv_row<PAGED, U>(ku[r], vu[r], kh, vh, table, base, j + ATT_BUFS * R, ctx, G, grp, sh, C8);
		}
	}
	// Merge the G lane groups' states through shared memory: a thread per dim rescales the
	// groups' sums to the largest running max (group 0 always holds position 0, so it is finite).
	*reinterpret_cast<float4 *>(&gacc[grp * HD + 8 * sub]) = make_float4(acc[0], acc[1], acc[2], acc[3]);
	*reinterpret_cast<float4 *>(&gacc[grp * HD + 8 * sub + 4]) = make_float4(acc[4], acc[5], acc[6], acc[7]);
	if (sub == 0) {
		gm[grp] = m;
		gl[grp] = l;
	}
	__syncthreads();
	for (int d = threadIdx.x; d < HD; d += ATT_THREADS) {
		float M = -INFINITY;
		for (int g = 0; g < G; g++) M = fmaxf(M, gm[g]);
		float sum = 0.f, r = 0.f;
		for (int g = 0; g < G; g++) {
			float f = exp2_fast(gm[g] - M); // 0 for a group with no position (-inf)
			sum += gl[g] * f;
			r += gacc[g * HD + d] * f;
		}
		out[(size_t)t * C + h * HD + d] = __float2half(r / sum);
	}
}

#define ATT_ARGS                                                                                                 \
	half *out, const half *qkv, half *kc, half *vc, const int *tokSeq, const int *pos, const int *tables,         \
	    int maxBlocks, int bs, int C, int NH, float scale
#define ATT_DECODE_ARGS                                                                                          \
	half *out, const float *y, const float *bias, const int *slot, half *kc, half *vc, const int *tokSeq,        \
	    const int *pos, const int *tables, int maxBlocks, int bs, int C, int NH, float scale

// Every GPT-2 size has heads of 64: that case runs a copy of the kernel compiled with the head
// size known (shifts for the lane arithmetic, unrolled shuffle reductions); others the general one.
#define ATT_DISPATCH(PAGED, FUSED, ...)                                                                         \
	if (C == 64 * NH) attention<PAGED, FUSED, 64>(__VA_ARGS__);                                             \
	else attention<PAGED, FUSED, 0>(__VA_ARGS__)

extern "C" __global__ void __launch_bounds__(ATT_THREADS, 6) attention_paged(ATT_ARGS) {
	ATT_DISPATCH(true, false, out, qkv, nullptr, nullptr, nullptr, kc, vc, tokSeq, pos, tables, maxBlocks, bs, C,
	             NH, scale);
}

extern "C" __global__ void __launch_bounds__(ATT_THREADS, 6) attention_contig(ATT_ARGS) {
	ATT_DISPATCH(false, false, out, qkv, nullptr, nullptr, nullptr, kc, vc, tokSeq, pos, tables, maxBlocks, bs, C,
	             NH, scale);
}

// attention_decode_*: qkv_bias_kv_write and attention in one launch, for steps of one token per
// sequence (see FUSED above). HD % 8 == 0 makes the 16- and 32-byte vector accesses aligned.
extern "C" __global__ void __launch_bounds__(ATT_THREADS, 6) attention_decode_paged(ATT_DECODE_ARGS) {
	ATT_DISPATCH(true, true, out, nullptr, y, bias, slot, kc, vc, tokSeq, pos, tables, maxBlocks, bs, C, NH, scale);
}

extern "C" __global__ void __launch_bounds__(ATT_THREADS, 6) attention_decode_contig(ATT_DECODE_ARGS) {
	ATT_DISPATCH(false, true, out, nullptr, y, bias, slot, kc, vc, tokSeq, pos, tables, maxBlocks, bs, C, NH, scale);
}

// meta_copy copies a step's metadata (n 16-byte words) from the mapped pinned host buffer src
// to the device: the first node of every step, a kernel rather than a host-to-device copy node
// (gpu/meta.go metaBufs). The loads are .cv (fetch again,
// never a cached line): the host rewrites src between steps. Grid ceil(n / 256), block 256.
extern "C" __global__ void meta_copy(uint4 *__restrict__ dst, const uint4 *__restrict__ src, int n) {
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n) dst[i] = __ldcv(src + i);
}

// tables_refresh brings a predicted step's block tables up to date (gpu/ahead.go refreshTables):
// it copies n 16-byte words of the tables from the mapped pinned host copy src to dst (.cv
// loads, as meta_copy), then gives each of the B rows that is not a scratch row (slot
// scratchSlot) the slot of its position in its new table: the sampler of the step before moved
// the positions on, and may have found a position's block missing from the old tables. Paged
// tables (blocks of 1 << sh positions, rows of width entries). Grid 1, block 256.
extern "C" __global__ void tables_refresh(uint4 *__restrict__ dst, const uint4 *__restrict__ src, int n,
                                          int *__restrict__ slot, const int *__restrict__ pos, int B, int width,
                                          int sh, int scratchSlot) {
	for (int i = threadIdx.x; i < n; i += blockDim.x) dst[i] = __ldcv(src + i);
	__syncthreads(); // the block's own global writes are visible to the block after the barrier
	const int *tables = reinterpret_cast<const int *>(dst);
	for (int b = threadIdx.x; b < B; b += blockDim.x) {
		if (slot[b] != scratchSlot) {
			int p = pos[b];
			slot[b] = tables[b * width + (p >> sh)] << sh | (p & ((1 << sh) - 1));
		}
	}
}

// spin_ns busy-waits ns nanoseconds of the GPU's global timer. Profiling only: it holds the stream
// while the host enqueues a whole eager step, so CUDA events then time the kernels back to back
// instead of the host's launch gaps. Grid 1, block 1.
extern "C" __global__ void spin_ns(unsigned long long ns) {
	unsigned long long t0, t;
	asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
	do {
		asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
	} while (t - t0 < ns);
}

// pack_head folds ln_f (gamma, beta) into the tied LM head for lm_head_argmax (gpu/head.go), once,
// at Open: dst gets fp16(gamma[k] wte[n][k]) in packWG's order with K = C whole (gpu/wg.go), for
// the Vh columns of the vocabulary padded to a multiple of 64 (zero past V); colc[n] is the sum
// of those values and d[n] = sum_k beta[k] wte[n][k], summed in double (gpu/fold.go's vectors).
// wte (V, C) is the uploaded fp16 embedding. A warp a column: grid ceil(Vh / 8), block 256.
extern "C" __global__ void pack_head(half *__restrict__ dst, float *__restrict__ colc, float *__restrict__ d,
                                     const half *__restrict__ wte, const float *__restrict__ gamma,
                                     const float *__restrict__ beta, int V, int C, int Vh) {
	const int lane = threadIdx.x % 32, n = blockIdx.x * 8 + threadIdx.x / 32;
	if (n >= Vh) return;
	half *col = dst + (size_t)(n / 64) * C * 64 + (n % 64 / 8) * 128 + (n % 8) * 8;
	double c = 0., b = 0.;
	for (int k = lane; k < C; k += 32) {
		const float w = n < V ? __half2float(wte[(size_t)n * C + k]) : 0.f;
		const half g = __float2half_rn(gamma[k] * w);
		col[(k / 16) * 1024 + (k % 16 / 8) * 64 + k % 8] = g;
		c += (double)__half2float(g);
		b += (double)beta[k] * w;
	}
	for (int o = 16; o > 0; o >>= 1) {
		c += __shfl_xor_sync(0xffffffffu, c, o);
		b += __shfl_xor_sync(0xffffffffu, b, o);
	}
	if (lane == 0) {
		colc[n] = (float)c;
		d[n] = (float)b;
	}
}
