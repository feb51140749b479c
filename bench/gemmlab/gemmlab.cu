// gemmlab: GPT-2 124M's four layer GEMMs at M decode rows (fp16 in, fp32 out), timed as chains of
// 24 distinct weight sets in CUDA graphs, on four paths: cuBLAS; gpu/kernels/gemm.cu's small_gemm
// (mma.sync, weights in registers, K split over a cluster, partial tiles pulled through DSMEM);
// lab_gemm below, in its two reductions; and the engine's gemm_wg (gpu/kernels/gemm_sm90a.cu,
// lab_gemm's pushing form with the epilogues), plain epilogue, on the plans gpu/wg.go picks. It is
// the measuring bench of the decode step's GEMMs (bench/RESULTS.md), not a path of the engine.
//
// lab_gemm: grid (N/64, S), cluster (CN, S, 1), 128 threads (one warpgroup), a block computes 64
// columns over K/S of K:
// - its weights are one contiguous slab of K/S x 64 halves, packed in wgmma's no-swizzle K-major
//   layout (pack_wg), fetched by one bulk copy before griddepcontrol.wait;
// - the CN column blocks of a cluster row share their X slice: each loads 64/CN of its rows by
//   bulk copies multicast to the others;
// - A from registers (ldmatrix), B from shared memory, wgmma m64n64k16, fp32 accumulators;
// - PULL: partial tiles in shared memory, a cluster barrier, the owner of each row block sums the
//   S tiles through DSMEM loads, a second barrier; PUSH: each block stores the rows others own
//   into their slots with st.async, counted on the owner's mbarrier: no barrier after the products.
//
// Build and run on the GPU machine (nvcc 12+; wgmma needs sm_90a): bench/gemmlab/run.sh; "gemmlab ROWS
// sweep" times every valid (CN, S) plan of lab_gemm with pushed partials.
#include "../../gpu/kernels/gemm.cu"
#include "../../gpu/kernels/gemm_sm90a.cu" // mbar_wait, wg_desc, wgmma_n64
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <functional>
#include <vector>

#define CK(x)                                                                                   \
	do {                                                                                        \
		cudaError_t e_ = (x);                                                                   \
		if (e_ != cudaSuccess) {                                                                \
			fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
			exit(1);                                                                            \
		}                                                                                       \
	} while (0)
#define CB(x)                                                              \
	do {                                                                   \
		cublasStatus_t s_ = (x);                                           \
		if (s_ != CUBLAS_STATUS_SUCCESS) {                                 \
			fprintf(stderr, "%s:%d %s: %d\n", __FILE__, __LINE__, #x, s_); \
			exit(1);                                                       \
		}                                                                  \
	} while (0)

constexpr int BN = WG_BN;
constexpr int KSMAX = WG_KSMAX;

// Shared memory of a block: W's slab, X's slice (64 rows of KS + 8 halves; PULL: then the partial
// tile, 64 rows of BN + 4 floats), PUSH: S slots of R rows of BN floats; three mbarriers.
__host__ __device__ constexpr int xBytes(int KS) { return 64 * (KS + 8) * 2; }
__host__ __device__ constexpr int pullRegion(int KS) { return xBytes(KS) > 64 * (BN + 4) * 4 ? xBytes(KS) : 64 * (BN + 4) * 4; }
int wgShared(bool push, int KS, int S) {
	int R = (64 + S - 1) / S;
	return KS * BN * 2 + (push ? xBytes(KS) + S * R * BN * 4 : pullRegion(KS)) + 24;
}

template <bool PUSH>
__global__ void __launch_bounds__(128) lab_gemm(float *__restrict__ y, const half *__restrict__ x,
                                               const half *__restrict__ ws, int M, int N, int K, int CN) {
#if __CUDA_ARCH__ >= 900
	extern __shared__ __align__(16) unsigned char smem[];
	const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
	const int S = gridDim.y, split = blockIdx.y, KS = K / S, cx = blockIdx.x % CN, xst = KS + 8;
	const int R = (M + S - 1) / S, r0 = split * R, r1 = min(M, r0 + R);
	unsigned char *region = smem + KS * BN * 2;
	float *slots = reinterpret_cast<float *>(region + xBytes(KS));
	uint64_t *bar = reinterpret_cast<uint64_t *>(PUSH ? reinterpret_cast<unsigned char *>(slots + S * R * BN)
	                                                  : region + pullRegion(KS));
	const uint32_t barW = (uint32_t)__cvta_generic_to_shared(bar), barX = barW + 8, barR = barW + 16;
	const uint32_t wA = (uint32_t)__cvta_generic_to_shared(smem), xs0 = (uint32_t)__cvta_generic_to_shared(region);

	// 1. Barriers, and the weights' bulk copy, before the wait.
	if (threadIdx.x == 0) {
		asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(barW) : "memory");
		asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(barX) : "memory");
		asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(barR) : "memory");
		asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
		asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
		asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(barW), "r"(KS * BN * 2) : "memory");
		const half *src = ws + ((size_t)blockIdx.x * S + split) * KS * BN;
		asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(wA),
		             "l"(src), "r"(KS * BN * 2), "r"(barW)
		             : "memory");
		asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(barX), "r"(64 * KS * 2) : "memory");
		if (PUSH)
			asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(barR),
			             "r"((S - 1) * max(r1 - r0, 0) * BN * 4)
			             : "memory");
	}
	if (CN * S > 1) cluster_sync(); // every block's barriers exist before anyone copies into them
	asm volatile("griddepcontrol.wait;" ::: "memory");
	asm volatile("griddepcontrol.launch_dependents;");

	// 2. X's slice: 64/CN rows from this block, multicast to its cluster row (rows past M repeat
	// row M-1: their products are never written).
	const int per = 64 / CN;
	if ((int)threadIdx.x < per) {
		int r = cx * per + threadIdx.x;
		const half *src = x + (size_t)min(r, M - 1) * K + split * KS;
		uint32_t dst = xs0 + 2 * r * xst;
		if (CN == 1)
			asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(dst),
			             "l"(src), "r"(KS * 2), "r"(barX)
			             : "memory");
		else
			asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster [%0], [%1], %2, "
			             "[%3], %4;" ::"r"(dst),
			             "l"(src), "r"(KS * 2), "r"(barX), "h"((uint16_t)(((1u << CN) - 1) << (split * CN)))
			             : "memory");
	}
	mbar_wait(barX, 0);

	// 3. The products: A fragments by ldmatrix, then KS/16 wgmmas on the weights' slab.
	uint32_t a[KSMAX / 16][4];
	const uint32_t xa = xs0 + 2 * ((16 * warp + lane % 16) * xst + (lane / 16) * 8);
#pragma unroll
	for (int kk = 0; kk < KSMAX / 16; kk++)
		if (kk < KS / 16) ldsm_x4(a[kk], xa + 32 * kk);
	float d[32];
#pragma unroll
	for (int i = 0; i < 32; i++) d[i] = 0.f;
	mbar_wait(barW, 0);
	asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
#pragma unroll
	for (int kk = 0; kk < KSMAX / 16; kk++)
		if (kk < KS / 16) wgmma_n64(d, a[kk], wg_desc(wA + kk * BN * 32));
	asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
	asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");

	// 4. The reduction over the S blocks of a cluster column; thread (warp, g, t) holds rows
	// 16*warp + g (+8) and columns 8j + 2t (+1).
	const int g = lane / 4, t = lane % 4, q4 = BN / 4;
	if (!PUSH) {
		__syncthreads(); // X's slice is free: the partial tile takes its place
		const int rst = BN + 4;
		float *red = reinterpret_cast<float *>(region);
#pragma unroll
		for (int j = 0; j < 8; j++) {
			int row = 16 * warp + g, col = 8 * j + 2 * t;
			*reinterpret_cast<float2 *>(red + row * rst + col) = make_float2(d[4 * j], d[4 * j + 1]);
			*reinterpret_cast<float2 *>(red + (row + 8) * rst + col) = make_float2(d[4 * j + 2], d[4 * j + 3]);
		}
		cluster_sync();
		for (int e = threadIdx.x; e < (r1 - r0) * q4; e += 128) {
			int r = r0 + e / q4, c = 4 * (e % q4);
			const float4 *la = reinterpret_cast<const float4 *>(red + r * rst + c);
			float4 v[SG_MAX_CLUSTER];
#pragma unroll
			for (int q = 0; q < SG_MAX_CLUSTER; q++)
				if (q < S) v[q] = *in_rank(la, q * CN + cx);
			float4 s = v[0];
#pragma unroll
			for (int q = 1; q < SG_MAX_CLUSTER; q++)
				if (q < S) s.x += v[q].x, s.y += v[q].y, s.z += v[q].z, s.w += v[q].w;
			*reinterpret_cast<float4 *>(y + (size_t)r * N + blockIdx.x * BN + c) = s;
		}
		cluster_sync(); // no block leaves while another may read its tile
		return;
	}
	const uint32_t slots0 = (uint32_t)__cvta_generic_to_shared(slots);
#pragma unroll
	for (int h = 0; h < 2; h++) {
		int row = 16 * warp + g + 8 * h;
		if (row >= M) continue;
		int o = row / R, slot = (split * R + row - o * R) * BN;
		if (o == split) {
#pragma unroll
			for (int j = 0; j < 8; j++)
				*reinterpret_cast<float2 *>(slots + slot + 8 * j + 2 * t) = make_float2(d[4 * j + 2 * h], d[4 * j + 2 * h + 1]);
			continue;
		}
		uint32_t rank = o * CN + cx, raddr, rbar;
		asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(rbar) : "r"(barR), "r"(rank));
		asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(raddr) : "r"(slots0 + 4 * slot), "r"(rank));
#pragma unroll
		for (int j = 0; j < 8; j++)
			asm volatile("st.async.shared::cluster.mbarrier::complete_tx::bytes.v2.f32 [%0], {%1, %2}, [%3];" ::"r"(
			                 raddr + 4 * (8 * j + 2 * t)),
			             "f"(d[4 * j + 2 * h]), "f"(d[4 * j + 2 * h + 1]), "r"(rbar)
			             : "memory");
	}
	__syncthreads(); // this block's own slot is written
	mbar_wait(barR, 0);
	for (int e = threadIdx.x; e < (r1 - r0) * q4; e += 128) {
		int rr = e / q4, c = 4 * (e % q4);
		float4 s = make_float4(0.f, 0.f, 0.f, 0.f);
		for (int q = 0; q < S; q++) { // rank order: the same sum every run
			float4 v = *reinterpret_cast<const float4 *>(slots + (q * R + rr) * BN + c);
			s.x += v.x, s.y += v.y, s.z += v.z, s.w += v.w;
		}
		*reinterpret_cast<float4 *>(y + (size_t)(r0 + rr) * N + blockIdx.x * BN + c) = s;
	}
#endif
}

struct Shape {
	const char *name;
	int N, K, S; // small_gemm's K slices (gpu/mma.go planSmall on 132 multiprocessors)
};
static const Shape shapes[4] = {{"qkv", 2304, 768, 4}, {"proj", 768, 768, 12}, {"fc", 3072, 768, 3}, {"fcproj", 768, 3072, 12}};
constexpr int LAYERS = 24;

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

// pack_mma: gpu/mma.go packMMA's order (small_gemm's B fragments).
static void pack_mma(uint16_t *dst, const uint16_t *W, int K, int N) {
	const int KT = K / 32, rows[8] = {0, 1, 8, 9, 16, 17, 24, 25};
	for (int nb = 0; nb < N / 8; nb++)
		for (int kp = 0; kp < KT; kp++)
			for (int l = 0; l < 32; l++) {
				int col = nb * 8 + l / 4, k0 = kp * 32 + 2 * (l % 4);
				uint16_t *out = dst + ((size_t)(nb * KT + kp) * 32 + l) * 8;
				for (int e = 0; e < 8; e++) out[e] = W[(size_t)(k0 + rows[e]) * N + col];
			}
}

// pack_wg: per (column block nb, K slice s), KS x 64 halves: k16 step kk, n8 group nc, k half kc
// and row n%8 hold 8 consecutive k at ((kk * 8 + nc) * 2 + kc) * 64 + (n%8) * 8.
static void pack_wg(uint16_t *dst, const uint16_t *W, int K, int N, int S) {
	const int KS = K / S;
	for (int nb = 0; nb < N / BN; nb++)
		for (int s = 0; s < S; s++) {
			uint16_t *base = dst + ((size_t)nb * S + s) * KS * BN;
			for (int k = 0; k < KS; k++)
				for (int n = 0; n < BN; n++) {
					size_t off = (size_t)(k / 16) * BN * 16 + (n / 8) * 128 + ((k % 16) / 8) * 64 + (n % 8) * 8 + (k % 8);
					base[off] = W[(size_t)(s * KS + k) * N + nb * BN + n];
				}
		}
}

int main(int argc, char **argv) {
	const int M = argc > 1 ? atoi(argv[1]) : 64;
	const bool sweep = argc > 2 && strcmp(argv[2], "sweep") == 0;
	if (M < 1 || M > 64 || (argc > 2 && !sweep)) {
		fprintf(stderr, "usage: gemmlab [ROWS (1..64) [sweep]]\n");
		return 2;
	}
	cudaDeviceProp prop;
	CK(cudaGetDeviceProperties(&prop, 0));
	printf("%s, %d SMs, L2 %d MB; M = %d rows\n", prop.name, prop.multiProcessorCount, prop.l2CacheSize >> 20, M);
	cudaStream_t st;
	CK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
	cublasHandle_t hb;
	CB(cublasCreate(&hb));
	CB(cublasSetStream(hb, st));
	void *wsp;
	CK(cudaMalloc(&wsp, 32 << 20));
	CB(cublasSetWorkspace(hb, wsp, 32 << 20));

	// Weights: LAYERS sets a shape, row-major (cuBLAS) and small_gemm-packed; X; outputs.
	unsigned rng = 12345;
	auto frand = [&] {
		rng = rng * 1664525u + 1013904223u;
		return (rng >> 8) / 16777216.f - 0.5f;
	};
	std::vector<uint16_t> host0[4];
	half *row[4][LAYERS], *mma[4][LAYERS];
	for (int si = 0; si < 4; si++) {
		const Shape &s = shapes[si];
		size_t n = (size_t)s.K * s.N;
		std::vector<uint16_t> W(n), P(n);
		for (int l = 0; l < LAYERS; l++) {
			for (auto &v : W) v = h16(3.4f * frand() / sqrtf((float)s.K));
			if (l == 0) host0[si] = W;
			CK(cudaMalloc(&row[si][l], n * 2));
			CK(cudaMalloc(&mma[si][l], n * 2));
			CK(cudaMemcpy(row[si][l], W.data(), n * 2, cudaMemcpyHostToDevice));
			pack_mma(P.data(), W.data(), s.K, s.N);
			CK(cudaMemcpy(mma[si][l], P.data(), n * 2, cudaMemcpyHostToDevice));
		}
	}
	std::vector<uint16_t> X768((size_t)64 * 768), X3072((size_t)64 * 3072);
	for (auto &v : X768) v = h16(2.f * frand());
	for (auto &v : X3072) v = h16(2.f * frand());
	half *dx768, *dx3072;
	float *dy[LAYERS];
	CK(cudaMalloc(&dx768, X768.size() * 2));
	CK(cudaMalloc(&dx3072, X3072.size() * 2));
	CK(cudaMemcpy(dx768, X768.data(), X768.size() * 2, cudaMemcpyHostToDevice));
	CK(cudaMemcpy(dx3072, X3072.data(), X3072.size() * 2, cudaMemcpyHostToDevice));
	for (int l = 0; l < LAYERS; l++) CK(cudaMalloc(&dy[l], (size_t)64 * 3072 * 4));
	auto xin = [&](const Shape &s) { return s.K == 768 ? dx768 : dx3072; };

	for (const void *k : {(const void *)gemm_small_n2, (const void *)lab_gemm<false>, (const void *)lab_gemm<true>}) {
		CK(cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, 200 << 10));
		CK(cudaFuncSetAttribute(k, cudaFuncAttributeNonPortableClusterSizeAllowed, 1));
	}
	auto config = [&](cudaLaunchConfig_t &cfg, cudaLaunchAttribute *at, dim3 grid, int cx, int cy, int smem, bool pdl) {
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
	};
	auto cublas = [&](int si, int l, float *y) {
		const Shape &s = shapes[si];
		float one = 1.f, zero = 0.f;
		CB(cublasGemmEx(hb, CUBLAS_OP_N, CUBLAS_OP_N, s.N, M, s.K, &one, row[si][l], CUDA_R_16F, s.N, xin(s), CUDA_R_16F,
		                s.K, &zero, y, CUDA_R_32F, s.N, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
	};
	auto small = [&](int si, int l, float *y, bool pdl) {
		const Shape &s = shapes[si];
		const int KS = s.K / s.S, rows = (M + 15) / 16 * 16;
		cudaLaunchConfig_t cfg;
		cudaLaunchAttribute at[2];
		config(cfg, at, dim3(s.N / 64, s.S), 1, s.S,
		       std::max(rows * (KS + 8) * 2, rows * (64 + 4) * 4) + 512 + (M + s.S - 1) / s.S * 64 * 4, pdl);
		CK(cudaLaunchKernelEx(&cfg, gemm_small_n2, (void *)y, (const half *)xin(s), (const uint4 *)mma[si][l],
		                      (const float *)nullptr, M, s.N, s.K, KS / 32, (const float *)nullptr, (float2 *)nullptr, 1, 1,
		                      1e-5f, (half *)nullptr));
	};
	auto timeGraph = [&](std::function<void()> body) {
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
		const int reps = 50;
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
	};
	// check compares y (M x N) with layer 0's double-precision product; it returns the error
	// relative to the largest |reference| (NaN stays NaN).
	auto check = [&](int si, const float *dev) {
		const Shape &s = shapes[si];
		const std::vector<uint16_t> &X = s.K == 768 ? X768 : X3072;
		std::vector<double> ref((size_t)M * s.N, 0.0);
		for (int r = 0; r < M; r++)
			for (int k = 0; k < s.K; k++) {
				double xv = f16(X[(size_t)r * s.K + k]);
				const uint16_t *wr = &host0[si][(size_t)k * s.N];
				for (int n = 0; n < s.N; n++) ref[(size_t)r * s.N + n] += xv * f16(wr[n]);
			}
		std::vector<float> got(ref.size());
		CK(cudaStreamSynchronize(st));
		CK(cudaMemcpy(got.data(), dev, got.size() * 4, cudaMemcpyDeviceToHost));
		double err = 0, mx = 0;
		for (size_t i = 0; i < got.size(); i++) {
			double e = fabs(got[i] - ref[i]);
			if (!(e <= err)) err = e;
			mx = std::max(mx, fabs(ref[i]));
		}
		return err / mx;
	};

	printf("\nus a GEMM (a graph of %d GEMMs of one shape, distinct weights); error relative to the largest |y|\n", LAYERS);
	printf("%-28s %10s %10s %10s %10s\n", "", shapes[0].name, shapes[1].name, shapes[2].name, shapes[3].name);
	float best[3][4]; // cuBLAS, small_gemm+PDL, wg_gemm best
	const char *names[3] = {"cuBLAS", "small_gemm", "small_gemm+PDL"};
	for (int impl = 0; impl < 3; impl++) {
		printf("%-28s", names[impl]);
		for (int si = 0; si < 4; si++) {
			auto one = [&](int l, float *y) { impl == 0 ? cublas(si, l, y) : small(si, l, y, impl == 2); };
			float us = timeGraph([&] {
				for (int l = 0; l < LAYERS; l++) one(l, dy[l]);
			}) / LAYERS;
			CK(cudaMemsetAsync(dy[0], 0xff, (size_t)64 * 3072 * 4, st));
			one(0, dy[0]);
			printf(" %5.2f %.0e", us, check(si, dy[0]));
			if (impl != 1) best[impl == 0 ? 0 : 1][si] = us;
		}
		printf("\n");
	}

	// wg_gemm plans: (CN, S), weights packed for each S.
	struct Plan {
		int si, CN, S;
	};
	std::vector<Plan> plans = {{0, 1, 4}, {0, 2, 4}, {0, 4, 4}, {1, 1, 12}, {1, 4, 4}, {1, 2, 8}, {1, 4, 2}, {2, 1, 3},
	                           {2, 4, 3}, {2, 8, 2}, {3, 1, 12}, {3, 2, 8}, {3, 1, 16}};
	if (sweep) { // every plan: S slices of at most KSMAX, CN dividing the column blocks, CN * S <= 16
		plans.clear();
		for (int si = 0; si < 4; si++)
			for (int S : {1, 2, 3, 4, 6, 8, 12, 16})
				for (int CN : {1, 2, 4, 8})
					if (shapes[si].K % (16 * S) == 0 && shapes[si].K / S <= KSMAX && shapes[si].N / BN % CN == 0 && CN * S <= 16)
						plans.push_back({si, CN, S});
	}
	printf("\nwg_gemm + PDL: us a GEMM, pull | push (error)\n");
	for (int si = 0; si < 4; si++) best[2][si] = 1e9f;
	std::vector<half *> pw(LAYERS);
	for (const Plan &p : plans) {
		const Shape &s = shapes[p.si];
		const int KS = s.K / p.S;
		size_t n = (size_t)s.K * s.N;
		std::vector<uint16_t> W(n), P(n);
		for (int l = 0; l < LAYERS; l++) {
			CK(cudaMemcpy(W.data(), row[p.si][l], n * 2, cudaMemcpyDeviceToHost));
			pack_wg(P.data(), W.data(), s.K, s.N, p.S);
			CK(cudaMalloc(&pw[l], n * 2));
			CK(cudaMemcpy(pw[l], P.data(), n * 2, cudaMemcpyHostToDevice));
		}
		printf("%-7s CN %d x S %2d = %2d, %3d blocks:", s.name, p.CN, p.S, p.CN * p.S, s.N / BN * p.S);
		for (bool push : {false, true}) {
			if (sweep && !push) continue;
			auto one = [&](int l, float *y, bool pdl) {
				cudaLaunchConfig_t cfg;
				cudaLaunchAttribute at[2];
				config(cfg, at, dim3(s.N / BN, p.S), p.CN, p.S, wgShared(push, KS, p.S), pdl);
				CK(cudaLaunchKernelEx(&cfg, push ? lab_gemm<true> : lab_gemm<false>, y, (const half *)xin(s),
				                      (const half *)pw[l], M, s.N, s.K, p.CN));
			};
			float us = timeGraph([&] {
				for (int l = 0; l < LAYERS; l++) one(l, dy[l], true);
			}) / LAYERS;
			CK(cudaMemsetAsync(dy[0], 0xff, (size_t)64 * 3072 * 4, st));
			one(0, dy[0], false);
			double err = check(p.si, dy[0]);
			printf(" %6.2f (%.0e)", us, err);
			if (err < 1e-4 && us < best[2][p.si]) best[2][p.si] = us;
		}
		printf("\n");
		for (int l = 0; l < LAYERS; l++) CK(cudaFree(pw[l]));
	}
	// The engine's kernel on gpu/wg.go planWG's plans: the fewest K slices of at most KSMAX, the
	// widest cluster row (up to 4) that divides the column blocks.
	CK(cudaFuncSetAttribute(gemm_wg, cudaFuncAttributeMaxDynamicSharedMemorySize, 200 << 10));
	CK(cudaFuncSetAttribute(gemm_wg, cudaFuncAttributeNonPortableClusterSizeAllowed, 1));
	printf("\ngemm_wg (engine) + PDL:");
	float engine = 0;
	for (int si = 0; si < 4; si++) {
		const Shape &s = shapes[si];
		int S = 1, CN = 4;
		while (s.K % (16 * S) != 0 || s.K / S > KSMAX) S++;
		while (s.N / BN % CN != 0 || CN * S > 16) CN /= 2;
		const int KS = s.K / S, R = (M + S - 1) / S;
		size_t n = (size_t)s.K * s.N;
		std::vector<uint16_t> W(n), P(n);
		for (int l = 0; l < LAYERS; l++) {
			CK(cudaMemcpy(W.data(), row[si][l], n * 2, cudaMemcpyDeviceToHost));
			pack_wg(P.data(), W.data(), s.K, s.N, S);
			CK(cudaMalloc(&pw[l], n * 2));
			CK(cudaMemcpy(pw[l], P.data(), n * 2, cudaMemcpyHostToDevice));
		}
		auto one = [&](int l, float *y, bool pdl) {
			cudaLaunchConfig_t cfg;
			cudaLaunchAttribute at[2];
			config(cfg, at, dim3(s.N / BN, S), CN, S, KS * BN * 2 + 64 * (KS + 8) * 2 + S * R * BN * 4 + 512 + 24, pdl);
			CK(cudaLaunchKernelEx(&cfg, gemm_wg, (void *)y, (const half *)xin(s), (const half *)pw[l], (const float *)nullptr,
			                      M, s.N, s.K, CN, (const float *)nullptr, (float2 *)nullptr, 1, 1, 1e-5f, (half *)nullptr));
		};
		float us = timeGraph([&] {
			for (int l = 0; l < LAYERS; l++) one(l, dy[l], true);
		}) / LAYERS;
		CK(cudaMemsetAsync(dy[0], 0xff, (size_t)64 * 3072 * 4, st));
		one(0, dy[0], false);
		printf("  %s CN %d x S %d %.2f (%.0e)", s.name, CN, S, us, check(si, dy[0]));
		engine += us;
		for (int l = 0; l < LAYERS; l++) CK(cudaFree(pw[l]));
	}
	printf("; a layer %.2f\n", engine);
	printf("\nbest a layer (us): cuBLAS %.2f, small_gemm+PDL %.2f, wg_gemm %.2f; floor at 4.3 TB/s %.2f\n",
	       best[0][0] + best[0][1] + best[0][2] + best[0][3], best[1][0] + best[1][1] + best[1][2] + best[1][3],
	       best[2][0] + best[2][1] + best[2][2] + best[2][3], (2304 + 768 + 2 * 3072) * 768 * 2 / 4.3e6);
	return 0;
}
