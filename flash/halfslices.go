package flash

import "github.com/fac-compiler/fac/internal/half"

// Tensors from Go slices of 16-bit floats: bf16 and fp16 values widen to
// float32 exactly, and Run* rounds them back to the kernel's DType without
// loss, so bf16/fp16 data passes through unchanged. Outputs come back as
// float32; narrow them with F32sToBF16 or F32sToF16.

// BF16s widens bfloat16 bit patterns to float32.
func BF16s(xs []uint16) []float32 { return widen(xs, half.BF16ToF32) }

// F16s widens IEEE half-precision bit patterns to float32.
func F16s(xs []uint16) []float32 { return widen(xs, half.F16ToF32) }

// F32sToBF16 rounds float32 values to bfloat16 bit patterns (nearest even).
func F32sToBF16(xs []float32) []uint16 { return narrow(xs, half.F32ToBF16) }

// F32sToF16 rounds float32 values to half-precision bit patterns (nearest even).
func F32sToF16(xs []float32) []uint16 { return narrow(xs, half.F32ToF16) }

func widen(xs []uint16, f func(uint16) float32) []float32 {
	out := make([]float32, len(xs))
	for i, x := range xs {
		out[i] = f(x)
	}
	return out
}

func narrow(xs []float32, f func(float32) uint16) []uint16 {
	out := make([]uint16, len(xs))
	for i, x := range xs {
		out[i] = f(x)
	}
	return out
}
