// rows.cuh: the warp-per-row pieces of a token row's embedding and layer norm, included by
// gpt2.cu (embed_ln_warp and the residual kernels) and sample.cu (argmax_next embeds the next
// step's rows for a step queued ahead, gpu/plan.go embedNext), so that both compute a row
// bit for bit alike. A warp owns a row of C channels (C % 128 == 0, C <= 128 * LNW_VEC): lane l
// holds float4 vectors of channels 4*(l + 32k) .. +3 for k < nv = C/128, so every access is 16
// bytes wide and coalesced and the reductions are warp shuffles. scripts/gen-ptx.sh hashes this
// file into every module's source hash.
#pragma once
#include <cuda_fp16.h>

#define LNW_VEC 8

__device__ __forceinline__ float row_sum(float v) {
	for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
	return v;
}

__device__ __forceinline__ float4 add4(float4 a, float4 b) {
	return make_float4(a.x + b.x, a.y + b.y, a.z + b.z, a.w + b.w);
}

// warp_wpe loads this lane's part of position pos's row of wpe (fp16, rows of C), ahead of the
// token's (warp_embed_tok).
__device__ __forceinline__ void warp_wpe(uint2 (&pe)[LNW_VEC], int nv, const half *__restrict__ wpe, int pos, int C) {
	int lane = threadIdx.x % 32;
#pragma unroll
	for (int k = 0; k < LNW_VEC; k++) {
		if (k < nv) pe[k] = *reinterpret_cast<const uint2 *>(wpe + (size_t)pos * C + 4 * (lane + k * 32));
	}
}

// warp_embed_tok: v = token tok's embedding (wte) plus the position's row that warp_wpe loaded.
__device__ __forceinline__ void warp_embed_tok(float4 (&v)[LNW_VEC], const uint2 (&pe)[LNW_VEC], int nv,
                                               const half *__restrict__ wte, int tok, int C) {
	int lane = threadIdx.x % 32;
#pragma unroll
	for (int k = 0; k < LNW_VEC; k++) {
		if (k < nv) {
			const half2 *a = reinterpret_cast<const half2 *>(wte + (size_t)tok * C + 4 * (lane + k * 32));
			const half2 *p = reinterpret_cast<const half2 *>(&pe[k]);
			float2 a0 = __half22float2(a[0]), a1 = __half22float2(a[1]), p0 = __half22float2(p[0]), p1 = __half22float2(p[1]);
			v[k] = make_float4(a0.x + p0.x, a0.y + p0.y, a1.x + p1.x, a1.y + p1.y);
		}
	}
}

// warp_store writes the row v to xr (fp32).
__device__ __forceinline__ void warp_store(const float4 (&v)[LNW_VEC], int nv, float *__restrict__ xr) {
	int lane = threadIdx.x % 32;
#pragma unroll
	for (int k = 0; k < LNW_VEC; k++) {
		if (k < nv) *reinterpret_cast<float4 *>(xr + 4 * (lane + k * 32)) = v[k];
	}
}

// warp_ln writes LN(v) with weights lnw and biases lnb to out as fp16. EARLY loads the weights
// before the reductions, overlapping their round trip (the row kernels); otherwise they load
// after them, in fewer registers (the sampler, whose every block would pay for the registers).
// The arithmetic is the same either way.
template <bool EARLY = true>
__device__ __forceinline__ void warp_ln(const float4 (&v)[LNW_VEC], int nv, const float *__restrict__ lnw,
                                        const float *__restrict__ lnb, half *__restrict__ out, int C, float eps) {
	int lane = threadIdx.x % 32;
	float4 w[LNW_VEC], b[LNW_VEC];
	float s = 0.f;
#pragma unroll
	for (int k = 0; k < LNW_VEC; k++) {
		if (k < nv) {
			if (EARLY) {
				int c = 4 * (lane + k * 32);
				w[k] = *reinterpret_cast<const float4 *>(lnw + c);
				b[k] = *reinterpret_cast<const float4 *>(lnb + c);
			}
			s += v[k].x + v[k].y + v[k].z + v[k].w;
		}
	}
	float mean = row_sum(s) / C, q = 0.f;
#pragma unroll
	for (int k = 0; k < LNW_VEC; k++) {
		if (k < nv) {
			float dx = v[k].x - mean, dy = v[k].y - mean, dz = v[k].z - mean, dw = v[k].w - mean;
			q += dx * dx + dy * dy + dz * dz + dw * dw;
		}
	}
	float rstd = rsqrtf(row_sum(q) / C + eps);
#pragma unroll
	for (int k = 0; k < LNW_VEC; k++) {
		if (k < nv) {
			int c = 4 * (lane + k * 32);
			if (!EARLY) {
				w[k] = *reinterpret_cast<const float4 *>(lnw + c);
				b[k] = *reinterpret_cast<const float4 *>(lnb + c);
			}
			half2 lo = __floats2half2_rn((v[k].x - mean) * rstd * w[k].x + b[k].x, (v[k].y - mean) * rstd * w[k].y + b[k].y);
			half2 hi = __floats2half2_rn((v[k].z - mean) * rstd * w[k].z + b[k].z, (v[k].w - mean) * rstd * w[k].w + b[k].w);
			half2 *o = reinterpret_cast<half2 *>(out + c);
			o[0] = lo;
			o[1] = hi;
		}
	}
}
