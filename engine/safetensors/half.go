package safetensors

import (
	"encoding/binary"
	"math"
)

// F16ToF32 converts an IEEE 754 binary16 value to float32 exactly (every half is a float32):
// signed zeros, subnormals, infinities and NaNs (payload kept) included.
func F16ToF32(h uint16) float32 {
	sign := uint32(h>>15) << 31
	exp := uint32(h>>10) & 0x1f
	frac := uint32(h) & 0x3ff
	switch {
	case exp == 0x1f: // inf or NaN: all-ones exponent, fraction shifted into place
		return math.Float32frombits(sign | 0xff<<23 | frac<<13)
	case exp != 0: // normal: rebias the exponent from 15 to 127
		return math.Float32frombits(sign | (exp+127-15)<<23 | frac<<13)
	case frac == 0:
		return math.Float32frombits(sign) // ±0
	}
	// Subnormal half: frac * 2^-24. Normalise: shift until the implicit bit (bit 10) is set.
	e := uint32(127 - 15 + 1)
	for frac&0x400 == 0 {
		frac <<= 1
		e--
	}
	return math.Float32frombits(sign | e<<23 | (frac&0x3ff)<<13)
}

// BF16ToF32 converts a bfloat16 value, which is the upper 16 bits of a float32.
func BF16ToF32(h uint16) float32 {
	return math.Float32frombits(uint32(h) << 16)
}

// f32frombits reads a little-endian float32 from the first 4 bytes of b.
func f32frombits(b []byte) float32 {
	return math.Float32frombits(binary.LittleEndian.Uint32(b))
}
