// Package tir is fac's tile IR: SSA over statically shaped tensors, in the
// spirit of Triton's TTIR. Every value is a scalar or a tensor of scalars (or
// of global-memory pointers); control flow is structured (for, if) with
// regions, so passes and the CPU interpreter never see a CFG.
//
// The IR has one textual form (see print.go and parse.go); printing a module,
// parsing the text and printing again gives the same text.
package tir

import (
	"fmt"
	"strconv"
	"strings"
)

// Elem is a scalar element type.
type Elem uint8

// Element types. The order is the printing order in docs, nothing more.
const (
	Invalid Elem = iota
	I1           // bool
	I32
	I64
	F16
	BF16
	F32
)

var elemNames = [...]string{Invalid: "invalid", I1: "i1", I32: "i32", I64: "i64", F16: "f16", BF16: "bf16", F32: "f32"}

func (e Elem) String() string {
	if int(e) < len(elemNames) {
		return elemNames[e]
	}
	return fmt.Sprintf("elem(%d)", e)
}

// IsFloat reports whether e is a floating-point type.
func (e Elem) IsFloat() bool { return e == F16 || e == BF16 || e == F32 }

// IsInt reports whether e is an integer type (not i1).
func (e Elem) IsInt() bool { return e == I32 || e == I64 }

// Bytes is the storage size of one element.
func (e Elem) Bytes() int {
	switch e {
	case I1:
		return 1
	case F16, BF16:
		return 2
	case I32, F32:
		return 4
	case I64:
		return 8
	}
	return 0
}

// ElemByName maps a printed element name ("f32") to its Elem.
func ElemByName(s string) (Elem, bool) {
	for i, n := range elemNames {
		if n == s && Elem(i) != Invalid {
			return Elem(i), true
		}
	}
	return Invalid, false
}

// Type is the type of a value: a scalar (Shape == nil) or a tensor, whose
// elements are Elem or, when Ptr is set, global-memory pointers to Elem.
//
// Printed forms: `f32`, `ptr<bf16>`, `tensor<64x128xf32>`, `tensor<64xptr<f32>>`.
type Type struct {
	Elem  Elem
	Ptr   bool
	Shape []int
}

// Scalar returns the scalar type of e.
func Scalar(e Elem) Type { return Type{Elem: e} }

// PtrTo returns the scalar pointer type to e.
func PtrTo(e Elem) Type { return Type{Elem: e, Ptr: true} }

// Tensor returns a tensor type; an empty shape gives the scalar type.
func Tensor(e Elem, shape ...int) Type {
	if len(shape) == 0 {
		return Type{Elem: e}
	}
	return Type{Elem: e, Shape: append([]int(nil), shape...)}
}

// PaddedDim is the power of two a tile dimension of n is computed in (the
// pad-dims pass; the GPU back end's layouts need powers of two).
func PaddedDim(n int) int {
	p := 1
	for p < n {
		p <<= 1
	}
	return p
}

// IsScalar reports whether t has rank 0.
func (t Type) IsScalar() bool { return len(t.Shape) == 0 }

// Rank is the number of dimensions.
func (t Type) Rank() int { return len(t.Shape) }

// NumElems is the product of the shape (1 for a scalar).
func (t Type) NumElems() int {
	n := 1
	for _, d := range t.Shape {
		n *= d
	}
	return n
}

// WithShape returns t with another shape (same element and pointer kind).
func (t Type) WithShape(shape []int) Type {
	if len(shape) == 0 {
		return Type{Elem: t.Elem, Ptr: t.Ptr}
	}
	return Type{Elem: t.Elem, Ptr: t.Ptr, Shape: append([]int(nil), shape...)}
}

// WithElem returns t with another element type (not a pointer).
func (t Type) WithElem(e Elem) Type { return Type{Elem: e, Shape: t.Shape} }

// ScalarOf is the element type of t as a scalar type.
func (t Type) ScalarOf() Type { return Type{Elem: t.Elem, Ptr: t.Ptr} }

// Equal reports whether two types are identical.
func (t Type) Equal(u Type) bool {
	if t.Elem != u.Elem || t.Ptr != u.Ptr || len(t.Shape) != len(u.Shape) {
		return false
	}
	for i := range t.Shape {
		if t.Shape[i] != u.Shape[i] {
			return false
		}
	}
	return true
}

func (t Type) String() string {
	s := t.Elem.String()
	if t.Ptr {
		s = "ptr<" + s + ">"
	}
	if len(t.Shape) == 0 {
		return s
	}
	var b strings.Builder
	b.WriteString("tensor<")
	for _, d := range t.Shape {
		b.WriteString(strconv.Itoa(d))
		b.WriteByte('x')
	}
	b.WriteString(s)
	b.WriteByte('>')
	return b.String()
}

// ParseType parses the printed form of a type.
func ParseType(s string) (Type, error) {
	bad := func() (Type, error) { return Type{}, fmt.Errorf("bad type %q", s) }
	var shape []int
	inner := s
	if strings.HasPrefix(s, "tensor<") && strings.HasSuffix(s, ">") {
		inner = s[len("tensor<") : len(s)-1]
		for {
			i := strings.IndexByte(inner, 'x')
			if i <= 0 {
				break
			}
			n, err := strconv.Atoi(inner[:i])
			if err != nil {
				break
			}
			if n <= 0 {
				return bad()
			}
			shape = append(shape, n)
			inner = inner[i+1:]
		}
		if len(shape) == 0 {
			return bad()
		}
	}
	ptr := false
	if strings.HasPrefix(inner, "ptr<") && strings.HasSuffix(inner, ">") {
		ptr = true
		inner = inner[4 : len(inner)-1]
	}
	e, ok := ElemByName(inner)
	if !ok {
		return bad()
	}
	return Type{Elem: e, Ptr: ptr, Shape: shape}, nil
}

// BroadcastShapes returns the numpy-style broadcast of two shapes, or false.
func BroadcastShapes(a, b []int) ([]int, bool) {
	n := max(len(a), len(b))
	out := make([]int, n)
	for i := 0; i < n; i++ {
		da, db := 1, 1
		if j := len(a) - n + i; j >= 0 {
			da = a[j]
		}
		if j := len(b) - n + i; j >= 0 {
			db = b[j]
		}
		switch {
		case da == db, db == 1:
			out[i] = da
		case da == 1:
			out[i] = db
		default:
			return nil, false
		}
	}
	if n == 0 {
		return nil, true
	}
	return out, true
}

// ShapeString prints a shape as [64, 128].
func ShapeString(s []int) string {
	parts := make([]string, len(s))
	for i, d := range s {
		parts[i] = strconv.Itoa(d)
	}
	return "[" + strings.Join(parts, ", ") + "]"
}

// Bool returns the i1 type of the given shape.
func Bool(shape []int) Type { return Tensor(I1, shape...) }
