package core

import (
	"github.com/llir/llvm/ir"
	"github.com/llir/llvm/ir/enum"
	"github.com/llir/llvm/ir/types"
	"github.com/llir/llvm/ir/value"

	"github.com/fac-compiler/fac/tir"
)

// lowerDot emits a dot on the target's tensor cores when it has them for
// this one, else as the FMA loop. Staged operand tiles are consumed by
// their (last) dot: no longer in flight after it.
func (l *Lowerer) lowerDot(op *tir.Op, lay Layout, ws []Layout) []value.Value {
	if _, ok := l.a.dotLayout(op); !ok {
		return l.fmaDot(op, lay, ws)
	}
	out := l.target.LowerDot(l, op, ws)
	for _, x := range op.Args[:2] {
		if st := l.smemTiles[x]; st != nil && !st.Resident && st.live && st.lastDot() == op {
			l.inFlight--
			st.live, st.ready = false, false
		}
	}
	return out
}

// fmaDot is the general fallback (any element types, any shapes): A and B
// go to shared memory row-major, then every thread runs a k loop over its
// accumulator registers with one fma (or integer multiply-add) per element,
// rounding to the accumulator type after each step as the interpreter does.
func (l *Lowerer) fmaDot(op *tir.Op, lay Layout, ws []Layout) []value.Value {
	at, bt, ct := op.Args[0].Type, op.Args[1].Type, op.Args[2].Type
	if at.Rank() != 2 || bt.Rank() != 2 || ct.Rank() != 2 {
		Fail("%s: dot needs rank-2 operands", op.Pos)
	}
	M, K, N := at.Shape[0], at.Shape[1], bt.Shape[1]
	a := l.Get(op.Args[0], ws[0])
	b := l.Get(op.Args[1], ws[1])
	c := l.Get(op.Args[2], ws[2])
	la, lb, lc := l.Lin(ws[0], at.Shape), l.Lin(ws[1], bt.Shape), l.Lin(lay, ct.Shape)

	amt, bmt := l.sharedRepr(at), l.sharedRepr(bt)
	aBytes := M * K * typeBytes(amt)
	bOff := (aBytes + 15) &^ 15
	l.UseShared(bOff + K*N*typeBytes(bmt))
	l.conversions++
	l.Barrier()
	ast, bst := []int{K, 1}, []int{N, 1}
	ab := l.FlatBase(la, ast)
	for r, v := range a {
		l.b.NewStore(l.toShared(v, at), l.sharedAt(amt, 0, l.AddOff(ab, DotInts(la.RegOffset(r), ast))))
	}
	bb := l.FlatBase(lb, bst)
	for r, v := range b {
		l.b.NewStore(l.toShared(v, bt), l.sharedAt(bmt, bOff, l.AddOff(bb, DotInts(lb.RegOffset(r), bst))))
	}
	l.Barrier()

	ce := ct.Elem
	// compute representation of the accumulator
	wide := func(v value.Value) value.Value {
		if ce.IsFloat() {
			return l.toF32(v, ce)
		}
		return v
	}
	narrow := func(v value.Value) value.Value {
		if ce.IsFloat() {
			return l.fromF32(v, ce)
		}
		return v
	}
	operand := func(v value.Value, e tir.Elem) value.Value {
		if ce.IsFloat() {
			if e.IsFloat() {
				return l.toF32(v, e)
			}
			return l.cast(e, tir.F32, v)
		}
		return l.cast(e, ce, v)
	}
	cb := l.baseCoords(lc)
	rowA := l.b.NewMul(cb[0], ConstI32(int64(K))) // A row base * K
	colB := cb[1]

	init := make([]value.Value, len(c))
	for r := range c {
		init[r] = wide(c[r])
	}
	pre := l.b
	body := l.newBlock("dot.k")
	exit := l.newBlock("dot.end")
	pre.NewBr(body)
	l.b = body
	kv := body.NewPhi(ir.NewIncoming(ConstI32(0), pre))
	phis := make([]*ir.InstPhi, len(c))
	for r := range c {
		phis[r] = body.NewPhi(ir.NewIncoming(init[r], pre))
	}
	kRow := l.b.NewMul(kv, ConstI32(int64(N)))
	out := make([]value.Value, len(c))
	for r := range c {
		off := lc.RegOffset(r)
		ai := l.b.NewAdd(l.AddOff(rowA, int64(off[0]*K)), kv)
		bi := l.b.NewAdd(l.AddOff(colB, int64(off[1])), kRow)
		av := operand(l.fromShared(l.b.NewLoad(amt, l.sharedAt(amt, 0, ai)), at), at.Elem)
		bv := operand(l.fromShared(l.b.NewLoad(bmt, l.sharedAt(bmt, bOff, bi)), bt), bt.Elem)
		var s value.Value
		if ce.IsFloat() {
			s = l.Call("llvm.fma.f32", types.Float, av, bv, phis[r])
			if ce != tir.F32 {
				s = l.toF32(l.fromF32(s, ce), ce)
			}
		} else {
			s = l.b.NewAdd(phis[r], l.b.NewMul(av, bv))
		}
		out[r] = s
	}
	next := l.b.NewAdd(kv, ConstI32(1))
	latch := l.b
	latch.NewCondBr(l.b.NewICmp(enum.IPredSLT, next, ConstI32(int64(K))), body, exit)
	kv.Incs = append(kv.Incs, ir.NewIncoming(next, latch))
	for r := range phis {
		phis[r].Incs = append(phis[r].Incs, ir.NewIncoming(out[r], latch))
	}
	l.b = exit
	res := make([]value.Value, len(out))
	for r := range out {
		res[r] = narrow(out[r])
	}
	return res
}
