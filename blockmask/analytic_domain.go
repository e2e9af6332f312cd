package blockmask

// The abstract domain of the analytic builder: i32 intervals, bools as
// intervals of 0 and 1, and affine forms in q_idx and kv_idx, with the
// transfer functions that need more than a line.

import "math"

// ival is an abstract value: an integer interval [lo, hi] of i32 values, or
// a bool as [0,0] (false), [1,1] (true), [0,1] (unknown).
type ival struct{ lo, hi int64 }

// affine is q*q_idx + k*kv_idx + c, coefficients wrapped to i32: since i32
// add, sub and mul wrap modulo 2^32, the run-time value is the form's value
// wrapped, and equals it exactly wherever the form stays inside i32.
type affine struct{ q, k, c int64 }

type rect struct{ q0, q1, k0, k1 int64 }

func (r rect) point() bool { return r.q0 == r.q1 && r.k0 == r.k1 }

const (
	predEQ uint8 = iota
	predNE
	predLT
	predLE
	predGT
	predGE
)

const (
	minI32 = math.MinInt32
	maxI32 = math.MaxInt32
)

var fullI32 = ival{minI32, maxI32}

func wrap(x int64) int64 { return int64(int32(x)) }

// affRange is the exact range of form a over r (in int64: with coefficients
// in i32 and positions below 2^30 nothing overflows).
func affRange(a affine, r rect) ival {
	lo, hi := a.c, a.c
	if a.q >= 0 {
		lo += a.q * r.q0
		hi += a.q * r.q1
	} else {
		lo += a.q * r.q1
		hi += a.q * r.q0
	}
	if a.k >= 0 {
		lo += a.k * r.k0
		hi += a.k * r.k1
	} else {
		lo += a.k * r.k1
		hi += a.k * r.k0
	}
	return ival{lo, hi}
}

// norm maps an int64 interval of exact results to the i32 results: a point
// wraps exactly; a range that leaves i32 becomes all of i32.
func norm(lo, hi int64) ival {
	if lo == hi {
		w := wrap(lo)
		return ival{w, w}
	}
	if lo < minI32 || hi > maxI32 {
		return fullI32
	}
	return ival{lo, hi}
}

var (
	bFalse = ival{0, 0}
	bTrue  = ival{1, 1}
	bMaybe = ival{0, 1}
)

func boolOf(t, f bool) ival {
	switch {
	case t:
		return bTrue
	case f:
		return bFalse
	}
	return bMaybe
}

// cmp compares intervals: true if it holds for every pair, false if for none.
func cmp(p uint8, x, y ival) ival {
	switch p {
	case predEQ:
		return boolOf(x.lo == x.hi && y.lo == y.hi && x.lo == y.lo, x.hi < y.lo || y.hi < x.lo)
	case predNE:
		return boolOf(x.hi < y.lo || y.hi < x.lo, x.lo == x.hi && y.lo == y.hi && x.lo == y.lo)
	case predLT:
		return boolOf(x.hi < y.lo, x.lo >= y.hi)
	case predLE:
		return boolOf(x.hi <= y.lo, x.lo > y.hi)
	case predGT:
		return boolOf(x.lo > y.hi, x.hi <= y.lo)
	case predGE:
		return boolOf(x.lo >= y.hi, x.hi < y.lo)
	}
	return bMaybe
}

// cmpZero is cmp(p, d, [0,0]).
func cmpZero(p uint8, d ival) ival {
	switch p {
	case predLT:
		return boolOf(d.hi < 0, d.lo >= 0)
	case predLE:
		return boolOf(d.hi <= 0, d.lo > 0)
	case predGT:
		return boolOf(d.lo > 0, d.hi <= 0)
	case predGE:
		return boolOf(d.lo >= 0, d.hi < 0)
	}
	return cmp(p, d, ival{})
}

// remRange bounds x % y (truncated, sign of the dividend) for y not
// containing 0.
func remRange(x, y ival) ival {
	if x.lo == x.hi && y.lo == y.hi {
		w := int64(int32(x.lo) % int32(y.lo)) // Go: MinInt32 % -1 == 0, like the interpreter
		return ival{w, w}
	}
	m := max(abs64(y.lo), abs64(y.hi)) // |x % y| <= m-1
	if y.lo == y.hi {
		// One divisor: a run of dividends with one quotient maps in order.
		if x.lo >= 0 && x.lo/m == x.hi/m {
			return ival{x.lo % m, x.hi % m}
		}
		if x.hi <= 0 && x.lo/m == x.hi/m {
			return ival{-((-x.lo) % m), -((-x.hi) % m)}
		}
	}
	switch {
	case x.lo >= 0:
		return ival{0, min(x.hi, m-1)}
	case x.hi <= 0:
		return ival{max(x.lo, -(m - 1)), 0}
	}
	return ival{max(x.lo, -(m - 1)), min(x.hi, m-1)}
}

func abs64(x int64) int64 {
	if x < 0 {
		return -x
	}
	return x
}
