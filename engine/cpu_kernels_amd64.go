package engine

import (
	"math"
	"slices"

	"golang.org/x/sys/cpu"
)

// Assembly kernels (cpu_kernels_amd64.s); the Go wrappers below check every length first.

//go:noescape
func mp4x24(acc *float32, x *float32, ldx int, w *float32, k int, pf *float32)

//go:noescape
func mp1x24(acc *float32, x *float32, w *float32, k int)

//go:noescape
func geluBias(y *float32, a *float32, b *float32, n int)

//go:noescape
func qk64(s *float32, q *float32, k *float32, ldk int, n int)

//go:noescape
func av64(out *float32, e *float32, v *float32, ldv int, n int)

//go:noescape
func expShift(x *float32, n int, top float32)

//go:noescape
func addBias(y *float32, a *float32, b *float32, n int, residual bool)

//go:noescape
func dot1x(x *float32, w *float32, n int) float32

//go:noescape
func rowScan(x *float32, n int, s float32) (m float32, ge, posInf, notLow int)

//go:noescape
func firstAbove(x *float32, n int, thr float32) int

// pickKernels returns the AVX2/FMA kernels when the CPU and the OS support them, else the Go ones.
func pickKernels() kernels {
	if cpu.X86.HasAVX2 && cpu.X86.HasFMA {
		return asmKernels()
	}
	return goKernels()
}

func asmKernels() kernels {
	return kernels{name: "avx2+fma", mp4: mp4Asm, mp1: mp1Asm, dot: dotAsm, gelu: geluAsm, bias: biasAsm,
		exp: expAsm, qk: qkAsm, av: avAsm, scan: scanAsm, above: aboveAsm}
}

func mp4Asm(acc, x []float32, ldx int, w []float32, k int, pf []float32) {
	if k <= 0 {
		return
	}
	_ = acc[4*panelW-1]
	_ = x[3*ldx+k-1]
	_ = w[k*panelW-1]
	// a prefetch never faults, but keep pf inside the slice it came from
	p := &w[0]
	if len(pf) >= (k&^1)*16 && len(pf) > 0 {
		p = &pf[0]
	}
	mp4x24(&acc[0], &x[0], ldx, &w[0], k, p)
}

func mp1Asm(acc, x, w []float32, k int) {
	if k <= 0 {
		return
	}
	_ = acc[panelW-1]
	_ = x[k-1]
	_ = w[k*panelW-1]
	mp1x24(&acc[0], &x[0], &w[0], k)
}

func dotAsm(x, w []float32) float32 {
	n := len(x)
	if n == 0 {
		return 0
	}
	_ = w[n-1]
	n8 := n &^ 7
	s := dot1x(&x[0], &w[0], n8)
	for j := n8; j < n; j++ {
		s += x[j] * w[j]
	}
	return s
}

func geluAsm(y, a, b []float32) {
	n := len(y)
	a, b = a[:n], b[:n]
	n8 := n &^ 7
	if n8 > 0 {
		geluBias(&y[0], &a[0], &b[0], n8)
	}
	for i := n8; i < n; i++ {
		y[i] = geluGo(a[i] + b[i])
	}
}

func expAsm(x []float32, top float32) {
	n8 := len(x) &^ 7
	if n8 > 0 {
		expShift(&x[0], n8, top)
	}
	for i := n8; i < len(x); i++ {
		x[i] = expGo(x[i] - top)
	}
}

// qkAsm runs qk64 for head dimension 64 (every GPT-2 size), dot per position otherwise.
func qkAsm(s, q, k []float32, ldk int) {
	n := len(s)
	if n == 0 {
		return
	}
	if len(q) != 64 {
		for i := range s {
			s[i] = dotAsm(q, k[i*ldk:])
		}
		return
	}
	_ = k[(n-1)*ldk+63]
	qk64(&s[0], &q[0], &k[0], ldk, n)
}

// avAsm runs av64 for head dimension 64, the Go loop otherwise.
func avAsm(out, e, v []float32, ldv int) {
	n := len(e)
	if n == 0 {
		return
	}
	if len(out) != 64 {
		avGo(out, e, v, ldv)
		return
	}
	_ = v[(n-1)*ldv+63]
	av64(&out[0], &e[0], &v[0], ldv, n)
}

func biasAsm(y, a, b []float32, residual bool) {
	n := len(y)
	a, b = a[:n], b[:n]
	n8 := n &^ 7
	if n8 > 0 {
		addBias(&y[0], &a[0], &b[0], n8, residual)
	}
	biasGo(y[n8:], a[n8:], b[n8:], residual)
}

// scanChunk bounds the floats of one rowScan call, whose counts are int32 lanes.
const scanChunk = 1 << 30

// scanAsm is scanGo: rowScan over chunks of whole vectors, scanGo over the tail. Of equal maxima
// scanGo keeps the first, which only shows for zero: then m is the row's first ±0.
func scanAsm(x []float32, s float32) (m float32, ge, posInf, notLow int) {
	m = float32(math.Inf(-1))
	for rest := x; len(rest) > 0; {
		var cm float32
		var cg, cp, cn int
		if n := min(len(rest), scanChunk) &^ 7; n > 0 {
			cm, cg, cp, cn = rowScan(&rest[0], n, s)
			rest = rest[n:]
		} else {
			cm, cg, cp, cn = scanGo(rest, s)
			rest = nil
		}
		m = max(m, cm) // neither is NaN
		ge, posInf, notLow = ge+cg, posInf+cp, notLow+cn
	}
	if m == 0 {
		m = x[slices.Index(x, 0)]
	}
	return m, ge, posInf, notLow
}

// aboveAsm is aboveGo: firstAbove over whole vectors from i, aboveGo over the tail.
func aboveAsm(x []float32, i int, thr float32) int {
	if i >= len(x) {
		return len(x)
	}
	rest := x[i:]
	if n := len(rest) &^ 7; n > 0 {
		if j := firstAbove(&rest[0], n, thr); j < n {
			return i + j
		}
		i += n
	}
	return aboveGo(x, i, thr)
}
