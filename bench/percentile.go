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
	return sorted[lo] + (sorted[hi]-sorted[lo])*frac
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

// median of values (NaN when empty); used for "steady" = median over steady runs.
func median(values []float64) float64 {
	s := make([]float64, 0, len(values))
	for _, v := range values {
		if !math.IsNaN(v) {
			s = append(s, v)
		}
	}
	sort.Float64s(s)
	return percentile(s, 50)
}
