package core

import "github.com/fac-compiler/fac/tir"

// ConstTile is the value of integer tile v when it is known at compile
// time (built from aranges and constants by splats, broadcasts, reshapes,
// transposes and integer arithmetic): its elements in row-major order.
// False when some element depends on a run-time value, or the tile has
// more than maxConstTile elements.
func ConstTile(v *tir.Value) ([]int64, bool) {
	if v.Type.Ptr || v.Type.Elem != tir.I32 && v.Type.Elem != tir.I64 || v.Type.NumElems() > maxConstTile {
		return nil, false
	}
	return constTile(v, map[*tir.Value][]int64{})
}

const maxConstTile = 1 << 16

func constTile(v *tir.Value, memo map[*tir.Value][]int64) ([]int64, bool) {
	if out, ok := memo[v]; ok {
		return out, out != nil
	}
	memo[v] = nil
	op := v.Def
	if op == nil || len(op.Results) != 1 {
		return nil, false
	}
	out := make([]int64, v.Type.NumElems())
	arg := func(i int) ([]int64, bool) { return constTile(op.Args[i], memo) }
	switch op.Kind {
	case tir.OpConst:
		c, ok := op.Attr("value").(int64)
		if !ok {
			return nil, false
		}
		for i := range out {
			out[i] = c
		}
	case tir.OpArange:
		for i := range out {
			out[i] = op.IntAttr("start") + int64(i)
		}
	case tir.OpSplat, tir.OpBroadcast:
		a, ok := arg(0)
		if !ok {
			return nil, false
		}
		src, dst := op.Args[0].Type.Shape, v.Type.Shape
		for i := range out {
			// The source element: the destination's coordinates, 0
			// along the source's dimensions of size 1 (all of a scalar's).
			rem, at, stride := i, 0, 1
			for d := len(dst) - 1; d >= 0; d-- {
				c := rem % dst[d]
				rem /= dst[d]
				if k := d - (len(dst) - len(src)); k >= 0 && src[k] > 1 {
					at += c * stride
					stride *= src[k]
				}
			}
			out[i] = a[at]
		}
	case tir.OpReshape:
		a, ok := arg(0)
		if !ok {
			return nil, false
		}
		copy(out, a)
	case tir.OpTrans:
		a, ok := arg(0)
		if !ok || len(v.Type.Shape) != 2 {
			return nil, false
		}
		rows, cols := v.Type.Shape[0], v.Type.Shape[1]
		for r := range rows {
			for c := range cols {
				out[r*cols+c] = a[c*rows+r]
			}
		}
	case tir.OpAdd, tir.OpSub, tir.OpMul, tir.OpDiv, tir.OpRem, tir.OpMin, tir.OpMax:
		a, ok := arg(0)
		if !ok {
			return nil, false
		}
		b, ok := arg(1)
		if !ok {
			return nil, false
		}
		for i := range out {
			x, y := a[i], b[i]
			switch op.Kind {
			case tir.OpAdd:
				out[i] = x + y
			case tir.OpSub:
				out[i] = x - y
			case tir.OpMul:
				out[i] = x * y
			case tir.OpDiv, tir.OpRem:
				if y == 0 {
					return nil, false
				}
				if op.Kind == tir.OpDiv {
					out[i] = x / y
				} else {
					out[i] = x % y
				}
			case tir.OpMin:
				out[i] = min(x, y)
			case tir.OpMax:
				out[i] = max(x, y)
			}
		}
	default:
		return nil, false
	}
	memo[v] = out
	return out, true
}
