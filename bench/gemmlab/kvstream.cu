// kvstream: how fast a batch-64 decode step's keys and values stream from DRAM when a block takes
// one head of 8 sequences (96 blocks, one an SM: the shape an attention kernel needs if each
// cluster of its blocks is to hold every head of its sequences, e.g. to fuse the output
// projection), against a block a (sequence, head) as the engine's attention kernel has (768
// blocks of 128 threads). Each layer's cache is its own (12 x 25 MB: past the L2); a position's
// head is 128 bytes of a 1,536-byte row (GPT-2 124M), sequences' positions contiguous. Every
// variant sums what it reads (the sums are compared), so no load is dropped.
// - rows: 16-byte loads, a sequence's all in flight, blocks of 128 or 256 a (sequence, head) (768
//   blocks), of 512 a head of 4 sequences (192) or of 1024 a head of 8 (96); also over the cache
//   head-major within blocks of 16 positions (a head's positions one 2 KB run);
// - tma: 96 blocks; one thread issues 2D bulk tensor copies of 16 positions x 64 dims (2 KB)
//   into a ring of S stages on mbarriers; the other warps sum each stage as it lands;
// - fused: rows' blocks of a head of SEQ sequences in clusters of the 12 heads (every head of the
//   cluster's sequences), then the cross-head reduction a fused attention + output projection
//   needs: each block's (SEQ, C) fp32 partial summed over the cluster through distributed shared
//   memory, block h taking columns [64h, 64h + 64); and the same clusters without the sum.
// Build and run on the GPU machine: bench/gemmlab/run.sh kvstream.
#include "../../gpu/kernels/gemm_sm90a.cu"
#include "lab.cuh"
#include <cooperative_groups.h>
#include <vector>

constexpr int C = 768, NH = 12, HD = 64, SEQS = 64, CTX = 129, SLOTS = 256, LAYERS = 12, GROUP = 8;
constexpr size_t CACHE = (size_t)SEQS * SLOTS * C; // halves a layer's K (and V)

// sum8 adds the 8 halves of v to s.
__device__ __forceinline__ float sum8(uint4 v) {
	const half2 *h = reinterpret_cast<const half2 *>(&v);
	float s = 0.f;
#pragma unroll
	for (int i = 0; i < 4; i++) s += __low2float(h[i]) + __high2float(h[i]);
	return s;
}

// block_add adds every thread's s to *out with one atomic a block (a 1024-thread block at most).
__device__ __forceinline__ void block_add(float *out, float s) {
	__shared__ float part[32];
	for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
	if (threadIdx.x % 32 == 0) part[threadIdx.x / 32] = s;
	__syncthreads();
	if (threadIdx.x == 0) {
		float t = 0.f;
		for (int w = 0; w < (int)blockDim.x / 32; w++) t += part[w];
		atomicAdd(out, t);
	}
}

// slot_off: the offset (halves) of sequence q's position p, head h, in a layer's cache: row-major
// (a position's 768 channels together, the engine's layout) or head-major within each block of
// 16 positions (a head's 16 positions one 2 KB run).
__device__ __forceinline__ size_t slot_off(int q, int p, int h, bool headMajor) {
	if (!headMajor) return ((size_t)q * SLOTS + p) * C + h * HD;
	return (((size_t)q * SLOTS / 16 + p / 16) * NH + h) * 16 * HD + (p % 16) * HD;
}

// rows: block (head h, sequences [SEQ g, + SEQ)); lane group t / 8 of a block of T threads takes
// positions t / 8, t / 8 + T / 8, ..., each of its 8 lanes a 16-byte unit of K and of V; every
// load of a sequence is issued before any is summed (bounds known at compile time).
template <bool HM, int SEQ, int T>
__global__ void __launch_bounds__(T) rows(const half *__restrict__ k, const half *__restrict__ v, float *__restrict__ out) {
	constexpr int PP = T / 8, PASSES = (CTX + PP - 1) / PP;
	const int h = blockIdx.x % NH, q0 = blockIdx.x / NH * SEQ, c = threadIdx.x % 8, pt = threadIdx.x / 8;
	float s = 0.f;
#pragma unroll
	for (int qq = 0; qq < SEQ; qq++) {
		uint4 r[PASSES][2];
#pragma unroll
		for (int i = 0; i < PASSES; i++) {
			const int p = pt + i * PP;
			const size_t o = slot_off(q0 + qq, min(p, CTX - 1), h, HM) + 8 * c;
			r[i][0] = p < CTX ? __ldcs(reinterpret_cast<const uint4 *>(k + o)) : make_uint4(0, 0, 0, 0);
			r[i][1] = p < CTX ? __ldcs(reinterpret_cast<const uint4 *>(v + o)) : make_uint4(0, 0, 0, 0);
		}
#pragma unroll
		for (int i = 0; i < PASSES; i++) s += sum8(r[i][0]) + sum8(r[i][1]);
	}
	block_add(out, s);
}

// tma: block (h, sequences [8g, 8g + 8)); thread 0 copies boxes of 16 positions x 64 dims of K
// and V (a sequence's 129 positions: 9 boxes, the last past CTX read but not summed) into a ring
// of S stages; warps 1.. sum a stage once it lands, then free it (an mbarrier of their own).
template <int S>
__global__ void __launch_bounds__(256) tma(const __grid_constant__ CUtensorMap km, const __grid_constant__ CUtensorMap vm,
                                           float *__restrict__ out) {
#if __CUDA_ARCH__ >= 900
	constexpr int BOX = 16 * HD * 2, NB = (CTX + 15) / 16, JOBS = GROUP * NB * 2;
	extern __shared__ __align__(128) unsigned char ring[]; // S stages of BOX bytes
	__shared__ __align__(8) uint64_t full[S], empty[S];
	const int h = blockIdx.x % NH, g = blockIdx.x / NH, warp = threadIdx.x / 32, lane = threadIdx.x % 32;
	const int consumers = blockDim.x / 32 - 1;
	const uint32_t r0 = (uint32_t)__cvta_generic_to_shared(ring), f0 = (uint32_t)__cvta_generic_to_shared(full),
	               e0 = (uint32_t)__cvta_generic_to_shared(empty);
	if (threadIdx.x == 0) {
		for (int i = 0; i < S; i++) {
			asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(f0 + 8 * i) : "memory");
			asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(e0 + 8 * i), "r"(consumers) : "memory");
		}
		asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
	}
	__syncthreads();
	float s = 0.f;
	if (warp == 0) {
		if (lane == 0)
			for (int j = 0; j < JOBS; j++) {
				const int st = j % S, kv = j % 2, b = j / 2 % NB, q = g * GROUP + j / (2 * NB);
				if (j >= S) mbar_wait(e0 + 8 * st, (j / S - 1) & 1);
				expect_tx(f0 + 8 * st, BOX);
				const int x = h * HD, y = q * SLOTS + 16 * b;
				asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];" ::"r"(
				                 r0 + st * BOX),
				             "l"(kv ? &vm : &km), "r"(x), "r"(y), "r"(f0 + 8 * st)
				             : "memory");
			}
	} else {
		for (int j = 0; j < JOBS; j++) {
			const int st = j % S, b = j / 2 % NB, valid = min(16, CTX - 16 * b);
			mbar_wait(f0 + 8 * st, (j / S) & 1);
			// 16 positions x 8 units: the consumer warps take the valid ones
			for (int u = (warp - 1) * 32 + lane; u < valid * 8; u += consumers * 32)
				s += sum8(reinterpret_cast<const uint4 *>(ring + st * BOX)[u]);
			__syncwarp();
			if (lane == 0) asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(e0 + 8 * st) : "memory");
		}
	}
	block_add(out, s);
#else
	__trap();
#endif
}

// fused: block (head h = its rank in a cluster of NH, sequences [SEQ g, + SEQ)) streams as rows
// does, keeping a sum a sequence; its partial (SEQ, C), each sequence's sum in every column (the
// shape of an output projection's partial), goes to shared memory; then block h sums columns
// [64h, 64h + 64) of the cluster's NH partials (distributed shared memory, ranks in order) into
// out (SEQS, C). Every column of a row is the sequence's sum over all heads. Without RED, block h
// writes its own partial's columns [64h, 64h + 64) instead: the clusters' cost without the sum.
template <int SEQ, int T, bool RED = true>
__global__ void __launch_bounds__(T) fused(const half *__restrict__ k, const half *__restrict__ v, float *__restrict__ out) {
	namespace cg = cooperative_groups;
	constexpr int PP = T / 8, PASSES = (CTX + PP - 1) / PP, W = T / 32;
	__shared__ __align__(16) float part[SEQ][C];
	__shared__ float red[SEQ][W];
	cg::cluster_group cl = cg::this_cluster();
	const int h = (int)cl.block_rank(), q0 = blockIdx.x / NH * SEQ, c = threadIdx.x % 8, pt = threadIdx.x / 8;
	float s[SEQ];
#pragma unroll
	for (int qq = 0; qq < SEQ; qq++) {
		uint4 r[PASSES][2];
#pragma unroll
		for (int i = 0; i < PASSES; i++) {
			const int p = pt + i * PP;
			const size_t o = slot_off(q0 + qq, min(p, CTX - 1), h, false) + 8 * c;
			r[i][0] = p < CTX ? __ldcs(reinterpret_cast<const uint4 *>(k + o)) : make_uint4(0, 0, 0, 0);
			r[i][1] = p < CTX ? __ldcs(reinterpret_cast<const uint4 *>(v + o)) : make_uint4(0, 0, 0, 0);
		}
		s[qq] = 0.f;
#pragma unroll
		for (int i = 0; i < PASSES; i++) s[qq] += sum8(r[i][0]) + sum8(r[i][1]);
	}
#pragma unroll
	for (int qq = 0; qq < SEQ; qq++) {
		for (int o = 16; o > 0; o >>= 1) s[qq] += __shfl_xor_sync(0xffffffffu, s[qq], o);
		if (threadIdx.x % 32 == 0) red[qq][threadIdx.x / 32] = s[qq];
	}
	__syncthreads();
	for (int i = threadIdx.x; i < SEQ * C; i += T) {
		float t = 0.f;
		for (int w = 0; w < W; w++) t += red[i / C][w];
		part[i / C][i % C] = t;
	}
	if (RED) cl.sync(); // every block's partial written
	else __syncthreads();
	for (int i = threadIdx.x; i < SEQ * 64; i += T) {
		const int qq = i / 64, col = 64 * h + i % 64;
		float t = 0.f;
		if (RED)
			for (int r = 0; r < NH; r++) t += cl.map_shared_rank(&part[0][0], r)[qq * C + col];
		else
			t = part[qq][col];
		out[(size_t)(q0 + qq) * C + col] = t;
	}
	if (RED) cl.sync(); // no block leaves while a peer reads its partial
}

int main(int argc, char **argv) {
	cudaStream_t st;
	lab_start(argc, argv, "kvstream", &st); // ROWS is not used: the step is batch 64
	printf("keys and values of %d sequences x %d positions, %d layers of %.1f MB\n", SEQS, CTX, LAYERS,
	       2.0 * SEQS * CTX * C * 2 / 1e6);
	Rand frand;
	std::vector<uint16_t> host(CACHE);
	std::vector<half *> k(LAYERS), v(LAYERS);
	double want[2] = {0, 0}; // the sums of every (sequence, head, position < CTX) value of layer 0, both layouts
	for (int l = 0; l < LAYERS; l++)
		for (int m = 0; m < 2; m++) {
			for (auto &x : host) x = h16(frand() + 0.5f); // positive: the sums compare
			if (l == 0)
				for (int q = 0; q < SEQS; q++)
					for (int p = 0; p < CTX; p++)
						for (int h = 0; h < NH; h++)
							for (int d = 0; d < HD; d++) {
								want[0] += f16(host[((size_t)q * SLOTS + p) * C + h * HD + d]);
								want[1] += f16(host[(((size_t)q * SLOTS / 16 + p / 16) * NH + h) * 16 * HD + (p % 16) * HD + d]);
							}
			half *d;
			CK(cudaMalloc(&d, CACHE * 2));
			CK(cudaMemcpy(d, host.data(), CACHE * 2, cudaMemcpyHostToDevice));
			(m ? v : k)[l] = d;
		}
	float *out, *vec;
	CK(cudaMalloc(&out, 4));
	CK(cudaMalloc(&vec, (size_t)SEQS * C * 4));
	// launch_fused: fused<SEQ, T> over clusters of the NH heads (a non-portable size).
	auto launch_fused = [&](auto kern, int seq, int threads, int l) {
		cudaLaunchConfig_t cfg = {};
		cfg.gridDim = dim3(SEQS / seq * NH);
		cfg.blockDim = dim3(threads);
		cfg.stream = st;
		cudaLaunchAttribute at[1];
		at[0].id = cudaLaunchAttributeClusterDimension;
		at[0].val.clusterDim.x = NH;
		at[0].val.clusterDim.y = at[0].val.clusterDim.z = 1;
		cfg.attrs = at;
		cfg.numAttrs = 1;
		CK(cudaLaunchKernelEx(&cfg, kern, (const half *)k[l], (const half *)v[l], vec));
	};
	CK(cudaFuncSetAttribute(fused<2, 256>, cudaFuncAttributeNonPortableClusterSizeAllowed, 1));
	CK(cudaFuncSetAttribute(fused<4, 512>, cudaFuncAttributeNonPortableClusterSizeAllowed, 1));
	CK(cudaFuncSetAttribute(fused<8, 1024>, cudaFuncAttributeNonPortableClusterSizeAllowed, 1));
	CK(cudaFuncSetAttribute(fused<2, 256, false>, cudaFuncAttributeNonPortableClusterSizeAllowed, 1));
	CK(cudaFuncSetAttribute(fused<4, 512, false>, cudaFuncAttributeNonPortableClusterSizeAllowed, 1));

	std::vector<CUtensorMap> km(LAYERS), vm(LAYERS);
	for (int l = 0; l < LAYERS; l++)
		for (int m = 0; m < 2; m++)
			(m ? vm : km)[l] = tensor_map_2d(m ? v[l] : k[l], C, SEQS * SLOTS, C * 2, HD, 16, CU_TENSOR_MAP_SWIZZLE_NONE,
			                                 CU_TENSOR_MAP_L2_PROMOTION_L2_256B);

	struct Variant {
		const char *name;
		std::function<void(int)> launch; // layer l's cache
		// 0: writes out; 1: vec, every column of a row the sequence's sum (fused); 2: vec, a head's
		// sum in each of its 64 columns (fused without the sum)
		int vec = 0;
	};
	std::vector<Variant> vs = {
	    {"rows: 768 blocks of 128 (a sequence's head)", [&](int l) { rows<false, 1, 128><<<SEQS * NH, 128, 0, st>>>(k[l], v[l], out); }},
	    {"rows: 768 blocks of 256", [&](int l) { rows<false, 1, 256><<<SEQS * NH, 256, 0, st>>>(k[l], v[l], out); }},
	    {"rows, head-major: 768 blocks of 128", [&](int l) { rows<true, 1, 128><<<SEQS * NH, 128, 0, st>>>(k[l], v[l], out); }},
	    {"rows: 96 blocks of 1024 (8 sequences' head)", [&](int l) { rows<false, GROUP, 1024><<<SEQS / GROUP * NH, 1024, 0, st>>>(k[l], v[l], out); }},
	    {"rows, head-major: 96 blocks of 1024", [&](int l) { rows<true, GROUP, 1024><<<SEQS / GROUP * NH, 1024, 0, st>>>(k[l], v[l], out); }},
	    {"rows: 192 blocks of 512 (4 sequences' head)", [&](int l) { rows<false, 4, 512><<<SEQS / 4 * NH, 512, 0, st>>>(k[l], v[l], out); }},
	    {"tma: 96 blocks, 8 stages of 2 KB", [&](int l) { tma<8><<<SEQS / GROUP * NH, 256, 8 * 2048, st>>>(km[l], vm[l], out); }},
	    {"tma: 96 blocks, 32 stages", [&](int l) { tma<32><<<SEQS / GROUP * NH, 256, 32 * 2048, st>>>(km[l], vm[l], out); }},
	    {"tma: 96 blocks, 64 stages", [&](int l) { tma<64><<<SEQS / GROUP * NH, 256, 64 * 2048, st>>>(km[l], vm[l], out); }},
	    {"fused: 384 blocks of 256, clusters of 12 heads", [&](int l) { launch_fused(fused<2, 256>, 2, 256, l); }, 1},
	    {"fused: 192 blocks of 512, clusters of 12 heads", [&](int l) { launch_fused(fused<4, 512>, 4, 512, l); }, 1},
	    {"fused: 96 blocks of 1024, clusters of 12 heads", [&](int l) { launch_fused(fused<8, 1024>, 8, 1024, l); }, 1},
	    {"clusters of 12 heads, no sum: 384 blocks of 256", [&](int l) { launch_fused(fused<2, 256, false>, 2, 256, l); }, 2},
	    {"clusters of 12 heads, no sum: 192 blocks of 512", [&](int l) { launch_fused(fused<4, 512, false>, 4, 512, l); }, 2},
	};
	CK(cudaFuncSetAttribute(tma<32>, cudaFuncAttributeMaxDynamicSharedMemorySize, 32 * 2048));
	CK(cudaFuncSetAttribute(tma<64>, cudaFuncAttributeMaxDynamicSharedMemorySize, 64 * 2048));
	const double bytes = 2.0 * SEQS * CTX * C * 2;
	printf("%-46s %10s %10s %12s\n", "", "us/layer", "TB/s", "sum error");
	for (int round = 0; round < 2; round++)
		for (auto &x : vs) {
			CK(cudaMemsetAsync(out, 0, 4, st));
			CK(cudaMemsetAsync(vec, 0, (size_t)SEQS * C * 4, st)); // a variant that writes nothing fails its check
			x.launch(0);
			float got;
			CK(cudaMemcpyAsync(&got, out, 4, cudaMemcpyDeviceToHost, st));
			CK(cudaStreamSynchronize(st));
			CK(cudaGetLastError());
			if (x.vec) { // the rows add up to the total (column 0, or every column / 64)
				std::vector<float> hv((size_t)SEQS * C);
				CK(cudaMemcpy(hv.data(), vec, hv.size() * 4, cudaMemcpyDeviceToHost));
				double t = 0;
				for (int q = 0; q < SEQS; q++) {
					for (int col = 0; col < C; col++) {
						const float y = hv[(size_t)q * C + col];
						if (x.vec == 2) t += y / 64;
						else if (col == 0) t += y;
						else if (y != hv[(size_t)q * C]) {
							fprintf(stderr, "kvstream: %s: row %d column %d is %g, column 0 %g\n", x.name, q, col, y, hv[(size_t)q * C]);
							return 1;
						}
					}
				}
				got = (float)t;
			}
			const float us = time_graph(st, 50, [&] {
				for (int l = 0; l < LAYERS; l++) x.launch(l);
			}) / LAYERS;
			const double w = want[strstr(x.name, "head-major") != nullptr];
			printf("%-46s %10.2f %10.2f %12.2e\n", x.name, us, bytes / us / 1e6, fabs(got - w) / w);
		}
	return 0;
}
