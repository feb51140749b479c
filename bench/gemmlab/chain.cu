// chain: what one persistent kernel saves over a chain of PDL launches for the decode step's
// GEMMs. The chain is GPT-2 124M's MLP GEMMs of 12 layers, alternating fc (768 -> 3072) and fc
// proj (3072 -> 768), 24 GEMMs of M rows, each reading the one before's output in fp16.
// - pdl: gemm_sm90a.cu's gemm_wg (plain epilogue) launched 24 times with PDL, on the engine's
//   plans (fc 4 x 2 blocks a cluster, fc proj 1 x 8), each next GEMM's weights prefetched into L2.
// - persist: one launch of 96 blocks in clusters of 8, one block an SM. Every GEMM is 96 tiles of
//   64 columns and a 384-long K slice; block b takes tile b of each. A block's weight slabs are
//   double-buffered in shared memory (GEMM g + 2's copy issued once g's products are done), so a
//   weight copy is never on the path. A GEMM's K slice waits only for the blocks that write it: an
//   owner block, having written its rows of a column block, adds 1 to its slice's counter after
//   a __threadfence, and a block spins on the counter of its next slice (acquire loads) before
//   copying X.
//   The S slices of a column block sum in the owners' shared memory as in wg_gemm (st.async),
//   a cluster barrier between a GEMM's sums and the next one's pushes. A variant loads X with
//   every thread's 16-byte loads instead of bulk copies; then both print where a GEMM's time
//   goes, from thread 0's clock64 stamps.
// Each GEMM's output is checked against a double-precision product of its input as left in memory
// (a consumer that read X too early would disagree with the buffer it was checked against).
// Build and run on the GPU machine: bench/gemmlab/run.sh chain [ROWS...].
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

constexpr int G = 24, C = 768, F = 3072, KS = 384, NBLK = 96, CL = 8, XST = KS + 8;
constexpr int SLAB = KS * 64 * 2, XBYTES = 64 * XST * 2, SLOTS = 64 * 64 * 4;
constexpr int SMEM = 2 * SLAB + XBYTES + SLOTS + 4 * 8;

struct Chain {
	const half *x0;  // the first GEMM's input (M x C)
	half *y[G];      // GEMM g's output (M x N_g), fp16
	const half *w[G]; // GEMM g's weights, packed (packWG order)
	unsigned *ctr;   // [G][8]: counter of GEMM g's output K slice (KS columns) of the next GEMM
	long long *ts;   // [blocks][G][6] clock64 stamps (TS)
	int M, n;        // rows; GEMMs to run (<= G)
};

// shape of GEMM g for block b: column block nb, K slice s of S, (N, K).
struct Tile {
	int nb, s, S, N, K;
};
__device__ __forceinline__ Tile tile(int g, int b) {
	const int cr = b / CL, r = b % CL;
	if (g % 2 == 0) return {4 * cr + r / 2, r % 2, 2, F, C};
	return {cr, r, 8, C, F};
}

// products: d = A B over KS, A by ldmatrix from X's slice at xa, B the slab at wA once its
// barrier completes the phase given.
__device__ __forceinline__ void products(float (&d)[32], uint32_t xa, uint32_t wA, uint32_t bar, uint32_t phase) {
#if __CUDA_ARCH__ >= 900
	uint32_t a[KS / 16][4];
#pragma unroll
	for (int kk = 0; kk < KS / 16; kk++) ldsm_x4(a[kk], xa + 32 * kk);
#pragma unroll
	for (int i = 0; i < 32; i++) d[i] = 0.f;
	mbar_wait(bar, phase);
	asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
#pragma unroll
	for (int kk = 0; kk < KS / 16; kk++) wgmma_n64(d, a[kk], wg_desc(wA + kk * 2048));
	asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
	asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");
#endif
}

// LDG: X's slice by 16-byte loads of every thread after a block barrier (else thread 0's bulk
// copies after a proxy fence). TS: thread 0 records clock64 at 6 points of each GEMM into c.ts.
template <bool LDG, bool TS>
__global__ void __cluster_dims__(CL, 1, 1) __launch_bounds__(128, 1) chain_persist(const __grid_constant__ Chain c) {
#if __CUDA_ARCH__ >= 900
	extern __shared__ __align__(128) unsigned char smem[];
	const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, b = blockIdx.x, M = c.M;
	const uint32_t s0 = (uint32_t)__cvta_generic_to_shared(smem), xs0 = s0 + 2 * SLAB, sl0 = xs0 + XBYTES;
	float *slots = reinterpret_cast<float *>(smem + 2 * SLAB + XBYTES);
	const uint32_t barW = sl0 + SLOTS, barX = barW + 16, barR = barW + 24; // barW + 8 buf: slab buf
	int g = 0;
	auto stamp = [&](int k) {
		if (threadIdx.x == 0) c.ts[((size_t)b * G + g) * 6 + k] = clock64();
	};
	auto loadW = [&](int g) { // thread 0
		const Tile t = tile(g, b);
		const uint32_t bar = barW + 8 * (g & 1);
		expect_tx(bar, SLAB);
		bulk_copy(s0 + (g & 1) * SLAB, c.w[g] + ((size_t)t.nb * t.K + (size_t)t.s * KS) * 64, SLAB, bar);
	};
	if (threadIdx.x == 0) {
		for (int i = 0; i < 4; i++) asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(barW + 8 * i) : "memory");
		asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
		asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
		loadW(0);
		if (c.n > 1) loadW(1);
	}
	asm volatile("barrier.cluster.arrive.relaxed.aligned;" ::: "memory");

	for (; g < c.n; g++) {
		const Tile t = tile(g, b);
		const int R = 64 / t.S, r0 = t.s * R, own = max(min(M, r0 + R) - r0, 0);
		// 1. X's slice, once every block that writes it has: rows [0, M), columns [s KS, s KS + KS).
		const half *xin = g == 0 ? c.x0 : c.y[g - 1];
		const int K = t.K;
		if (TS) stamp(0);
		if (threadIdx.x == 0) {
			expect_tx(barR, (t.S - 1) * own * 64 * 4);
			if (g > 0) {
				const unsigned need = (KS / 64) * tile(g - 1, 0).S; // owners of the slice's column blocks
				const unsigned *p = c.ctr + (g - 1) * 8 + t.s;
				unsigned v;
				do asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
				while (v < need);
				if (!LDG) asm volatile("fence.proxy.async.global;" ::: "memory");
			}
			if (TS) stamp(1);
			if (!LDG) expect_tx(barX, M * KS * 2);
		}
		if (LDG) {
			__syncthreads(); // thread 0's acquire before every thread's loads
			for (int i = threadIdx.x; i < M * KS / 8; i += 128) {
				const int r = i / (KS / 8), c8 = i % (KS / 8);
				const uint4 v = __ldcg(reinterpret_cast<const uint4 *>(xin + (size_t)r * K + t.s * KS) + c8);
				*reinterpret_cast<uint4 *>(smem + 2 * SLAB + 2 * r * XST + 16 * c8) = v;
			}
			__syncthreads();
		} else {
			if (warp == 0) {
				__syncwarp();
				for (int r = lane; r < M; r += 32)
					bulk_copy(xs0 + 2 * r * XST, xin + (size_t)r * K + t.s * KS, KS * 2, barX);
			}
			mbar_wait(barX, g & 1);
		}
		if (TS) stamp(2);

		// 2. The products; then the slab is free for GEMM g + 2's weights.
		float d[32];
		const uint32_t xa = xs0 + 2 * ((16 * (warp % 4) + lane % 16) * XST + (lane / 16) * 8);
		products(d, xa, s0 + (g & 1) * SLAB, barW + 8 * (g & 1), (g >> 1) & 1);
		__syncthreads(); // every warp's products done: its slab and X are free
		if (TS) stamp(3);
		if (threadIdx.x == 0 && g + 2 < c.n) {
			asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
			// the wait for barW + 8 (g & 1) at phase (g >> 1) & 1 is done: the next use is g + 2
			loadW(g + 2);
		}

		// 3. The partials: own rows into this block's slots, the others' into their owners'
		// (their slots are free: the cluster barrier follows every block's sums of GEMM g - 1).
		asm volatile("barrier.cluster.wait.aligned;" ::: "memory");
		// the S blocks of column block nb are cluster ranks (b % CL) - s + q for q in [0, S)
		const int gq = lane / 4, tq = lane % 4, rank0 = b % CL - t.s;
#pragma unroll
		for (int h = 0; h < 2; h++) {
			const int row = 16 * (warp % 4) + gq + 8 * h;
			if (row >= M) continue;
			const int o = row / R, slot = (t.s * R + row - o * R) * 64;
			if (o == t.s) {
#pragma unroll
				for (int j = 0; j < 8; j++)
					*reinterpret_cast<float2 *>(slots + slot + 8 * j + 2 * tq) = make_float2(d[4 * j + 2 * h], d[4 * j + 2 * h + 1]);
				continue;
			}
			uint32_t raddr, rbar;
			asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(rbar) : "r"(barR), "r"(rank0 + o));
			asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(raddr) : "r"(sl0 + 4 * slot), "r"(rank0 + o));
#pragma unroll
			for (int j = 0; j < 8; j++)
				asm volatile("st.async.shared::cluster.mbarrier::complete_tx::bytes.v2.f32 [%0], {%1, %2}, [%3];" ::"r"(
				                 raddr + 4 * (8 * j + 2 * tq)),
				             "f"(d[4 * j + 2 * h]), "f"(d[4 * j + 2 * h + 1]), "r"(rbar)
				             : "memory");
		}
		__syncthreads();
		mbar_wait(barR, g & 1);
		if (TS) stamp(4);

		// 4. The owned rows: the S partials summed in order, written in fp16; then the slice's counter.
		for (int e = threadIdx.x; e < own * 16; e += 128) {
			const int rr = e / 16, col = 4 * (e % 16);
			float4 s = make_float4(0.f, 0.f, 0.f, 0.f);
			for (int p = 0; p < t.S; p++) {
				const float4 v = *reinterpret_cast<const float4 *>(slots + (p * R + rr) * 64 + col);
				s.x += v.x, s.y += v.y, s.z += v.z, s.w += v.w;
			}
			half2 lo = __floats2half2_rn(s.x, s.y), hi = __floats2half2_rn(s.z, s.w);
			uint2 u = make_uint2(*reinterpret_cast<uint32_t *>(&lo), *reinterpret_cast<uint32_t *>(&hi));
			*reinterpret_cast<uint2 *>(c.y[g] + (size_t)(r0 + rr) * t.N + t.nb * 64 + col) = u;
		}
		__syncthreads(); // the slots read, the rows written
		asm volatile("barrier.cluster.arrive.relaxed.aligned;" ::: "memory");
		if (threadIdx.x == 0) {
			asm volatile("fence.proxy.async.global;" ::: "memory");
			__threadfence();
			atomicAdd(c.ctr + g * 8 + t.nb * 64 / KS, 1u);
			if (TS) stamp(5);
		}
	}
	asm volatile("barrier.cluster.wait.aligned;" ::: "memory"); // no block leaves while others push into it
#endif
}

int main(int argc, char **argv) {
	cudaStream_t st;
	const int M = lab_start(argc, argv, "chain", &st);
	printf("%d GEMMs (fc, fc proj alternating)\n", G);
	cudaDeviceProp prop;
	CK(cudaGetDeviceProperties(&prop, 0));
	Rand frand;
	std::vector<std::vector<uint16_t>> Wh(G);
	Chain ch{};
	std::vector<half *> wS(G); // the engine's plans' packing for pdl (S 2 for fc: KS 384; 8 for fc proj: 384)
	for (int g = 0; g < G; g++) {
		const int K = g % 2 ? F : C, N = g % 2 ? C : F;
		Wh[g].resize((size_t)K * N);
		// scaled so that a row's outputs keep about the inputs' magnitude through the chain
		for (auto &v : Wh[g]) v = h16(3.4f * frand() / sqrtf((float)K));
		std::vector<uint16_t> P((size_t)K * N);
		pack_wg(P.data(), Wh[g].data(), K, N);
		half *w;
		CK(cudaMalloc(&w, P.size() * 2));
		CK(cudaMemcpy(w, P.data(), P.size() * 2, cudaMemcpyHostToDevice));
		ch.w[g] = w;
		wS[g] = w;
		CK(cudaMalloc(&ch.y[g], (size_t)64 * F * 2));
	}
	std::vector<uint16_t> X0((size_t)64 * C);
	for (auto &v : X0) v = h16(2.f * frand());
	half *x0;
	CK(cudaMalloc(&x0, X0.size() * 2));
	CK(cudaMemcpy(x0, X0.data(), X0.size() * 2, cudaMemcpyHostToDevice));
	ch.x0 = x0;
	CK(cudaMalloc(&ch.ctr, G * 8 * 4));
	ch.M = M;
	float *yf[G];
	for (int g = 0; g < G; g++) CK(cudaMalloc(&yf[g], (size_t)64 * F * 4));

	for (const void *k : {(const void *)chain_persist<false, false>, (const void *)chain_persist<true, false>,
	                      (const void *)chain_persist<false, true>, (const void *)chain_persist<true, true>})
		CK(cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, SMEM));
	for (const void *k : {(const void *)gemm_wg, (const void *)gemm_wg_box}) {
		CK(cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)prop.sharedMemPerBlockOptin));
		CK(cudaFuncSetAttribute(k, cudaFuncAttributeNonPortableClusterSizeAllowed, 1));
	}
	{
		cudaLaunchConfig_t cfg = {};
		cfg.gridDim = dim3(NBLK);
		cfg.blockDim = dim3(128);
		cfg.dynamicSmemBytes = SMEM;
		int clusters = 0;
		CK(cudaOccupancyMaxActiveClusters(&clusters, chain_persist<false, false>, &cfg));
		printf("persist: %d blocks in clusters of %d, %d B shared memory; %d clusters fit at once\n", NBLK, CL, SMEM, clusters);
		if (clusters * CL < NBLK) {
			fprintf(stderr, "chain: %d clusters of %d do not all fit at once; the spin waits would deadlock\n", NBLK / CL, CL);
			return 1;
		}
	}
	CK(cudaMalloc(&ch.ts, (size_t)NBLK * G * 6 * 8));
	bool ldg = false, ts = false;
	auto persist = [&](int n) {
		Chain c = ch;
		c.n = n;
		CK(cudaMemsetAsync(ch.ctr, 0, G * 8 * 4, st));
		auto k = ldg ? (ts ? chain_persist<true, true> : chain_persist<true, false>)
		             : (ts ? chain_persist<false, true> : chain_persist<false, false>);
		k<<<NBLK, 128, SMEM, st>>>(c);
		CK(cudaGetLastError());
	};
	// pdl: gemm_wg on the engine's plans, each GEMM reading a fixed input of its K (its time does
	// not depend on the values), writing fp32.
	const CUtensorMap xms[2] = {x_map(x0, C, M), x_map(ch.y[0], F, M)};
	auto pdl = [&](int n) {
		for (int g = 0; g < n; g++) {
			const int K = g % 2 ? F : C, N = g % 2 ? C : F, S = K / KS, CN = g % 2 ? 1 : 4;
			cudaLaunchConfig_t cfg;
			cudaLaunchAttribute at[2];
			launch_config(cfg, at, st, dim3(N / 64, S), CN, S, wg_shared(KS, S), true);
			const unsigned char *pf = g + 1 < n ? (const unsigned char *)wS[g + 1] : nullptr;
			launch_wg(cfg, gemm_wg, gemm_wg_box, M, (void *)yf[g], (const half *)(g % 2 ? ch.y[0] : x0), xms[g % 2],
			          (const half *)wS[g], (const float *)nullptr, M, N, K, CN, (const float *)nullptr, (float2 *)nullptr, 1,
			          1, 1e-5f, (half *)nullptr, pf, pf ? C * F * 2 : 0);
		}
	};
	auto timeGraph = [&](std::function<void()> body) { return time_graph(st, 100, body); };

	for (int v = 0; v < 2; v++) {
	ldg = v == 1;
	// Correctness: every GEMM's output against its input as it is in memory.
	CK(cudaMemset(ch.y[G - 1], 0xff, (size_t)64 * F * 2));
	persist(G);
	CK(cudaStreamSynchronize(st));
	double worst = 0;
	std::vector<uint16_t> in = X0, out;
	for (int g = 0; g < G; g++) {
		const int K = g % 2 ? F : C, N = g % 2 ? C : F;
		out.assign((size_t)64 * F, 0);
		CK(cudaMemcpy(out.data(), ch.y[g], out.size() * 2, cudaMemcpyDeviceToHost));
		double err = 0, mx = 0;
		for (int r = 0; r < M; r++) {
			std::vector<double> ref(N, 0.0);
			for (int k = 0; k < K; k++) {
				const double xv = f16(in[(size_t)r * K + k]);
				const uint16_t *wr = &Wh[g][(size_t)k * N];
				for (int n = 0; n < N; n++) ref[n] += xv * f16(wr[n]);
			}
			for (int n = 0; n < N; n++) {
				const double e = fabs(f16(out[(size_t)r * N + n]) - ref[n]);
				if (!(e <= err)) err = e;
				mx = std::max(mx, fabs(ref[n]));
			}
		}
		worst = std::max(worst, err / mx);
		if (!(err / mx < 2e-3)) printf("GEMM %d: error %.2e relative to the largest |y| (%.3g)\n", g, err / mx, mx);
		in = out;
	}
	printf("persist%s: the worst GEMM's error %.1e relative to its largest |y|\n", ldg ? " (X by loads)" : "", worst);
	}

	printf("\nus (a graph replayed 100 times)      %8s %8s %10s\n", "2 GEMMs", "24 GEMMs", "a GEMM");
	const char *names[3] = {"pdl: gemm_wg launches", "persist: one launch (+ memset)", "persist, X by loads"};
	for (int round = 0; round < 2; round++)
		for (int v = 0; v < 3; v++) {
			ldg = v == 2;
			auto f = v == 0 ? std::function<void(int)>(pdl) : std::function<void(int)>(persist);
			const float t2 = timeGraph([&] { f(2); }), t24 = timeGraph([&] { f(G); });
			printf("%-36s %8.2f %8.2f %10.2f\n", names[v], t2, t24, (t24 - t2) / (G - 2));
		}

	// Where a GEMM's time goes: thread 0's stamps, the median over blocks and GEMMs 2..G-1 of each
	// interval, in ns.
	const char *iv[6] = {"spin (wait for the slice's writers)", "X's slice lands", "products", "partials summed in",
	                     "sum, write, counter", "to the next GEMM"};
	for (int v = 0; v < 2; v++) {
		ldg = v == 1;
		ts = true;
		for (int i = 0; i < 3; i++) persist(G);
		CK(cudaStreamSynchronize(st));
		ts = false;
		std::vector<long long> T((size_t)NBLK * G * 6);
		CK(cudaMemcpy(T.data(), ch.ts, T.size() * 8, cudaMemcpyDeviceToHost));
		int khz = 0;
		CK(cudaDeviceGetAttribute(&khz, cudaDevAttrClockRate, 0));
		printf("\nper GEMM, persist%s (ns, median over blocks and GEMMs 2..%d):\n", ldg ? ", X by loads" : "", G - 2);
		for (int k = 0; k < 6; k++) {
			std::vector<double> d;
			for (int b = 0; b < NBLK; b++)
				for (int g = 2; g < G - 1; g++) {
					const long long *t = &T[((size_t)b * G + g) * 6];
					const long long e = k < 5 ? t[k + 1] - t[k] : t[6] - t[5]; // t[6]: the next GEMM's stamp 0
					d.push_back(e * 1e6 / khz);
				}
			std::nth_element(d.begin(), d.begin() + d.size() / 2, d.end());
			printf("  %-40s %8.0f\n", iv[k], d[d.size() / 2]);
		}
	}
	return 0;
}
