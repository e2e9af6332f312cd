package passes

import (
	"math"

	"github.com/fac-compiler/fac/internal/half"
	"github.com/fac-compiler/fac/tir"
)

// Constant folding for canonicalize. A constant's value is a bool (i1), an
// int64 (i32 and i64, kept in range of the type) or a float64 (floats, kept
// rounded to the element type), which is also its attribute's form.

// constOf returns the value of v when v is a constant (splat for a tensor).
func constOf(v *tir.Value) (any, bool) {
	if v == nil || v.Def == nil || v.Def.Kind != tir.OpConst || v.Type.Ptr {
		return nil, false
	}
	switch a := v.Def.Attr("value").(type) {
	case bool:
		return a, v.Type.Elem == tir.I1
	case int64:
		switch e := v.Type.Elem; {
		case e == tir.I1 && (a == 0 || a == 1):
			return a == 1, true
		case e == tir.I64 || e == tir.I32 && a == wrap(e, a):
			return a, true
		}
	case float64:
		if v.Type.Elem.IsFloat() {
			return roundTo(v.Type.Elem, a), true
		}
	}
	return nil, false
}

// fold returns the constant value of op's result, when it has one.
func fold(op *tir.Op) (any, bool) {
	if len(op.Results) != 1 || op.Result().Type.Ptr || op.Kind == tir.OpConst {
		return nil, false
	}
	e := op.Result().Type.Elem
	args := make([]any, len(op.Args))
	all := true
	for i, a := range op.Args {
		var ok bool
		if args[i], ok = constOf(a); !ok {
			all = false
		}
	}
	switch k := op.Kind; {
	case k == tir.OpSplat || k == tir.OpBroadcast || k == tir.OpReshape || k == tir.OpTrans:
		// The same value in every lane, whatever the shape; keep the
		// attribute as written.
		if all {
			return op.Args[0].Def.Attr("value"), true
		}
	case k.IsBinary():
		if all {
			return foldBinary(k, e, args[0], args[1])
		}
		if (k == tir.OpSub || k == tir.OpXor) && op.Args[0] == op.Args[1] && !e.IsFloat() {
			if e == tir.I1 {
				return false, true
			}
			return int64(0), true // x-x and x^x; not for floats: inf-inf is NaN
		}
		return absorb(k, e, args[0], args[1])
	case k.IsUnary() && all:
		return foldUnary(k, e, args[0])
	case k == tir.OpCmp:
		pred := op.IdentAttr("pred")
		if all {
			return foldCmp(pred, args[0], args[1])
		}
		if op.Args[0] == op.Args[1] && !op.Args[0].Type.Elem.IsFloat() { // x == x fails only for NaN
			return pred == "eq" || pred == "le" || pred == "ge", true
		}
	case k == tir.OpCast && all:
		return foldCast(e, args[0])
	}
	return nil, false
}

// absorb folds ops with one constant operand that decides the result:
// x&0, x|-1 (false and true for i1) and integer x*0.
func absorb(k tir.Kind, e tir.Elem, x, y any) (any, bool) {
	for _, c := range []any{x, y} {
		switch {
		case c == nil:
		case k == tir.OpAnd && (c == false || c == int64(0)),
			k == tir.OpOr && (c == true || c == int64(-1)),
			k == tir.OpMul && c == int64(0) && e.IsInt():
			return c, true
		}
	}
	return nil, false
}

func foldBinary(k tir.Kind, e tir.Elem, x, y any) (any, bool) {
	switch x := x.(type) {
	case bool:
		y := y.(bool)
		switch k {
		case tir.OpAnd:
			return x && y, true
		case tir.OpOr:
			return x || y, true
		case tir.OpXor:
			return x != y, true
		}
	case int64:
		y := y.(int64)
		r, ok := foldArith(k, x, y)
		switch {
		case ok:
		case k == tir.OpDiv || k == tir.OpRem:
			if y == 0 {
				return nil, false // a runtime fault, not ours to decide
			}
			// In i32, -2^31 / -1 is 2^31 here and wraps back, as it does in int32.
			if r = x / y; k == tir.OpRem {
				r = x % y
			}
		case k == tir.OpAnd:
			r = x & y
		case k == tir.OpOr:
			r = x | y
		case k == tir.OpXor:
			r = x ^ y
		default:
			return nil, false
		}
		return wrap(e, r), true
	case float64:
		y := y.(float64)
		r, ok := foldArith(k, x, y)
		switch {
		case ok:
		case k == tir.OpDiv:
			r = x / y
		case k == tir.OpRem:
			r = math.Mod(x, y) // exact, like C's fmod
		default:
			return nil, false
		}
		// The exact result rounded to float64 and then to e is the exact
		// result rounded to e: float64 has more than twice e's precision.
		return roundTo(e, r), true
	}
	return nil, false
}

// foldArith folds the ops integers and floats share (Go's min and max
// propagate NaN and order -0.0 < +0.0, as the interpreter does).
func foldArith[T int64 | float64](k tir.Kind, x, y T) (T, bool) {
	switch k {
	case tir.OpAdd:
		return x + y, true
	case tir.OpSub:
		return x - y, true
	case tir.OpMul:
		return x * y, true
	case tir.OpMin:
		return min(x, y), true
	case tir.OpMax:
		return max(x, y), true
	}
	return 0, false
}

func foldUnary(k tir.Kind, e tir.Elem, x any) (any, bool) {
	switch x := x.(type) {
	case bool:
		return !x, k == tir.OpNot
	case int64:
		switch k {
		case tir.OpNeg:
			return wrap(e, -x), true
		case tir.OpNot:
			return ^x, true
		case tir.OpAbs:
			return wrap(e, max(x, -x)), true
		}
	case float64:
		fn := map[tir.Kind]func(float64) float64{
			tir.OpNeg: func(x float64) float64 { return -x },
			tir.OpAbs: math.Abs, tir.OpExp: math.Exp, tir.OpExp2: math.Exp2,
			tir.OpLog: math.Log, tir.OpLog2: math.Log2, tir.OpTanh: math.Tanh, tir.OpSqrt: math.Sqrt,
		}[k]
		if fn != nil {
			return roundTo(e, fn(x)), true
		}
	}
	return nil, false
}

// foldCmp compares signed for integers and with Go's float comparisons,
// which are ordered except != (the documented semantics).
func foldCmp(pred string, x, y any) (any, bool) {
	var lt, eq bool
	switch x := x.(type) {
	case bool:
		if pred != "eq" && pred != "ne" {
			return nil, false
		}
		eq = x == y.(bool)
	case int64:
		lt, eq = x < y.(int64), x == y.(int64)
	case float64:
		y := y.(float64)
		switch pred {
		case "eq":
			return x == y, true
		case "ne":
			return x != y, true
		case "lt":
			return x < y, true
		case "le":
			return x <= y, true
		case "gt":
			return x > y, true
		case "ge":
			return x >= y, true
		}
		return nil, false
	}
	switch pred {
	case "eq":
		return eq, true
	case "ne":
		return !eq, true
	case "lt":
		return lt, true
	case "le":
		return lt || eq, true
	case "gt":
		return !lt && !eq, true
	case "ge":
		return !lt, true
	}
	return nil, false
}

// foldCast converts a constant. It declines float to int out of range or
// of NaN (targets may saturate differently) and i64 to float beyond 2^53,
// where going through float64 would round twice.
func foldCast(to tir.Elem, x any) (any, bool) {
	if to == tir.I1 { // nonzero is true, NaN included
		switch x := x.(type) {
		case bool:
			return x, true
		case int64:
			return x != 0, true
		case float64:
			return x != 0, true
		}
	}
	switch x := x.(type) {
	case bool:
		var n int64
		if x {
			n = 1
		}
		switch {
		case to.IsInt():
			return n, true
		case to.IsFloat():
			return float64(n), true
		}
	case int64:
		switch {
		case to.IsInt():
			return wrap(to, x), true
		case to.IsFloat() && math.Abs(float64(x)) <= 1<<53:
			return roundTo(to, float64(x)), true
		}
	case float64:
		switch {
		case to.IsFloat():
			return roundTo(to, x), true
		case to == tir.I32 && x > -(1<<31)-1 && x < 1<<31,
			to == tir.I64 && x >= -(1<<63) && x < 1<<63:
			return int64(x), true // truncates toward zero; NaN fails both tests
		}
	}
	return nil, false
}

// wrap reduces an integer result to e's width, two's complement.
func wrap(e tir.Elem, n int64) int64 {
	if e == tir.I32 {
		return int64(int32(n))
	}
	return n
}

// roundTo rounds x to the nearest value of float type e (ties to even).
func roundTo(e tir.Elem, x float64) float64 {
	switch e {
	case tir.F32:
		return half.RoundF32(x)
	case tir.BF16:
		return half.RoundBF16(x)
	case tir.F16:
		return half.RoundF16(x)
	}
	return x
}

func isNegZero(f float64) bool { return f == 0 && math.Signbit(f) }
