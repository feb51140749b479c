// rosetop's GEMM for decode steps of up to 64 rows on Hopper, in sm_90a code (wgmma, bulk copies,
// multicast): Y(M, N) = X(M, K) W(K, N), M <= 64, fp16 X and W, fp32 accumulation, through one of
// gemm.cuh's epilogues. Built by scripts/gen-sm90a.sh on a machine with nvcc 12.3 or newer; the
// runtime loads it where the driver takes the image and keeps small_gemm and cuBLAS elsewhere.
//
// At 64 rows the cost of a GEMM kernel is its fixed work, not its bytes (bench/RESULTS.md), so a
// block does as little as it can after the previous kernel ends:
// - Its weights, K/S x BN halves packed in 64-column blocks in wgmma's no-swizzle K-major order
//   (gpu/wg.go packWG), are bulk copies issued *before* griddepcontrol.wait: one slab for 64
//   columns, a 1 KB half of each k16 step for 32.
// - It prefetches its share of the next GEMM's weights (pf) into L2: that GEMM's blocks that can
//   start only once this one's leave (shared memory) then copy theirs from L2, not DRAM.
// - X's slice lands, shared by the CN column blocks of a cluster row (multicast), either by bulk
//   tensor copies (the _box kernels: xm, a tensor map of X's M rows, gpu/xmaps.go) of 64 columns
//   x M rows in the 128-byte swizzle, each block copying every CN-th box; or by a bulk copy of
//   each row of x (64/CN rows a block) into rows padded by 8 halves. Either way ldmatrix reads it
//   without bank conflicts. Which kernel takes which steps: gpu/xmaps.go xBoxes.
// - A in registers (ldmatrix), B from shared memory: wgmma m64nBNk16, BN 64 or 32 columns.
// - K is split over the W warpgroups of a block (their partials summed in its shared memory) and
//   over the S blocks of a cluster column. Each block pushes the rows other blocks own into their
//   shared memory (st.async, counted on the owner's mbarrier), so that no cluster barrier follows
//   the products; the owner sums the S x W partials in order and runs the epilogue on its rows.
// grid (N/BN, S), cluster (CN, S, 1), 128 x W threads.
#include "argmax.cuh"
#include "gemm.cuh"
#include <cuda.h>

#define WG_KSMAX 384 // the longest K slice a warpgroup: 24 k16 steps of A in registers (gpu/wg.go wgMaxSlice)
#define X_BOX 64     // X's tensor copies: boxes of 64 columns (128 bytes, the swizzle's span) x 64 rows

#if __CUDA_ARCH__ >= 900
__device__ __forceinline__ void mbar_wait(uint32_t bar, uint32_t phase) {
	uint32_t ok = 0;
	while (!ok)
		asm volatile("{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2; selp.u32 %0, 1, 0, p; }"
		             : "=r"(ok)
		             : "r"(bar), "r"(phase)
		             : "memory");
}

// wg_desc is the shared-memory matrix descriptor of B at addr, no swizzle: core matrices (8 rows
// of 16 bytes) 128 bytes apart along K (leading byte offset), 256 bytes apart along N (stride).
__device__ __forceinline__ uint64_t wg_desc(uint32_t addr) {
	return (uint64_t)((addr & 0x3FFFF) >> 4) | ((uint64_t)(128 >> 4) << 16) | ((uint64_t)(256 >> 4) << 32);
}

// wgmma_n64: d(64 x 64, f32) += a(64 x 16; this warp's 16 rows in registers) b(16 x 64, K-major).
__device__ __forceinline__ void wgmma_n64(float (&d)[32], const uint32_t (&a)[4], uint64_t desc) {
	asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"
	             "wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 "
	             "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
	             "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, "
	             "{%32, %33, %34, %35}, %36, p, 1, 1, 0;\n}\n"
	             : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]),
	               "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]),
	               "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]),
	               "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]),
	               "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
	             : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc));
}

// wgmma_n32: the same for 32 columns.
__device__ __forceinline__ void wgmma_n32(float (&d)[16], const uint32_t (&a)[4], uint64_t desc) {
	asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"
	             "wgmma.mma_async.sync.aligned.m64n32k16.f32.f16.f16 "
	             "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15}, "
	             "{%16, %17, %18, %19}, %20, p, 1, 1, 0;\n}\n"
	             : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]),
	               "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]),
	               "+f"(d[14]), "+f"(d[15])
	             : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc));
}

__device__ __forceinline__ void wgmma_n(float (&d)[32], const uint32_t (&a)[4], uint64_t desc) { wgmma_n64(d, a, desc); }
__device__ __forceinline__ void wgmma_n(float (&d)[16], const uint32_t (&a)[4], uint64_t desc) { wgmma_n32(d, a, desc); }

// bulk_copy copies bytes from src to dst (shared) on bar's transaction count.
__device__ __forceinline__ void bulk_copy(uint32_t dst, const void *src, int bytes, uint32_t bar) {
	asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(dst),
	             "l"(src), "r"(bytes), "r"(bar)
	             : "memory");
}

// bulk_stream is bulk_copy for bytes a step reads once (weights): they leave the L2 first.
__device__ __forceinline__ void bulk_stream(uint32_t dst, const void *src, int bytes, uint32_t bar) {
	uint64_t first;
	asm("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(first));
	asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.L2::cache_hint [%0], [%1], %2, [%3], %4;" ::"r"(dst),
	             "l"(src), "r"(bytes), "r"(bar), "l"(first)
	             : "memory");
}

__device__ __forceinline__ void expect_tx(uint32_t bar, int bytes) {
	asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar), "r"(bytes) : "memory");
}

// x_rows: a lane's ldmatrix addresses of A, k16 step by k16 step, in X's rows as their bulk copies
// land them, xst halves apart: row r, chunk h of each step, from column k0.
struct x_rows {
	uint32_t base;
	__device__ __forceinline__ x_rows(uint32_t xs, int xst, int r, int k0, int h) : base(xs + 2 * (r * xst + h * 8 + k0)) {}
	__device__ __forceinline__ uint32_t operator()(int kk) const { return base + 32 * kk; }
};

// x_lane: a lane's ldmatrix addresses of A, k16 step by k16 step, in X as its tensor copies land
// it from xs (128-byte aligned): box b (columns [64b, 64b + 64)) 8 KB from the last (room for 64
// rows), row r's 128 bytes in it, the row's 16-byte chunk j at chunk j ^ (bits 7-9 of the row's
// address: the 128-byte swizzle). The lane reads row r, chunk h of each step, from column 8 c0 (a
// box's first, c0 % 8 == 0). Rows past M hold whatever was there: their products are never written.
struct x_lane {
	uint32_t base, o[4]; // box c0 / 8, row r; the swizzled chunk of the four k16 steps of a box
	__device__ __forceinline__ x_lane(uint32_t xs, int r, int c0, int h) {
		base = xs + (c0 >> 3) * (X_BOX * X_BOX * 2) + r * (X_BOX * 2);
#pragma unroll
		for (int q = 0; q < 4; q++) o[q] = ((2 * q + h) ^ ((base >> 7) & 7)) << 4;
	}
	__device__ __forceinline__ uint32_t operator()(int kk) const { return base + (kk >> 2) * (X_BOX * X_BOX * 2) + o[kk & 3]; }
};

// x_boxes copies boxes b0, b0 + db, ... below nb of X's rows (those of xm: box b is columns
// from c0 + 64 b) into xs on bar: multicast to the blocks of mask when it is not 0, else to this one.
__device__ __forceinline__ void x_boxes(uint32_t xs, const CUtensorMap *xm, int c0, int b0, int nb, int db, uint32_t bar,
                                        uint16_t mask) {
	for (int b = b0; b < nb; b += db) {
		const uint32_t dst = xs + b * (X_BOX * X_BOX * 2);
		if (mask)
			asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster [%0], "
			             "[%1, {%2, %3}], [%4], %5;" ::"r"(dst),
			             "l"(xm), "r"(c0 + b * X_BOX), "r"(0), "r"(bar), "h"(mask)
			             : "memory");
		else
			asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];" ::"r"(
			                 dst),
			             "l"(xm), "r"(c0 + b * X_BOX), "r"(0), "r"(bar)
			             : "memory");
	}
}

// wg_products: d = A B over nk k16 steps (NK when it is not 0: then known at compile time), A's
// fragments by ldmatrix, k16 step kk's for this lane from xa(kk), B the weights' slab of BN
// columns at wA once barW completes.
template <int NK, int BN, class XA>
__device__ __forceinline__ void wg_products(float (&d)[BN / 2], XA xa, uint32_t wA, int nk, uint32_t barW) {
	uint32_t a[WG_KSMAX / 16][4];
#pragma unroll
	for (int kk = 0; kk < WG_KSMAX / 16; kk++)
		if (kk < (NK ? NK : nk)) ldsm_x4(a[kk], xa(kk));
#pragma unroll
	for (int i = 0; i < BN / 2; i++) d[i] = 0.f;
	mbar_wait(barW, 0);
	asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
#pragma unroll
	for (int kk = 0; kk < WG_KSMAX / 16; kk++)
		if (kk < (NK ? NK : nk)) wgmma_n(d, a[kk], wg_desc(wA + kk * BN * 32));
	asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
	asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");
}
#endif

// wg_gemm: BN 64: one warpgroup a block, K in S slices; BN 32: K whole (S 1) over two warpgroups
// of 128 to 384 K each (a multiple of 64: x_lane), whose partials (at most 64 rows of 32 floats) go into their own halves of
// the weights' slab once their products are done. Dynamic shared memory (gpu/wg.go wgShared), in
// this order: W's slab (KS x BN halves); X's slice (room for ceil(KS / 64) boxes of 64 x 64 halves
// in x_lane's order, or 64 rows of KS + 8 halves); BN 64: the partial
// slots (S x R rows of BN floats, R = ceil(M/S) the rows a block owns); EPI_RES: the residual's R
// rows (BN floats each); the owned rows' norms (64 float pairs); three mbarriers (W, X, partials).
// ws is W packed by packWG: the slab of 64-column block nb and K slice s starts at (nb * K + s *
// KS) * 64 halves, a k16 step of it 1024 halves, of which columns 32h.. are the 512 from 512h.
template <int EPI, int BN, bool BOX>
__device__ __forceinline__ void wg_gemm(void *__restrict__ y, const half *__restrict__ x, const CUtensorMap *xm,
                                        const half *__restrict__ ws,
                                        const float *__restrict__ bias, int M, int N, int K, int CN,
                                        const float *__restrict__ colc, float2 *__restrict__ stats, int P, int pstride,
                                        float eps, half *__restrict__ x16, const unsigned char *__restrict__ pf,
                                        int pfBytes) {
#if __CUDA_ARCH__ >= 900
	extern __shared__ __align__(128) unsigned char smem[];
	constexpr bool inSlab = BN == 32;       // K whole: the partials in the weights' slab
	constexpr int W = inSlab ? 2 : 1, nt = 128 * W; // warpgroups, threads
	const int lane = threadIdx.x % 32, warp = threadIdx.x / 32 % 4, q4 = BN / 4, wgi = W == 1 ? 0 : threadIdx.x / 128;
	const int S = inSlab ? 1 : gridDim.y, split = inSlab ? 0 : blockIdx.y, KS = K / S, KW = KS / W;
	const int cx = blockIdx.x % CN, nbox = (KS + X_BOX - 1) / X_BOX, xst = KS + 8;
	const int R = (M + S - 1) / S, r0 = split * R, r1 = min(M, r0 + R), own = max(r1 - r0, 0), NP = S * W;
	unsigned char *xsm = smem + KS * BN * 2;
	float *slots = reinterpret_cast<float *>(xsm + (BOX ? max(nbox * X_BOX * X_BOX * 2, 64 * xst * 2) : 64 * xst * 2));
	float *xres = slots + (inSlab ? 0 : NP * R * BN);
	float2 *rowNorm = reinterpret_cast<float2 *>(xres + (EPI == EPI_RES ? R * BN : 0));
	const uint32_t wA = (uint32_t)__cvta_generic_to_shared(smem), xs0 = (uint32_t)__cvta_generic_to_shared(xsm);
	const uint32_t barW = (uint32_t)__cvta_generic_to_shared(rowNorm + 64), barX = barW + 8, barR = barW + 16;
	// part(q): the slot of partial q (slice q / W, warpgroup q % W) for a block's owned rows.
	auto part = [&](int q) {
		return inSlab ? reinterpret_cast<float *>(smem + q * KW * BN * 2) : slots + q * R * BN;
	};

	// 1. The barriers, and the weights' bulk copy and the epilogue's vectors before the wait: they
	// do not depend on the previous kernel.
	if (threadIdx.x == 0) {
		asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(barW) : "memory");
		asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(barX) : "memory");
		asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(barR) : "memory");
		asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
		asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
		expect_tx(barW, KS * BN * 2);
		if (!inSlab) bulk_stream(wA, ws + ((size_t)blockIdx.x * K + (size_t)split * KS) * BN, KS * BN * 2, barW);
		expect_tx(barX, BOX ? nbox * M * X_BOX * 2 : M * KS * 2); // rows past M are never loaded
		if (BOX) asm volatile("prefetch.tensormap [%0];" ::"l"(xm) : "memory");
		expect_tx(barR, (S - 1) * W * own * BN * 4);
		// The next GEMM's weights into L2, a share a block.
		const int nb = gridDim.x * gridDim.y, share = (pfBytes / nb + 15) & ~15;
		const int off = (blockIdx.y * gridDim.x + blockIdx.x) * share, n = min(share, pfBytes - off);
		if (n > 0)
			asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(pf + off), "r"(n) : "memory");
	}
	if (inSlab && warp == 0 && wgi == 0) { // after thread 0's expect_tx: this half of every k16 step
		__syncwarp();
		const half *src = ws + (size_t)(blockIdx.x / 2) * K * 64 + (blockIdx.x % 2) * 512;
		for (int kk = lane; kk < K / 16; kk += 32) bulk_stream(wA + kk * 1024, src + (size_t)kk * 1024, 1024, barW);
	}
	const int ncol = blockIdx.x * BN + 4 * (threadIdx.x % q4); // a thread's columns in step 5
	float4 bv = make_float4(0.f, 0.f, 0.f, 0.f), cv = bv;
	if (EPI != EPI_PLAIN) bv = __ldg(reinterpret_cast<const float4 *>(bias + ncol));
	if (EPI == EPI_LN || EPI == EPI_LN_GELU) cv = __ldg(reinterpret_cast<const float4 *>(colc + ncol));
	// Every block's barriers exist before anyone copies into them or waits on them: the init fence
	// above publishes them to the cluster, so the arrive needs no release of its own.
	if (CN * S > 1)
		asm volatile("barrier.cluster.arrive.relaxed.aligned;\n\tbarrier.cluster.wait.aligned;" ::: "memory");
	else
		__syncthreads();
	asm volatile("griddepcontrol.wait;" ::: "memory");
	asm volatile("griddepcontrol.launch_dependents;");

	// 2. X's slice from this block, multicast to its cluster row: boxes cx, cx + CN, ...; or rows
	// [cx*64/CN, (cx+1)*64/CN) below M.
	if constexpr (BOX) {
		const uint16_t mask = CN == 1 ? 0 : (uint16_t)(((1u << CN) - 1) << (split * CN));
		if (threadIdx.x == 0) x_boxes(xs0, xm, split * KS, cx, nbox, CN, barX, mask);
	} else {
		const int per = 64 / CN;
		if ((int)threadIdx.x < per) {
			const int r = cx * per + threadIdx.x;
			if (r < M) {
				const half *src = x + (size_t)r * K + split * KS;
				const uint32_t dst = xs0 + 2 * r * xst;
				if (CN == 1)
					bulk_copy(dst, src, KS * 2, barX);
				else
					asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster [%0], "
					             "[%1], %2, [%3], %4;" ::"r"(dst),
					             "l"(src), "r"(KS * 2), "r"(barX), "h"((uint16_t)(((1u << CN) - 1) << (split * CN)))
					             : "memory");
			}
		}
	}
	// EPI_RES: the residual stream's rows this block owns; EPI_LN*: their norms.
	if (EPI == EPI_RES) {
		const uint32_t xr0 = (uint32_t)__cvta_generic_to_shared(xres);
		for (int i = threadIdx.x; i < own * q4; i += nt) {
			const float *src = reinterpret_cast<const float *>(y) + (size_t)(r0 + i / q4) * N + blockIdx.x * BN + 4 * (i % q4);
			asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(xr0 + 16 * i), "l"(src) : "memory");
		}
	}
	if ((EPI == EPI_LN || EPI == EPI_LN_GELU) && (int)threadIdx.x < own)
		rowNorm[threadIdx.x] = row_norm(stats + (size_t)(r0 + threadIdx.x) * pstride, P, K, eps);
	mbar_wait(barX, 0);

	// 3. The products of this warpgroup's part of the slice. Parts of 384 (GPT-2) and 256 (GPT-2
	// medium) run with their length compiled in, so that the wgmmas issue back to back with no
	// branch between them (bench/RESULTS.md).
	float d[BN / 2];
	const uint32_t wa = wA + wgi * KW * BN * 2;
	const auto products = [&](auto xa) {
		switch (KW / 16) {
		case 24: wg_products<24, BN>(d, xa, wa, KW / 16, barW); break;
		case 16: wg_products<16, BN>(d, xa, wa, KW / 16, barW); break;
		default: wg_products<0, BN>(d, xa, wa, KW / 16, barW);
		}
	};
	const int xr = 16 * warp + lane % 16;
	if (BOX)
		products(x_lane(xs0, xr, wgi * KW / 8, lane / 16));
	else
		products(x_rows(xs0, xst, xr, wgi * KW, lane / 16));
	if (inSlab) // this warpgroup's partial overwrites the weights it has just read
		asm volatile("fence.proxy.async.shared::cta;" ::: "memory");

	// 4. The partials: thread (warp, g, t) holds rows 16*warp + g (+8), columns 8j + 2t (+1).
	// Rows this block owns go to its own slot, the others to their owner's slot for this block.
	const int g = lane / 4, t = lane % 4, q = split * W + wgi;
	const uint32_t slots0 = (uint32_t)__cvta_generic_to_shared(part(q));
#pragma unroll
	for (int h = 0; h < 2; h++) {
		const int row = 16 * warp + g + 8 * h;
		if (row >= M) continue;
		const int o = row / R, slot = (row - o * R) * BN;
		if (o == split) {
#pragma unroll
			for (int j = 0; j < BN / 8; j++)
				*reinterpret_cast<float2 *>(part(q) + slot + 8 * j + 2 * t) = make_float2(d[4 * j + 2 * h], d[4 * j + 2 * h + 1]);
			continue;
		}
		uint32_t rank = o * CN + cx, raddr, rbar;
		asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(rbar) : "r"(barR), "r"(rank));
		asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(raddr) : "r"(slots0 + 4 * slot), "r"(rank));
#pragma unroll
		for (int j = 0; j < BN / 8; j++)
			asm volatile("st.async.shared::cluster.mbarrier::complete_tx::bytes.v2.f32 [%0], {%1, %2}, [%3];" ::"r"(
			                 raddr + 4 * (8 * j + 2 * t)),
			             "f"(d[4 * j + 2 * h]), "f"(d[4 * j + 2 * h + 1]), "r"(rbar)
			             : "memory");
	}
	if (EPI == EPI_RES) asm volatile("cp.async.wait_all;" ::: "memory");
	__syncthreads(); // this block's own partials, the residual's rows and the norms are in place
	mbar_wait(barR, 0);

	// 5. The owned rows: the S x W partials summed in order (the same sum every run), then the
	// epilogue; q4 consecutive threads share a row.
	for (int e = threadIdx.x; e < own * q4; e += nt) {
		const int rr = e / q4, c = 4 * (e % q4), r = r0 + rr;
		float4 s = make_float4(0.f, 0.f, 0.f, 0.f);
		for (int p = 0; p < NP; p++) {
			const float4 v = *reinterpret_cast<const float4 *>(part(p) + rr * BN + c);
			s.x += v.x, s.y += v.y, s.z += v.z, s.w += v.w;
		}
		float4 xv = make_float4(0.f, 0.f, 0.f, 0.f);
		if (EPI == EPI_RES) xv = reinterpret_cast<const float4 *>(xres)[e];
		float2 nr = make_float2(0.f, 0.f);
		if (EPI == EPI_LN || EPI == EPI_LN_GELU) nr = rowNorm[rr];
		epilogue4<EPI, BN>(s, y, x16, (size_t)r * N + blockIdx.x * BN + c, nr, bv, cv, xv,
		                   stats + (size_t)r * pstride + blockIdx.x, c == 0);
	}
#else
	__trap();
#endif
}

// A kernel takes X as its second parameter: the rows' kernels a pointer, the _box kernels a tensor
// map (only what each reads: a kernel's parameters are loaded at every launch).
#define WG_ARGS                                                                                                 \
	const half *ws, const float *bias, int M, int N, int K, int CN, const float *colc, float2 *stats, int P,    \
	    int pstride, float eps, half *x16, const unsigned char *pf, int pfBytes
#define WG_CALL ws, bias, M, N, K, CN, colc, stats, P, pstride, eps, x16, pf, pfBytes
#define WG_KERNEL(name, EPI, BN, THREADS)                                                                      \
	extern "C" __global__ void __launch_bounds__(THREADS) gemm_wg##name(void *y, const half *x, WG_ARGS) {      \
		wg_gemm<EPI, BN, false>(y, x, nullptr, WG_CALL);                                                       \
	}                                                                                                          \
	extern "C" __global__ void __launch_bounds__(THREADS)                                                      \
	    gemm_wg##name##_box(void *y, const __grid_constant__ CUtensorMap xm, WG_ARGS) {                        \
		wg_gemm<EPI, BN, true>(y, nullptr, &xm, WG_CALL);                                                      \
	}
// The folded step's epilogues (gpu/forward.go viaWG; the plain one is the last layer's MLP) for
// blocks of 64 columns (one warpgroup, K sliced), and the MLP's first GEMM's for blocks of 32
// (two, K whole) (gpu/wg.go planWGLayer).
WG_KERNEL(, EPI_PLAIN, 64, 128)
WG_KERNEL(_ln, EPI_LN, 64, 128)
WG_KERNEL(_ln_gelu, EPI_LN_GELU, 64, 128)
WG_KERNEL(_res, EPI_RES, 64, 128)
WG_KERNEL(32_ln_gelu, EPI_LN_GELU, 32, 256)

// lm_head_argmax: the LM head of a greedy decode step on this path, with its argmax. Row r's logit
// n is rstd_r (x_r . W'_n - mean_r colc_n) + d_n (ln_f folded into W' at Open, gpt2.cu pack_head)
// and is never written: block b writes row r's largest logit over its columns, packed as the samplers'
// (argmax.cuh), to part[r * gridDim.x + b], and argmax_parts_next (sample.cu) takes the largest of
// a row's. W' is in packWG's order with K whole: tile t, columns [64t, 64t + 64), is one slab of
// 64 x K halves. Block b takes the b-th of gridDim.x even runs of tiles and streams them through
// two stages of shared memory, the first copy issued before the PDL wait; each tile's two K
// halves land on mbarriers of their own, one for each warpgroup. A warpgroup multiplies its half
// of K (A in registers, loaded once from X), and the two swap halves of the tile's columns
// through shared memory to sum them. At most 64 rows, K / 2 <= WG_KSMAX and a multiple of 64 (x_lane).
// grid (G), block 256; dynamic shared memory (gpu/head.go headShared): stage 0; stage 1, which
// holds X (as in wg_gemm: xm's boxes, or x's rows K + 8 halves apart, past the stage into the swap
// buffers) while A loads; the swap buffers (2 tiles x 2 warpgroups x
// 64 rows x 32 floats, swizzled); 64 row norms; five mbarriers (the stages' halves, X).
template <int NK, bool BOX>
__device__ __forceinline__ void lm_head(unsigned long long *__restrict__ part, const half *__restrict__ x, const CUtensorMap *xm,
                                        const half *__restrict__ ws, const float *__restrict__ colc,
                                        const float *__restrict__ dv, const float2 *__restrict__ stats, int P, int pstride,
                                        float eps, int M, int K, int V, int tiles) {
#if __CUDA_ARCH__ >= 900
	extern __shared__ __align__(128) unsigned char smem[];
	const int lane = threadIdx.x % 32, warp = threadIdx.x / 32 % 4, wgi = threadIdx.x / 128, g = lane / 4, t = lane % 4;
	const int KW = K / 2, nk = NK ? NK : KW / 16, stage = K * 64 * 2, nbox = (K + X_BOX - 1) / X_BOX, xst = K + 8;
	const int t0 = (int)((long long)blockIdx.x * tiles / gridDim.x);
	const int n = (int)((long long)(blockIdx.x + 1) * tiles / gridDim.x) - t0;
	float *swap = reinterpret_cast<float *>(smem + 2 * stage);
	float2 *rowNorm = reinterpret_cast<float2 *>(swap + 2 * 2 * 64 * 32);
	const uint32_t s0 = (uint32_t)__cvta_generic_to_shared(smem), xs0 = s0 + stage;
	const uint32_t bar0 = (uint32_t)__cvta_generic_to_shared(rowNorm + 64), barX = bar0 + 32; // stage s half h: bar0 + 8(2s + h)
	// load(j, s): thread 0 copies tile t0 + j into stage s, a K half on each of its barriers.
	auto load = [&](int j, int s) {
		const half *src = ws + (size_t)(t0 + j) * K * 64;
		for (int h = 0; h < 2; h++) {
			const uint32_t bar = bar0 + 8 * (2 * s + h);
			expect_tx(bar, KW * 128);
			bulk_stream(s0 + s * stage + h * KW * 128, src + (size_t)h * KW * 64, KW * 128, bar);
		}
	};
	// sw: float c of row r in a swap buffer, the 8-float groups swizzled by the row so that the
	// float2 stores and loads of a half warp (4 rows x 4 columns pairs) hit distinct banks.
	auto sw = [](int r, int c) { return r * 32 + (c ^ (8 * (r % 4))); };

	if (threadIdx.x == 0) {
		for (int i = 0; i < 5; i++) asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(bar0 + 8 * i) : "memory");
		asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
		asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
		if (n > 0) load(0, 0);
		expect_tx(barX, BOX ? nbox * M * X_BOX * 2 : M * K * 2);
		if (BOX) asm volatile("prefetch.tensormap [%0];" ::"l"(xm) : "memory");
	}
	__syncthreads();
	asm volatile("griddepcontrol.wait;" ::: "memory");
	asm volatile("griddepcontrol.launch_dependents;");
	if (BOX && threadIdx.x == 0) x_boxes(xs0, xm, 0, 0, nbox, 1, barX, 0);
	if ((int)threadIdx.x < M) {
		if (!BOX) bulk_copy(xs0 + 2 * threadIdx.x * xst, x + (size_t)threadIdx.x * K, K * 2, barX);
		rowNorm[threadIdx.x] = row_norm(stats + (size_t)threadIdx.x * pstride, P, K, eps);
	}
	mbar_wait(barX, 0);
	uint32_t a[WG_KSMAX / 16][4];
	const auto load_a = [&](auto xa) {
#pragma unroll
		for (int kk = 0; kk < WG_KSMAX / 16; kk++)
			if (kk < nk) ldsm_x4(a[kk], xa(kk));
	};
	const int xr = 16 * warp + lane % 16;
	if (BOX)
		load_a(x_lane(xs0, xr, wgi * KW / 8, lane / 16));
	else
		load_a(x_rows(xs0, xst, xr, wgi * KW, lane / 16));
	__syncthreads(); // every warp's A and the norms are in place: stage 1 is free
	if (threadIdx.x == 0 && n > 1) {
		asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
		load(1, 1);
	}
	// Thread (warp, g, t) of warpgroup wgi holds rows 16 warp + g (+8), columns 8j + 2t (+1); it
	// keeps j in [4 wgi, 4 wgi + 4) and sends the other four to the other warpgroup.
	float2 nr[2];
	unsigned long long best[2] = {0, 0};
#pragma unroll
	for (int h = 0; h < 2; h++) {
		const int row = 16 * warp + g + 8 * h;
		nr[h] = row < M ? rowNorm[row] : make_float2(0.f, 0.f);
	}
	for (int j = 0; j < n; j++) {
		const int s = j & 1, cb = (t0 + j) * 64 + 32 * wgi;
		float2 cc[4], dd[4];
#pragma unroll
		for (int q = 0; q < 4; q++) {
			cc[q] = __ldg(reinterpret_cast<const float2 *>(colc + cb + 8 * q + 2 * t));
			dd[q] = __ldg(reinterpret_cast<const float2 *>(dv + cb + 8 * q + 2 * t));
		}
		float d[32];
#pragma unroll
		for (int i = 0; i < 32; i++) d[i] = 0.f;
		mbar_wait(bar0 + 8 * (2 * s + wgi), (j >> 1) & 1);
		asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
		const uint32_t wa = s0 + s * stage + wgi * KW * 128;
#pragma unroll
		for (int kk = 0; kk < WG_KSMAX / 16; kk++)
			if (kk < nk) wgmma_n64(d, a[kk], wg_desc(wa + kk * 2048));
		asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
		asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");
		float *mine = swap + (2 * s + wgi) * 2048, *theirs = swap + (2 * s + 1 - wgi) * 2048;
#pragma unroll
		for (int h = 0; h < 2; h++) {
			const int row = 16 * warp + g + 8 * h;
#pragma unroll
			for (int q = 0; q < 4; q++) {
				const int lo = 4 * q + 2 * h, hi = lo + 16; // j = q, j = 4 + q: registers picked, not indexed
				*reinterpret_cast<float2 *>(mine + sw(row, 8 * q + 2 * t)) =
				    wgi ? make_float2(d[lo], d[lo + 1]) : make_float2(d[hi], d[hi + 1]);
			}
		}
		asm volatile("bar.sync 1, 256;" ::: "memory"); // both halves of every sum; stage s read by both
		if (threadIdx.x == 0 && j + 2 < n) load(j + 2, s);
#pragma unroll
		for (int h = 0; h < 2; h++) {
			const int row = 16 * warp + g + 8 * h;
#pragma unroll
			for (int q = 0; q < 4; q++) {
				const int lo = 4 * q + 2 * h, hi = lo + 16, c = cb + 8 * q + 2 * t;
				const float2 o = *reinterpret_cast<const float2 *>(theirs + sw(row, 8 * q + 2 * t));
				const float2 k = wgi ? make_float2(d[hi], d[hi + 1]) : make_float2(d[lo], d[lo + 1]);
				const float v0 = nr[h].y * (k.x + o.x - nr[h].x * cc[q].x) + dd[q].x;
				const float v1 = nr[h].y * (k.y + o.y - nr[h].x * cc[q].y) + dd[q].y;
				if (c < V) best[h] = packed_max(best[h], packed(v0, c));
				if (c + 1 < V) best[h] = packed_max(best[h], packed(v1, c + 1));
			}
		}
	}
	// A row's best over the 4 threads that share it, then over the two warpgroups.
#pragma unroll
	for (int h = 0; h < 2; h++)
		for (int o = 1; o < 4; o <<= 1) best[h] = packed_max(best[h], __shfl_xor_sync(0xffffffffu, best[h], o));
	unsigned long long *other = reinterpret_cast<unsigned long long *>(swap);
	__syncthreads(); // every swap buffer read
	if (wgi == 1 && t == 0)
		for (int h = 0; h < 2; h++) other[16 * warp + g + 8 * h] = best[h];
	__syncthreads();
	if (wgi == 0 && t == 0) {
		for (int h = 0; h < 2; h++) {
			const int row = 16 * warp + g + 8 * h;
			if (row < M) part[(size_t)row * gridDim.x + blockIdx.x] = packed_max(best[h], other[row]);
		}
	}
#else
	__trap();
#endif
}

// X as in wg_gemm: lm_head_argmax takes a pointer, lm_head_argmax_box a tensor map.
#define LM_HEAD_ARGS                                                                                          \
	const half *ws, const float *colc, const float *dv, const float2 *stats, int P, int pstride, float eps,  \
	    int M, int K, int V, int tiles
#define LM_HEAD_SWITCH(BOX, x, xm)                                                                            \
	switch (K / 32) { /* the K halves of GPT-2 (384) and GPT-2 medium's width at 512 (256) compiled in */ \
	case 24: lm_head<24, BOX>(part, x, xm, ws, colc, dv, stats, P, pstride, eps, M, K, V, tiles); break;   \
	case 16: lm_head<16, BOX>(part, x, xm, ws, colc, dv, stats, P, pstride, eps, M, K, V, tiles); break;   \
	default: lm_head<0, BOX>(part, x, xm, ws, colc, dv, stats, P, pstride, eps, M, K, V, tiles);           \
	}
extern "C" __global__ void __launch_bounds__(256, 1) lm_head_argmax(unsigned long long *part, const half *x, LM_HEAD_ARGS) {
	LM_HEAD_SWITCH(false, x, nullptr)
}
extern "C" __global__ void __launch_bounds__(256, 1)
    lm_head_argmax_box(unsigned long long *part, const __grid_constant__ CUtensorMap xm, LM_HEAD_ARGS) {
	LM_HEAD_SWITCH(true, nullptr, &xm)
}
