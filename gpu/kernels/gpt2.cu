// rosetop's GPT-2 kernels. fp16 weights and activations, fp32 accumulation; the residual stream
// stays in fp32. Built to PTX with `nvcc -arch=compute_80 -ptx` (scripts/gen-ptx.sh) and
// JIT-compiled by the driver at module load. Shapes: N tokens in the step, B sequences, C channels,
// NH heads of HD = C/NH, V vocabulary. Every kernel is launched on the runtime's one stream.
#include <cuda_fp16.h>
#include <stdint.h>

#define WARP 32

__device__ __forceinline__ float warp_sum(float v) {
	for (int o = WARP / 2; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
	return v;
}

__device__ __forceinline__ float warp_max(float v) {
	for (int o = WARP / 2; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
	return v;
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

// layernorm_regs normalizes the row held in v (thread-strided: v[k] is channel tid + k*blockDim)
// and writes it to out.
__device__ void layernorm_regs(float (&v)[LN_PER_THREAD], half *out, const float *w, const float *b, int C,
                               float eps, float *red) {
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
		if (c < C) out[c] = __float2half((v[k] - mean) * rstd * w[c] + b[c]);
	}
}

// embed_ln: x(N,C) = wte[ids] + wpe[pos]; xln(N,C) = LN1 of layer 0. Grid N, block 256.
extern "C" __global__ void embed_ln(float *x, half *xln, const int *ids, const int *pos, const half *wte,
                                    const half *wpe, const float *lnw, const float *lnb, int C, float eps) {
	__shared__ float red[32];
	int t = blockIdx.x;
	const half *te = wte + (size_t)ids[t] * C, *pe = wpe + (size_t)pos[t] * C;
	float *xr = x + (size_t)t * C;
	float v[LN_PER_THREAD];
#pragma unroll
	for (int k = 0; k < LN_PER_THREAD; k++) {
		int c = threadIdx.x + k * blockDim.x;
		v[k] = c < C ? __half2float(te[c]) + __half2float(pe[c]) : 0.f;
		if (c < C) xr[c] = v[k];
	}
	layernorm_regs(v, xln + (size_t)t * C, lnw, lnb, C, eps, red);
}

// residual_ln: x(N,C) += y(N,C) + bias(C); xln = LN(x). Grid N, block 256.
extern "C" __global__ void residual_ln(float *x, const half *y, const float *bias, const float *lnw,
                                       const float *lnb, half *xln, int C, float eps) {
	__shared__ float red[32];
	int t = blockIdx.x;
	float *xr = x + (size_t)t * C;
	const half *yr = y + (size_t)t * C;
	float v[LN_PER_THREAD];
#pragma unroll
	for (int k = 0; k < LN_PER_THREAD; k++) {
		int c = threadIdx.x + k * blockDim.x;
		v[k] = c < C ? xr[c] + __half2float(yr[c]) + bias[c] : 0.f;
		if (c < C) xr[c] = v[k];
	}
	layernorm_regs(v, xln + (size_t)t * C, lnw, lnb, C, eps, red);
}

// residual_ln_last: for each sequence b, row t = last[b]: out(B,C)[b] = LN(x[t] + y[t] + bias).
// Only the last position of each sequence needs the final norm and the logits. Grid B, block 256.
extern "C" __global__ void residual_ln_last(const float *x, const half *y, const float *bias, const float *lnw,
                                            const float *lnb, half *out, const int *last, int C, float eps) {
	__shared__ float red[32];
	int b = blockIdx.x, t = last[b];
	float v[LN_PER_THREAD];
#pragma unroll
	for (int k = 0; k < LN_PER_THREAD; k++) {
		int c = threadIdx.x + k * blockDim.x;
		v[k] = c < C ? x[(size_t)t * C + c] + __half2float(y[(size_t)t * C + c]) + bias[c] : 0.f;
	}
	layernorm_regs(v, out + (size_t)b * C, lnw, lnb, C, eps, red);
}

// bias_gelu: h(N,F) = gelu_tanh(h + bias(F)), in place. Grid ceil(N*F/256), block 256.
extern "C" __global__ void bias_gelu(half *h, const float *bias, int F, int total) {
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i >= total) return;
	float v = __half2float(h[i]) + bias[i % F];
	float u = 0.7978845608028654f * (v + 0.044715f * v * v * v);
	h[i] = __float2half(0.5f * v * (1.f + tanhf(u)));
}

// qkv_bias_kv_write: adds the bias to qkv(N,3C), keeps q in place and writes k and v into the
// cache slot of each token: kc/vc are (slots, C) for this layer. Grid N, block 256.
extern "C" __global__ void qkv_bias_kv_write(half *qkv, const float *bias, half *kc, half *vc, const int *slot,
                                             int C) {
	int t = blockIdx.x;
	half *row = qkv + (size_t)t * 3 * C;
	size_t s = (size_t)slot[t] * C;
	for (int c = threadIdx.x; c < 3 * C; c += blockDim.x) {
		half v = __float2half(__half2float(row[c]) + bias[c]);
		if (c < C) row[c] = v;
		else if (c < 2 * C) kc[s + c - C] = v;
		else vc[s + c - 2 * C] = v;
	}
}

// attention: causal attention of each token over its sequence's cached keys and values,
// positions [0, pos[t]]. Prefill and decode alike: the token's own k and v were written to the
// cache first. The sequence's block table (maxBlocks entries) maps position j to slot
// table[j / bs] * bs + j % bs; contiguous KV is one block of bs = MaxSeqLen per batch slot.
// Decode is latency-bound, so both phases keep many independent loads in flight: scores take one
// key per thread, values 8 dims of one position per thread, all with 16-byte loads.
// Grid (N, NH), block 256; dynamic shared memory: (HD + maxCtx rounded to 4 + 256*8) floats, then
// maxBlocks ints.
template <bool PAGED>
__device__ __forceinline__ size_t kv_slot(const int *table, size_t base, int j, int bs) {
	return PAGED ? (size_t)table[j / bs] * bs + j % bs : base + j;
}

template <bool PAGED>
__device__ void attention(half *out, const half *qkv, const half *kc, const half *vc, const int *tokSeq,
                          const int *pos, const int *tables, int maxBlocks, int bs, int C, int NH, float scale) {
	extern __shared__ float sm[];
	__shared__ float red[32];
	int t = blockIdx.x, h = blockIdx.y, HD = C / NH;
	int ctx = pos[t] + 1;
	const int *gtable = tables + (size_t)tokSeq[t] * maxBlocks;
	float *q = sm, *sc = sm + HD, *part = sc + ((ctx + 3) & ~3);
	// The block table's used entries move to shared memory (after part's 8 floats per thread):
	// a key's address then costs one global load, not two dependent ones.
	int *table = reinterpret_cast<int *>(part + 8 * blockDim.x);
	int nblk = PAGED ? (ctx + bs - 1) / bs : 1;
	for (int i = threadIdx.x; i < nblk; i += blockDim.x) table[i] = gtable[i];
	for (int d = threadIdx.x; d < HD; d += blockDim.x) q[d] = __half2float(qkv[(size_t)t * 3 * C + h * HD + d]) * scale;
	__syncthreads();
	size_t base = PAGED ? 0 : (size_t)table[0] * bs; // read after the barrier above
	const half *kh = kc + h * HD, *vh = vc + h * HD;

	// Scores: one key per thread.
	float mx = -INFINITY;
	for (int j = threadIdx.x; j < ctx; j += blockDim.x) {
		const half *k = kh + kv_slot<PAGED>(table, base, j, bs) * C;
		float s = 0.f;
		if ((HD & 7) == 0) {
			for (int d = 0; d < HD; d += 8) {
				uint4 u = *reinterpret_cast<const uint4 *>(k + d);
				const half2 *k2 = reinterpret_cast<const half2 *>(&u);
#pragma unroll
				for (int e = 0; e < 4; e++) {
					float2 f = __half22float2(k2[e]);
					s += q[d + 2 * e] * f.x + q[d + 2 * e + 1] * f.y;
				}
			}
		} else {
			for (int d = 0; d < HD; d++) s += q[d] * __half2float(k[d]);
		}
		sc[j] = s;
		mx = fmaxf(mx, s);
	}
	mx = block_max(mx, red);
	float sum = 0.f;
	for (int j = threadIdx.x; j < ctx; j += blockDim.x) {
		float e = expf(sc[j] - mx);
		sc[j] = e;
		sum += e;
	}
	sum = block_sum(sum, red); // its barriers also publish sc

	// Values: thread (g, c) sums positions g, g+G, ... for the 8 dims [8c, 8c+8) with 16-byte
	// loads; G = blockDim / (HD/8) groups. Partial sums meet in part (G x HD).
	if ((HD & 7) == 0) {
		int chunks = HD / 8, G = blockDim.x / chunks;
		int g = threadIdx.x / chunks, c = threadIdx.x % chunks;
		float acc[8] = {0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f};
		if (g < G) {
#pragma unroll 4
			for (int j = g; j < ctx; j += G) {
				uint4 u = *reinterpret_cast<const uint4 *>(vh + kv_slot<PAGED>(table, base, j, bs) * C + 8 * c);
				const half2 *v2 = reinterpret_cast<const half2 *>(&u);
				float p = sc[j];
#pragma unroll
				for (int e = 0; e < 4; e++) {
					float2 f = __half22float2(v2[e]);
					acc[2 * e] += p * f.x;
					acc[2 * e + 1] += p * f.y;
				}
			}
#pragma unroll
			for (int e = 0; e < 8; e++) part[g * HD + 8 * c + e] = acc[e];
		}
		__syncthreads();
		for (int d = threadIdx.x; d < HD; d += blockDim.x) {
			float r = 0.f;
			for (int k = 0; k < G; k++) r += part[k * HD + d];
			out[(size_t)t * C + h * HD + d] = __float2half(r / sum);
		}
	} else {
		for (int d = threadIdx.x; d < HD; d += blockDim.x) {
			float r = 0.f;
			for (int j = 0; j < ctx; j++) r += sc[j] * __half2float(vh[kv_slot<PAGED>(table, base, j, bs) * C + d]);
			out[(size_t)t * C + h * HD + d] = __float2half(r / sum);
		}
	}
}

extern "C" __global__ void attention_paged(half *out, const half *qkv, const half *kc, const half *vc,
                                           const int *tokSeq, const int *pos, const int *tables, int maxBlocks,
                                           int bs, int C, int NH, float scale) {
	attention<true>(out, qkv, kc, vc, tokSeq, pos, tables, maxBlocks, bs, C, NH, scale);
}

extern "C" __global__ void attention_contig(half *out, const half *qkv, const half *kc, const half *vc,
                                            const int *tokSeq, const int *pos, const int *tables, int maxBlocks,
                                            int bs, int C, int NH, float scale) {
	attention<false>(out, qkv, kc, vc, tokSeq, pos, tables, maxBlocks, bs, C, NH, scale);
}
