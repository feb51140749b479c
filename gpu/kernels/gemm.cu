// rosetop's small-batch GEMM for Hopper: Y(M, N) = X(M, K) W(K, N) for the decode steps
// (M <= 64 rows), fp16 X and W, fp32 accumulation on the tensor cores (mma.sync m16n8k16), with
// one of the epilogues EPI_* (gemm.cuh): the layer norms and residual adds of a decode step live in
// them (gpu/fold.go), so a layer is four GEMMs and the attention kernel, nothing else.
//
// At M <= 64 a GEMM is a stream of weights: 1-5 MB read once against a few hundred KB of X, so
// the kernel is built around getting the weights moving early and from many multiprocessors:
// - W is packed at upload (gpu/mma.go) so that each lane's two B fragments of a k32 step are one
//   16-byte load and a warp's load is 512 contiguous bytes; no shared memory for W.
// - Each warp loads all of its weights (its NT n8 columns over the block's K slice, at most 64
//   registers) *before* griddepcontrol.wait: launched with programmatic dependent launch, the
//   loads run while the previous kernel is still finishing. Only X depends on that kernel.
// - K is split over the S blocks of a thread block cluster (grid y, cluster (1, S, 1)) so that a
//   GEMM of 768 output columns still fills ~144 multiprocessors; the S partial tiles are summed
//   through distributed shared memory (each block sums M/S rows of all S tiles), with the
//   epilogue fused: no partials in global memory, no second kernel.
// Every block: 4 warps; the block's columns are 32*NT wide (each warp NT n8 tiles). Clusters of
// up to 16 blocks (past the portable 8: the runtime allows it per kernel).
// sm_90 only (clusters, griddepcontrol): the sm_80 and PTX builds trap, and the runtime uses this
// kernel only on compute capability 9.x.
#include "gemm.cuh"

#define SG_THREADS 128
#define SG_WARPS 4

// smallRegion is the bytes of X's slice (16*mt rows of KS halves, padded by 8) or, after the
// products, of the partial tile (16*mt rows of BN floats, padded by 4): multiples of 256.
__host__ __device__ constexpr int smallRegion(int mt, int KS, int BN) {
	return 16 * mt * (KS + 8) * 2 > 16 * mt * (BN + 4) * 4 ? 16 * mt * (KS + 8) * 2 : 16 * mt * (BN + 4) * 4;
}

#if __CUDA_ARCH__ >= 900
// mma16816: d += a(16x16, row) * b(16x8, col), fp16 in, fp32 accumulate. Registers only, so not
// volatile: the compiler may schedule it between the (volatile, ordered) shared-memory loads.
__device__ __forceinline__ void mma16816(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
	asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
	             "{%0,%1,%2,%3};"
	             : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
	             : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
#endif

// small_gemm: grid (N / (32*NT), S), cluster (1, S, 1), block 128; dynamic shared memory
// smallRegion + 512 + R * 32*NT * 4 bytes (gpu/mma.go smallShared): X's slice, then the partial
// tile, in the first; the rows' norms (EPI_LN*) and the residual's rows (EPI_RES) after it, with
// R = ceil(M/S) the rows a block writes. wp is W packed by gpu/mma.go: for n8 tile nb and k32 step kp, lane l's 8
// halves at ((nb * K/32 + kp) * 32 + l) * 8 are the B fragments (rows k, column nb*8 + l/4) of
// the step's two k16 halves: k = 2*(l%4) + {0, 1, 8, 9} and the same + 16.
template <int NT, int KPMAX, int EPI>
__device__ __forceinline__ void small_gemm(void *__restrict__ y, const half *__restrict__ x,
                                           const uint4 *__restrict__ wp, const float *__restrict__ bias, int M,
                                           int N, int K, int KP, const float *__restrict__ colc,
                                           float2 *__restrict__ stats, int P, int pstride, float eps,
                                           half *__restrict__ x16) {
#if __CUDA_ARCH__ >= 900
	extern __shared__ __align__(16) unsigned char smem[];
	const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
	const int S = gridDim.y, split = blockIdx.y, KS = 32 * KP, KT = K / 32;
	const int mt = (M + 15) / 16;
	const int nb0 = (blockIdx.x * SG_WARPS + warp) * NT;

	// 1. This warp's weights, before the wait: they do not depend on the previous kernel.
	uint4 w[KPMAX][NT];
#pragma unroll
	for (int kp = 0; kp < KPMAX; kp++)
#pragma unroll
		for (int j = 0; j < NT; j++)
			if (kp < KP) w[kp][j] = __ldg(wp + ((size_t)(nb0 + j) * KT + split * KP + kp) * 32 + lane);
	// The epilogue's per-column vectors, also before the wait: a thread's columns are the same
	// in every pass of step 5 (128 is a multiple of the BN/4 threads of a row).
	const int BN = 32 * NT, q4 = BN / 4, ncol = blockIdx.x * BN + 4 * (threadIdx.x % q4);
	float4 bv = make_float4(0.f, 0.f, 0.f, 0.f), cv = bv;
	if (EPI != EPI_PLAIN) bv = __ldg(reinterpret_cast<const float4 *>(bias + ncol));
	if (EPI == EPI_LN || EPI == EPI_LN_GELU) cv = __ldg(reinterpret_cast<const float4 *>(colc + ncol));
	asm volatile("griddepcontrol.wait;" ::: "memory");
	asm volatile("griddepcontrol.launch_dependents;");

	// 2. X's rows [0, 16*mt) of this K slice into shared memory, rows padded by 8 halves so the
	// ldmatrix row addresses fall in different banks; rows past M are zero-filled. Every copy is
	// an asynchronous 16-byte cp.async issued before the first wait: one L2 round trip for the
	// whole slice, where a load-then-store loop paid one per few rows.
	half *xs = reinterpret_cast<half *>(smem);
	const int xst = KS + 8, vecs = KS / 8;
	const uint32_t xs0 = (uint32_t)__cvta_generic_to_shared(xs);
	for (int i = threadIdx.x; i < 16 * mt * vecs; i += SG_THREADS) {
		int r = i / vecs, c = i - r * vecs;
		const half *src = x + (size_t)min(r, M - 1) * K + split * KS + 8 * c;
		asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(xs0 + 2 * (r * xst + 8 * c)), "l"(src),
		             "r"(r < M ? 16 : 0)
		             : "memory");
	}
	// EPI_RES: the residual's rows this block writes (step 5), fp32, into shared memory with X.
	const int R = (M + S - 1) / S, r0 = split * R, r1 = min(M, r0 + R);
	float2 *rowNorm = reinterpret_cast<float2 *>(smem + smallRegion(mt, KS, BN));
	float *xres = reinterpret_cast<float *>(rowNorm + 64);
	if (EPI == EPI_RES) {
		const uint32_t xr0 = (uint32_t)__cvta_generic_to_shared(xres);
		for (int i = threadIdx.x; i < (r1 - r0) * q4; i += SG_THREADS) {
			const float *src = reinterpret_cast<const float *>(y) + (size_t)(r0 + i / q4) * N + blockIdx.x * BN + 4 * (i % q4);
			asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(xr0 + 16 * i), "l"(src) : "memory");
		}
	}
	// The LN epilogues: the mean and rstd of the rows this block writes.
	if ((EPI == EPI_LN || EPI == EPI_LN_GELU) && (int)threadIdx.x < r1 - r0) // signed: r1 < r0 past M
		rowNorm[threadIdx.x] = row_norm(stats + (size_t)(r0 + threadIdx.x) * pstride, P, K, eps);
	asm volatile("cp.async.wait_all;" ::: "memory");
	__syncthreads();

	// 3. The tensor-core products: per k16 step, one ldmatrix.x4 per m16 tile, NT MMAs each.
	float acc[4][NT][4];
#pragma unroll
	for (int i = 0; i < 4; i++)
#pragma unroll
		for (int j = 0; j < NT; j++) acc[i][j][0] = acc[i][j][1] = acc[i][j][2] = acc[i][j][3] = 0.f;
	const uint32_t xa = (uint32_t)__cvta_generic_to_shared(xs) + 2 * ((lane % 16) * xst + (lane / 16) * 8);
	// A k32 step's A fragments are all loaded before its first product: the loads are volatile,
	// so their order is the source's, and one loaded right before its use would stall every MMA
	// on a shared-memory round trip.
#pragma unroll
	for (int kp = 0; kp < KPMAX; kp++) {
		if (kp < KP) {
			uint32_t a[2][4][4];
#pragma unroll
			for (int hk = 0; hk < 2; hk++)
#pragma unroll
				for (int i = 0; i < 4; i++)
					if (i < mt) ldsm_x4(a[hk][i], xa + 2 * (16 * i * xst + 16 * (2 * kp + hk)));
#pragma unroll
			for (int hk = 0; hk < 2; hk++)
#pragma unroll
				for (int i = 0; i < 4; i++)
					if (i < mt)
#pragma unroll
						for (int j = 0; j < NT; j++)
							mma16816(acc[i][j], a[hk][i], hk ? w[kp][j].z : w[kp][j].x, hk ? w[kp][j].w : w[kp][j].y);
		}
	}
	__syncthreads(); // every warp is done with xs: the partial tile reuses the memory

	// 4. This block's partial tile (16*mt rows, 32*NT columns) into shared memory.
	const int rst = BN + 4;
	float *red = reinterpret_cast<float *>(smem);
	const int g = lane / 4, tq = lane % 4;
#pragma unroll
	for (int i = 0; i < 4; i++) {
		if (i < mt) {
#pragma unroll
			for (int j = 0; j < NT; j++) {
				int col = (warp * NT + j) * 8 + 2 * tq, row = 16 * i + g;
				*reinterpret_cast<float2 *>(red + row * rst + col) = make_float2(acc[i][j][0], acc[i][j][1]);
				*reinterpret_cast<float2 *>(red + (row + 8) * rst + col) = make_float2(acc[i][j][2], acc[i][j][3]);
			}
		}
	}
	cluster_sync(); // every block's tile is written (and this block's own barrier)

	// 5. Block `split` sums rows [r0, r1) of the S tiles, in rank order (the same sum every run),
	// and writes them through the epilogue. q4 consecutive threads share a row (EPI_RES's
	// shuffles).
	for (int e = threadIdx.x; e < (r1 - r0) * q4; e += SG_THREADS) {
		int r = r0 + e / q4, c = 4 * (e % q4);
		const float4 *la = reinterpret_cast<const float4 *>(red + r * rst + c);
		// Every block's value first, then the sums: the S remote loads are in flight together
		// (loading and adding in turn paid one distributed-shared-memory round trip per block).
		float4 v[SG_MAX_CLUSTER];
#pragma unroll
		for (int q = 0; q < SG_MAX_CLUSTER; q++)
			if (q < S) v[q] = *in_rank(la, q);
		float4 s = v[0];
#pragma unroll
		for (int q = 1; q < SG_MAX_CLUSTER; q++) {
			if (q < S) {
				s.x += v[q].x;
				s.y += v[q].y;
				s.z += v[q].z;
				s.w += v[q].w;
			}
		}
		float4 xv = make_float4(0.f, 0.f, 0.f, 0.f);
		if (EPI == EPI_RES) xv = reinterpret_cast<const float4 *>(xres)[e];
		float2 nr = make_float2(0.f, 0.f);
		if (EPI == EPI_LN || EPI == EPI_LN_GELU) nr = rowNorm[r - r0];
		epilogue4<EPI, 32 * NT>(s, y, x16, (size_t)r * N + blockIdx.x * BN + c, nr, bv, cv, xv,
		                        stats + (size_t)r * pstride + blockIdx.x, c == 0);
	}
	cluster_sync(); // no block leaves while another may still read its tile
#else
	__trap();
#endif
}

#define SG_ARGS                                                                                                  \
	void *y, const half *x, const uint4 *wp, const float *bias, int M, int N, int K, int KP, const float *colc,   \
	    float2 *stats, int P, int pstride, float eps, half *x16
#define SG_CALL y, x, wp, bias, M, N, K, KP, colc, stats, P, pstride, eps, x16

// The variants: NT = 2 (64 columns a block, K slices up to 256) or NT = 1 (32 columns, K slices
// up to 512); 64 registers of weights per thread either way; times the five epilogues.
#define SG_KERNELS(name, EPI)                                                                                    \
	extern "C" __global__ void __launch_bounds__(SG_THREADS) gemm_small_n2##name(SG_ARGS) {                     \
		small_gemm<2, 8, EPI>(SG_CALL);                                                                          \
	}                                                                                                            \
	extern "C" __global__ void __launch_bounds__(SG_THREADS) gemm_small_n1##name(SG_ARGS) {                     \
		small_gemm<1, 16, EPI>(SG_CALL);                                                                         \
	}
SG_KERNELS(, EPI_PLAIN)
SG_KERNELS(_gelu, EPI_GELU)
SG_KERNELS(_ln, EPI_LN)
SG_KERNELS(_ln_gelu, EPI_LN_GELU)
SG_KERNELS(_res, EPI_RES)
