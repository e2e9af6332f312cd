package launch

import (
	"fmt"
	"math"

	"github.com/fac-compiler/fac/internal/half"
)

// Array is an N-D host tensor, such as an aux tensor read from a .npy file:
// Data is a flat row-major slice (as HostData takes), Shape its dimensions.
// A plain slice is an aux tensor whose shape is the one its mod declares.
type Array struct {
	Shape []int
	Data  any
}

// Len is the number of elements of the shape.
func (a Array) Len() (int, error) {
	n, ok := Product(a.Shape...)
	if !ok {
		return 0, fmt.Errorf("shape %v is too large", a.Shape)
	}
	return n, nil
}

// HostData converts the host value of an aux tensor of element type elem
// ("i1" for bool, "i32", "i64", "f16", "bf16", "f32") to the slice a device
// takes for it: []bool, []int32, []int64, []uint16 (the bits of f16 or
// bf16) or []float32. It also returns the shape of an Array (nil for a
// plain slice).
//
// v is []bool, []int8, []uint8, []int16, []int32, []int64, []int, []uint16,
// []float32 or []float64, or an Array of one. Conversions keep every
// value: integers must fit (and, for bool, be 0 or 1), floats for integer
// tensors must be whole, integers for f32 exact. Floats for f16 and bf16
// round to nearest even; []uint16 are taken as the bits of the tensor's
// 16-bit float type and are only for f16 and bf16 tensors.
func HostData(elem string, v any) (data any, shape []int, err error) {
	if a, ok := v.(Array); ok {
		n, err := a.Len()
		if err != nil {
			return nil, nil, err
		}
		data, _, err := HostData(elem, a.Data)
		if err != nil {
			return nil, nil, err
		}
		if m := sliceLen(data); m != n {
			return nil, nil, fmt.Errorf("shape %v has %d elements, its data %d", a.Shape, n, m)
		}
		return data, append([]int{}, a.Shape...), nil
	}
	if a, ok := v.(*Array); ok && a != nil {
		return HostData(elem, *a)
	}
	switch elem {
	case "i1":
		if b, ok := v.([]bool); ok {
			return b, nil, nil
		}
		xs, err := ints(v, elem)
		if err != nil {
			return nil, nil, err
		}
		out := make([]bool, len(xs))
		for i, x := range xs {
			if x != 0 && x != 1 {
				return nil, nil, fmt.Errorf("element %d is %d; a bool tensor takes 0 or 1", i, x)
			}
			out[i] = x == 1
		}
		return out, nil, nil
	case "i32":
		if x, ok := v.([]int32); ok {
			return x, nil, nil
		}
		xs, err := ints(v, elem)
		if err != nil {
			return nil, nil, err
		}
		out := make([]int32, len(xs))
		for i, x := range xs {
			if x < math.MinInt32 || x > math.MaxInt32 {
				return nil, nil, fmt.Errorf("element %d is %d, outside i32", i, x)
			}
			out[i] = int32(x)
		}
		return out, nil, nil
	case "i64":
		xs, err := ints(v, elem)
		return xs, nil, err
	case "f32":
		switch x := v.(type) {
		case []float32:
			return x, nil, nil
		case []float64:
			out := make([]float32, len(x))
			for i, f := range x {
				out[i] = float32(f)
			}
			return out, nil, nil
		case []uint16:
			return nil, nil, fmt.Errorf("[]uint16 holds the bits of f16 or bf16 values, and the tensor is f32: convert to []float32")
		}
		xs, err := ints(v, elem)
		if err != nil {
			return nil, nil, err
		}
		out := make([]float32, len(xs))
		for i, x := range xs {
			out[i] = float32(x)
			if int64(out[i]) != x {
				return nil, nil, fmt.Errorf("element %d is %d, not exactly an f32", i, x)
			}
		}
		return out, nil, nil
	case "f16", "bf16":
		conv := half.F32ToF16
		if elem == "bf16" {
			conv = half.F32ToBF16
		}
		switch x := v.(type) {
		case []uint16:
			return x, nil, nil
		case []float32:
			out := make([]uint16, len(x))
			for i, f := range x {
				out[i] = conv(f)
			}
			return out, nil, nil
		case []float64:
			out := make([]uint16, len(x))
			for i, f := range x {
				out[i] = conv(float32(f))
			}
			return out, nil, nil
		}
		return nil, nil, fmt.Errorf("got %T; an %s tensor takes []uint16 (its bits), []float32 or []float64", v, elem)
	}
	return nil, nil, fmt.Errorf("unsupported aux element type %q", elem)
}

// ints reads integer data (or whole floats) as int64s.
func ints(v any, elem string) ([]int64, error) {
	var out []int64
	switch x := v.(type) {
	case []int8:
		out = widen(x)
	case []uint8:
		out = widen(x)
	case []int16:
		out = widen(x)
	case []int32:
		out = widen(x)
	case []int64:
		out = x
	case []int:
		out = widen(x)
	case []float32, []float64:
		var fs []float64
		if f, ok := x.([]float32); ok {
			fs = make([]float64, len(f))
			for i, v := range f {
				fs[i] = float64(v)
			}
		} else {
			fs = x.([]float64)
		}
		out = make([]int64, len(fs))
		for i, f := range fs {
			if f != math.Trunc(f) || math.Abs(f) > 1<<53 {
				return nil, fmt.Errorf("element %d is %v, not an integer (the tensor is %s)", i, f, elemName(elem))
			}
			out[i] = int64(f)
		}
	case []bool:
		return nil, fmt.Errorf("got []bool for an %s tensor: bools are for bool tensors", elemName(elem))
	case []uint16:
		return nil, fmt.Errorf("got []uint16 (f16 or bf16 bits) for an %s tensor", elemName(elem))
	case nil:
		return nil, fmt.Errorf("no data")
	default:
		return nil, fmt.Errorf("got %T; an %s tensor takes a slice of integers", v, elemName(elem))
	}
	return out, nil
}

func widen[T int8 | uint8 | int16 | int32 | int](xs []T) []int64 {
	out := make([]int64, len(xs))
	for i, x := range xs {
		out[i] = int64(x)
	}
	return out
}

func elemName(e string) string {
	if e == "i1" {
		return "bool"
	}
	return e
}

// HostLen is the number of elements of a host aux value (a slice HostData
// takes, or an Array), without converting it.
func HostLen(v any) (int, error) {
	switch a := v.(type) {
	case Array:
		return a.Len()
	case *Array:
		if a != nil {
			return a.Len()
		}
	}
	if n := sliceLen(v); n >= 0 {
		return n, nil
	}
	return 0, fmt.Errorf("got %T, want a slice of numbers or bools, or a launch.Array", v)
}

func sliceLen(v any) int {
	switch x := v.(type) {
	case []bool:
		return len(x)
	case []int8:
		return len(x)
	case []uint8:
		return len(x)
	case []int16:
		return len(x)
	case []uint16:
		return len(x)
	case []int32:
		return len(x)
	case []int64:
		return len(x)
	case []int:
		return len(x)
	case []float32:
		return len(x)
	case []float64:
		return len(x)
	}
	return -1
}
