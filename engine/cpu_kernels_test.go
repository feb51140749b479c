package engine

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestKernelsAgree checks every kernel set this CPU can run against the Go kernels (within float
// rounding) and each set against itself: the multi-row and multi-column kernels must give bit for
// bit what the single ones give, since a sequence's results must not depend on its batch.
func TestKernelsAgree(t *testing.T) {
	rng := rand.New(rand.NewPCG(2, 2))
	randSlice := func(n int) []float32 {
		s := make([]float32, n)
		for i := range s {
			s[i] = float32(rng.NormFloat64())
		}
		return s
	}
	ref := goKernels()
	for _, ks := range testKernels() {
		for _, n := range []int{1, 7, 8, 16, 33, 64, 768} {
			ldx, ldw := n+3, n+5 // strides wider than the rows
			x, w := randSlice(2*ldx), randSlice(4*ldw)
			var oct [8]float32
			var quad [4]float32
			ks.dot8(&oct, x, ldx, w, ldw, n)
			for r := range 2 {
				ks.dot4(&quad, x[r*ldx:r*ldx+n], w, ldw)
				for i := range 4 {
					one := ks.dot(x[r*ldx:r*ldx+n], w[i*ldw:])
					if oct[r*4+i] != one || quad[i] != one {
						t.Fatalf("%s n=%d row %d col %d: dot8 %v, dot4 %v, dot %v: want identical", ks.name, n, r, i, oct[r*4+i], quad[i], one)
					}
					if want := ref.dot(x[r*ldx:r*ldx+n], w[i*ldw:]); !close32(one, want, n) {
						t.Errorf("%s n=%d: dot %v, Go %v", ks.name, n, one, want)
					}
				}
			}
		}
		for _, k := range []int{0, 1, 5, 64, 200} {
			ldx, ldw := k+2, 40
			x, w := randSlice(4*ldx), randSlice(max(k, 1)*ldw)
			acc4 := randSlice(64)
			acc1 := append([]float32(nil), acc4...)
			accRef := append([]float32(nil), acc4...)
			ks.mm4(acc4, x, ldx, w, ldw, k)
			for r := range 4 {
				ks.mm1(acc1[r*16:], x[r*ldx:], w, ldw, k)
				ref.mm1(accRef[r*16:], x[r*ldx:], w, ldw, k)
			}
			for i := range acc4 {
				if acc4[i] != acc1[i] {
					t.Fatalf("%s k=%d: element %d: mm4 %v, mm1 %v: want identical", ks.name, k, i, acc4[i], acc1[i])
				}
				if !close32(acc4[i], accRef[i], k+1) {
					t.Errorf("%s k=%d: mm4[%d] = %v, Go %v", ks.name, k, i, acc4[i], accRef[i])
				}
			}
		}
	}
}

// close32 allows the rounding of n float32 multiply-adds of unit-size values.
func close32(a, b float32, n int) bool {
	return math.Abs(float64(a)-float64(b)) <= 1e-6*float64(n+1)*math.Max(1, math.Abs(float64(b)))
}
