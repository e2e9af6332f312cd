// Package half converts between float32/float64 and the 16-bit float
// formats (IEEE binary16 "f16" and bfloat16 "bf16"), rounding to nearest
// even, with NaN, infinities and subnormals handled.
package half

import "math"

// Format parameters: explicit mantissa bits, minimum normal exponent and
// largest finite value.
const (
	bf16Mant = 7
	bf16Emin = -126
	f16Mant  = 10
	f16Emin  = -14
)

var (
	bf16Max = math.Ldexp(2-1.0/(1<<bf16Mant), 127) // 3.3895e38
	f16Max  = 65504.0
)

// RoundBF16 rounds x to the nearest bfloat16 value (ties to even), as float64.
func RoundBF16(x float64) float64 { return round(x, bf16Mant, bf16Emin, bf16Max) }

// RoundF16 rounds x to the nearest binary16 value (ties to even), as float64.
func RoundF16(x float64) float64 { return round(x, f16Mant, f16Emin, f16Max) }

// RoundF32 rounds x to the nearest float32 value (ties to even), as float64.
func RoundF32(x float64) float64 { return float64(float32(x)) }

// round rounds x directly from float64 (no double rounding through float32)
// to a format with mant explicit mantissa bits, minimum normal exponent emin
// and largest finite value maxv; overflow gives a signed infinity.
func round(x float64, mant uint, emin int, maxv float64) float64 {
	if x == 0 || math.IsNaN(x) || math.IsInf(x, 0) {
		return x
	}
	b := math.Float64bits(x)
	if e := int(b>>52&0x7ff) - 1023; e >= emin {
		// Normal in the target: round the float64 mantissa at bit sh; a carry
		// out of the mantissa correctly bumps the exponent.
		sh := 52 - mant
		b += 1<<(sh-1) - 1 + (b >> sh & 1)
		b &^= 1<<sh - 1
		r := math.Float64frombits(b)
		if math.Abs(r) > maxv {
			return math.Copysign(math.Inf(1), x)
		}
		return r
	}
	// Subnormal in the target: a fixed quantum; scaling by it is exact.
	q := math.Ldexp(1, emin-int(mant))
	return math.RoundToEven(x/q) * q
}

// F32ToBF16 converts f to bfloat16 bits, rounding to nearest even. NaNs stay
// NaN (quieted), keeping the sign and the top payload bits.
func F32ToBF16(f float32) uint16 {
	b := math.Float32bits(f)
	if f != f {
		return uint16(b>>16) | 0x40
	}
	b += 0x7fff + (b >> 16 & 1)
	return uint16(b >> 16)
}

// BF16ToF32 converts bfloat16 bits to float32 (exact).
func BF16ToF32(h uint16) float32 { return math.Float32frombits(uint32(h) << 16) }

// F32ToF16 converts f to binary16 bits, rounding to nearest even. NaNs stay
// NaN (quieted), keeping the sign and the top payload bits.
func F32ToF16(f float32) uint16 {
	b := math.Float32bits(f)
	sign := uint16(b>>16) & 0x8000
	if f != f {
		return sign | 0x7e00 | uint16(b>>13&0x3ff)
	}
	a := math.Abs(RoundF16(float64(f))) // exactly representable now
	switch {
	case math.IsInf(a, 0):
		return sign | 0x7c00
	case a < math.Ldexp(1, f16Emin): // subnormal or zero
		return sign | uint16(a*(1<<24))
	}
	frac, exp := math.Frexp(a) // a = frac * 2^exp, frac in [0.5, 1)
	return sign | uint16(exp-1+15)<<10 | uint16((2*frac-1)*(1<<f16Mant))
}

// F16ToF32 converts binary16 bits to float32 (exact).
func F16ToF32(h uint16) float32 {
	sign := uint32(h&0x8000) << 16
	exp := uint32(h>>10) & 0x1f
	mant := uint32(h) & 0x3ff
	switch exp {
	case 0: // zero or subnormal: mant * 2^-24, exact in float32
		v := float32(mant) / (1 << 24)
		return math.Float32frombits(sign | math.Float32bits(v))
	case 0x1f:
		return math.Float32frombits(sign | 0x7f800000 | mant<<13)
	}
	return math.Float32frombits(sign | (exp-15+127)<<23 | mant<<13)
}
