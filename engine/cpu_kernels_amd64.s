#include "textflag.h"

// AVX2+FMA kernels of the CPU backend (selected at run time when the CPU has both; see
// cpu_kernels_amd64.go). Every output element is one FMA chain in a fixed order, the same in the
// 4-row and 1-row matmul kernels and in the 4-row and 1-row dot kernels, so a row's results do
// not depend on how many rows are computed with it.

// func mm4x16(acc *float32, x *float32, ldx int, w *float32, ldw int, k int)
// acc (4, 16) row-major += x (4 rows of stride ldx, k columns) @ w (k rows of stride ldw, 16 columns)
TEXT ·mm4x16(SB), NOSPLIT, $0-48
	MOVQ acc+0(FP), DX
	MOVQ x+8(FP), SI
	MOVQ ldx+16(FP), R8
	SHLQ $2, R8
	MOVQ w+24(FP), DI
	MOVQ ldw+32(FP), R9
	SHLQ $2, R9
	MOVQ k+40(FP), CX
	LEAQ (SI)(R8*1), R10
	LEAQ (R10)(R8*1), R11
	LEAQ (R11)(R8*1), R12
	VMOVUPS 0(DX), Y0
	VMOVUPS 32(DX), Y1
	VMOVUPS 64(DX), Y2
	VMOVUPS 96(DX), Y3
	VMOVUPS 128(DX), Y4
	VMOVUPS 160(DX), Y5
	VMOVUPS 192(DX), Y6
	VMOVUPS 224(DX), Y7
	TESTQ CX, CX
	JZ    mm4done

mm4loop:
	VMOVUPS      0(DI), Y8
	VMOVUPS      32(DI), Y9
	VBROADCASTSS (SI), Y10
	VFMADD231PS  Y8, Y10, Y0
	VFMADD231PS  Y9, Y10, Y1
	VBROADCASTSS (R10), Y11
	VFMADD231PS  Y8, Y11, Y2
	VFMADD231PS  Y9, Y11, Y3
	VBROADCASTSS (R11), Y12
	VFMADD231PS  Y8, Y12, Y4
	VFMADD231PS  Y9, Y12, Y5
	VBROADCASTSS (R12), Y13
	VFMADD231PS  Y8, Y13, Y6
	VFMADD231PS  Y9, Y13, Y7
	ADDQ         $4, SI
	ADDQ         $4, R10
	ADDQ         $4, R11
	ADDQ         $4, R12
	ADDQ         R9, DI
	DECQ         CX
	JNZ          mm4loop

mm4done:
	VMOVUPS Y0, 0(DX)
	VMOVUPS Y1, 32(DX)
	VMOVUPS Y2, 64(DX)
	VMOVUPS Y3, 96(DX)
	VMOVUPS Y4, 128(DX)
	VMOVUPS Y5, 160(DX)
	VMOVUPS Y6, 192(DX)
	VMOVUPS Y7, 224(DX)
	VZEROUPPER
	RET

// func mm1x16(acc *float32, x *float32, w *float32, ldw int, k int)
// acc (16) += x (k) @ w (k rows of stride ldw, 16 columns)
TEXT ·mm1x16(SB), NOSPLIT, $0-40
	MOVQ acc+0(FP), DX
	MOVQ x+8(FP), SI
	MOVQ w+16(FP), DI
	MOVQ ldw+24(FP), R9
	SHLQ $2, R9
	MOVQ k+32(FP), CX
	VMOVUPS 0(DX), Y0
	VMOVUPS 32(DX), Y1
	TESTQ CX, CX
	JZ    mm1done

mm1loop:
	VBROADCASTSS (SI), Y10
	VFMADD231PS  0(DI), Y10, Y0
	VFMADD231PS  32(DI), Y10, Y1
	ADDQ         $4, SI
	ADDQ         R9, DI
	DECQ         CX
	JNZ          mm1loop

mm1done:
	VMOVUPS Y0, 0(DX)
	VMOVUPS Y1, 32(DX)
	VZEROUPPER
	RET

// HSUM reduces the 8 lanes of Y into the low float of X (X is Y's low half; T is scratch):
// lanes i and i+4, then pairs i and i+2, then the last two: always in this order.
#define HSUM(Y, X, T) \
	VEXTRACTF128 $1, Y, T; \
	VADDPS       T, X, X; \
	VMOVHLPS     X, T, T; \
	VADDPS       T, X, X; \
	VMOVSHDUP    X, T; \
	VADDSS       T, X, X

// func dot4x(out *float32, x *float32, w *float32, ldw int, n int)
// out[i] = x (n) . w[i*ldw : i*ldw+n] for i = 0..3; n is a multiple of 8
TEXT ·dot4x(SB), NOSPLIT, $0-40
	MOVQ out+0(FP), DX
	MOVQ x+8(FP), SI
	MOVQ w+16(FP), DI
	MOVQ ldw+24(FP), R9
	SHLQ $2, R9
	MOVQ n+32(FP), CX
	SHRQ $3, CX
	LEAQ (DI)(R9*1), R10
	LEAQ (R10)(R9*1), R11
	LEAQ (R11)(R9*1), R12
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	TESTQ  CX, CX
	JZ     dot4done

dot4loop:
	VMOVUPS     (SI), Y8
	VFMADD231PS (DI), Y8, Y0
	VFMADD231PS (R10), Y8, Y1
	VFMADD231PS (R11), Y8, Y2
	VFMADD231PS (R12), Y8, Y3
	ADDQ        $32, SI
	ADDQ        $32, DI
	ADDQ        $32, R10
	ADDQ        $32, R11
	ADDQ        $32, R12
	DECQ        CX
	JNZ         dot4loop

dot4done:
	HSUM(Y0, X0, X9)
	HSUM(Y1, X1, X9)
	HSUM(Y2, X2, X9)
	HSUM(Y3, X3, X9)
	VMOVSS X0, 0(DX)
	VMOVSS X1, 4(DX)
	VMOVSS X2, 8(DX)
	VMOVSS X3, 12(DX)
	VZEROUPPER
	RET

// func dot1x(x *float32, w *float32, n int) float32
// x (n) . w (n); n is a multiple of 8; the same chain as one lane of dot4x
TEXT ·dot1x(SB), NOSPLIT, $0-28
	MOVQ x+0(FP), SI
	MOVQ w+8(FP), DI
	MOVQ n+16(FP), CX
	SHRQ $3, CX
	VXORPS Y0, Y0, Y0
	TESTQ  CX, CX
	JZ     dot1done

dot1loop:
	VMOVUPS     (SI), Y8
	VFMADD231PS (DI), Y8, Y0
	ADDQ        $32, SI
	ADDQ        $32, DI
	DECQ        CX
	JNZ         dot1loop

dot1done:
	HSUM(Y0, X0, X9)
	VMOVSS X0, ret+24(FP)
	VZEROUPPER
	RET

// func dot2x4(out *float32, x *float32, ldx int, w *float32, ldw int, n int)
// out[r*4+i] = x[r*ldx : r*ldx+n] . w[i*ldw : i*ldw+n] for r < 2, i < 4; n is a multiple of 8.
// Eight independent chains keep both FMA units busy; each chain is exactly dot1x's.
TEXT ·dot2x4(SB), NOSPLIT, $0-48
	MOVQ out+0(FP), DX
	MOVQ x+8(FP), SI
	MOVQ ldx+16(FP), R8
	SHLQ $2, R8
	MOVQ w+24(FP), DI
	MOVQ ldw+32(FP), R9
	SHLQ $2, R9
	MOVQ n+40(FP), CX
	SHRQ $3, CX
	LEAQ (SI)(R8*1), R13
	LEAQ (DI)(R9*1), R10
	LEAQ (R10)(R9*1), R11
	LEAQ (R11)(R9*1), R12
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	VXORPS Y4, Y4, Y4
	VXORPS Y5, Y5, Y5
	VXORPS Y6, Y6, Y6
	VXORPS Y7, Y7, Y7
	TESTQ  CX, CX
	JZ     dot24done

dot24loop:
	VMOVUPS     (SI), Y8
	VMOVUPS     (R13), Y9
	VMOVUPS     (DI), Y10
	VFMADD231PS Y10, Y8, Y0
	VFMADD231PS Y10, Y9, Y4
	VMOVUPS     (R10), Y11
	VFMADD231PS Y11, Y8, Y1
	VFMADD231PS Y11, Y9, Y5
	VMOVUPS     (R11), Y12
	VFMADD231PS Y12, Y8, Y2
	VFMADD231PS Y12, Y9, Y6
	VMOVUPS     (R12), Y13
	VFMADD231PS Y13, Y8, Y3
	VFMADD231PS Y13, Y9, Y7
	ADDQ        $32, SI
	ADDQ        $32, R13
	ADDQ        $32, DI
	ADDQ        $32, R10
	ADDQ        $32, R11
	ADDQ        $32, R12
	DECQ        CX
	JNZ         dot24loop

dot24done:
	HSUM(Y0, X0, X14)
	HSUM(Y1, X1, X14)
	HSUM(Y2, X2, X14)
	HSUM(Y3, X3, X14)
	HSUM(Y4, X4, X14)
	HSUM(Y5, X5, X14)
	HSUM(Y6, X6, X14)
	HSUM(Y7, X7, X14)
	VMOVSS X0, 0(DX)
	VMOVSS X1, 4(DX)
	VMOVSS X2, 8(DX)
	VMOVSS X3, 12(DX)
	VMOVSS X4, 16(DX)
	VMOVSS X5, 20(DX)
	VMOVSS X6, 24(DX)
	VMOVSS X7, 28(DX)
	VZEROUPPER
	RET
