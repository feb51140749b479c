// mlp: GPT-2 124M's MLP block at M decode rows as one kernel, against the engine's two wg_gemm
// launches (fc with ln_2 folded in and GELU, then fc proj with the residual add and the next
// norm's statistics), both chained over 12 layers of distinct weights with PDL.
// - pair: gemm_sm90a.cu's gemm_wg{32,}_ln_gelu then gemm_wg_res on the engine's plans
//   (gpu/wg.go planWGLayer: past 48 rows fc 8 x 1 blocks of 32 columns keeping K whole and fc
//   proj 1 x 8; else 4 x 2 and 2 x 8).
// - fused: one launch of 96 blocks of 256 threads in 12 clusters of 8. Block b owns 32 of the
//   3072 hidden columns and cluster c the 256 of its 8 blocks. Before the PDL wait a block copies
//   its fc weights (768 x 32) and the rows of fc proj for its cluster's hidden columns and its 96
//   output columns (256 x 96). After it: X multicast over the cluster (8 rows a block), fc
//   (two warpgroups of 384 K, wgmma m64n32), h = gelu(folded ln_2) pushed into all 8 blocks'
//   shared memory (st.async), fc proj over the cluster's 256 hidden columns (two warpgroups of
//   128 K, wgmma m64n96), the cluster's partial of its 96 columns written to global memory. A
//   grid-wide counter then orders the 12 clusters' partials before block b sums rows [8(b/12),
//   +8) of columns [64(b%12), +64) in cluster order and runs wg_res's epilogue (residual, fp16
//   copy, the next norm's statistics). All 96 blocks must be resident at once (checked).
// Each path's output after 1 and 12 layers is compared (fp32 residual stream, its fp16 copy and
// statistics); then graphs of 2 and 12 layers are timed (the fused kernel prefetching into L2 the
// next layer's fc and fc proj weights, or fc's only), and the fused kernel's thread 0 stamps show
// where its time goes.
// Build and run on the GPU machine: bench/gemmlab/run.sh mlp [ROWS...].
#include "../../gpu/kernels/gemm_sm90a.cu"
#include "lab.cuh"
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cuda_runtime.h>
#include <functional>
#include <vector>

constexpr int C = 768, F = 3072, LAYERS = 12, PSTAT = C / 32; // PSTAT: gpu/fold.go statStride
constexpr int CL = 8, HB = 32, NB = F / HB, NCL = NB / CL, HC = HB * CL, OB = C / CL;
constexpr int XST = C + 8, PST = OB + 8, FST = HB + 8; // row strides (halves, floats)
constexpr int W1_OFF = 0, W1_BYTES = C * HB * 2;
constexpr int W2_OFF = W1_OFF + W1_BYTES, W2_BYTES = HC * OB * 2;
constexpr int X_OFF = W2_OFF + W2_BYTES, X_BYTES = 64 * XST * 2;
constexpr int H_OFF = X_OFF + X_BYTES, H_BYTES = CL * 64 * HB * 2; // CL chunks of 64 rows x 32 halves
constexpr int N_OFF = H_OFF + H_BYTES, B_OFF = N_OFF + 64 * 8, SMEM = B_OFF + 4 * 8;
constexpr int NTS = 8; // stamps a block
static_assert(NB == (C / 64) * 8, "the final sums: 12 column blocks x 8 row groups, one a block");
static_assert(2 * 64 * PST * 4 <= X_BYTES && 64 * FST * 4 <= W1_BYTES / 2, "scratch regions");

struct MLP {
	float *x;                         // the residual stream (M x C, fp32), in and out
	half *x16;                        // its fp16 copy: fc's X, then the new copy
	float2 *stats;                    // PSTAT pairs a row: P (mean, M2) pairs in, C / 64 out
	const half *w1, *w2;              // fc (C x F), fc proj (F x C), packWG order
	const float *b1, *c1, *b2;        // fc's folded bias and column sums, fc proj's bias
	float *part;                      // NCL x 64 x C: the clusters' partial products
	unsigned long long *ctr;          // the grid's arrivals, never reset
	const unsigned char *pf, *pf2;    // the next weights, prefetched into L2 (two ranges)
	long long *ts;                    // NB x NTS clock64 stamps, or null
	int pfBytes, pf2Bytes, M, P;
	float eps;
};

#if __CUDA_ARCH__ >= 900
// wgmma_n96: d(64 x 96, f32) += a(64 x 16; this warp's 16 rows in registers) b(16 x 96, K-major).
__device__ __forceinline__ void wgmma_n96(float (&d)[48], const uint32_t (&a)[4], uint64_t desc) {
	asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"
	             "wgmma.mma_async.sync.aligned.m64n96k16.f32.f16.f16 "
	             "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, "
	             "%21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, "
	             "%40, %41, %42, %43, %44, %45, %46, %47}, "
	             "{%48, %49, %50, %51}, %52, p, 1, 1, 0;\n}\n"
	             : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
	               "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
	               "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]),
	               "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]),
	               "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]),
	               "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]),
	               "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47])
	             : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc));
}
#endif

// hunit: the byte offset in H of chunk q's row's 16-byte unit u (of 4), swizzled by the row.
__device__ __forceinline__ uint32_t hunit(int q, int row, int u) { return (q * 64 + row) * HB * 2 + 16 * (u ^ (row >> 1 & 3)); }

__global__ void __launch_bounds__(256, 1) mlp_fused(const __grid_constant__ MLP a) {
#if __CUDA_ARCH__ >= 900
	extern __shared__ __align__(128) unsigned char smem[];
	const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32 % 4, wgi = tid / 128, g = lane / 4, t = lane % 4;
	const int b = blockIdx.x, r = b % CL, c = b / CL, M = a.M;
	const uint32_t s0 = (uint32_t)__cvta_generic_to_shared(smem), w1s = s0 + W1_OFF, w2s = s0 + W2_OFF;
	const uint32_t xs0 = s0 + X_OFF, hs0 = s0 + H_OFF;
	const uint32_t barW1 = s0 + B_OFF, barW2 = barW1 + 8, barX = barW1 + 16, barH = barW1 + 24;
	float2 *rowNorm = reinterpret_cast<float2 *>(smem + N_OFF);
	auto stamp = [&](int k) {
		if (a.ts && tid == 0) a.ts[b * NTS + k] = clock64();
	};

	// 1. Before the wait: the barriers, both weight slices, the next weights into L2, fc's vectors.
	if (tid == 0) {
		for (int i = 0; i < 4; i++) asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(barW1 + 8 * i) : "memory");
		asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
		asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
		expect_tx(barW1, W1_BYTES);
		expect_tx(barW2, W2_BYTES);
		expect_tx(barX, M * C * 2);
		expect_tx(barH, (CL - 1) * M * HB * 2);
		for (int k = 0; k < 2; k++) {
			const unsigned char *pf = k ? a.pf2 : a.pf;
			const int bytes = k ? a.pf2Bytes : a.pfBytes, share = (bytes / NB + 15) & ~15, off = b * share;
			const int n = min(share, bytes - off);
			if (n > 0) asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(pf + off), "r"(n) : "memory");
		}
	}
	if (tid < 32) {
		__syncwarp(); // after thread 0's expect_tx
		// fc: the 32-column half b % 2 of column block b / 2, every k16 step (1 KB each)
		const half *src1 = a.w1 + (size_t)(b / 2) * C * 64 + (b % 2) * 512;
		for (int kk = lane; kk < C / 16; kk += 32) bulk_copy(w1s + kk * 1024, src1 + (size_t)kk * 1024, 1024, barW1);
		// fc proj: k16 steps [16c, 16c + 16), the 32-column halves [3r, 3r + 3): step j at 3072 j
		for (int i = lane; i < 48; i += 32) {
			const int j = i / 3, q = i % 3, hh = 3 * r + q;
			const half *src = a.w2 + (size_t)(hh / 2) * F * 64 + (size_t)(16 * c + j) * 1024 + (hh % 2) * 512;
			bulk_copy(w2s + j * 3072 + q * 1024, src, 1024, barW2);
		}
	}
	const int hr = tid / 4, h8 = 8 * (tid % 4), hcol = HB * b + h8; // step 4's row and 8 hidden columns
	float bb[8], cc[8];
#pragma unroll
	for (int i = 0; i < 8; i += 4) {
		const float4 u = __ldg(reinterpret_cast<const float4 *>(a.b1 + hcol + i));
		const float4 v = __ldg(reinterpret_cast<const float4 *>(a.c1 + hcol + i));
		bb[i] = u.x, bb[i + 1] = u.y, bb[i + 2] = u.z, bb[i + 3] = u.w;
		cc[i] = v.x, cc[i + 1] = v.y, cc[i + 2] = v.z, cc[i + 3] = v.w;
	}
	asm volatile("barrier.cluster.arrive.relaxed.aligned;\n\tbarrier.cluster.wait.aligned;" ::: "memory");
	asm volatile("griddepcontrol.wait;" ::: "memory");
	asm volatile("griddepcontrol.launch_dependents;");
	stamp(0);

	// 2. X: rows [8r, 8r + 8) below M from this block, multicast to the cluster; the rows' norms.
	if (tid < 8) {
		const int row = 8 * r + tid;
		if (row < M)
			asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster [%0], "
			             "[%1], %2, [%3], %4;" ::"r"(xs0 + 2 * row * XST),
			             "l"(a.x16 + (size_t)row * C), "r"(C * 2), "r"(barX), "h"((uint16_t)((1u << CL) - 1))
			             : "memory");
	}
	if (tid < M) rowNorm[tid] = row_norm(a.stats + (size_t)tid * PSTAT, a.P, C, a.eps);
	mbar_wait(barX, 0);
	stamp(1);

	// 3. fc: warpgroup wgi multiplies K half wgi; its partial then overwrites its half of W1's slab.
	{
		float d[16];
		const uint32_t xa = xs0 + 2 * ((16 * warp + lane % 16) * XST + (lane / 16) * 8 + wgi * (C / 2));
		wg_products<C / 32, 32>(d, [=](int kk) { return xa + 32 * kk; }, w1s + wgi * (W1_BYTES / 2), C / 32, barW1);
		asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
		float *p = reinterpret_cast<float *>(smem + W1_OFF + wgi * (W1_BYTES / 2));
#pragma unroll
		for (int h = 0; h < 2; h++) {
			const int row = 16 * warp + g + 8 * h;
#pragma unroll
			for (int j = 0; j < 4; j++)
				*reinterpret_cast<float2 *>(p + row * FST + 8 * j + 2 * t) = make_float2(d[4 * j + 2 * h], d[4 * j + 2 * h + 1]);
		}
	}
	__syncthreads(); // both partials and the norms in place
	stamp(2);

	// 4. h = gelu(rstd (XW - mean colc) + bias) in fp16, this thread's 8 columns of row hr, into
	// this block's chunk of H (chunk r: rows of 64 bytes, their 16-byte units swizzled by the row
	// so that ldmatrix's 8 rows hit distinct banks); then the chunk is one bulk copy into each
	// other block of the cluster, whose chunks land in this one's.
	if (hr < M) {
		const float *p0 = reinterpret_cast<const float *>(smem + W1_OFF), *p1 = p0 + W1_BYTES / 8;
		const float2 nr = rowNorm[hr];
		uint32_t u[4];
#pragma unroll
		for (int i = 0; i < 8; i += 2) {
			const float v0 = p0[hr * FST + h8 + i] + p1[hr * FST + h8 + i];
			const float v1 = p0[hr * FST + h8 + i + 1] + p1[hr * FST + h8 + i + 1];
			const half2 hv = __floats2half2_rn(gelu(nr.y * (v0 - nr.x * cc[i]) + bb[i]),
			                                   gelu(nr.y * (v1 - nr.x * cc[i + 1]) + bb[i + 1]));
			u[i / 2] = *reinterpret_cast<const uint32_t *>(&hv);
		}
		*reinterpret_cast<uint4 *>(smem + H_OFF + hunit(r, hr, h8 / 8)) = make_uint4(u[0], u[1], u[2], u[3]);
	}
	asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
	__syncthreads();
	if (tid < CL && tid != r) {
		const uint32_t src = hs0 + hunit(r, 0, 0);
		uint32_t raddr, rbar;
		asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(raddr) : "r"(src), "r"(tid));
		asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(rbar) : "r"(barH), "r"(tid));
		asm volatile("cp.async.bulk.shared::cluster.shared::cta.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(
		                 raddr),
		             "r"(src), "r"(M * HB * 2), "r"(rbar)
		             : "memory");
	}
	// The final tile's residual and bias (step 7), read while the cluster's chunks land.
	const int cb = b % (C / 64), rg = b / (C / 64), frow = 8 * rg + tid / 16, fcol = 64 * cb + 4 * (tid % 16);
	const bool fin = tid < 128 && frow < M;
	float4 xv = make_float4(0.f, 0.f, 0.f, 0.f), bv = xv;
	if (fin) {
		xv = *reinterpret_cast<const float4 *>(a.x + (size_t)frow * C + fcol);
		bv = __ldg(reinterpret_cast<const float4 *>(a.b2 + fcol));
	}
	mbar_wait(barH, 0);
	stamp(3);

	// 5. fc proj over the cluster's hidden columns: warpgroup wgi takes K [128 wgi, + 128); both
	// partials (64 x 96) go into X's region, free since step 3.
	{
		float e[48];
		uint32_t aa[8][4];
		const int arow = 16 * warp + lane % 16;
#pragma unroll
		for (int kk = 0; kk < 8; kk++) { // k16 step kk of K half wgi: chunk 4 wgi + kk / 2, units 2 (kk % 2) + lane / 16
			const int k = 8 * wgi + kk;
			ldsm_x4(aa[kk], hs0 + hunit(k / 2, arow, 2 * (k % 2) + lane / 16));
		}
#pragma unroll
		for (int i = 0; i < 48; i++) e[i] = 0.f;
		mbar_wait(barW2, 0);
		asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
#pragma unroll
		for (int kk = 0; kk < 8; kk++) wgmma_n96(e, aa[kk], wg_desc(w2s + (8 * wgi + kk) * 3072));
		asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
		asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");
		float *p = reinterpret_cast<float *>(smem + X_OFF) + wgi * 64 * PST;
#pragma unroll
		for (int h = 0; h < 2; h++) {
			const int row = 16 * warp + g + 8 * h;
#pragma unroll
			for (int j = 0; j < 12; j++)
				*reinterpret_cast<float2 *>(p + row * PST + 8 * j + 2 * t) = make_float2(e[4 * j + 2 * h], e[4 * j + 2 * h + 1]);
		}
	}
	__syncthreads();
	stamp(4);
	{
		const float *p0 = reinterpret_cast<const float *>(smem + X_OFF), *p1 = p0 + 64 * PST;
		for (int i = tid; i < M * (OB / 4); i += 256) {
			const int row = i / (OB / 4), c4 = 4 * (i % (OB / 4));
			const float4 u = *reinterpret_cast<const float4 *>(p0 + row * PST + c4);
			const float4 v = *reinterpret_cast<const float4 *>(p1 + row * PST + c4);
			__stcg(reinterpret_cast<float4 *>(a.part + ((size_t)c * 64 + row) * C + OB * r + c4),
			       make_float4(u.x + v.x, u.y + v.y, u.z + v.z, u.w + v.w));
		}
	}
	__syncthreads();
	stamp(5);

	// 6. Every cluster's partial written: one arrival a block; the launch's 96 arrivals end at the
	// next multiple of NB.
	if (tid == 0) {
		__threadfence();
		const unsigned long long v = atomicAdd(a.ctr, 1ull), target = (v / NB + 1) * NB;
		unsigned long long now;
		do asm volatile("ld.acquire.gpu.global.u64 %0, [%1];" : "=l"(now) : "l"(a.ctr) : "memory");
		while (now < target);
	}
	__syncthreads();
	stamp(6);

	// 7. Rows [8 rg, + 8) of columns [64 cb, + 64): the clusters' partials in order, the bias, the
	// residual; wg_res's epilogue writes x, its fp16 copy and each row's (mean, M2) of the block.
	if (fin) {
		float4 s = make_float4(0.f, 0.f, 0.f, 0.f);
#pragma unroll
		for (int q = 0; q < NCL; q++) {
			const float4 v = __ldcg(reinterpret_cast<const float4 *>(a.part + ((size_t)q * 64 + frow) * C + fcol));
			s.x += v.x, s.y += v.y, s.z += v.z, s.w += v.w;
		}
		epilogue4<EPI_RES, 64>(s, a.x, a.x16, (size_t)frow * C + fcol, make_float2(0.f, 0.f), bv,
		                       make_float4(0.f, 0.f, 0.f, 0.f), xv, a.stats + (size_t)frow * PSTAT + cb, tid % 16 == 0);
	}
	stamp(7);
#else
	__trap();
#endif
}

// state: a layer's input and output (the residual stream, its fp16 copy, its statistics).
struct State {
	float *x;
	half *x16;
	float2 *stats;
};

int main(int argc, char **argv) {
	cudaStream_t st;
	const int M = lab_start(argc, argv, "mlp", &st);
	printf("%d layers' MLPs\n", LAYERS);
	cudaDeviceProp prop;
	CK(cudaGetDeviceProperties(&prop, 0));
	Rand frand;
	auto upload = [&](const void *src, size_t bytes) {
		void *p;
		CK(cudaMalloc(&p, bytes));
		CK(cudaMemcpy(p, src, bytes, cudaMemcpyHostToDevice));
		return p;
	};
	// Weights: each layer its own, packed; fc's folded vectors and fc proj's bias.
	std::vector<const half *> w1(LAYERS), w2(LAYERS);
	std::vector<const float *> b1(LAYERS), c1(LAYERS), b2(LAYERS);
	for (int l = 0; l < LAYERS; l++) {
		for (int m = 0; m < 2; m++) {
			const int K = m ? F : C, N = m ? C : F;
			std::vector<uint16_t> W((size_t)K * N), P((size_t)K * N);
			for (auto &v : W) v = h16(3.4f * frand() / sqrtf((float)K));
			pack_wg(P.data(), W.data(), K, N);
			(m ? w2 : w1)[l] = (const half *)upload(P.data(), P.size() * 2);
		}
		std::vector<float> v1(F), v2(F), v3(C);
		for (auto &v : v1) v = 0.2f * frand();
		for (auto &v : v2) v = 0.5f * frand();
		for (auto &v : v3) v = 0.2f * frand();
		b1[l] = (const float *)upload(v1.data(), F * 4);
		c1[l] = (const float *)upload(v2.data(), F * 4);
		b2[l] = (const float *)upload(v3.data(), C * 4);
	}
	// The first layer's input: x, its fp16 copy and (mean, M2) of each row's 64-column blocks.
	std::vector<float> X0((size_t)64 * C);
	std::vector<uint16_t> X16((size_t)64 * C);
	std::vector<float2> S0((size_t)64 * PSTAT);
	for (size_t i = 0; i < X0.size(); i++) X0[i] = 2.f * frand(), X16[i] = h16(X0[i]);
	for (int row = 0; row < 64; row++)
		for (int p = 0; p < C / 64; p++) {
			double mean = 0, m2 = 0;
			for (int k = 0; k < 64; k++) mean += X0[(size_t)row * C + 64 * p + k];
			mean /= 64;
			for (int k = 0; k < 64; k++) {
				const double d = X0[(size_t)row * C + 64 * p + k] - mean;
				m2 += d * d;
			}
			S0[(size_t)row * PSTAT + p] = make_float2((float)mean, (float)m2);
		}
	State s[2];
	for (auto &v : s) {
		CK(cudaMalloc(&v.x, X0.size() * 4));
		CK(cudaMalloc(&v.x16, X16.size() * 2));
		CK(cudaMalloc(&v.stats, S0.size() * 8));
	}
	auto reset = [&](State &v) {
		CK(cudaMemcpyAsync(v.x, X0.data(), X0.size() * 4, cudaMemcpyHostToDevice, st));
		CK(cudaMemcpyAsync(v.x16, X16.data(), X16.size() * 2, cudaMemcpyHostToDevice, st));
		CK(cudaMemcpyAsync(v.stats, S0.data(), S0.size() * 8, cudaMemcpyHostToDevice, st));
	};
	half *hbuf;
	CK(cudaMalloc(&hbuf, (size_t)64 * F * 2));
	float *part;
	CK(cudaMalloc(&part, (size_t)NCL * 64 * C * 4));
	unsigned long long *ctr;
	CK(cudaMalloc(&ctr, 8));
	CK(cudaMemset(ctr, 0, 8));
	long long *ts;
	CK(cudaMalloc(&ts, NB * NTS * 8));

	CK(cudaFuncSetAttribute(mlp_fused, cudaFuncAttributeMaxDynamicSharedMemorySize, SMEM));
	for (const void *k : {(const void *)gemm_wg32_ln_gelu, (const void *)gemm_wg_ln_gelu, (const void *)gemm_wg_res,
	                      (const void *)gemm_wg32_ln_gelu_box, (const void *)gemm_wg_ln_gelu_box, (const void *)gemm_wg_res_box}) {
		CK(cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)prop.sharedMemPerBlockOptin));
		CK(cudaFuncSetAttribute(k, cudaFuncAttributeNonPortableClusterSizeAllowed, 1));
	}
	auto config = [&](cudaLaunchConfig_t &cfg, cudaLaunchAttribute (&at)[2], dim3 grid, int threads, int cx, int cy, int smem) {
		launch_config(cfg, at, st, grid, cx, cy, smem, true);
		cfg.blockDim = dim3(threads);
	};
	{
		cudaLaunchConfig_t cfg;
		cudaLaunchAttribute at[2];
		config(cfg, at, dim3(NB), 256, CL, 1, SMEM);
		cfg.numAttrs = 1;
		int clusters = 0;
		CK(cudaOccupancyMaxActiveClusters(&clusters, mlp_fused, &cfg));
		printf("fused: %d blocks of 256 threads in clusters of %d, %d B shared memory; %d clusters fit at once\n", NB, CL,
		       SMEM, clusters);
		if (clusters < NCL) {
			fprintf(stderr, "mlp: %d clusters of %d do not all fit at once; the grid's counter would deadlock\n", NCL, CL);
			return 1;
		}
	}

	// pair: the engine's two launches a layer (gpu/wg.go planWGLayer, wgShared).
	const bool wide = M > 48;
	auto pair = [&](State &v, int layers) {
		const CUtensorMap xm = x_map(v.x16, C, M), hm = x_map(hbuf, F, M);
		for (int l = 0; l < layers; l++) {
			cudaLaunchConfig_t cfg;
			cudaLaunchAttribute at[2];
			const unsigned char *pf = (const unsigned char *)w2[l];
			if (wide) {
				config(cfg, at, dim3(F / 32, 1), 256, 8, 1, C * 32 * 2 + 64 * (C + 8) * 2 + 64 * 8 + 24);
				launch_wg(cfg, gemm_wg32_ln_gelu, gemm_wg32_ln_gelu_box, M, (void *)hbuf, (const half *)v.x16, xm, w1[l],
				          b1[l], M, F, C, 8, c1[l], v.stats, C / 64, PSTAT, 1e-5f, (half *)nullptr, pf, F * C * 2);
			} else {
				const int R = (M + 1) / 2;
				config(cfg, at, dim3(F / 64, 2), 128, 4, 2, 384 * 64 * 2 + 64 * 392 * 2 + 2 * R * 64 * 4 + 64 * 8 + 24);
				launch_wg(cfg, gemm_wg_ln_gelu, gemm_wg_ln_gelu_box, M, (void *)hbuf, (const half *)v.x16, xm, w1[l], b1[l],
				          M, F, C, 4, c1[l], v.stats, C / 64, PSTAT, 1e-5f, (half *)nullptr, pf, F * C * 2);
			}
			const int CN = wide ? 1 : 2, R = (M + 7) / 8;
			pf = l + 1 < LAYERS ? (const unsigned char *)w1[l + 1] : nullptr;
			config(cfg, at, dim3(C / 64, 8), 128, CN, 8, 384 * 64 * 2 + 64 * 392 * 2 + 8 * R * 64 * 4 + R * 64 * 4 + 64 * 8 + 24);
			launch_wg(cfg, gemm_wg_res, gemm_wg_res_box, M, (void *)v.x, (const half *)hbuf, hm, w2[l], b2[l], M, C, F,
			          CN, (const float *)nullptr, v.stats, 1, PSTAT, 1e-5f, v.x16, pf, pf ? C * F * 2 : 0);
		}
	};
	bool stamps = false, pf2 = true;
	auto fused = [&](State &v, int layers) {
		for (int l = 0; l < layers; l++) {
			cudaLaunchConfig_t cfg;
			cudaLaunchAttribute at[2];
			config(cfg, at, dim3(NB), 256, CL, 1, SMEM);
			MLP m{};
			m.x = v.x, m.x16 = v.x16, m.stats = v.stats, m.w1 = w1[l], m.w2 = w2[l], m.b1 = b1[l], m.c1 = c1[l],
			m.b2 = b2[l];
			m.part = part, m.ctr = ctr, m.ts = stamps && l == layers / 2 ? ts : nullptr;
			// the next layer's weights, both GEMMs' (the pair's GEMMs each prefetch the next one's)
			m.pf = l + 1 < LAYERS ? (const unsigned char *)w1[l + 1] : nullptr;
			m.pf2 = l + 1 < LAYERS && pf2 ? (const unsigned char *)w2[l + 1] : nullptr;
			m.pfBytes = m.pf ? C * F * 2 : 0;
			m.pf2Bytes = m.pf2 ? C * F * 2 : 0;
			m.M = M, m.P = C / 64, m.eps = 1e-5f;
			CK(cudaLaunchKernelEx(&cfg, mlp_fused, m));
		}
	};

	// Correctness: both paths from the same input, after 1 layer and after all.
	for (int layers : {1, LAYERS}) {
		reset(s[0]);
		reset(s[1]);
		pair(s[0], layers);
		fused(s[1], layers);
		CK(cudaStreamSynchronize(st));
		CK(cudaGetLastError());
		std::vector<float> xa((size_t)M * C), xb((size_t)M * C);
		std::vector<uint16_t> ha((size_t)M * C), hb((size_t)M * C);
		std::vector<float2> sa((size_t)M * PSTAT), sb((size_t)M * PSTAT);
		CK(cudaMemcpy(xa.data(), s[0].x, xa.size() * 4, cudaMemcpyDeviceToHost));
		CK(cudaMemcpy(xb.data(), s[1].x, xb.size() * 4, cudaMemcpyDeviceToHost));
		CK(cudaMemcpy(ha.data(), s[0].x16, ha.size() * 2, cudaMemcpyDeviceToHost));
		CK(cudaMemcpy(hb.data(), s[1].x16, hb.size() * 2, cudaMemcpyDeviceToHost));
		CK(cudaMemcpy(sa.data(), s[0].stats, sa.size() * 8, cudaMemcpyDeviceToHost));
		CK(cudaMemcpy(sb.data(), s[1].stats, sb.size() * 8, cudaMemcpyDeviceToHost));
		double ex = 0, mx = 0, eh = 0, es = 0, ms = 0;
		for (size_t i = 0; i < xa.size(); i++) {
			const double d = fabs((double)xa[i] - xb[i]);
			if (!(d <= ex)) ex = d; // NaN counts as the worst
			mx = std::max(mx, (double)fabs(xa[i]));
			eh = std::max(eh, fabs((double)f16(ha[i]) - f16(hb[i])));
		}
		for (int row = 0; row < M; row++)
			for (int p = 0; p < C / 64; p++) {
				const float2 u = sa[(size_t)row * PSTAT + p], w = sb[(size_t)row * PSTAT + p];
				const double d = std::max(fabs((double)u.x - w.x), fabs((double)u.y - w.y));
				if (!(d <= es)) es = d;
				ms = std::max(ms, std::max(fabs((double)u.x), fabs((double)u.y)));
			}
		printf("after %2d layers: fused - pair: x %.2e (|x| <= %.3g), x16 %.2e, stats %.2e (<= %.3g)%s\n", layers, ex, mx,
		       eh, es, ms, ex / mx < 1e-3 && es / ms < 1e-3 ? "" : "  MISMATCH");
	}
	// The fused path twice from the same input: the same bits (sums in a fixed order).
	{
		std::vector<float> xa((size_t)M * C), xb((size_t)M * C);
		for (int k = 0; k < 2; k++) {
			reset(s[1]);
			fused(s[1], LAYERS);
			CK(cudaMemcpyAsync((k ? xb : xa).data(), s[1].x, xa.size() * 4, cudaMemcpyDeviceToHost, st));
			CK(cudaStreamSynchronize(st));
		}
		printf("fused twice: %s\n", memcmp(xa.data(), xb.data(), xa.size() * 4) ? "DIFFERENT bits" : "the same bits");
	}

	printf("\nus (a graph replayed 100 times)   %9s %9s %9s\n", "2 layers", "12 layers", "a layer");
	const char *names[3] = {"pair: fc, fc proj", "fused: one launch", "fused, next fc prefetched only"};
	for (int round = 0; round < 2; round++)
		for (int v = 0; v < 3; v++) {
			pf2 = v != 2;
			auto f = [&](int n) { v ? fused(s[1], n) : pair(s[0], n); };
			const float t2 = time_graph(st, 100, [&] { f(2); }), t12 = time_graph(st, 100, [&] { f(LAYERS); });
			printf("%-33s %9.2f %9.2f %9.2f\n", names[v], t2, t12, (t12 - t2) / (LAYERS - 2));
		}
	pf2 = true;

	// Where the fused kernel's time goes: a middle layer's stamps, medians over blocks, in ns.
	stamps = true;
	for (int i = 0; i < 3; i++) fused(s[1], LAYERS);
	CK(cudaStreamSynchronize(st));
	std::vector<long long> T(NB * NTS);
	CK(cudaMemcpy(T.data(), ts, T.size() * 8, cudaMemcpyDeviceToHost));
	int khz = 0;
	CK(cudaDeviceGetAttribute(&khz, cudaDevAttrClockRate, 0));
	const char *iv[NTS - 1] = {"X lands",           "fc products, partials", "h exchanged",   "fc proj products",
	                           "partial written",   "grid counter",          "final sums, epilogue"};
	printf("\nfused, per block (ns, median over the %d blocks of layer %d):\n", NB, LAYERS / 2);
	for (int k = 0; k < NTS - 1; k++) {
		std::vector<double> d;
		for (int b = 0; b < NB; b++) d.push_back((T[b * NTS + k + 1] - T[b * NTS + k]) * 1e6 / khz);
		std::nth_element(d.begin(), d.begin() + d.size() / 2, d.end());
		printf("  %-24s %8.0f\n", iv[k], d[d.size() / 2]);
	}
	return 0;
}
