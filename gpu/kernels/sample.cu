// Token sampling on the GPU with exactly the rules of engine/sample.go, so that only token ids
// travel back to the host:
//   1. greedy (temperature <= 0 or top-k == 1): argmax, lowest id on ties (argmax_part + sample,
//      or argmax_next alone when every row of the step is greedy);
//   2. w_i = exp(z_i - max z), z_i = logit_i / T, in double;
//   3. top-k: the K best by (logit desc, id asc), exactly K tokens;
//   4. top-p: the shortest prefix of the kept tokens in that order reaching P * kept weight;
//   5. u = Uniform(seed, pos) (splitmix64, bit for bit), walk kept tokens in ascending id order
//      and return the first whose running weight exceeds u * kept weight.
// Cut-offs are found by bisection on the logits' order-preserving integer keys (no sort): each
// probe is one pass over the vocabulary. Ties at a cut-off are resolved by id rank within the tie.
#include <stdint.h>

#include "argmax.cuh"
#include "rows.cuh"

#define SAMPLE_THREADS 1024
#define WARP 32

template <typename T> __device__ __forceinline__ T warp_sum_t(T v) {
	for (int o = WARP / 2; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
	return v;
}

// bsum returns the block-wide sum to every thread; red holds 32 values of T.
template <typename T> __device__ T bsum(T v, T *red) {
	int lane = threadIdx.x % WARP, w = threadIdx.x / WARP;
	v = warp_sum_t(v);
	if (lane == 0) red[w] = v;
	__syncthreads();
	T r = lane < (int)(blockDim.x / WARP) ? red[lane] : (T)0;
	r = warp_sum_t(r);
	__syncthreads();
	return r;
}

__device__ __forceinline__ double uniform(unsigned long long seed, long long pos) {
	unsigned long long z = seed ^ ((unsigned long long)pos * 0x9E3779B97F4A7C15ull);
	z += 0x9E3779B97F4A7C15ull;
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
	z ^= z >> 31;
	return (double)(z >> 11) * (1.0 / 9007199254740992.0);
}

struct Ctx {
	const float *l;
	int V;
	double invT, zmax;
	// top-k: kept when key > kk, or key == kk and tie rank < mk
	unsigned kk;
	int mk;
	// top-p: kept when key > pk, or key == pk and tie rank < mp (applied after top-k)
	unsigned pk;
	int mp;
};

// tie_rank returns, for every id of this thread's chunk in turn, how many ids below it share key
// k. Threads own contiguous chunks; the exclusive scan of per-chunk counts goes through cnt.
__device__ int chunk_tie_base(const Ctx &c, unsigned k, int lo, int hi, int *cnt) {
	int n = 0;
	for (int i = lo; i < hi; i++) n += key_of(c.l[i]) == k;
	cnt[threadIdx.x] = n;
	__syncthreads();
	// Hillis-Steele inclusive scan over the block.
	for (int o = 1; o < (int)blockDim.x; o <<= 1) {
		int v = threadIdx.x >= (unsigned)o ? cnt[threadIdx.x - o] : 0;
		__syncthreads();
		cnt[threadIdx.x] += v;
		__syncthreads();
	}
	int base = cnt[threadIdx.x] - n;
	__syncthreads();
	return base;
}

__device__ __forceinline__ double weight(const Ctx &c, int i) {
	return exp((double)c.l[i] * c.invT - c.zmax);
}

// largest_key returns the largest key t in [lo, hi] with pred(t) true (pred(lo) must hold and
// pred must be monotone: true below some key, false above).
template <typename P> __device__ unsigned largest_key(unsigned lo, unsigned hi, P pred) {
	while (lo < hi) {
		unsigned mid = lo + (unsigned)(((unsigned long long)hi - lo + 1) / 2);
		if (pred(mid)) lo = mid;
		else hi = mid - 1;
	}
	return lo;
}

// chunk_max returns to thread 0 the largest logit of chunk c of row b of logits (chunks of them
// a row, lowest id on ties) packed as key << 32 | ~id, 0 for an empty chunk: the largest packed
// value of a row is its argmax. best holds a value per warp.
__device__ __forceinline__ unsigned long long chunk_max(const float *__restrict__ logits, int V, int ld, int b, int c,
                                                        int chunks, unsigned long long *best) {
	const float *row = logits + (size_t)b * ld;
	unsigned long long m = 0;
	// Chunks of a multiple of 4 logits, read as float4 (ld is a multiple of 8: every chunk starts
	// 16-byte aligned), the row's last few past a multiple of 4 one by one.
	int per = ((V + chunks - 1) / chunks + 3) & ~3, lo = min(V, c * per), hi = min(V, lo + per);
	int hi4 = lo + ((hi - lo) & ~3);
#pragma unroll 4
	for (int i = lo + 4 * threadIdx.x; i < hi4; i += 4 * blockDim.x) {
		float4 v = *reinterpret_cast<const float4 *>(row + i);
		unsigned long long p = max(max(packed(v.x, i), packed(v.y, i + 1)), max(packed(v.z, i + 2), packed(v.w, i + 3)));
		m = p > m ? p : m;
	}
	if (hi4 + (int)threadIdx.x < hi) {
		unsigned long long p = packed(row[hi4 + threadIdx.x], hi4 + threadIdx.x);
		m = p > m ? p : m;
	}
	for (int o = WARP / 2; o > 0; o >>= 1) {
		unsigned long long q = __shfl_xor_sync(0xffffffffu, m, o);
		m = q > m ? q : m;
	}
	if (threadIdx.x % WARP == 0) best[threadIdx.x / WARP] = m;
	__syncthreads();
	if (threadIdx.x == 0)
		for (int w = 1; w < (int)(blockDim.x / WARP); w++) m = best[w] > m ? best[w] : m;
	return m;
}

// Meta is the device metadata of a decode step (gpu/meta.go), which the sampler moves on to
// that of the step after it once row b's token tok is known, for a predicted step that may follow
// (gpu/ahead.go): the sequence's next token, one position on, and that position's slot. Paged
// (tables not null: rows of width entries, blocks of 1 << sh positions) the slot comes from the
// block table; where the position's block is not in the device's tables yet, the runner's
// tables_refresh (gpt2.cu) sets it again before the step runs. Contiguous, it is the next slot.
// Scratch rows (slot scratchSlot) stay. A step that runs as planned by the host starts with
// meta_copy, which overwrites all of it. Null ids: the step is not a decode graph, nothing moves.
// The kernels take its fields as parameters (META_PARAMS), one 8-byte slot each (gpu/cu
// launch.go Arg).
struct Meta {
	int *ids, *pos, *slot, *outPos;
	const int *tables;
	int width, sh, scratchSlot;
};
#define META_PARAMS                                                                                          \
	int *mids, int *mpos, int *mslot, int *moutPos, const int *mtables, int mwidth, int msh, int scratchSlot
#define META_OF_PARAMS {mids, mpos, mslot, moutPos, mtables, mwidth, msh, scratchSlot}

// moves reports whether row b's metadata moves on (a decode graph's, not a scratch row).
__device__ __forceinline__ bool moves(const Meta &m, int b) { return m.ids && m.slot[b] != m.scratchSlot; }

// next_slot is the cache slot of position p, one past row b's current one.
__device__ __forceinline__ int next_slot(const Meta &m, int b, int p) {
	return m.tables ? m.tables[b * m.width + (p >> m.sh)] << m.sh | (p & ((1 << m.sh) - 1)) : m.slot[b] + 1;
}

__device__ __forceinline__ void advance(const Meta &m, int b, int tok) {
	if (moves(m, b)) {
		int p = ++m.pos[b];
		m.ids[b] = tok;
		m.slot[b] = next_slot(m, b, p);
		m.outPos[b]++;
	}
}

// argmax_part: the greedy rows' first pass when some row of the step samples. Block (b, c) of
// grid (B, chunks) writes chunk c's packed maximum (chunk_max) into part[b * chunks + c]. Many
// blocks per row read the 200 KB of a GPT-2 row in parallel; sample then reads the chunks.
// Block 256.
extern "C" __global__ void argmax_part(const float *__restrict__ logits, int V, int ld,
                                       unsigned long long *__restrict__ part) {
	__shared__ unsigned long long best[WARP];
	int b = blockIdx.x, chunks = gridDim.y, c = blockIdx.y;
	unsigned long long m = chunk_max(logits, V, ld, b, c, chunks, best);
	if (threadIdx.x == 0) part[b * chunks + c] = m;
}

// EMBED_PARAMS: where the step after a decode graph's runs without an embedding kernel of its own
// (a step queued ahead on cuBLAS GEMMs, gpu/plan.go embedNext), the sampler embeds it: once
// row b's metadata has moved on, x(B,C) row b = wte[ids[b]] + wpe[pos[b]] and xln row b its
// layer 0 ln_1 (lnw, lnb), as embed_ln_warp does (rows.cuh). Null x: no embedding.
#define EMBED_PARAMS                                                                                         \
	float *ex, half *exln, const half *ewte, const half *ewpe, const float *elnw, const float *elnb, int eC,  \
	    float eeps

// row_next is the tail of a greedy row b once its packed maxima are in part (nparts of them): warp
// 0 reduces them to the token, writes next[b], moves the metadata on (advance), sets *done back to
// 0 when not null and, with EMBED, embeds the row's next token. The tail is a chain of round trips
// the whole step waits for, so what does not need the token loads first: the metadata, the slot's
// table entry, the position's row of wpe and (by the other warps, into shared memory lnws) the
// norm's weights; after the token, only its row of wte. With WAIT the parts are the previous
// kernel's: that first part runs before griddepcontrol.wait (it reads only metadata and weights).
// Block 256.
template <bool WAIT>
__device__ __forceinline__ void row_next(int b, const unsigned long long *part, int nparts, unsigned *done, int *next,
                                         const Meta &md, float *lnws, EMBED_PARAMS) {
	// Warp 0: the position and slot the metadata moves on to (advance; a scratch row's stay),
	// read by every lane before lane 0 writes them; the position's row of wpe. The other warps:
	// the norm's weights, for warp 0.
	int nv = eC / 128, tok = 0, pos = 0, slot = 0;
	bool move = false;
	uint2 pe[LNW_VEC];
	if (threadIdx.x >= WARP) {
		for (int i = threadIdx.x - WARP; ex && i < eC / 4; i += blockDim.x - WARP) {
			reinterpret_cast<float4 *>(lnws)[i] = reinterpret_cast<const float4 *>(elnw)[i];
			reinterpret_cast<float4 *>(lnws + eC)[i] = reinterpret_cast<const float4 *>(elnb)[i];
		}
	} else {
		move = moves(md, b);
		pos = md.ids ? md.pos[b] : 0;
		if (move) slot = next_slot(md, b, ++pos);
		if (ex) {
			warp_wpe(pe, nv, ewpe, pos, eC);
			if (!move) tok = md.ids[b]; // a scratch row embeds its token as it is (ex implies ids)
		}
	}
#if __CUDA_ARCH__ >= 900
	if (WAIT) {
		asm volatile("griddepcontrol.wait;" ::: "memory");
		asm volatile("griddepcontrol.launch_dependents;");
	}
#endif
	if (threadIdx.x < WARP) {
		unsigned long long m = 0;
		for (int i = threadIdx.x; i < nparts; i += WARP) m = packed_max(m, __ldcg(part + i));
		for (int o = WARP / 2; o > 0; o >>= 1) m = packed_max(m, __shfl_xor_sync(0xffffffffu, m, o));
		if (threadIdx.x == 0) {
			int t = packed_id(m);
			next[b] = t;
			if (move) {
				md.ids[b] = tok = t;
				md.pos[b] = pos;
				md.slot[b] = slot;
				md.outPos[b]++;
			}
			if (done) *done = 0;
		}
	}
	__syncthreads(); // lnws
	if (threadIdx.x >= WARP || !ex) return;
	tok = __shfl_sync(0xffffffffu, tok, 0);
	float4 v[LNW_VEC];
	warp_embed_tok(v, pe, nv, ewte, tok, eC);
	warp_store(v, nv, ex + (size_t)b * eC);
	warp_ln<false>(v, nv, lnws, lnws + eC, exln + (size_t)b * eC, eC, eeps);
}

// argmax_next: the whole sampler of a step whose every row is greedy, in one launch. Block (b, c)
// does argmax_part's work, then counts itself done in done[b]; the row's last block to finish runs
// row_next over the row's chunks (and sets done[b] back to 0 for the next step: the buffer starts
// zeroed). The count is an acq_rel atomic: it orders each block's part store before it and, with
// the barrier after it, the last block's loads after it, without a full fence. Grid (B, chunks),
// block 256; at most 64 registers, so that 4 blocks an SM hold a batch-64 step's 512 blocks in
// one wave.
extern "C" __global__ void __launch_bounds__(256, 4) argmax_next(int *next, const float *__restrict__ logits, int V,
                                                                 int ld, unsigned long long *part, unsigned *done,
                                                                 META_PARAMS, EMBED_PARAMS) {
	__shared__ unsigned long long best[WARP];
	__shared__ int last;
	__shared__ __align__(16) float lnws[2 * 128 * LNW_VEC]; // the norm's weights, then its biases
	int b = blockIdx.x, chunks = gridDim.y, c = blockIdx.y;
	unsigned long long m = chunk_max(logits, V, ld, b, c, chunks, best);
	if (threadIdx.x == 0) {
		part[b * chunks + c] = m;
		unsigned n;
		asm volatile("atom.acq_rel.gpu.global.add.u32 %0, [%1], 1;" : "=r"(n) : "l"(done + b) : "memory");
		last = n == (unsigned)chunks - 1;
	}
	__syncthreads();
	if (!last) return;
	row_next<false>(b, part + b * chunks, chunks, done + b, next, Meta META_OF_PARAMS, lnws, ex, exln, ewte, ewpe, elnw,
	                elnb, eC, eeps);
}

// argmax_parts_next: the greedy sampler after an LM head that took its own argmax
// (gemm_sm90a.cu lm_head_argmax): row_next over row b's nparts packed maxima in part (B,
// nparts), launched with programmatic dependent launch. Grid (B), block 256.
extern "C" __global__ void __launch_bounds__(256) argmax_parts_next(int *next, const unsigned long long *part, int nparts,
                                                                    META_PARAMS, EMBED_PARAMS) {
	__shared__ __align__(16) float lnws[2 * 128 * LNW_VEC];
	const int b = blockIdx.x;
	row_next<true>(b, part + (size_t)b * nparts, nparts, nullptr, next, Meta META_OF_PARAMS, lnws, ex, exln, ewte, ewpe,
	               elnw, elnb, eC, eeps);
}

// sample: one block of SAMPLE_THREADS per sequence b. logits (B, ld) fp32, the first V columns
// used; wbuf (B, ld) double is scratch for the weights. next[b] gets the token, and the metadata
// moves on (advance; its outPos is outPos). A greedy row (temperature <= 0 or top-k 1) takes its
// token from argmax_part's chunks partials.
extern "C" __global__ void sample(int *next, const float *logits, int V, int ld, const float *temp, const int *topk,
                                  const float *topp, const unsigned long long *seed, const int *outPos, double *wbuf,
                                  const unsigned long long *part, int chunks, META_PARAMS) {
	__shared__ double redd[32];
	__shared__ int redi[32];
	__shared__ int cnt[SAMPLE_THREADS];
	__shared__ double scan[SAMPLE_THREADS];
	__shared__ int best;
	int b = blockIdx.x;
	if (temp[b] <= 0.f || topk[b] == 1 || V <= 1) {
		if (threadIdx.x == 0) {
			unsigned long long m = 0;
			for (int i = 0; i < chunks; i++) m = part[b * chunks + i] > m ? part[b * chunks + i] : m;
			next[b] = packed_id(m);
			advance(Meta META_OF_PARAMS, b, packed_id(m));
		}
		return;
	}
	Ctx c;
	c.l = logits + (size_t)b * ld;
	c.V = V;

	// Argmax (lowest id on ties) and the smallest key in one pass; unrolled so that several
	// loads are in flight (a block reads the whole row).
	unsigned mk = 0, mink = 0xffffffffu;
	int mi = 0x7fffffff;
#pragma unroll 8
	for (int i = threadIdx.x; i < V; i += blockDim.x) {
		unsigned k = key_of(c.l[i]);
		if (k > mk) { // ids rise within a thread: the first max is its lowest id
			mk = k;
			mi = i;
		}
		mink = min(mink, k);
	}
	for (int o = WARP / 2; o > 0; o >>= 1) {
		unsigned ok = __shfl_xor_sync(0xffffffffu, mk, o);
		int oi = __shfl_xor_sync(0xffffffffu, mi, o);
		if (ok > mk || (ok == mk && oi < mi)) {
			mk = ok;
			mi = oi;
		}
		mink = min(mink, __shfl_xor_sync(0xffffffffu, mink, o));
	}
	__shared__ unsigned maxw[32], minw[32];
	__shared__ int idxw[32];
	if (threadIdx.x % WARP == 0) {
		maxw[threadIdx.x / WARP] = mk;
		minw[threadIdx.x / WARP] = mink;
		idxw[threadIdx.x / WARP] = mi;
	}
	__syncthreads();
	mk = 0;
	mink = 0xffffffffu;
	mi = 0x7fffffff;
	for (int w = 0; w < (int)(blockDim.x / WARP); w++) {
		if (maxw[w] > mk || (maxw[w] == mk && idxw[w] < mi)) {
			mk = maxw[w];
			mi = idxw[w];
		}
		mink = min(mink, minw[w]);
	}
	if (threadIdx.x == 0) best = mi;
	__syncthreads();
	int argmax = best;
	float T = temp[b];
	int K = topk[b];
	float P = topp[b];
	c.invT = 1.0 / (double)T;
	c.zmax = (double)c.l[argmax] * c.invT;

	int chunk = (V + blockDim.x - 1) / blockDim.x;
	int lo = min(V, (int)threadIdx.x * chunk), hi = min(V, lo + chunk);

	// Top-k cut: the largest key with at least K logits at or above it.
	c.kk = 0;
	c.mk = 0x7fffffff;
	if (K > 0 && K < V) {
		c.kk = largest_key(mink, mk, [&](unsigned t) {
			int n = 0;
#pragma unroll 8
			for (int i = threadIdx.x; i < V; i += blockDim.x) n += key_of(c.l[i]) >= t;
			return bsum(n, redi) >= K;
		});
		int n = 0;
#pragma unroll 8
		for (int i = threadIdx.x; i < V; i += blockDim.x) n += key_of(c.l[i]) > c.kk;
		c.mk = K - bsum(n, redi);
	}
	int kbase = chunk_tie_base(c, c.kk, lo, hi, cnt);

	// wk(V): the weight of each top-k token, 0 for the others; exp runs once per token here and
	// every later pass reads wk. r is the id's rank among ids with key == c.kk.
	double *wk = wbuf + (size_t)b * ld;
	double total = 0;
	{
		int r = kbase;
		for (int i = lo; i < hi; i++) {
			unsigned k = key_of(c.l[i]);
			double w = (k > c.kk || (k == c.kk && r < c.mk)) ? weight(c, i) : 0.0;
			wk[i] = w;
			total += w;
			r += k == c.kk;
		}
	}
	total = bsum(total, redd); // its barriers also publish wk to the block

	c.pk = 0;
	c.mp = 0x7fffffff;
	int pbase = 0;
	if (P > 0.f && P < 1.f) {
		double need = (double)P * total;
		// mass(t): weight of the top-k tokens with key >= t (> t when strict).
		auto mass = [&](unsigned t, bool strict) {
			double m = 0;
#pragma unroll 8
			for (int i = threadIdx.x; i < V; i += blockDim.x) {
				unsigned k = key_of(c.l[i]);
				if (strict ? k > t : k >= t) m += wk[i];
			}
			return bsum(m, redd);
		};
		// mass(kk) is the whole top-k weight: the cut lies at or above it.
		c.pk = largest_key(c.kk > mink ? c.kk : mink, mk, [&](unsigned t) { return mass(t, false) >= need; });
		double above = mass(c.pk, true);
		// Ties at the cut: each weighs the same; keep as many (in id order) as reach need.
		unsigned pb = c.pk & 0x80000000u ? c.pk & 0x7fffffffu : ~c.pk;
		double wv = exp((double)__uint_as_float(pb) * c.invT - c.zmax);
		int m = 1;
		if (wv > 0) {
			double q = ceil((need - above) / wv);
			m = q < 1 ? 1 : (q > 1e9 ? 1000000000 : (int)q);
		}
		c.mp = m;
		pbase = chunk_tie_base(c, c.pk, lo, hi, cnt);
	}
	// kept: in the top-k set (a zero weight counts for nothing either way) and in the top-p set.
	auto kept = [&](int i, unsigned k, int rp) { return wk[i] > 0 && (k > c.pk || (k == c.pk && rp < c.mp)); };

	// Kept weight per chunk, then the walk in ascending id order.
	double mine = 0;
	{
		int rp = pbase;
		for (int i = lo; i < hi; i++) {
			unsigned k = key_of(c.l[i]);
			if (kept(i, k, rp)) mine += wk[i];
			rp += k == c.pk;
		}
	}
	scan[threadIdx.x] = mine;
	__syncthreads();
	for (int o = 1; o < (int)blockDim.x; o <<= 1) {
		double v = threadIdx.x >= (unsigned)o ? scan[threadIdx.x - o] : 0;
		__syncthreads();
		scan[threadIdx.x] += v;
		__syncthreads();
	}
	double kw = scan[blockDim.x - 1];
	double target = uniform(seed[b], outPos[b]) * kw;
	double run = scan[threadIdx.x] - mine;
	if (threadIdx.x == 0) best = -1;
	__syncthreads();
	// The chunk where the running sum first exceeds target picks the token; the last kept token
	// wins when rounding leaves target at the very end of the mass.
	int pick = -1, lastKept = -1;
	{
		int rp = pbase;
		for (int i = lo; i < hi; i++) {
			unsigned k = key_of(c.l[i]);
			if (kept(i, k, rp)) {
				run += wk[i];
				lastKept = i;
				if (pick < 0 && run > target) pick = i;
			}
			rp += k == c.pk;
		}
	}
	if (pick >= 0) atomicMin((unsigned *)&best, (unsigned)pick); // -1 as unsigned is the max
	__syncthreads();
	if (best == -1) {
		if (lastKept >= 0) atomicMax(&best, lastKept);
		__syncthreads();
	}
	if (threadIdx.x == 0) { // every thread read outPos[b] before the barriers above
		int tok = (best >= 0 && kw > 0 && kw == kw) ? best : argmax;
		next[b] = tok;
		advance(Meta META_OF_PARAMS, b, tok);
	}
}
