// gemm.cuh: what the decode-step GEMMs share, included by gemm.cu (small_gemm, mma.sync, sm_90)
// and gemm_sm90a.cu (wg_gemm, wgmma, sm_90a): the epilogues, which fold a step's layer norms and
// residual adds into the GEMMs (gpu/fold.go), and the cluster helpers. scripts/gen-ptx.sh hashes
// this file into every module's source hash.
#pragma once
#include <cuda_fp16.h>
#include <stdint.h>

#define SG_MAX_CLUSTER 16 // gpu/mma.go smallMaxCluster
#define SG_MAX_PARTS 16   // gpu/fold.go foldMaxParts: (mean, M2) pairs a row of stats

// The epilogues. A layer norm y = LN(x) W + b is folded (gpu/fold.go): X is the row x itself in
// fp16, W holds gamma * W, and with the row's mean and rstd, colc = the column sums of that W
// and bias = beta W + b, LN(x) W + b = rstd * (x W - mean * colc) + bias. The row's mean and
// rstd come from stats, pstride pairs a row: its first P are (mean, M2) of K/P channels each,
// written by whoever wrote x (EPI_RES below, or embed_ln_warp).
#define EPI_PLAIN 0   // y fp32 (M, N) = XW
#define EPI_GELU 1    // y fp16 (M, N) = gelu(XW + bias)
#define EPI_LN 2      // y fp32 (M, N) = rstd * (XW - mean * colc) + bias
#define EPI_LN_GELU 3 // y fp16 (M, N) = gelu(rstd * (XW - mean * colc) + bias)
#define EPI_RES 4     // y fp32 (M, N) += XW + bias (the residual stream); x16 = y in fp16; the
                      // first gridDim.x stats of each row = (mean, M2) of each block's columns

#if __CUDA_ARCH__ >= 900
__device__ __forceinline__ void ldsm_x4(uint32_t (&r)[4], uint32_t addr) {
	asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
	             : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
	             : "r"(addr));
}

__device__ __forceinline__ void cluster_sync() {
	asm volatile("barrier.cluster.arrive.aligned;\n\tbarrier.cluster.wait.aligned;" ::: "memory");
}

// in_rank maps p, in this block's shared memory, to the same offset in cluster block rank's, as
// a generic address: plain loads through it are ordinary memory accesses the compiler may batch
// (they stay between the cluster barriers, which clobber memory).
template <typename T> __device__ __forceinline__ const T *in_rank(const T *p, uint32_t rank) {
	uint64_t r;
	asm("mapa.u64 %0, %1, %2;" : "=l"(r) : "l"(reinterpret_cast<uint64_t>(p)), "r"(rank));
	return reinterpret_cast<const T *>(r);
}

__device__ __forceinline__ float gelu(float v) {
	return 0.5f * v * (1.f + tanhf(0.7978845608028654f * (v + 0.044715f * v * v * v)));
}

// row_norm is a row's (mean, rstd) over K channels from its P (mean, M2) pairs st, all loaded at
// once (Chan et al.'s pairwise combination, in a fixed order).
__device__ __forceinline__ float2 row_norm(const float2 *st, int P, int K, float eps) {
	float2 v[SG_MAX_PARTS];
	float mean = 0.f, m2 = 0.f, n = (float)(K / P);
#pragma unroll
	for (int p = 0; p < SG_MAX_PARTS; p++)
		if (p < P) v[p] = st[p];
#pragma unroll
	for (int p = 0; p < SG_MAX_PARTS; p++)
		if (p < P) mean += v[p].x;
	mean /= P;
#pragma unroll
	for (int p = 0; p < SG_MAX_PARTS; p++) {
		if (p < P) {
			float d = v[p].x - mean;
			m2 += v[p].y + n * d * d;
		}
	}
	return make_float2(mean, rsqrtf(m2 / K + eps));
}

// epilogue4 finishes four consecutive outputs of a row: s = their XW, o their offset in y (and
// x16), nr the row's (mean, rstd) (EPI_LN*), bv and cv their bias and colc, xv the residual
// stream's values (EPI_RES). The BN/4 consecutive threads of a row (one float4 each, a group of
// lanes) call it together: EPI_RES's statistics are their shuffles, the first writes *stat.
template <int EPI, int BN>
__device__ __forceinline__ void epilogue4(float4 s, void *__restrict__ y, half *__restrict__ x16, size_t o, float2 nr,
                                          float4 bv, float4 cv, float4 xv, float2 *stat, bool first) {
	if (EPI == EPI_LN || EPI == EPI_LN_GELU) {
		s.x = nr.y * (s.x - nr.x * cv.x);
		s.y = nr.y * (s.y - nr.x * cv.y);
		s.z = nr.y * (s.z - nr.x * cv.z);
		s.w = nr.y * (s.w - nr.x * cv.w);
	}
	if (EPI != EPI_PLAIN) {
		s.x += bv.x;
		s.y += bv.y;
		s.z += bv.z;
		s.w += bv.w;
	}
	if (EPI == EPI_GELU || EPI == EPI_LN_GELU) {
		half2 *h = reinterpret_cast<half2 *>(reinterpret_cast<half *>(y) + o);
		h[0] = __floats2half2_rn(gelu(s.x), gelu(s.y));
		h[1] = __floats2half2_rn(gelu(s.z), gelu(s.w));
	} else if (EPI == EPI_RES) {
		s.x += xv.x;
		s.y += xv.y;
		s.z += xv.z;
		s.w += xv.w;
		*reinterpret_cast<float4 *>(reinterpret_cast<float *>(y) + o) = s;
		half2 *h = reinterpret_cast<half2 *>(x16 + o);
		h[0] = __floats2half2_rn(s.x, s.y);
		h[1] = __floats2half2_rn(s.z, s.w);
		// The row's mean and M2 over the block's BN columns: q4 lanes, one float4 each.
		constexpr int q4 = BN / 4;
		const int lane = threadIdx.x % 32;
		const unsigned grp = (q4 == 32 ? 0xffffffffu : ((1u << q4) - 1) << (lane & ~(q4 - 1)));
		float sum = s.x + s.y + s.z + s.w;
		for (int d = q4 / 2; d > 0; d >>= 1) sum += __shfl_xor_sync(grp, sum, d);
		float mean = sum / BN, dx = s.x - mean, dy = s.y - mean, dz = s.z - mean, dw = s.w - mean;
		float m2 = dx * dx + dy * dy + dz * dz + dw * dw;
		for (int d = q4 / 2; d > 0; d >>= 1) m2 += __shfl_xor_sync(grp, m2, d);
		if (first) *stat = make_float2(mean, m2);
	} else {
		*reinterpret_cast<float4 *>(reinterpret_cast<float *>(y) + o) = s;
	}
}
#endif
