// rosetop's small-batch GEMM for Hopper: Y(M, N) = X(M, K) W(K, N) for the decode steps
// (M <= 64 rows), fp16 X and W, fp32 accumulation on the tensor cores (mma.sync m16n8k16), Y in
// fp32 or, for the MLP's first GEMM, gelu_tanh(Y + bias) in fp16.
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
#include <cuda_fp16.h>
#include <stdint.h>

#define SG_THREADS 128
#define SG_WARPS 4
#define SG_MAX_CLUSTER 16 // gpu/mma.go smallMaxCluster

#if __CUDA_ARCH__ >= 900
__device__ __forceinline__ void ldsm_x4(uint32_t (&r)[4], uint32_t addr) {
	asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
	             : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
	             : "r"(addr));
}

// mma16816: d += a(16x16, row) * b(16x8, col), fp16 in, fp32 accumulate. Registers only, so not
// volatile: the compiler may schedule it between the (volatile, ordered) shared-memory loads.
__device__ __forceinline__ void mma16816(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
	asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
	             "{%0,%1,%2,%3};"
	             : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
	             : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
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
#endif

// small_gemm: grid (N / (32*NT), S), cluster (1, S, 1), block 128; dynamic shared memory
// max(rows16 * (KS + 8) * 2, rows16 * (32*NT + 4) * 4) bytes with rows16 = M rounded up to 16 and
// KS = 32*KP = K/S. wp is W packed by gpu/mma.go: for n8 tile nb and k32 step kp, lane l's 8
// halves at ((nb * K/32 + kp) * 32 + l) * 8 are the B fragments (rows k, column nb*8 + l/4) of
// the step's two k16 halves: k = 2*(l%4) + {0, 1, 8, 9} and the same + 16.
// GELU: y is half (M, N) = gelu(XW + bias); else y is float (M, N) = XW.
template <int NT, int KPMAX, bool GELU>
__device__ __forceinline__ void small_gemm(void *__restrict__ y, const half *__restrict__ x,
                                           const uint4 *__restrict__ wp, const float *__restrict__ bias, int M,
                                           int N, int K, int KP) {
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
	// so their order is the source's, and one loaded right before its use stalls every MMA on a
	// shared-memory round trip (at 64 rows the qkv GEMM took 5.96 us that way, 5.52 us this way).
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
	const int BN = 32 * NT, rst = BN + 4;
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

	// 5. Block `split` sums rows [split*R, (split+1)*R) of the S tiles, in rank order (the same
	// sum every run), and writes them through the epilogue.
	const int R = (M + S - 1) / S, r0 = split * R, r1 = min(M, r0 + R), q4 = BN / 4;
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
		int n = blockIdx.x * BN + c;
		if (GELU) {
			float4 b = *reinterpret_cast<const float4 *>(bias + n);
			half2 lo = __floats2half2_rn(gelu(s.x + b.x), gelu(s.y + b.y));
			half2 hi = __floats2half2_rn(gelu(s.z + b.z), gelu(s.w + b.w));
			half2 *o = reinterpret_cast<half2 *>(reinterpret_cast<half *>(y) + (size_t)r * N + n);
			o[0] = lo;
			o[1] = hi;
		} else {
			*reinterpret_cast<float4 *>(reinterpret_cast<float *>(y) + (size_t)r * N + n) = s;
		}
	}
	cluster_sync(); // no block leaves while another may still read its tile
#else
	__trap();
#endif
}

#define SG_ARGS void *y, const half *x, const uint4 *wp, const float *bias, int M, int N, int K, int KP
#define SG_CALL y, x, wp, bias, M, N, K, KP

// The four variants: NT = 2 (64 columns a block, K slices up to 256) or NT = 1 (32 columns, K
// slices up to 512); 64 registers of weights per thread either way. (NT = 4 was measured too:
// no plan of GPT-2's shapes ran faster with it.)
extern "C" __global__ void __launch_bounds__(SG_THREADS) gemm_small_n2(SG_ARGS) { small_gemm<2, 8, false>(SG_CALL); }
extern "C" __global__ void __launch_bounds__(SG_THREADS) gemm_small_n1(SG_ARGS) { small_gemm<1, 16, false>(SG_CALL); }
extern "C" __global__ void __launch_bounds__(SG_THREADS) gemm_small_n2_gelu(SG_ARGS) { small_gemm<2, 8, true>(SG_CALL); }
extern "C" __global__ void __launch_bounds__(SG_THREADS) gemm_small_n1_gelu(SG_ARGS) { small_gemm<1, 16, true>(SG_CALL); }
