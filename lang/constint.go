package lang

import (
	"math"

	"github.com/alecthomas/participle/v2/lexer"
)

// Compile-time integers are exact in 64 bits (docs/language.md, "Compile-time
// constants"): an operation on them whose result does not fit is an error at
// the operator, never a wrapped value. Before, 65536*65536*65536*65536
// folded to 0, so sliding_window(65536*65536*65536*65536, 0) compiled as
// sliding_window(0, 0) (issue 46 item 5).

// checkedInt computes a op b for the integer operators + - * / %; ok is
// false when the exact result does not fit in an int64. b is not 0 for /
// and % (the caller reports division by zero).
func checkedInt(op string, a, b int64) (r int64, ok bool) {
	switch op {
	case "+":
		r = a + b
		return r, (b >= 0) == (r >= a)
	case "-":
		r = a - b
		return r, (b >= 0) == (r <= a)
	case "*":
		if a == 0 || b == 0 {
			return 0, true
		}
		if (a == -1 && b == math.MinInt64) || (b == -1 && a == math.MinInt64) {
			return 0, false
		}
		r = a * b
		return r, r/b == a
	case "/":
		if a == math.MinInt64 && b == -1 {
			return 0, false
		}
		return a / b, true
	case "%":
		if b == -1 {
			return 0, true // Go's MinInt64 % -1 is 0 too, but say it plainly
		}
		return a % b, true
	}
	panic("checkedInt: operator " + op)
}

// intOp is checkedInt, failing at pos when the result overflows.
func (l *lowerer) intOp(op string, a, b int64, pos lexer.Position) int64 {
	r, ok := checkedInt(op, a, b)
	if !ok {
		l.fail(pos, "constant %d %s %d overflows: compile-time integers are exact, in 64 bits", a, op, b)
	}
	return r
}

// intNeg is -a, failing at pos when it overflows (a is the most negative
// int64).
func (l *lowerer) intNeg(a int64, pos lexer.Position) int64 {
	if a == math.MinInt64 {
		l.fail(pos, "constant -(%d) overflows: compile-time integers are exact, in 64 bits", a)
	}
	return -a
}

// floatToInt truncates a float constant toward zero, as i32(x) does,
// failing at pos when the result is no 64-bit integer (NaN, ±inf, or
// beyond ±2^63), where Go's conversion gives an arbitrary value.
func (l *lowerer) floatToInt(f float64, pos lexer.Position) int64 {
	t := math.Trunc(f)
	if math.IsNaN(t) || t < math.MinInt64 || t >= math.MaxInt64 {
		l.fail(pos, "constant %s overflows when converted to an integer: compile-time integers are exact, in 64 bits", FloatConst(f).String())
	}
	return int64(t)
}
