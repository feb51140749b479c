// gemmlab: GPT-2 124M's four layer GEMMs at M decode rows (fp16 in, fp32 out), timed as chains of
// 24 distinct weight sets in CUDA graphs, on three paths: cuBLAS; gpu/kernels/gemm.cu's small_gemm
// (mma.sync, weights in registers, K split over a cluster, partial tiles pulled through DSMEM);
// and gpu/kernels/gemm_sm90a.cu's gemm_wg (plain epilogue) on chosen (CN, S) plans: grid (N/64,
// S), cluster (CN, S, 1); a block's weights one bulk copy before the PDL wait, X's slice multicast
// over the CN blocks of a cluster row, wgmma, the S slices' partial rows pushed to their owners.
// It is the measuring bench of the decode step's GEMMs (bench/RESULTS.md), not a path of the
// engine; pulling the partials instead (two cluster barriers) lost (RESULTS.md, `c962e0e`).
//
// Build and run on the GPU machine (nvcc 12+; wgmma needs sm_90a): bench/gemmlab/run.sh; "gemmlab
// ROWS sweep" times gemm_wg on every valid (CN, S) plan.
#include "../../gpu/kernels/gemm.cu"
#include "../../gpu/kernels/gemm_sm90a.cu"
#include "lab.cuh"
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <functional>
#include <vector>

#define CB(x)                                                              \
	do {                                                                   \
		cublasStatus_t s_ = (x);                                           \
		if (s_ != CUBLAS_STATUS_SUCCESS) {                                 \
			fprintf(stderr, "%s:%d %s: %d\n", __FILE__, __LINE__, #x, s_); \
			exit(1);                                                       \
		}                                                                  \
	} while (0)

constexpr int BN = 64; // gpu/wg.go wgBN
constexpr int KSMAX = WG_KSMAX;


struct Shape {
	const char *name;
	int N, K, S; // small_gemm's K slices (gpu/mma.go planSmall on 132 multiprocessors)
};
static const Shape shapes[4] = {{"qkv", 2304, 768, 4}, {"proj", 768, 768, 12}, {"fc", 3072, 768, 3}, {"fcproj", 768, 3072, 12}};
constexpr int LAYERS = 24;

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

	for (const void *k : {(const void *)gemm_small_n2, (const void *)gemm_wg, (const void *)gemm_wg_box}) {
		CK(cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)prop.sharedMemPerBlockOptin));
		CK(cudaFuncSetAttribute(k, cudaFuncAttributeNonPortableClusterSizeAllowed, 1));
	}
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
		launch_config(cfg, at, st, dim3(s.N / 64, s.S), 1, s.S,
		       std::max(rows * (KS + 8) * 2, rows * (64 + 4) * 4) + 512 + (M + s.S - 1) / s.S * 64 * 4, pdl);
		CK(cudaLaunchKernelEx(&cfg, gemm_small_n2, (void *)y, (const half *)xin(s), (const uint4 *)mma[si][l],
		                      (const float *)nullptr, M, s.N, s.K, KS / 32, (const float *)nullptr, (float2 *)nullptr, 1, 1,
		                      1e-5f, (half *)nullptr));
	};
	auto timeGraph = [&](std::function<void()> body) { return time_graph(st, 50, body); };
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

	// Plans (CN, S) of the wgmma kernels: a few by hand, gpu/wg.go planWG's (the fewest K slices of
	// at most KSMAX, the widest cluster row up to 4 dividing the column blocks), or every one.
	struct Plan {
		int si, CN, S;
	};
	std::vector<Plan> plans = {{0, 2, 4}, {0, 4, 4}, {1, 4, 4}, {1, 2, 8}, {2, 4, 3}, {2, 8, 2}, {3, 1, 8}, {3, 1, 12}};
	for (int si = 0; si < 4; si++) {
		int S = 1, CN = 4;
		while (shapes[si].K % (16 * S) != 0 || shapes[si].K / S > KSMAX) S++;
		while (shapes[si].N / BN % CN != 0 || CN * S > 16) CN /= 2;
		plans.push_back({si, CN, S});
	}
	if (sweep) { // every plan: S slices of at most KSMAX, CN dividing the column blocks, CN * S <= 16
		plans.clear();
		for (int si = 0; si < 4; si++)
			for (int S : {1, 2, 3, 4, 6, 8, 12, 16})
				for (int CN : {1, 2, 4, 8})
					if (shapes[si].K % (16 * S) == 0 && shapes[si].K / S <= KSMAX && shapes[si].N / BN % CN == 0 && CN * S <= 16)
						plans.push_back({si, CN, S});
	}
	printf("\ngemm_wg + PDL: us a GEMM (error); the last plan of each shape is planWG's\n");
	for (int si = 0; si < 4; si++) best[2][si] = 1e9f;
	std::vector<half *> pw(LAYERS);
	for (const Plan &p : plans) {
		const Shape &s = shapes[p.si];
		const int KS = s.K / p.S;
		size_t n = (size_t)s.K * s.N;
		std::vector<uint16_t> W(n), P(n);
		for (int l = 0; l < LAYERS; l++) {
			CK(cudaMemcpy(W.data(), row[p.si][l], n * 2, cudaMemcpyDeviceToHost));
			pack_wg(P.data(), W.data(), s.K, s.N);
			CK(cudaMalloc(&pw[l], n * 2));
			CK(cudaMemcpy(pw[l], P.data(), n * 2, cudaMemcpyHostToDevice));
		}
		printf("%-7s CN %d x S %2d = %2d, %3d blocks:", s.name, p.CN, p.S, p.CN * p.S, s.N / BN * p.S);
		const CUtensorMap xm = x_map(xin(s), s.K, M);
		auto one = [&](int l, float *y, bool pdl) {
			cudaLaunchConfig_t cfg;
			cudaLaunchAttribute at[2];
			launch_config(cfg, at, st, dim3(s.N / BN, p.S), p.CN, p.S, wg_shared(KS, p.S), pdl);
			launch_wg(cfg, gemm_wg, gemm_wg_box, M, (void *)y, (const half *)xin(s), xm, (const half *)pw[l],
			          (const float *)nullptr, M, s.N, s.K, p.CN, (const float *)nullptr, (float2 *)nullptr, 1, 1, 1e-5f,
			          (half *)nullptr, (const unsigned char *)nullptr, 0);
		};
		float us = timeGraph([&] {
			for (int l = 0; l < LAYERS; l++) one(l, dy[l], true);
		}) / LAYERS;
		CK(cudaMemsetAsync(dy[0], 0xff, (size_t)64 * 3072 * 4, st));
		one(0, dy[0], false);
		double err = check(p.si, dy[0]);
		printf(" %6.2f (%.0e)\n", us, err);
		if (err < 1e-4 && us < best[2][p.si]) best[2][p.si] = us;
		for (int l = 0; l < LAYERS; l++) CK(cudaFree(pw[l]));
	}
	printf("\nbest a layer (us): cuBLAS %.2f, small_gemm+PDL %.2f, gemm_wg %.2f; floor at 4.3 TB/s %.2f\n",
	       best[0][0] + best[0][1] + best[0][2] + best[0][3], best[1][0] + best[1][1] + best[1][2] + best[1][3],
	       best[2][0] + best[2][1] + best[2][2] + best[2][3], (2304 + 768 + 2 * 3072) * 768 * 2 / 4.3e6);
	return 0;
}
