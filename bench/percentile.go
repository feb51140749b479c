package bench

import (
	"math"
	"sort"
)

// percentile returns the p-th percentile (0..100) of sorted samples by linear interpolation
// between the closest ranks, numpy's default ("linear"): rank = p/100*(n-1). NaN for no samples.
func percentile(sorted []float64, p float64) float64 {
	n := len(sorted)
	if n == 0 {
		return math.NaN()
	}
	rank := p / 100 * float64(n-1)
	lo := int(math.Floor(rank))
	hi := int(math.Ceil(rank))
	if hi >= n {
		hi = n - 1
	}
	frac := rank - float64(lo)
	return lerp(sorted[lo], sorted[hi], frac)
}

// makeDist summarizes samples (milliseconds). It sorts a copy; samples is left untouched.
func makeDist(samples []float64) Dist {
	if len(samples) == 0 {
		return Dist{P50: math.NaN(), P95: math.NaN(), P99: math.NaN(), Mean: math.NaN(), Max: math.NaN()}
	}
	s := append([]float64(nil), samples...)
	sort.Float64s(s)
	sum := 0.0
	for _, v := range s {
		sum += v
	}
	return Dist{
		P50:  percentile(s, 50),
		P95:  percentile(s, 95),
		P99:  percentile(s, 99),
		Mean: sum / float64(len(s)),
		Max:  s[len(s)-1],
		N:    len(s),
	}
}

// median of values, NaN ones left out (NaN when none); used for "steady" = median over steady runs.
func median(values []float64) float64 {
	s := make([]float64, 0, len(values))
	for _, v := range values {
		if !math.IsNaN(v) {
			s = append(s, v)
		}
	}
	sort.Float64s(s)
	return sortedMedian(s)
}

// sortedMedian is numpy.median of sorted samples: the middle one, or the mean of the two middle
// ones (which can differ in the last bit from percentile(s, 50)). NaN for none.
func sortedMedian(s []float64) float64 {
	n := len(s)
	switch {
	case n == 0:
		return math.NaN()
	case n%2 == 1:
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// numpySum is numpy's float64 sum (pairwise_sum): a plain loop below 8 values, eight running
// sums up to 128, halves split at a multiple of 8 above; so np.mean and np.std agree to the bit.
func numpySum(x []float64) float64 {
	n := len(x)
	switch {
	case n < 8:
		s := 0.0
		for _, v := range x {
			s += v
		}
		return s
	case n <= 128:
		var r [8]float64
		copy(r[:], x[:8])
		i := 8
		for ; i < n-n%8; i += 8 {
			for j := range r {
				r[j] += x[i+j]
			}
		}
		s := ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]))
		for ; i < n; i++ {
			s += x[i]
		}
		return s
	}
	half := n / 2
	half -= half % 8
	return numpySum(x[:half]) + numpySum(x[half:])
}
