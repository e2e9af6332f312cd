package fac

import "github.com/fac-compiler/fac/flash"

// Tensors from Go slices of 16-bit floats: bf16 and fp16 values widen to
// float32 exactly, and the Run methods round them back to the kernel's
// DType without loss, so bf16/fp16 data passes through unchanged. Outputs
// come back as float32; narrow them with F32sToBF16 or F32sToF16.

// BF16s widens bfloat16 bit patterns to float32.
func BF16s(xs []uint16) []float32 { return flash.BF16s(xs) }

// F16s widens IEEE half-precision bit patterns to float32.
func F16s(xs []uint16) []float32 { return flash.F16s(xs) }

// F32sToBF16 rounds float32 values to bfloat16 bit patterns (nearest even).
func F32sToBF16(xs []float32) []uint16 { return flash.F32sToBF16(xs) }

// F32sToF16 rounds float32 values to half-precision bit patterns (nearest even).
func F32sToF16(xs []float32) []uint16 { return flash.F32sToF16(xs) }
