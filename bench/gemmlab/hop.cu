// hop: what one link of the step's kernel chain costs before any product: 48 kernels of 96 blocks
// (110 KB of shared memory each, as wg_gemm's), chained with PDL in a graph, each block loading a
// K slice of X (64 rows x 384, 48 KB) that the kernel before it wrote, then writing its share of
// the next X from it. Varied: clusters of 1 (no cluster launch), 2, 4 or 8 blocks (each block
// passing a cluster barrier before the PDL wait, as wg_gemm's do); with and without a 48 KB weight
// slab copied before the PDL wait (distinct for every block of every kernel: from DRAM); and how X
// lands (XM):
//   0 not staged: each thread reads its elements from global memory;
//   1 a bulk copy a row (64 of 768 bytes, wg_gemm's way), each block alone;
//   2 the same rows multicast over the cluster, a block copying 64 / CN of them;
//   3 X stored slice-major with its rows padded as shared memory holds them ([K / 384][64][392]):
//     one bulk copy of the block's slice (50 KB);
//   4 that layout, multicast: a block copying 64 / CN rows' contiguous run to the cluster;
//   5 X row-major, six 2D tensor copies (64 rows x 64 columns, 128-byte swizzle) a block.
// Each link writes X'(r, c) = X(r, 384 split(b) + c mod 384) for the 512 elements (r, c) of block
// b, so every mode computes the same chain; the host checks it.
// Build and run on the GPU machine: bench/gemmlab/run.sh hop.
#include "../../gpu/kernels/gemm_sm90a.cu"
#include "lab.cuh"
#include <vector>

constexpr int HM = 64, HC = 768, HKS = 384, HB = 96, HT = 128, LINKS = 48;
constexpr int XST = HKS + 8;               // X's rows in shared memory, halves apart
constexpr int WBYTES = HKS * 64 * 2;       // a block's weight slab
constexpr int SMEM = 110 * 1024;           // wg_gemm's order of size: two blocks an SM at most
constexpr size_t WALL = (size_t)LINKS * HB * WBYTES / 2; // halves of every link's slabs
constexpr int XPAD = HC / HKS * HM * XST;  // halves of X slice-major with padded rows (XM 3, 4)

// xoff: the offset (halves) of X(r, c) in the layout mode xm reads.
__host__ __device__ inline int xoff(int xm, int r, int c) {
	return xm == 3 || xm == 4 ? ((c / HKS) * HM + r) * XST + c % HKS : r * HC + c;
}

// hop<CN, XM, WT>: one link (XM: the header). WT: the block's weight slab copied before the wait.
// tm: X as a tensor map (XM 5).
template <int CN, int XM, bool WT>
__global__ void __launch_bounds__(HT) hop(half *__restrict__ xn, const half *__restrict__ x, const half *__restrict__ w,
                                          const __grid_constant__ CUtensorMap tm) {
#if __CUDA_ARCH__ >= 900
	extern __shared__ __align__(128) unsigned char smem[];
	const int b = blockIdx.x, split = (b / CN) % 2, cx = b % CN;
	const uint32_t ws0 = (uint32_t)__cvta_generic_to_shared(smem), xs0 = ws0 + WBYTES;
	const uint32_t barW = xs0 + HM * XST * 2, barX = barW + 8;
	if (threadIdx.x == 0) {
		asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(barW) : "memory");
		asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(barX) : "memory");
		asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
		asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
		if (WT) {
			expect_tx(barW, WBYTES);
			bulk_stream(ws0, w + (size_t)b * WBYTES / 2, WBYTES, barW);
		}
		if (XM) expect_tx(barX, XM == 3 || XM == 4 ? HM * XST * 2 : HM * HKS * 2);
	}
	if (CN > 1)
		asm volatile("barrier.cluster.arrive.relaxed.aligned;\n\tbarrier.cluster.wait.aligned;" ::: "memory");
	else
		__syncthreads();
	asm volatile("griddepcontrol.wait;" ::: "memory");
	asm volatile("griddepcontrol.launch_dependents;");
	if (XM == 1 && threadIdx.x < HM)
		bulk_copy(xs0 + 2 * threadIdx.x * XST, x + (size_t)threadIdx.x * HC + split * HKS, HKS * 2, barX);
	if (XM == 2 && (int)threadIdx.x < HM / CN) {
		const int r = cx * (HM / CN) + threadIdx.x;
		asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster [%0], "
		             "[%1], %2, [%3], %4;" ::"r"(xs0 + 2 * r * XST),
		             "l"(x + (size_t)r * HC + split * HKS), "r"(HKS * 2), "r"(barX), "h"((uint16_t)((1u << CN) - 1))
		             : "memory");
	}
	const half *src = x + split * HM * XST;
	if (XM == 3 && threadIdx.x == 0) bulk_copy(xs0, src, HM * XST * 2, barX);
	if (XM == 4 && threadIdx.x == 0) {
		const int per = HM / CN * XST;
		asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster [%0], "
		             "[%1], %2, [%3], %4;" ::"r"(xs0 + 2 * cx * per),
		             "l"(src + cx * per), "r"(per * 2), "r"(barX), "h"((uint16_t)((1u << CN) - 1))
		             : "memory");
	}
	if (XM == 5 && threadIdx.x < HKS / 64)
		asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];" ::"r"(
		                 xs0 + threadIdx.x * HM * 128),
		             "l"(&tm), "r"(split * HKS + 64 * (int)threadIdx.x), "r"(0), "r"(barX)
		             : "memory");
	if (XM) mbar_wait(barX, 0);
	const half *xsm = reinterpret_cast<const half *>(smem + WBYTES);
	for (int e = 0; e < 4; e++) {
		const int p = b * 512 + 4 * threadIdx.x + e, row = p / HC, col = p % HC % HKS;
		half v;
		if (XM == 0)
			v = x[xoff(XM, row, split * HKS + col)];
		else if (XM == 5) // box col / 64: row r's 16-byte chunk j at chunk j ^ (r % 8) of its 128 bytes
			v = xsm[(col / 64) * HM * 64 + row * 64 + ((col % 64 / 8) ^ (row % 8)) * 8 + col % 8];
		else
			v = xsm[row * XST + col];
		xn[xoff(XM, row, p % HC)] = v;
	}
	if (WT) mbar_wait(barW, 0);
#else
	__trap();
#endif
}

int main(int argc, char **argv) {
	cudaStream_t st;
	lab_start(argc, argv, "hop", &st); // ROWS is not used: X is 64 rows
	printf("%d links of %d blocks, %d KB of shared memory a block\n", LINKS, HB, SMEM / 1024);
	Rand frand;
	std::vector<uint16_t> x0(HM * HC), wh(WALL);
	for (auto &v : x0) v = h16(frand());
	for (auto &v : wh) v = h16(frand());
	half *xb[2], *w;
	for (auto &p : xb) CK(cudaMalloc(&p, XPAD * 2));
	CK(cudaMalloc(&w, WALL * 2));
	CK(cudaMemcpy(w, wh.data(), WALL * 2, cudaMemcpyHostToDevice));
	const CUtensorMap tm[2] = {x_map(xb[0], HC, HM), x_map(xb[1], HC, HM)}; // XM 5
	// The chain's result on the host: LINKS gathers of x0.
	std::vector<uint16_t> want = x0, next(HM * HC);
	auto gather = [&](int cn) {
		want = x0;
		for (int l = 0; l < LINKS; l++) {
			for (int p = 0; p < HM * HC; p++) {
				const int b = p / 512, split = (b / cn) % 2;
				next[p] = want[(p / HC) * HC + split * HKS + p % HC % HKS];
			}
			want.swap(next);
		}
	};

	struct Variant {
		const char *name;
		void (*kern)(half *, const half *, const half *, const CUtensorMap);
		int cn, xm;
	};
#define V(CN, XM, WT) {#CN " " #XM " " #WT, hop<CN, XM, WT>, CN, XM}
	const Variant vs[] = {V(1, 0, false), V(1, 1, false), V(1, 3, false), V(1, 5, false), V(2, 0, false), V(2, 1, false),
	                      V(2, 2, false), V(4, 0, false), V(4, 1, false), V(4, 2, false), V(4, 3, false), V(4, 4, false),
	                      V(4, 5, false), V(8, 0, false), V(8, 1, false), V(8, 2, false), V(8, 4, false), V(1, 0, true),
	                      V(1, 1, true),  V(1, 3, true),  V(1, 5, true),  V(4, 0, true),  V(4, 1, true),  V(4, 2, true),
	                      V(4, 4, true),  V(8, 1, true),  V(8, 2, true),  V(8, 4, true)};
#undef V
	printf("cluster, X (XM: the header), weights: us a link (two rounds)\n");
	for (int round = 0; round < 2; round++)
		for (const auto &v : vs) {
			CK(cudaFuncSetAttribute(v.kern, cudaFuncAttributeMaxDynamicSharedMemorySize, SMEM));
			auto chain = [&] {
				for (int l = 0; l < LINKS; l++) {
					cudaLaunchConfig_t cfg;
					cudaLaunchAttribute at[2];
					launch_config(cfg, at, st, dim3(HB), v.cn, 1, SMEM, true);
					if (v.cn == 1) { // no cluster launch at all: PDL only
						cfg.attrs = at + 1;
						cfg.numAttrs = 1;
					}
					CK(cudaLaunchKernelEx(&cfg, v.kern, xb[(l + 1) % 2], (const half *)xb[l % 2],
					                      (const half *)(w + (size_t)l * HB * WBYTES / 2), tm[l % 2]));
				}
			};
			std::vector<uint16_t> img(XPAD), got(HM * HC);
			for (int r = 0; r < HM; r++)
				for (int c = 0; c < HC; c++) img[xoff(v.xm, r, c)] = x0[r * HC + c];
			CK(cudaMemcpy(xb[0], img.data(), XPAD * 2, cudaMemcpyHostToDevice));
			chain();
			CK(cudaStreamSynchronize(st));
			CK(cudaMemcpy(img.data(), xb[LINKS % 2], XPAD * 2, cudaMemcpyDeviceToHost));
			for (int r = 0; r < HM; r++)
				for (int c = 0; c < HC; c++) got[r * HC + c] = img[xoff(v.xm, r, c)];
			gather(v.cn);
			if (got != want) {
				fprintf(stderr, "hop %s: the chain's X differs from the host's\n", v.name);
				return 1;
			}
			printf("  %-8s %7.3f\n", v.name, time_graph(st, 200, chain) / LINKS);
		}
	return 0;
}
