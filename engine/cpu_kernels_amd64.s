#include "textflag.h"

// AVX2+FMA kernels of the CPU backend (selected at run time when the CPU has both; see
// cpu_kernels_amd64.go). Every output element is one FMA chain in a fixed order, the same in the
// 4-row and 1-row panel kernels, so a row's results do not depend on how many rows are computed
// with it.

// HSUM reduces the 8 lanes of Y into the low float of X (X is Y's low half; T is scratch):
// lanes i and i+4, then pairs i and i+2, then the last two: always in this order.
#define HSUM(Y, X, T) \
	VEXTRACTF128 $1, Y, T; \
	VADDPS       T, X, X; \
	VMOVHLPS     X, T, T; \
	VADDPS       T, X, X; \
	VMOVSHDUP    X, T; \
	VADDSS       T, X, X

// func dot1x(x *float32, w *float32, n int) float32
// x (n) . w (n); n is a multiple of 8: eight lanes of partial sums, then HSUM (attention
// scores when the head dimension is not 64)
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

// Panel kernels: w is a packed panel of 24 columns, k rows of 24 contiguous floats (see
// packedMat), so W streams sequentially. Twelve accumulators (4 rows x 3 vectors) keep both FMA
// pipes busy through the 4-cycle FMA latency. Each output element is one FMA chain over k in
// order, the same in mp4x24 and mp1x24.

// MP4STEP is one k of mp4x24: W row at WOFF(DI), x at XOFF from each row pointer.
#define MP4STEP(WOFF, XOFF) \
	VMOVUPS      WOFF(DI), Y12; \
	VMOVUPS      WOFF+32(DI), Y13; \
	VMOVUPS      WOFF+64(DI), Y14; \
	VBROADCASTSS XOFF(SI), Y15; \
	VFMADD231PS  Y12, Y15, Y0; \
	VFMADD231PS  Y13, Y15, Y1; \
	VFMADD231PS  Y14, Y15, Y2; \
	VBROADCASTSS XOFF(SI)(R8*1), Y15; \
	VFMADD231PS  Y12, Y15, Y3; \
	VFMADD231PS  Y13, Y15, Y4; \
	VFMADD231PS  Y14, Y15, Y5; \
	VBROADCASTSS XOFF(SI)(R8*2), Y15; \
	VFMADD231PS  Y12, Y15, Y6; \
	VFMADD231PS  Y13, Y15, Y7; \
	VFMADD231PS  Y14, Y15, Y8; \
	VBROADCASTSS XOFF(R10), Y15; \
	VFMADD231PS  Y12, Y15, Y9; \
	VFMADD231PS  Y13, Y15, Y10; \
	VFMADD231PS  Y14, Y15, Y11

// func mp4x24(acc *float32, x *float32, ldx int, w *float32, k int, pf *float32)
// acc (4, 24) row-major += x (4 rows of stride ldx, k columns) @ w (k, 24). Every k (pair of k)
// it also prefetches one cache line (two) from pf onwards, k &^ 1 lines in all: the caller points
// pf at a part of the panel it reads next, so that memory works while this chunk runs from L1.
TEXT ·mp4x24(SB), NOSPLIT, $0-48
	MOVQ acc+0(FP), DX
	MOVQ x+8(FP), SI
	MOVQ ldx+16(FP), R8
	SHLQ $2, R8
	MOVQ w+24(FP), DI
	MOVQ k+32(FP), CX
	MOVQ pf+40(FP), R11
	LEAQ (SI)(R8*2), R10
	ADDQ R8, R10 // R10 = row 3
	VMOVUPS 0(DX), Y0
	VMOVUPS 32(DX), Y1
	VMOVUPS 64(DX), Y2
	VMOVUPS 96(DX), Y3
	VMOVUPS 128(DX), Y4
	VMOVUPS 160(DX), Y5
	VMOVUPS 192(DX), Y6
	VMOVUPS 224(DX), Y7
	VMOVUPS 256(DX), Y8
	VMOVUPS 288(DX), Y9
	VMOVUPS 320(DX), Y10
	VMOVUPS 352(DX), Y11
	MOVQ CX, R12
	SHRQ $1, R12 // pairs of k
	ANDQ $1, CX  // odd k left
	TESTQ R12, R12
	JZ    mp4odd

mp4loop:
	PREFETCHT0 (R11)
	PREFETCHT0 64(R11)
	ADDQ       $128, R11
	MP4STEP(0, 0)
	MP4STEP(96, 4)
	ADDQ       $8, SI
	ADDQ       $8, R10
	ADDQ       $192, DI
	DECQ       R12
	JNZ        mp4loop

mp4odd:
	TESTQ CX, CX
	JZ    mp4done
	MP4STEP(0, 0)

mp4done:
	VMOVUPS Y0, 0(DX)
	VMOVUPS Y1, 32(DX)
	VMOVUPS Y2, 64(DX)
	VMOVUPS Y3, 96(DX)
	VMOVUPS Y4, 128(DX)
	VMOVUPS Y5, 160(DX)
	VMOVUPS Y6, 192(DX)
	VMOVUPS Y7, 224(DX)
	VMOVUPS Y8, 256(DX)
	VMOVUPS Y9, 288(DX)
	VMOVUPS Y10, 320(DX)
	VMOVUPS Y11, 352(DX)
	VZEROUPPER
	RET

// func mp1x24(acc *float32, x *float32, w *float32, k int)
// acc (24) += x (k) @ w (k, 24)
TEXT ·mp1x24(SB), NOSPLIT, $0-32
	MOVQ acc+0(FP), DX
	MOVQ x+8(FP), SI
	MOVQ w+16(FP), DI
	MOVQ k+24(FP), CX
	VMOVUPS 0(DX), Y0
	VMOVUPS 32(DX), Y1
	VMOVUPS 64(DX), Y2
	TESTQ CX, CX
	JZ    mp1done

mp1loop:
	VBROADCASTSS (SI), Y15
	VFMADD231PS  0(DI), Y15, Y0
	VFMADD231PS  32(DI), Y15, Y1
	VFMADD231PS  64(DI), Y15, Y2
	ADDQ         $4, SI
	ADDQ         $96, DI
	DECQ         CX
	JNZ          mp1loop

mp1done:
	VMOVUPS Y0, 0(DX)
	VMOVUPS Y1, 32(DX)
	VMOVUPS Y2, 64(DX)
	VZEROUPPER
	RET

// Constants of geluBias (float32 bits): gelu_new(x) = 0.5 x (1 + tanh(u)) = x / (1 + exp(-2u)),
// u = sqrt(2/pi) (x + 0.044715 x^3), so -2u = x (A + B x^2). exp(t) = 2^n e^r with
// n = round(t log2 e), r = t - n ln2 (ln2 split in two so that n*high is exact), e^r by its Taylor
// polynomial to r^7 (|r| <= ln2/2: truncation under 6e-9 relative). t is clamped to
// [-87, 88] so that 2^n stays a normal float; past that, exp no longer changes the result.
DATA geluK<>+0(SB)/4, $0xbfcc422a  // A = -2 sqrt(2/pi)
DATA geluK<>+4(SB)/4, $0xbd922279  // B = -2 sqrt(2/pi) 0.044715
DATA geluK<>+8(SB)/4, $0x42b00000  // 88
DATA geluK<>+12(SB)/4, $0xc2ae0000 // -87
DATA geluK<>+16(SB)/4, $0x3fb8aa3b // log2 e
DATA geluK<>+20(SB)/4, $0xbf318000 // -ln2, high part: 0.693359375 has 9 bits, so n*it is exact
DATA geluK<>+24(SB)/4, $0x395e8083 // -ln2, low part: -(ln2 - 0.693359375)
DATA geluK<>+28(SB)/4, $0x3f800000 // 1
DATA geluK<>+32(SB)/4, $0x3f000000 // 1/2!
DATA geluK<>+36(SB)/4, $0x3e2aaaab // 1/3!
DATA geluK<>+40(SB)/4, $0x3d2aaaab // 1/4!
DATA geluK<>+44(SB)/4, $0x3c088889 // 1/5!
DATA geluK<>+48(SB)/4, $0x3ab60b61 // 1/6!
DATA geluK<>+52(SB)/4, $0x39500d01 // 1/7!
GLOBL geluK<>(SB), RODATA|NOPTR, $56

// func geluBias(y *float32, a *float32, b *float32, n int)
// y[i] = gelu_new(a[i] + b[i]) for i < n; n is a multiple of 8. geluGo is the same computation
// without fused multiply-adds.
TEXT ·geluBias(SB), NOSPLIT, $0-32
	MOVQ y+0(FP), DI
	MOVQ a+8(FP), SI
	MOVQ b+16(FP), BX
	MOVQ n+24(FP), CX
	SHRQ $3, CX
	JZ   gelu_done
	VBROADCASTSS geluK<>+0(SB), Y6
	VBROADCASTSS geluK<>+4(SB), Y7
	VBROADCASTSS geluK<>+8(SB), Y8
	VBROADCASTSS geluK<>+12(SB), Y9
	VBROADCASTSS geluK<>+16(SB), Y10
	VBROADCASTSS geluK<>+20(SB), Y11
	VBROADCASTSS geluK<>+24(SB), Y12
	VBROADCASTSS geluK<>+28(SB), Y13
	VBROADCASTSS geluK<>+48(SB), Y14
	VBROADCASTSS geluK<>+52(SB), Y15

gelu_loop:
	VMOVUPS      (SI), Y0
	VADDPS       (BX), Y0, Y0 // x
	VMULPS       Y0, Y0, Y1   // x^2
	VFMADD213PS  Y6, Y7, Y1   // A + B x^2
	VMULPS       Y0, Y1, Y1   // t = -2u
	VMINPS       Y1, Y8, Y1   // x second: a NaN stays NaN
	VMAXPS       Y1, Y9, Y1
	VMULPS       Y10, Y1, Y3
	VROUNDPS     $0, Y3, Y3   // n, to nearest even
	VFMADD231PS  Y11, Y3, Y1  // r = t - n ln2_hi
	VFMADD231PS  Y12, Y3, Y1  //     - n ln2_lo
	VMOVAPS      Y15, Y4      // p = 1/7!
	VFMADD213PS  Y14, Y1, Y4  // p = p r + 1/6!
	VBROADCASTSS geluK<>+44(SB), Y2
	VFMADD213PS  Y2, Y1, Y4
	VBROADCASTSS geluK<>+40(SB), Y2
	VFMADD213PS  Y2, Y1, Y4
	VBROADCASTSS geluK<>+36(SB), Y2
	VFMADD213PS  Y2, Y1, Y4
	VBROADCASTSS geluK<>+32(SB), Y2
	VFMADD213PS  Y2, Y1, Y4
	VFMADD213PS  Y13, Y1, Y4  // p r + 1
	VFMADD213PS  Y13, Y1, Y4  // p r + 1 = e^r
	VCVTPS2DQ    Y3, Y5
	VPSLLD       $23, Y5, Y5
	VPADDD       Y13, Y5, Y5  // bits of 2^n: (n + 127) << 23
	VMULPS       Y5, Y4, Y4   // exp(t)
	VADDPS       Y13, Y4, Y4  // 1 + exp(-2u)
	VDIVPS       Y4, Y0, Y0
	VMOVUPS      Y0, (DI)
	ADDQ         $32, SI
	ADDQ         $32, BX
	ADDQ         $32, DI
	DECQ         CX
	JNZ          gelu_loop
	VZEROUPPER

gelu_done:
	RET

// func qk64(s *float32, q *float32, k *float32, ldk int, n int)
// s[i] = q[0:64] . k[i*ldk : i*ldk+64] for i < n: attention scores of one head (head dim 64) over
// n positions whose keys are rows of stride ldk. q stays in Y8-Y15; each score is two chains of
// four products (vectors 0,2,4,6 and 1,3,5,7), added, then summed across lanes like HSUM. The key
// row two positions ahead is prefetched while this one is computed.
TEXT ·qk64(SB), NOSPLIT, $0-40
	MOVQ s+0(FP), DX
	MOVQ q+8(FP), SI
	MOVQ k+16(FP), DI
	MOVQ ldk+24(FP), R9
	SHLQ $2, R9
	MOVQ n+32(FP), CX
	TESTQ CX, CX
	JZ    qk_done
	VMOVUPS 0(SI), Y8
	VMOVUPS 32(SI), Y9
	VMOVUPS 64(SI), Y10
	VMOVUPS 96(SI), Y11
	VMOVUPS 128(SI), Y12
	VMOVUPS 160(SI), Y13
	VMOVUPS 192(SI), Y14
	VMOVUPS 224(SI), Y15

qk_loop:
	LEAQ        (DI)(R9*2), R10
	PREFETCHT0  (R10)
	PREFETCHT0  64(R10)
	PREFETCHT0  128(R10)
	PREFETCHT0  192(R10)
	VMULPS      0(DI), Y8, Y0
	VMULPS      32(DI), Y9, Y1
	VFMADD231PS 64(DI), Y10, Y0
	VFMADD231PS 96(DI), Y11, Y1
	VFMADD231PS 128(DI), Y12, Y0
	VFMADD231PS 160(DI), Y13, Y1
	VFMADD231PS 192(DI), Y14, Y0
	VFMADD231PS 224(DI), Y15, Y1
	VADDPS      Y1, Y0, Y0
	HSUM(Y0, X0, X1)
	VMOVSS      X0, (DX)
	ADDQ        $4, DX
	ADDQ        R9, DI
	DECQ        CX
	JNZ         qk_loop
	VZEROUPPER

qk_done:
	RET

// func av64(out *float32, e *float32, v *float32, ldv int, n int)
// out[0:64] += sum over i < n of e[i] * v[i*ldv : i*ldv+64], in order of i: one head's weighted
// sum of values (head dim 64), rows of stride ldv; the running sums stay in Y0-Y7, and the row
// two positions ahead is prefetched.
TEXT ·av64(SB), NOSPLIT, $0-40
	MOVQ out+0(FP), DX
	MOVQ e+8(FP), SI
	MOVQ v+16(FP), DI
	MOVQ ldv+24(FP), R9
	SHLQ $2, R9
	MOVQ n+32(FP), CX
	TESTQ CX, CX
	JZ    av_done
	VMOVUPS 0(DX), Y0
	VMOVUPS 32(DX), Y1
	VMOVUPS 64(DX), Y2
	VMOVUPS 96(DX), Y3
	VMOVUPS 128(DX), Y4
	VMOVUPS 160(DX), Y5
	VMOVUPS 192(DX), Y6
	VMOVUPS 224(DX), Y7

av_loop:
	LEAQ         (DI)(R9*2), R10
	PREFETCHT0   (R10)
	PREFETCHT0   64(R10)
	PREFETCHT0   128(R10)
	PREFETCHT0   192(R10)
	VBROADCASTSS (SI), Y8
	VFMADD231PS  0(DI), Y8, Y0
	VFMADD231PS  32(DI), Y8, Y1
	VFMADD231PS  64(DI), Y8, Y2
	VFMADD231PS  96(DI), Y8, Y3
	VFMADD231PS  128(DI), Y8, Y4
	VFMADD231PS  160(DI), Y8, Y5
	VFMADD231PS  192(DI), Y8, Y6
	VFMADD231PS  224(DI), Y8, Y7
	ADDQ         $4, SI
	ADDQ         R9, DI
	DECQ         CX
	JNZ          av_loop
	VMOVUPS Y0, 0(DX)
	VMOVUPS Y1, 32(DX)
	VMOVUPS Y2, 64(DX)
	VMOVUPS Y3, 96(DX)
	VMOVUPS Y4, 128(DX)
	VMOVUPS Y5, 160(DX)
	VMOVUPS Y6, 192(DX)
	VMOVUPS Y7, 224(DX)
	VZEROUPPER

av_done:
	RET

// func expShift(x *float32, n int, top float32)
// x[i] = exp(x[i] - top) for i < n (n a multiple of 8), as expGo computes it (geluBias's exp).
TEXT ·expShift(SB), NOSPLIT, $0-20
	MOVQ x+0(FP), DI
	MOVQ n+8(FP), CX
	SHRQ $3, CX
	JZ   exp_done
	VBROADCASTSS top+16(FP), Y7
	VBROADCASTSS geluK<>+8(SB), Y8
	VBROADCASTSS geluK<>+12(SB), Y9
	VBROADCASTSS geluK<>+16(SB), Y10
	VBROADCASTSS geluK<>+20(SB), Y11
	VBROADCASTSS geluK<>+24(SB), Y12
	VBROADCASTSS geluK<>+28(SB), Y13
	VBROADCASTSS geluK<>+48(SB), Y14
	VBROADCASTSS geluK<>+52(SB), Y15

exp_loop:
	VMOVUPS      (DI), Y1
	VSUBPS       Y7, Y1, Y1   // t = x - top
	VMINPS       Y1, Y8, Y1   // x second: a NaN stays NaN
	VMAXPS       Y1, Y9, Y1
	VMULPS       Y10, Y1, Y3
	VROUNDPS     $0, Y3, Y3   // n, to nearest even
	VFMADD231PS  Y11, Y3, Y1  // r = t - n ln2_hi
	VFMADD231PS  Y12, Y3, Y1  //     - n ln2_lo
	VMOVAPS      Y15, Y4      // p = 1/7!
	VFMADD213PS  Y14, Y1, Y4  // p = p r + 1/6!
	VBROADCASTSS geluK<>+44(SB), Y2
	VFMADD213PS  Y2, Y1, Y4
	VBROADCASTSS geluK<>+40(SB), Y2
	VFMADD213PS  Y2, Y1, Y4
	VBROADCASTSS geluK<>+36(SB), Y2
	VFMADD213PS  Y2, Y1, Y4
	VBROADCASTSS geluK<>+32(SB), Y2
	VFMADD213PS  Y2, Y1, Y4
	VFMADD213PS  Y13, Y1, Y4  // p r + 1
	VFMADD213PS  Y13, Y1, Y4  // p r + 1 = e^r
	VCVTPS2DQ    Y3, Y5
	VPSLLD       $23, Y5, Y5
	VPADDD       Y13, Y5, Y5  // bits of 2^n
	VMULPS       Y5, Y4, Y4
	VMOVUPS      Y4, (DI)
	ADDQ         $32, DI
	DECQ         CX
	JNZ          exp_loop
	VZEROUPPER

exp_done:
	RET

// func addBias(y *float32, a *float32, b *float32, n int, residual bool)
// y[i] = a[i] + b[i] for i < n, or y[i] += a[i] + b[i] when residual (a matmul's epilogue);
// n is a multiple of 8.
TEXT ·addBias(SB), NOSPLIT, $0-33
	MOVQ y+0(FP), DI
	MOVQ a+8(FP), SI
	MOVQ b+16(FP), BX
	MOVQ n+24(FP), CX
	MOVBLZX residual+32(FP), AX
	SHRQ $3, CX
	JZ   bias_done
	TESTQ AX, AX
	JNZ  bias_res

bias_store:
	VMOVUPS (SI), Y0
	VADDPS  (BX), Y0, Y0
	VMOVUPS Y0, (DI)
	ADDQ    $32, SI
	ADDQ    $32, BX
	ADDQ    $32, DI
	DECQ    CX
	JNZ     bias_store
	VZEROUPPER
	RET

bias_res:
	VMOVUPS (SI), Y0
	VADDPS  (BX), Y0, Y0 // a + b first, as the Go loop
	VADDPS  (DI), Y0, Y0
	VMOVUPS Y0, (DI)
	ADDQ    $32, SI
	ADDQ    $32, BX
	ADDQ    $32, DI
	DECQ    CX
	JNZ     bias_res
	VZEROUPPER

bias_done:
	RET

// Constants of rowScan (float32 bits).
DATA scanK<>+0(SB)/4, $0x7f800000 // +Inf
DATA scanK<>+4(SB)/4, $0xff7fffff // -MaxFloat32
DATA scanK<>+8(SB)/4, $0xff800000 // -Inf
GLOBL scanK<>(SB), RODATA|NOPTR, $12

// SCANSTEP folds the 8 floats at OFF(SI) into the running max M and the counts: ge (Y4) of
// x >= s (Y15), posInf (Y5) of x == +Inf (Y14), notLow (Y6) of x >= -MaxFloat32 (Y13). A +Inf
// lane is made NaN (all ones) before the max, which keeps M for a NaN x (M is its second
// operand), as for -Inf (never above M). Compare masks are -1 per lane, hence subtracted.
#define SCANSTEP(OFF, M) \
	VMOVUPS OFF(SI), Y8; \
	VCMPPS  $0x1d, Y15, Y8, Y9; \
	VCMPPS  $0x00, Y14, Y8, Y10; \
	VCMPPS  $0x1d, Y13, Y8, Y11; \
	VORPS   Y10, Y8, Y12; \
	VMAXPS  M, Y12, M; \
	VPSUBD  Y9, Y4, Y4; \
	VPSUBD  Y10, Y5, Y5; \
	VPSUBD  Y11, Y6, Y6

// HSUMD reduces the 8 int32 lanes of Y into the low dword of X (X is Y's low half; T scratch).
#define HSUMD(Y, X, T) \
	VEXTRACTI128 $1, Y, T; \
	VPADDD       T, X, X; \
	VPSHUFD      $0x4e, X, T; \
	VPADDD       T, X, X; \
	VPSHUFD      $0xb1, X, T; \
	VPADDD       T, X, X

// func rowScan(x *float32, n int, s float32) (m float32, ge, posInf, notLow int)
// scanGo over x[:n] (n a multiple of 8, under 2^31) except for which of equal maxima m is: a
// zero m may be -0 or +0 whatever the row's order (the caller settles it). Four running maxima
// over 32 floats a step, then one over 8; the counts in int32 lanes.
TEXT ·rowScan(SB), NOSPLIT, $0-56
	MOVQ         x+0(FP), SI
	MOVQ         n+8(FP), CX
	VBROADCASTSS s+16(FP), Y15
	VBROADCASTSS scanK<>+0(SB), Y14
	VBROADCASTSS scanK<>+4(SB), Y13
	VBROADCASTSS scanK<>+8(SB), Y0
	VMOVAPS      Y0, Y1
	VMOVAPS      Y0, Y2
	VMOVAPS      Y0, Y3
	VPXOR        Y4, Y4, Y4
	VPXOR        Y5, Y5, Y5
	VPXOR        Y6, Y6, Y6
	SHRQ         $3, CX // vectors of 8
	MOVQ         CX, DX
	SHRQ         $2, DX // steps of 4 vectors
	ANDQ         $3, CX // vectors left after them
	TESTQ        DX, DX
	JZ           scan_one

scan_four:
	SCANSTEP(0, Y0)
	SCANSTEP(32, Y1)
	SCANSTEP(64, Y2)
	SCANSTEP(96, Y3)
	ADDQ $128, SI
	DECQ DX
	JNZ  scan_four

scan_one:
	TESTQ CX, CX
	JZ    scan_done
	SCANSTEP(0, Y0)
	ADDQ  $32, SI
	DECQ  CX
	JMP   scan_one

scan_done:
	VMAXPS       Y1, Y0, Y0 // no NaN here: the maxima combine in any order
	VMAXPS       Y3, Y2, Y2
	VMAXPS       Y2, Y0, Y0
	VEXTRACTF128 $1, Y0, X1
	VMAXPS       X1, X0, X0
	VMOVHLPS     X0, X1, X1
	VMAXPS       X1, X0, X0
	VMOVSHDUP    X0, X1
	VMAXSS       X1, X0, X0
	VMOVSS       X0, m+24(FP)
	HSUMD(Y4, X4, X7)
	VMOVD        X4, AX
	MOVQ         AX, ge+32(FP)
	HSUMD(Y5, X5, X7)
	VMOVD        X5, AX
	MOVQ         AX, posInf+40(FP)
	HSUMD(Y6, X6, X7)
	VMOVD        X6, AX
	MOVQ         AX, notLow+48(FP)
	VZEROUPPER
	RET

// func firstAbove(x *float32, n int, thr float32) int
// The index of the first x[j] > thr (NaN never), or n if none; n is a multiple of 8. Four
// vectors a step, their compare masks or'ed into one test: a row's top-k candidates are rare.
TEXT ·firstAbove(SB), NOSPLIT, $0-32
	MOVQ         x+0(FP), SI
	MOVQ         n+8(FP), CX
	VBROADCASTSS thr+16(FP), Y15
	XORQ         AX, AX // index of the vector at hand

above_four:
	LEAQ    32(AX), DX
	CMPQ    DX, CX
	JGT     above_one
	VCMPPS  $0x11, (SI)(AX*4), Y15, Y0 // thr < x, ordered: false for NaN
	VCMPPS  $0x11, 32(SI)(AX*4), Y15, Y1
	VCMPPS  $0x11, 64(SI)(AX*4), Y15, Y2
	VCMPPS  $0x11, 96(SI)(AX*4), Y15, Y3
	VORPS   Y1, Y0, Y4
	VORPS   Y3, Y2, Y5
	VORPS   Y5, Y4, Y4
	VMOVMSKPS Y4, BX
	TESTL   BX, BX
	JNZ     above_which
	MOVQ    DX, AX
	JMP     above_four

above_which: // the first of the four vectors with a lane set
	VMOVMSKPS Y0, BX
	TESTL     BX, BX
	JNZ       above_found
	ADDQ      $8, AX
	VMOVMSKPS Y1, BX
	TESTL     BX, BX
	JNZ       above_found
	ADDQ      $8, AX
	VMOVMSKPS Y2, BX
	TESTL     BX, BX
	JNZ       above_found
	ADDQ      $8, AX
	VMOVMSKPS Y3, BX
	JMP       above_found

above_one:
	CMPQ      AX, CX
	JGE       above_none
	VCMPPS    $0x11, (SI)(AX*4), Y15, Y0
	VMOVMSKPS Y0, BX
	TESTL     BX, BX
	JNZ       above_found
	ADDQ      $8, AX
	JMP       above_one

above_found:
	BSFL BX, BX
	ADDQ BX, AX
	MOVQ AX, ret+24(FP)
	VZEROUPPER
	RET

above_none:
	MOVQ CX, ret+24(FP)
	VZEROUPPER
	RET
