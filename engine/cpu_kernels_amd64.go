package engine

import "golang.org/x/sys/cpu"

// Assembly kernels (cpu_kernels_amd64.s); the Go wrappers below check every length first.

//go:noescape
func mm4x16(acc *float32, x *float32, ldx int, w *float32, ldw int, k int)

//go:noescape
func mm1x16(acc *float32, x *float32, w *float32, ldw int, k int)

//go:noescape
func dot4x(out *float32, x *float32, w *float32, ldw int, n int)

//go:noescape
func dot2x4(out *float32, x *float32, ldx int, w *float32, ldw int, n int)

//go:noescape
func dot1x(x *float32, w *float32, n int) float32

// pickKernels returns the AVX2/FMA kernels when the CPU and the OS support them, else the Go ones.
func pickKernels() kernels {
	if cpu.X86.HasAVX2 && cpu.X86.HasFMA {
		return asmKernels()
	}
	return goKernels()
}

func asmKernels() kernels {
	return kernels{name: "avx2+fma", mm4: mm4Asm, mm1: mm1Asm, dot8: dot8Asm, dot4: dot4Asm, dot: dotAsm}
}

func mm4Asm(acc, x []float32, ldx int, w []float32, ldw, k int) {
	if k <= 0 {
		return
	}
	_ = acc[63]
	_ = x[3*ldx+k-1]
	_ = w[(k-1)*ldw+15]
	mm4x16(&acc[0], &x[0], ldx, &w[0], ldw, k)
}

func mm1Asm(acc, x, w []float32, ldw, k int) {
	if k <= 0 {
		return
	}
	_ = acc[15]
	_ = x[k-1]
	_ = w[(k-1)*ldw+15]
	mm1x16(&acc[0], &x[0], &w[0], ldw, k)
}

func dot4Asm(out *[4]float32, x, w []float32, ldw int) {
	n := len(x)
	if n == 0 {
		*out = [4]float32{}
		return
	}
	_ = w[3*ldw+n-1]
	n8 := n &^ 7
	dot4x(&out[0], &x[0], &w[0], ldw, n8)
	for i := range out {
		for j := n8; j < n; j++ {
			out[i] += x[j] * w[i*ldw+j]
		}
	}
}

func dot8Asm(out *[8]float32, x []float32, ldx int, w []float32, ldw, n int) {
	if n == 0 {
		*out = [8]float32{}
		return
	}
	_ = x[ldx+n-1]
	_ = w[3*ldw+n-1]
	n8 := n &^ 7
	dot2x4(&out[0], &x[0], ldx, &w[0], ldw, n8)
	for r := range 2 {
		for i := range 4 {
			for j := n8; j < n; j++ {
				out[r*4+i] += x[r*ldx+j] * w[i*ldw+j]
			}
		}
	}
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
