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
func (em *Emitter) lowerDot(op *tir.Op, lay Layout, ws []Layout) []value.Value {
	if _, ok := em.lay.dotLayout(op); !ok {
		return em.fmaDot(op, lay, ws)
	}
	out := em.target.LowerDot(em.l, op, ws)
	for _, x := range op.Args[:2] {
		if st := em.smemTiles[x]; st != nil && !st.Resident && st.live && st.lastDot() == op {
			em.inFlight--
			st.live, st.ready = false, false
		}
	}
	return out
}

// fmaDot is the general fallback (any element types, any shapes): A and B
// go to shared memory row-major, then every thread runs a k loop over its
// accumulator registers with one fma (or integer multiply-add) per element,
// rounding to the accumulator type after each step as the interpreter does.
func (em *Emitter) fmaDot(op *tir.Op, lay Layout, ws []Layout) []value.Value {
	at, bt, ct := op.Args[0].Type, op.Args[1].Type, op.Args[2].Type
	if at.Rank() != 2 || bt.Rank() != 2 || ct.Rank() != 2 {
		Fail("%s: dot needs rank-2 operands", op.Pos)
	}
	M, K, N := at.Shape[0], at.Shape[1], bt.Shape[1]
	a := em.Get(op.Args[0], ws[0])
	b := em.Get(op.Args[1], ws[1])
	c := em.Get(op.Args[2], ws[2])
	la, lb, lc := em.Lin(ws[0], at.Shape), em.Lin(ws[1], bt.Shape), em.Lin(lay, ct.Shape)

	amt, bmt := em.sharedRepr(at), em.sharedRepr(bt)
	aBytes := M * K * typeBytes(amt)
	bOff := (aBytes + 15) &^ 15
	em.UseShared(bOff + K*N*typeBytes(bmt))
	em.conversions++
	em.Barrier()
	ast, bst := []int{K, 1}, []int{N, 1}
	ab := em.FlatBase(la, ast)
	for r, v := range a {
		em.b.NewStore(em.toShared(v, at), em.sharedAt(amt, 0, em.AddOff(ab, DotInts(la.RegOffset(r), ast))))
	}
	bb := em.FlatBase(lb, bst)
	for r, v := range b {
		em.b.NewStore(em.toShared(v, bt), em.sharedAt(bmt, bOff, em.AddOff(bb, DotInts(lb.RegOffset(r), bst))))
	}
	em.Barrier()

	ce := ct.Elem
	// compute representation of the accumulator
	wide := func(v value.Value) value.Value {
		if ce.IsFloat() {
			return em.toF32(v, ce)
		}
		return v
	}
	narrow := func(v value.Value) value.Value {
		if ce.IsFloat() {
			return em.fromF32(v, ce)
		}
		return v
	}
	operand := func(v value.Value, e tir.Elem) value.Value {
		if ce.IsFloat() {
			if e.IsFloat() {
				return em.toF32(v, e)
			}
			return em.cast(e, tir.F32, v)
		}
		return em.cast(e, ce, v)
	}
	cb := em.baseCoords(lc)
	rowA := em.b.NewMul(cb[0], ConstI32(int64(K))) // A row base * K
	colB := cb[1]

	init := make([]value.Value, len(c))
	for r := range c {
		init[r] = wide(c[r])
	}
	pre := em.b
	body := em.newBlock("dot.k")
	exit := em.newBlock("dot.end")
	pre.NewBr(body)
	em.b = body
	kv := body.NewPhi(ir.NewIncoming(ConstI32(0), pre))
	phis := make([]*ir.InstPhi, len(c))
	for r := range c {
		phis[r] = body.NewPhi(ir.NewIncoming(init[r], pre))
	}
	kRow := em.b.NewMul(kv, ConstI32(int64(N)))
	out := make([]value.Value, len(c))
	for r := range c {
		off := lc.RegOffset(r)
		ai := em.b.NewAdd(em.AddOff(rowA, int64(off[0]*K)), kv)
		bi := em.b.NewAdd(em.AddOff(colB, int64(off[1])), kRow)
		av := operand(em.fromShared(em.b.NewLoad(amt, em.sharedAt(amt, 0, ai)), at), at.Elem)
		bv := operand(em.fromShared(em.b.NewLoad(bmt, em.sharedAt(bmt, bOff, bi)), bt), bt.Elem)
		var s value.Value
		if ce.IsFloat() {
			s = em.Call("llvm.fma.f32", types.Float, av, bv, phis[r])
			if ce != tir.F32 {
				s = em.toF32(em.fromF32(s, ce), ce)
			}
		} else {
			s = em.b.NewAdd(phis[r], em.b.NewMul(av, bv))
		}
		out[r] = s
	}
	next := em.b.NewAdd(kv, ConstI32(1))
	latch := em.b
	latch.NewCondBr(em.b.NewICmp(enum.IPredSLT, next, ConstI32(int64(K))), body, exit)
	kv.Incs = append(kv.Incs, ir.NewIncoming(next, latch))
	for r := range phis {
		phis[r].Incs = append(phis[r].Incs, ir.NewIncoming(out[r], latch))
	}
	em.b = exit
	res := make([]value.Value, len(out))
	for r := range out {
		res[r] = narrow(out[r])
	}
	return res
}

// KSteps is how many of a tensor-core dot's k-steps of 16 to issue: K/16,
// or up to the dot's k_extent (pad-dims: the operands are zero past it,
// so the steps wholly beyond it add nothing).
func KSteps(op *tir.Op) int {
	k := op.Args[0].Type.Shape[1]
	if n, ok := op.Attr("k_extent").(int64); ok && int(n) < k {
		k = int(n)
	}
	return (k + 15) / 16
}

// NTiles is how many of a tensor-core dot's n-tiles of tile columns
// (repeated every stride columns: a tile of every warp along N) to
// issue: n/tile, or those holding a column before the dot's n_extent
// (pad-dims: the result's columns past it are the accumulator's, so the
// tiles wholly beyond it are left as c has them).
func NTiles(op *tir.Op, n, stride int) int {
	if e, ok := op.Attr("n_extent").(int64); ok {
		return min(n, (int(e)+stride-1)/stride)
	}
	return n
}
