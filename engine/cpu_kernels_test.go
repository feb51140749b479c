package engine

import (
	"math"
	"math/rand/v2"
	"slices"
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
			x, w := randSlice(n), randSlice(n+5)
			if got, want := ks.dot(x, w), ref.dot(x, w); !close32(got, want, n) {
				t.Errorf("%s n=%d: dot %v, Go %v", ks.name, n, got, want)
			}
		}
		for _, k := range []int{0, 1, 5, 64, 200} {
			ldx := k + 2
			x, w := randSlice(4*ldx), randSlice(max(k, 1)*panelW)
			acc4 := randSlice(4 * panelW)
			acc1 := append([]float32(nil), acc4...)
			accRef := append([]float32(nil), acc4...)
			ks.mp4(acc4, x, ldx, w, k, w)
			for r := range 4 {
				ks.mp1(acc1[r*panelW:], x[r*ldx:], w, k)
				ref.mp1(accRef[r*panelW:], x[r*ldx:], w, k)
			}
			for i := range acc4 {
				if acc4[i] != acc1[i] {
					t.Fatalf("%s k=%d: element %d: mp4 %v, mp1 %v: want identical", ks.name, k, i, acc4[i], acc1[i])
				}
				if !close32(acc4[i], accRef[i], k+1) {
					t.Errorf("%s k=%d: mp4[%d] = %v, Go %v", ks.name, k, i, acc4[i], accRef[i])
				}
			}
		}
		for _, hd := range []int{64, 16, 12} { // 64: the assembly path; the others the fallback
			for _, n := range []int{0, 1, 5, 16} {
				const ld = 200 // rows of stride C, wider than a head
				q, k := randSlice(hd), randSlice(max(n, 1)*ld)
				s, sRef := make([]float32, n), make([]float32, n)
				ks.qk(s, q, k, ld)
				ref.qk(sRef, q, k, ld)
				out := randSlice(hd)
				outRef := append([]float32(nil), out...)
				ks.av(out, s, k, ld)
				ref.av(outRef, sRef, k, ld)
				for i := range s {
					if !close32(s[i], sRef[i], hd) {
						t.Errorf("%s hd=%d n=%d: qk[%d] = %v, Go %v", ks.name, hd, n, i, s[i], sRef[i])
					}
				}
				for i := range out {
					if !close32(out[i], outRef[i], 4*n) {
						t.Errorf("%s hd=%d n=%d: av[%d] = %v, Go %v", ks.name, hd, n, i, out[i], outRef[i])
					}
				}
			}
		}
	}
}

// TestBias checks the epilogue's bias and residual adds against the Go loops, bit for bit (both
// add a and b first, then y).
func TestBias(t *testing.T) {
	rng := rand.New(rand.NewPCG(6, 6))
	for _, n := range []int{0, 1, 8, 13, 24} {
		a, b, y0 := make([]float32, n), make([]float32, n), make([]float32, n)
		for i := range a {
			a[i], b[i], y0[i] = float32(rng.NormFloat64()), float32(rng.NormFloat64()), float32(rng.NormFloat64())
		}
		for _, residual := range []bool{false, true} {
			want := make([]float32, n)
			for i := range want {
				want[i] = a[i] + b[i]
				if residual {
					want[i] += y0[i]
				}
			}
			for _, ks := range testKernels() {
				y := append([]float32(nil), y0...)
				ks.bias(y, a, b, residual)
				if !slices.Equal(y, want) {
					t.Errorf("%s n=%d residual=%v: %v, want %v", ks.name, n, residual, y, want)
				}
			}
		}
	}
}

// TestGELU checks the GELU kernels against gelu_new in float64 over the range that matters and
// past the clamps, and the assembly against the Go version.
func TestGELU(t *testing.T) {
	rng := rand.New(rand.NewPCG(4, 4))
	var xs []float32
	for _, x := range []float32{0, 1e-30, -1e-30, 1e-3, -1e-3, 0.5, -0.5, 3, -3, 10, -10, 50, -50, 88, -88, 1e4, -1e4} {
		xs = append(xs, x)
	}
	for range 4000 {
		xs = append(xs, float32(rng.NormFloat64()*4))
	}
	bias := make([]float32, len(xs)) // gelu(x + 0)
	for _, ks := range testKernels() {
		y := make([]float32, len(xs))
		ks.gelu(y, xs, bias)
		for i, x := range xs {
			want := geluTanh(x)
			// a few float32 roundings, relative to max(|x|, 1e-3) where gelu(x) ~ x/2 goes to 0
			if d := math.Abs(float64(y[i] - want)); d > 4e-7*math.Max(math.Abs(float64(x)), 1e-3) {
				t.Errorf("%s: gelu(%v) = %v, want %v (diff %.2e)", ks.name, x, y[i], want, d)
			}
			if g := geluGo(x); math.Abs(float64(y[i]-g)) > 2.5e-7*math.Max(math.Abs(float64(x)), 1e-3) {
				t.Errorf("%s: gelu(%v) = %v, Go %v", ks.name, x, y[i], g)
			}
		}
	}
}

// geluTanh is GPT-2's activation (gelu_new) in float64, the reference for the kernels: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
func geluTanh(x float32) float32 {
	const s = 0.7978845608028654 // sqrt(2/pi)
	v := float64(x)
	return float32(0.5 * v * (1 + math.Tanh(s*(v+0.044715*v*v*v))))
}

// TestExp checks the softmax exp kernels against math.Exp, including the clamp and NaN.
func TestExp(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 5))
	xs := []float32{0, -1e-6, -0.3, -1, -10, -80, -86.9, -87, -100, -1e30, 0.5, 3}
	for range 1000 {
		xs = append(xs, float32(-rng.ExpFloat64()*10))
	}
	const top = 0.25
	for _, ks := range testKernels() {
		got := append([]float32(nil), xs...)
		got = append(got, float32(math.NaN()))
		ks.exp(got, top)
		for i, x := range xs {
			want := math.Exp(float64(x - top))
			if x-top < -87 {
				want = math.Exp(-87) // the clamp: still negligible next to the softmax's 1
			}
			if d := math.Abs(float64(got[i]) - want); d > 3e-7*want {
				t.Errorf("%s: exp(%v - %v) = %v, want %v (rel diff %.2e)", ks.name, x, top, got[i], want, d/want)
			}
		}
		if last := got[len(got)-1]; !math.IsNaN(float64(last)) {
			t.Errorf("%s: exp(NaN) = %v, want NaN", ks.name, last)
		}
	}
}

// close32 allows the rounding of n float32 multiply-adds of unit-size values.
func close32(a, b float32, n int) bool {
	return math.Abs(float64(a)-float64(b)) <= 1e-6*float64(n+1)*math.Max(1, math.Abs(float64(b)))
}

// specialFloats are the values where float compares differ: NaN, the infinities, both zeros,
// the float32 extremes, subnormals, and a few numbers that tie often.
var specialFloats = []float32{float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1)),
	float32(math.Copysign(0, -1)), 0, math.MaxFloat32, -math.MaxFloat32, math.SmallestNonzeroFloat32,
	-math.SmallestNonzeroFloat32, 1e-40, -1e-40, 1, -1, 2.5, -2.5}

// scanRow is a row for the scan kernels: each element special with probability pSpecial, else
// one of a few values (heavy ties) or a normal number.
func scanRow(rng *rand.Rand, n int, pSpecial float64) []float32 {
	row := make([]float32, n)
	for i := range row {
		switch {
		case rng.Float64() < pSpecial:
			row[i] = specialFloats[rng.IntN(len(specialFloats))]
		case rng.IntN(2) == 0:
			row[i] = float32(rng.IntN(5)) - 2
		default:
			row[i] = float32(rng.NormFloat64() * 3)
		}
	}
	return row
}

// TestRowScanKernels checks each kernel set's scan and above against scanGo and aboveGo, bit for
// bit (m's sign of zero included), on rows of special values, ties and non-finite runs, of
// lengths 0..67 and 50257 at every alignment.
func TestRowScanKernels(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 9))
	var rows [][]float32
	for n := range 68 {
		for _, p := range []float64{0, 0.1, 0.5, 1} {
			rows = append(rows, scanRow(rng, n, p))
		}
	}
	for _, p := range []float64{0, 0.001, 0.3, 1} {
		rows = append(rows, scanRow(rng, 50257, p))
	}
	nonFinite := []float32{float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1))}
	for _, n := range []int{9, 40, 67, 50257} {
		all, zeros := make([]float32, n), make([]float32, n)
		for i := range all {
			all[i] = nonFinite[rng.IntN(3)]
			zeros[i] = []float32{-1, 0, float32(math.Copysign(0, -1))}[rng.IntN(3)] // max ±0
		}
		zeros[0], zeros[n-1] = -1, float32(math.Copysign(0, -1)) // the first zero late in some lanes
		rows = append(rows, all, zeros)
	}
	buf := make([]float32, 50257+8)
	for _, ks := range testKernels() {
		for ri, row := range rows {
			for off := range 8 {
				x := buf[off : off+len(row)]
				copy(x, row)
				ss := append([]float32{float32(math.NaN())}, specialFloats...)
				for range 4 {
					if len(x) > 0 {
						ss = append(ss, x[rng.IntN(len(x))])
					}
				}
				for _, s := range ss {
					m, ge, inf, nl := ks.scan(x, s)
					wm, wge, winf, wnl := scanGo(x, s)
					if math.Float32bits(m) != math.Float32bits(wm) || ge != wge || inf != winf || nl != wnl {
						t.Fatalf("%s row %d (n %d, offset %d) s %v: scan (%v %d %d %d), want (%v %d %d %d)",
							ks.name, ri, len(x), off, s, m, ge, inf, nl, wm, wge, winf, wnl)
					}
					for _, i := range []int{0, 1, 7, 8, 9, 31, 32, 33, len(x) / 2, len(x) - 1, len(x), rng.IntN(len(x) + 1)} {
						if i > len(x) || i < 0 {
							continue
						}
						if got, want := ks.above(x, i, s), aboveGo(x, i, s); got != want {
							t.Fatalf("%s row %d (n %d, offset %d): above(%d, %v) = %d, want %d", ks.name, ri, len(x), off, i, s, got, want)
						}
					}
				}
			}
		}
	}
}
