package core

import (
	"math"
	"math/big"

	"github.com/llir/llvm/ir/constant"
	"github.com/llir/llvm/ir/enum"
	"github.com/llir/llvm/ir/types"
	"github.com/llir/llvm/ir/value"

	"github.com/fac-compiler/fac/tir"
)

// elementwise lowers one lane of an elementwise op (binary, unary, cmp,
// select, cast, addptr) on registers xs.
func (em *Emitter) elementwise(op *tir.Op, xs []value.Value) value.Value {
	k := op.Kind
	switch {
	case k.IsBinary():
		return em.binary(k, op.Result().Type.Elem, xs[0], xs[1])
	case k.IsUnary():
		return em.unary(k, op.Result().Type.Elem, xs[0])
	case k == tir.OpCmp:
		return em.cmp(op.IdentAttr("pred"), op.Args[0].Type, xs[0], xs[1])
	case k == tir.OpSelect:
		c := xs[0]
		if maskSelect(op) {
			// llc splits a select on `a && b && c` into one select per
			// condition (three FSELs an element for a sliding-window mask
			// at the sequence end); behind a predicate move it keeps one,
			// and ptxas folds the compares into its predicate.
			c = em.asm(types.I1, "mov.pred $0, $1;", "=b,b", false, c)
		}
		return em.b.NewSelect(c, xs[1], xs[2])
	case k == tir.OpCast:
		return em.cast(op.Args[0].Type.Elem, op.Result().Type.Elem, xs[0])
	case k == tir.OpAddPtr:
		return em.ptrAdd(memType(op.Args[0].Type.Elem), xs[0], xs[1])
	}
	Fail("%s: not an elementwise op: %s", op.Pos, k)
	return nil
}

func (em *Emitter) binary(k tir.Kind, e tir.Elem, x, y value.Value) value.Value {
	b := em.b
	if e.IsFloat() {
		x, y = em.toF32(x, e), em.toF32(y, e)
		var r value.Value
		switch k {
		case tir.OpAdd:
			r = b.NewFAdd(x, y)
		case tir.OpSub:
			r = b.NewFSub(x, y)
		case tir.OpMul:
			r = b.NewFMul(x, y)
		case tir.OpDiv:
			if rc, ok := reciprocal(y); ok {
				r = b.NewFMul(x, rc)
			} else {
				r = b.NewFDiv(x, y)
			}
		case tir.OpRem:
			r = b.NewFRem(x, y)
		case tir.OpMin:
			r = em.Call("llvm.minimum.f32", types.Float, x, y)
		case tir.OpMax:
			r = em.Call("llvm.maximum.f32", types.Float, x, y)
		default:
			Fail("%s on %s", k, e)
		}
		return em.fromF32(r, e)
	}
	if e == tir.I1 {
		// i1 arithmetic is mod 2 (as the interpreter's), min/max order false < true.
		switch k {
		case tir.OpAdd, tir.OpSub, tir.OpXor:
			return b.NewXor(x, y)
		case tir.OpMul, tir.OpAnd, tir.OpMin:
			return b.NewAnd(x, y)
		case tir.OpOr, tir.OpMax:
			return b.NewOr(x, y)
		case tir.OpDiv:
			return x
		case tir.OpRem:
			return constant.NewBool(false)
		}
		Fail("%s on i1", k)
	}
	switch k {
	case tir.OpAdd:
		return b.NewAdd(x, y)
	case tir.OpSub:
		return b.NewSub(x, y)
	case tir.OpMul:
		return b.NewMul(x, y)
	case tir.OpDiv:
		return b.NewSDiv(x, y)
	case tir.OpRem:
		return b.NewSRem(x, y)
	case tir.OpMin:
		return b.NewSelect(b.NewICmp(enum.IPredSLT, x, y), x, y)
	case tir.OpMax:
		return b.NewSelect(b.NewICmp(enum.IPredSGT, x, y), x, y)
	case tir.OpAnd:
		return b.NewAnd(x, y)
	case tir.OpOr:
		return b.NewOr(x, y)
	case tir.OpXor:
		return b.NewXor(x, y)
	}
	Fail("%s on %s", k, e)
	return nil
}

const (
	log2e = 1.4426950408889634
	ln2   = 0.6931471805599453
)

func (em *Emitter) unary(k tir.Kind, e tir.Elem, x value.Value) value.Value {
	b := em.b
	if !e.IsFloat() {
		it, _ := regType(tir.Scalar(e)).(*types.IntType)
		switch k {
		case tir.OpNeg:
			if e == tir.I1 {
				return x // -x == x mod 2
			}
			return b.NewSub(constant.NewInt(it, 0), x)
		case tir.OpNot:
			if e == tir.I1 {
				return b.NewXor(x, constant.NewBool(true))
			}
			return b.NewXor(x, constant.NewInt(it, -1))
		case tir.OpAbs:
			if e == tir.I1 {
				return x
			}
			neg := b.NewSub(constant.NewInt(it, 0), x)
			return b.NewSelect(b.NewICmp(enum.IPredSLT, x, constant.NewInt(it, 0)), neg, x)
		}
		Fail("%s on %s", k, e)
	}
	// Sign-bit ops act on the bits directly: exact for every format.
	if e != tir.F32 && (k == tir.OpNeg || k == tir.OpAbs) {
		if k == tir.OpNeg {
			return b.NewXor(x, constant.NewInt(types.I16, -0x8000))
		}
		return b.NewAnd(x, constant.NewInt(types.I16, 0x7fff))
	}
	f := em.toF32(x, e)
	var r value.Value
	switch k {
	case tir.OpNeg:
		r = b.NewFNeg(f)
	case tir.OpAbs:
		r = em.Call("llvm.fabs.f32", types.Float, f)
	case tir.OpExp:
		r = em.Call("llvm.nvvm.ex2.approx.ftz.f", types.Float, b.NewFMul(f, cf32(log2e)))
	case tir.OpExp2:
		r = em.Call("llvm.nvvm.ex2.approx.ftz.f", types.Float, f)
	case tir.OpLog:
		r = b.NewFMul(em.Call("llvm.nvvm.lg2.approx.f", types.Float, f), cf32(ln2))
	case tir.OpLog2:
		r = em.Call("llvm.nvvm.lg2.approx.f", types.Float, f)
	case tir.OpTanh:
		r = em.pure(types.Float, "tanh.approx.f32 $0, $1;", "=f,f", f)
	case tir.OpSqrt:
		r = em.Call("llvm.sqrt.f32", types.Float, f)
	default:
		Fail("%s on %s", k, e)
	}
	return em.fromF32(r, e)
}

func (em *Emitter) cmp(pred string, t tir.Type, x, y value.Value) value.Value {
	b := em.b
	if !t.Ptr && t.Elem.IsFloat() {
		x, y = em.toF32(x, t.Elem), em.toF32(y, t.Elem)
		fp := map[string]enum.FPred{"eq": enum.FPredOEQ, "ne": enum.FPredUNE, "lt": enum.FPredOLT,
			"le": enum.FPredOLE, "gt": enum.FPredOGT, "ge": enum.FPredOGE}[pred]
		if fp == 0 {
			Fail("cmp: bad predicate %q", pred)
		}
		return b.NewFCmp(fp, x, y)
	}
	ip := map[string]enum.IPred{"eq": enum.IPredEQ, "ne": enum.IPredNE, "lt": enum.IPredSLT,
		"le": enum.IPredSLE, "gt": enum.IPredSGT, "ge": enum.IPredSGE}
	if t.Ptr || t.Elem == tir.I1 {
		ip = map[string]enum.IPred{"eq": enum.IPredEQ, "ne": enum.IPredNE, "lt": enum.IPredULT,
			"le": enum.IPredULE, "gt": enum.IPredUGT, "ge": enum.IPredUGE}
	}
	p, ok := ip[pred]
	if !ok {
		Fail("cmp: bad predicate %q", pred)
	}
	return b.NewICmp(p, x, y)
}

// cast converts one element from s to d with the interpreter's semantics:
// floats round to nearest even, float->int truncates and saturates (NaN
// gives 0), ints wrap, anything->i1 is != 0, i1->number is 0/1.
func (em *Emitter) cast(s, d tir.Elem, x value.Value) value.Value {
	b := em.b
	if s == d {
		return x
	}
	switch {
	case d == tir.I1:
		if s.IsFloat() {
			return b.NewFCmp(enum.FPredUNE, em.toF32(x, s), cf32(0))
		}
		return b.NewICmp(enum.IPredNE, x, constant.NewInt(regType(tir.Scalar(s)).(*types.IntType), 0))
	case s == tir.I1 && d.IsFloat():
		return em.fromF32(b.NewUIToFP(x, types.Float), d)
	case s == tir.I1:
		return b.NewZExt(x, regType(tir.Scalar(d)))
	case s.IsFloat() && d.IsFloat():
		return em.fromF32(em.toF32(x, s), d)
	case s.IsFloat():
		it := regType(tir.Scalar(d))
		name := "llvm.fptosi.sat.i32.f32"
		if d == tir.I64 {
			name = "llvm.fptosi.sat.i64.f32"
		}
		return em.Call(name, it, em.toF32(x, s))
	case d.IsFloat():
		return em.fromF32(b.NewSIToFP(x, types.Float), d)
	}
	// int <-> int
	if s.Bytes() < d.Bytes() {
		return b.NewSExt(x, regType(tir.Scalar(d)))
	}
	return b.NewTrunc(x, regType(tir.Scalar(d)))
}

// maskSelect reports whether op masks a tile of scores: a select of -inf
// on a conjunction or disjunction of conditions. The forward's partial
// blocks gained 1.5–4% with one select there;
// the backward's select of P (0 where masked) measured 7.7% slower with it
// (none), so only the -inf form takes it.
func maskSelect(op *tir.Op) bool {
	d := op.Args[0].Def
	if d == nil || (d.Kind != tir.OpAnd && d.Kind != tir.OpOr) || op.Result().Type.IsScalar() {
		return false
	}
	return op.SelectsNegInf()
}

// reciprocal is 1/y rounded to f32 (to nearest) where y is a constant
// whose reciprocal is a normal f32: a division by it becomes a
// multiplication. The target's f32 division is div.full.f32 (2 ulp,
// codegen/llc) and x · RN(1/y) is within 1.5 ulp, exact where y is a power
// of two, in one instruction instead of a reciprocal and its refinement: a
// score mod's s / c, and its gradient's, once an element (softcap: three an
// element in the backward).
func reciprocal(y value.Value) (value.Value, bool) {
	c, ok := y.(*constant.Float)
	if !ok || c.X == nil || c.NaN || c.X.Sign() == 0 || c.X.IsInf() {
		return nil, false
	}
	q := new(big.Float).SetPrec(24).SetMode(big.ToNearestEven).Quo(big.NewFloat(1), c.X)
	r, _ := q.Float32()
	if a := math.Abs(float64(r)); math.IsInf(a, 0) || a < 0x1p-126 {
		return nil, false
	}
	return cf32(float64(r)), true
}
