//go:build cgo

package gpu

import "math"

// IEEE fp16 conversions for the weights the runner uploads.

// toHalf converts float32 to IEEE fp16 bits, rounding to nearest even; out-of-range values
// become infinities, NaN stays NaN.
func toHalf(dst []uint16, src []float32) {
	for i, f := range src {
		dst[i] = halfBits(f)
	}
}

// toHalfT converts rows [lo, hi) of the (rows, cols) matrix src (rows = len/cols) to fp16 and
// writes their transpose into dst, which is (cols, padRows); the piece holding the last row
// also zeroes the padding columns [rows, padRows). Pieces of different rows may run at once.
func toHalfT(dst []uint16, src []float32, cols, padRows, lo, hi int) {
	rows := len(src) / cols
	const tile = 64 // rows per pass: src's tile lines stay in L1 while c sweeps them
	for r0 := lo; r0 < hi; r0 += tile {
		r1 := min(r0+tile, hi)
		for c := range cols {
			out := dst[c*padRows+r0 : c*padRows+r1]
			for r := range out {
				out[r] = halfBits(src[(r0+r)*cols+c])
			}
		}
	}
	if hi == rows {
		for c := range cols {
			clear(dst[c*padRows+rows : (c+1)*padRows])
		}
	}
}

func halfBits(f float32) uint16 {
	b := math.Float32bits(f)
	sign := uint16(b>>16) & 0x8000
	exp := int32(b>>23&0xff) - 127 + 15
	mant := b & 0x7fffff
	switch {
	case b&0x7fffffff > 0x7f800000: // NaN
		return sign | 0x7e00
	case exp >= 31: // overflow or infinity
		return sign | 0x7c00
	case exp <= 0: // subnormal or zero in fp16
		if exp < -10 {
			return sign
		}
		mant |= 0x800000
		shift := uint32(14 - exp)
		h := mant >> shift
		rem := mant & (1<<shift - 1)
		half := uint32(1) << (shift - 1)
		if rem > half || (rem == half && h&1 == 1) {
			h++
		}
		return sign | uint16(h)
	}
	h := uint32(exp)<<10 | mant>>13
	rem := mant & 0x1fff
	if rem > 0x1000 || (rem == 0x1000 && h&1 == 1) {
		h++ // may carry into the exponent: still correct, up to infinity
	}
	return sign | uint16(h)
}

// halfToFloat converts fp16 bits back to float32 (tests).
func halfToFloat(h uint16) float32 {
	sign := uint32(h&0x8000) << 16
	exp := uint32(h>>10) & 0x1f
	mant := uint32(h & 0x3ff)
	switch {
	case exp == 0 && mant == 0:
		return math.Float32frombits(sign)
	case exp == 0: // subnormal
		return float32(float64(mant) * 0x1p-24 * signOf(sign))
	case exp == 31:
		return math.Float32frombits(sign | 0x7f800000 | mant<<13)
	}
	return math.Float32frombits(sign | (exp+127-15)<<23 | mant<<13)
}

func signOf(sign uint32) float64 {
	if sign != 0 {
		return -1
	}
	return 1
}
