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
	// mm4 adds x (4 rows of stride ldx, k columns) @ w (k rows of stride ldw, 16 columns) to acc (4, 16).
	mm4 func(acc, x []float32, ldx int, w []float32, ldw, k int)
	// mm1 adds x (k) @ w (k rows of stride ldw, 16 columns) to acc (16).
	mm1 func(acc, x, w []float32, ldw, k int)
	// dot8 writes x[r*ldx:][:n] . w[i*ldw:][:n] into out[r*4+i] for r < 2, i < 4, each exactly as dot would.
	dot8 func(out *[8]float32, x []float32, ldx int, w []float32, ldw, n int)
	// dot4 writes x . w[i*ldw : i*ldw+len(x)] into out[i] for i < 4, each exactly as dot would.
	dot4 func(out *[4]float32, x, w []float32, ldw int)
	// dot returns x . w[:len(x)].
	dot func(x, w []float32) float32
}

// goKernels are the portable kernels.
func goKernels() kernels {
	return kernels{name: "go", mm4: mm4Go, mm1: mm1Go, dot8: dot8Go, dot4: dot4Go, dot: dotGo}
}

func mm4Go(acc, x []float32, ldx int, w []float32, ldw, k int) {
	for r := range 4 {
		mm1Go(acc[r*16:], x[r*ldx:], w, ldw, k)
	}
}

func mm1Go(acc, x, w []float32, ldw, k int) {
	a := acc[:16:16]
	for i, xv := range x[:k] {
		wr := w[i*ldw : i*ldw+16 : i*ldw+16]
		for c := range a {
			a[c] += xv * wr[c]
		}
	}
}

func dot8Go(out *[8]float32, x []float32, ldx int, w []float32, ldw, n int) {
	for r := range 2 {
		for i := range 4 {
			out[r*4+i] = dotGo(x[r*ldx:r*ldx+n], w[i*ldw:])
		}
	}
}

func dot4Go(out *[4]float32, x, w []float32, ldw int) {
	for i := range out {
		out[i] = dotGo(x, w[i*ldw:])
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
	var sum float64
	for _, v := range x {
		sum += float64(v)
	}
	mean := sum / float64(n)
	var ss float64
	for _, v := range x {
		d := float64(v) - mean
		ss += d * d
	}
	rstd := 1 / math.Sqrt(ss/float64(n)+float64(eps))
	m, r := float32(mean), float32(rstd)
	for i, v := range x {
		out[i] = (v-m)*r*w[i] + b[i]
	}
}

// geluTanh is GPT-2's activation (gelu_new): 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
func geluTanh(x float32) float32 {
	const s = 0.7978845608028654 // sqrt(2/pi)
	v := float64(x)
	return float32(0.5 * v * (1 + math.Tanh(s*(v+0.044715*v*v*v))))
}
