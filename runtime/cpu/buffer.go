package cpu

import (
	"math"

	"github.com/fac-compiler/fac/internal/half"
	"github.com/fac-compiler/fac/tir"
)

// Buffer is a region of global memory. Values are kept as float64 but always
// hold values of Elem: stores round floats to Elem's precision, wrap i32 and
// keep i1 as 0/1.
type Buffer struct {
	Name string
	Elem tir.Elem
	Vals []float64
}

// Pointer is a global-memory address: an element offset into a buffer.
type Pointer struct {
	Buf *Buffer
	Off int64
}

// Tensor is a value passed to or returned by Call: row-major Vals, or Ptrs
// when Type.Ptr. A scalar has one element.
type Tensor struct {
	Type tir.Type
	Vals []float64
	Ptrs []Pointer
}

// NewBuffer makes a zeroed buffer of n elements of e.
func NewBuffer(name string, e tir.Elem, n int) *Buffer {
	return &Buffer{Name: name, Elem: e, Vals: make([]float64, n)}
}

// FromF32 makes an f32 buffer holding xs.
func FromF32(name string, xs []float32) *Buffer {
	b := NewBuffer(name, tir.F32, len(xs))
	for i, x := range xs {
		b.Vals[i] = float64(x)
	}
	return b
}

// FromI32 makes an i32 buffer holding xs.
func FromI32(name string, xs []int32) *Buffer {
	b := NewBuffer(name, tir.I32, len(xs))
	for i, x := range xs {
		b.Vals[i] = float64(x)
	}
	return b
}

// FromHost makes a buffer of e from the slice launch.HostData gives for e:
// []bool, []int32, []int64, []uint16 (f16 or bf16 bits) or []float32.
func FromHost(name string, e tir.Elem, data any) *Buffer {
	var b *Buffer
	switch x := data.(type) {
	case []bool:
		b = NewBuffer(name, e, len(x))
		for i, v := range x {
			b.Vals[i] = b2f(v)
		}
	case []int32:
		b = NewBuffer(name, e, len(x))
		for i, v := range x {
			b.Vals[i] = float64(v)
		}
	case []int64:
		b = NewBuffer(name, e, len(x))
		for i, v := range x {
			b.Vals[i] = float64(v)
		}
	case []uint16:
		dec := half.F16ToF32
		if e == tir.BF16 {
			dec = half.BF16ToF32
		}
		b = NewBuffer(name, e, len(x))
		for i, v := range x {
			b.Vals[i] = float64(dec(v))
		}
	case []float32:
		b = NewBuffer(name, e, len(x))
		for i, v := range x {
			b.Vals[i] = float64(v)
		}
	default:
		return NewBuffer(name, e, 0)
	}
	fixSlice(e, b.Vals)
	return b
}

// FromFloats makes a buffer of e holding xs, each rounded to e (e.g. bf16
// inputs).
func FromFloats(name string, e tir.Elem, xs []float64) *Buffer {
	b := NewBuffer(name, e, len(xs))
	copy(b.Vals, xs)
	fixSlice(e, b.Vals)
	return b
}

// F32 returns the contents as float32s.
func (b *Buffer) F32() []float32 {
	out := make([]float32, len(b.Vals))
	for i, v := range b.Vals {
		out[i] = float32(v)
	}
	return out
}

// I32 returns the contents as int32s (wrapping).
func (b *Buffer) I32() []int32 {
	out := make([]int32, len(b.Vals))
	for i, v := range b.Vals {
		out[i] = int32(toInt(v))
	}
	return out
}

// toInt truncates v to an int64 without relying on Go's
// implementation-defined conversion of NaN and out-of-range floats.
func toInt(v float64) int64 {
	switch {
	case v != v:
		return 0
	case v >= 1<<63:
		return math.MaxInt64
	case v < -1<<63:
		return math.MinInt64
	}
	return int64(v)
}

// fix maps v to the nearest value of e: float rounding, int32 wraparound,
// int64 truncation, i1 as v != 0.
func fix(e tir.Elem, v float64) float64 {
	switch e {
	case tir.F32:
		return float64(float32(v))
	case tir.BF16:
		return half.RoundBF16(v)
	case tir.F16:
		return half.RoundF16(v)
	case tir.I32:
		return float64(int32(toInt(v)))
	case tir.I64:
		return float64(toInt(v))
	case tir.I1:
		if v != 0 {
			return 1
		}
		return 0
	}
	return v
}

// Round rounds every value to what an element of e holds, in place (as
// FromFloats stores them), without a buffer: f32, bf16 and f16 round to
// nearest even, integers convert.
func Round(e tir.Elem, xs []float64) { fixSlice(e, xs) }

// fixSlice applies fix to every element, with a tight loop for f32.
func fixSlice(e tir.Elem, d []float64) {
	if e == tir.F32 {
		for i, v := range d {
			d[i] = float64(float32(v))
		}
		return
	}
	for i, v := range d {
		d[i] = fix(e, v)
	}
}
