package engine

import "math"

// Kernels of the CPU backend. Each output element is computed by the same sequence of
// floating-point operations whatever the batch around it, so a sequence gets bit-identical
// results alone or batched (the batch tests rely on it).

// kernels are the inner loops of the CPU backend: AVX2/FMA assembly where the CPU has both
// (cpu_kernels_amd64.go), else pure Go. Each output is one chain of multiply-adds in a fixed order
// that does not depend on how many rows are computed together.
type kernels struct {
	name string
	// mp4 adds x (4 rows of stride ldx, k columns) @ w (k, 24), a packed panel, to acc (4, 24).
	// It may prefetch the first k&^1 cache lines ((k&^1)*16 floats) of pf, memory read soon after.
	mp4 func(acc, x []float32, ldx int, w []float32, k int, pf []float32)
	// mp1 adds x (k) @ w (k, 24), a packed panel, to acc (24).
	mp1 func(acc, x, w []float32, k int)
	// dot returns x . w[:len(x)].
	dot func(x, w []float32) float32
	// gelu writes geluGo(a[i] + b[i]) into y[i] for i < len(y).
	gelu func(y, a, b []float32)
	// bias writes a[i] + b[i] into y[i] for i < len(y), or adds it to y[i] when residual.
	bias func(y, a, b []float32, residual bool)
	// exp replaces x[i] with expGo(x[i] - top) (within float32 rounding).
	exp func(x []float32, top float32)
	// qk writes q . k[i*ldk : i*ldk+len(q)] into s[i] for i < len(s): one head's scores.
	qk func(s, q, k []float32, ldk int)
	// av adds e[i] * v[i*ldv : i*ldv+len(out)] to out for i < len(e), in order of i.
	av func(out, e, v []float32, ldv int)
	// scan returns what scanGo does: a logprobs row's largest finite logit and its counts.
	scan func(x []float32, s float32) (m float32, ge, posInf, notLow int)
	// above returns the index of the first x[j] > thr with j >= i (NaN never), or len(x).
	above func(x []float32, i int, thr float32) int
}

// goKernels are the portable kernels.
func goKernels() kernels {
	return kernels{name: "go", mp4: mp4Go, mp1: mp1Go, dot: dotGo, gelu: geluSliceGo, bias: biasGo,
		exp: expShiftGo, qk: qkGo, av: avGo, scan: scanGo, above: aboveGo}
}

func mp4Go(acc, x []float32, ldx int, w []float32, k int, _ []float32) {
	for r := range 4 {
		mp1Go(acc[r*panelW:], x[r*ldx:], w, k)
	}
}

func mp1Go(acc, x, w []float32, k int) {
	a := acc[:panelW:panelW]
	for i, xv := range x[:k] {
		wr := w[i*panelW : (i+1)*panelW : (i+1)*panelW]
		for c := range a {
			a[c] += xv * wr[c]
		}
	}
}

// axpyGo adds a*w to y, element-wise. w is at least len(y) long.
func axpyGo(y, w []float32, a float32) {
	w = w[:len(y)]
	for j := range y {
		y[j] += a * w[j]
	}
}

// dotGo returns the dot product of x and w (len(w) >= len(x)) with four partial sums, so the
// adds of consecutive elements do not wait on each other.
func dotGo(x, w []float32) float32 {
	n := len(x)
	w = w[:n]
	var s0, s1, s2, s3 float32
	j := 0
	for ; j+4 <= n; j += 4 {
		x4, w4 := x[j:j+4:j+4], w[j:j+4:j+4]
		s0 += x4[0] * w4[0]
		s1 += x4[1] * w4[1]
		s2 += x4[2] * w4[2]
		s3 += x4[3] * w4[3]
	}
	for ; j < n; j++ {
		s0 += x[j] * w[j]
	}
	return (s0 + s1) + (s2 + s3)
}

// layerNorm writes (x - mean) / sqrt(var + eps) * w + b into out; statistics in float64.
func layerNorm(out, x, w, b []float32, eps float32) {
	n := len(x)
	out, w, b = out[:n], w[:n], b[:n]
	mean := sum64(x) / float64(n)
	rstd := 1 / math.Sqrt(sumSq64(x, mean)/float64(n)+float64(eps))
	m, r := float32(mean), float32(rstd)
	for i, v := range x {
		out[i] = (v-m)*r*w[i] + b[i]
	}
}

// sum64 returns the sum of x in float64, with four partial sums so that the adds do not wait on
// each other.
func sum64(x []float32) float64 {
	var s0, s1, s2, s3 float64
	i := 0
	for ; i+4 <= len(x); i += 4 {
		x4 := x[i : i+4 : i+4]
		s0 += float64(x4[0])
		s1 += float64(x4[1])
		s2 += float64(x4[2])
		s3 += float64(x4[3])
	}
	for ; i < len(x); i++ {
		s0 += float64(x[i])
	}
	return (s0 + s1) + (s2 + s3)
}

// sumSq64 returns the sum of (x[i] - mean)^2 in float64, four partial sums like sum64.
func sumSq64(x []float32, mean float64) float64 {
	var s0, s1, s2, s3 float64
	i := 0
	for ; i+4 <= len(x); i += 4 {
		x4 := x[i : i+4 : i+4]
		d0, d1, d2, d3 := float64(x4[0])-mean, float64(x4[1])-mean, float64(x4[2])-mean, float64(x4[3])-mean
		s0 += d0 * d0
		s1 += d1 * d1
		s2 += d2 * d2
		s3 += d3 * d3
	}
	for ; i < len(x); i++ {
		d := float64(x[i]) - mean
		s0 += d * d
	}
	return (s0 + s1) + (s2 + s3)
}

func biasGo(y, a, b []float32, residual bool) {
	a, b = a[:len(y)], b[:len(y)]
	if residual {
		for i := range y {
			y[i] += a[i] + b[i]
		}
		return
	}
	for i := range y {
		y[i] = a[i] + b[i]
	}
}

func geluSliceGo(y, a, b []float32) {
	a, b = a[:len(y)], b[:len(y)]
	for i := range y {
		y[i] = geluGo(a[i] + b[i])
	}
}

// Constants of geluGo (see it).
const (
	geluA       = -1.5957691216057308  // -2 sqrt(2/pi)
	geluB       = -0.07135481627260025 // -2 sqrt(2/pi) 0.044715
	expLog2E    = 1.4426950408889634   // log2 e
	expNegLn2Hi = -0.693359375         // -ln2, high part: 9 significant bits, so n*expNegLn2Hi is exact
	expNegLn2Lo = 2.12194440054713e-4  // -(ln2 - 0.693359375)
)

// geluGo is GPT-2's activation gelu_new, 0.5 x (1 + tanh(u)) with u = sqrt(2/pi) (x + 0.044715 x^3),
// computed in float32 as x / (1 + exp(-2u)) (the same function: 1 + tanh(u) = 2 / (1 + e^-2u)).
// The AVX2 kernel (geluBias) does the same operations, with fused multiply-adds.
func geluGo(x float32) float32 {
	return x / (1 + expGo(x*(geluA+geluB*x*x)))
}

// expGo is exp(t) in float32: 2^n e^r with n = round(t log2 e) and r = t - n ln2 (ln2 in two
// parts, the first short enough that n times it is exact without a fused multiply-add), e^r by its Taylor polynomial to r^7: |r| <= ln2/2 bounds the truncation by 6e-9
// relative, so the result is within a few float32 roundings of exp. t is clamped to [-87, 88],
// where 2^n is a normal float (GELU and softmax do not notice the clamp). The AVX2 kernels
// (geluBias, expShift) do the same operations, with fused multiply-adds.
func expGo(t float32) float32 {
	t = min(max(t, -87), 88)
	n := float32(math.RoundToEven(float64(t * expLog2E)))
	r := t + n*expNegLn2Hi
	r += n * expNegLn2Lo
	p := float32(1.0 / 5040)
	p = p*r + 1.0/720
	p = p*r + 1.0/120
	p = p*r + 1.0/24
	p = p*r + 1.0/6
	p = p*r + 0.5
	p = p*r + 1
	p = p*r + 1
	return p * math.Float32frombits(uint32(int32(n)+127)<<23)
}

// expShiftGo replaces every x[i] with exp(x[i] - top).
func expShiftGo(x []float32, top float32) {
	for i, v := range x {
		x[i] = expGo(v - top)
	}
}

// qkGo writes q . k[i*ldk : i*ldk+len(q)] into s[i] for every i < len(s).
func qkGo(s, q, k []float32, ldk int) {
	for i := range s {
		s[i] = dotGo(q, k[i*ldk:])
	}
}

// avGo adds e[i] * v[i*ldv : i*ldv+len(out)] to out for every i < len(e), in order of i.
func avGo(out, e, v []float32, ldv int) {
	for i, ei := range e {
		axpyGo(out, v[i*ldv:], ei)
	}
}

// scanGo returns m, the largest finite x (-Inf if none; of equal ones the first, so -0 or +0 as
// the row has them first), and how many x are >= s (none if s is NaN), +Inf, and >= -MaxFloat32
// (neither NaN nor -Inf): one pass, the counts branch-free.
func scanGo(x []float32, s float32) (m float32, ge, posInf, notLow int) {
	m = float32(math.Inf(-1))
	for _, v := range x {
		if v > m { // NaN compares false
			if v <= math.MaxFloat32 {
				m = v
			} else {
				posInf++
			}
		}
		inc, fin := 0, 0
		if v >= s {
			inc = 1
		}
		if v >= -math.MaxFloat32 {
			fin = 1
		}
		ge += inc
		notLow += fin
	}
	return m, ge, posInf, notLow
}

// aboveGo returns the index of the first x[j] > thr with j >= i, or len(x).
func aboveGo(x []float32, i int, thr float32) int {
	for ; i < len(x); i++ {
		if x[i] > thr {
			return i
		}
	}
	return len(x)
}
