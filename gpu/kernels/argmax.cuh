// argmax.cuh: a logit and its id packed so that one unsigned maximum is the argmax, shared by the
// samplers (sample.cu) and the LM head that takes its argmax itself (gemm_sm90a.cu).
#pragma once

// key_of maps a float to an unsigned key of the same order (negative values below positive).
__device__ __forceinline__ unsigned key_of(float f) {
	unsigned b = __float_as_uint(f);
	return (b & 0x80000000u) ? ~b : (b | 0x80000000u);
}

// packed is logit v of id i as key << 32 | ~id: the larger of two is the larger logit, the lower
// id on ties.
__device__ __forceinline__ unsigned long long packed(float v, int i) {
	return (unsigned long long)key_of(v) << 32 | (0xffffffffu - (unsigned)i);
}

__device__ __forceinline__ int packed_id(unsigned long long m) { return (int)(0xffffffffu - (unsigned)(m & 0xffffffffu)); }

__device__ __forceinline__ unsigned long long packed_max(unsigned long long a, unsigned long long b) { return a > b ? a : b; }
