package codegen

import (
	"github.com/llir/llvm/ir"
	"github.com/llir/llvm/ir/enum"
	"github.com/llir/llvm/ir/types"
	"github.com/llir/llvm/ir/value"

	"github.com/fac-compiler/fac/tir"
)

func (l *lowerer) lowerDot(op *tir.Op, lay Layout, ws []Layout) []value.Value {
	if m, ok := l.a.mmaDot(op); ok {
		return l.mmaDot(op, m, ws)
	}
	return l.fmaDot(op, lay, ws)
}

// mmaDot lowers a 16-bit dot with f32 accumulation to mma.sync m16n8k16:
// A in DotOperand{0}, B in DotOperand{1}, C in MMA (see their register
// orders). Loop order: k tiles outermost, so consecutive mmas are
// independent.
func (l *lowerer) mmaDot(op *tir.Op, m MMA, ws []Layout) []value.Value {
	at, bt := op.Args[0].Type, op.Args[1].Type
	M, K, N := at.Shape[0], at.Shape[1], bt.Shape[1]
	wm, wn := m.WarpsPerCTA[0], m.WarpsPerCTA[1]
	nM, nN, nK := max(1, M/(16*wm)), max(1, N/(8*wn)), K/16
	c := l.get(op.Args[2], ws[2])
	if len(c) != 4*nM*nN {
		fail("internal error: mma accumulator has %d registers for %dx%d %s", len(c), M, N, m)
	}
	f16 := at.Elem == tir.F16
	half2 := types.NewVector(2, types.Half)
	pack := func(lo, hi value.Value) value.Value {
		w := l.b.NewOr(l.b.NewZExt(lo, types.I32), l.b.NewShl(l.b.NewZExt(hi, types.I32), ci32(16)))
		if f16 {
			return l.b.NewBitCast(w, half2)
		}
		return w
	}
	packAll := func(regs []value.Value) []value.Value {
		out := make([]value.Value, len(regs)/2)
		for i := range out {
			out[i] = pack(regs[2*i], regs[2*i+1])
		}
		return out
	}

	// Operands: in registers already (converted at their definition), or
	// staged here (fuseOperand) and read fragment by fragment.
	var loaders [2]*fragLoader
	var srcs [2][]value.Value
	var lins [2]*linear
	var plans [2]*fragPlan
	var tiles []*asyncTile
	off := 0
	for i := 0; i < 2; i++ {
		x := op.Args[i]
		if _, ok := ws[i].(DotOperand); ok {
			continue
		}
		if at := l.smemTiles[x]; at != nil {
			loaders[i] = l.newFragLoader(at.plan, at.byteOff)
			tiles = append(tiles, at)
			continue
		}
		to := DotOperand{OpIdx: i, Parent: m}
		lins[i] = l.lin(ws[i], x.Type.Shape)
		p, ok := planFrag(lins[i], to, l.lin(to, x.Type.Shape), x.Type)
		if !ok {
			fail("internal error: fused mma operand %d has no ldmatrix plan", i)
		}
		plans[i] = p
		srcs[i] = l.get(x, ws[i])
		loaders[i] = l.newFragLoader(p, l.scratch()+off)
		off = (off + p.bytes + 127) &^ 127
		l.conversions++
	}
	if off > 0 {
		l.useShared(off)
		l.barrier()
		for i := 0; i < 2; i++ {
			if plans[i] != nil {
				l.sharedStore(srcs[i], lins[i], plans[i].st, op.Args[i].Type, loaders[i].byteOff-l.scratch())
			}
		}
	}
	for _, at := range tiles {
		l.waitFor(at)
	}
	if off > 0 || len(tiles) > 0 {
		l.barrier()
	}
	var ap, bp []value.Value // packed registers, nil when fused
	if loaders[0] == nil {
		a := l.get(op.Args[0], ws[0])
		if len(a) != 8*nK*nM {
			fail("internal error: mma A operand has %d registers", len(a))
		}
		ap = packAll(a)
	}
	if loaders[1] == nil {
		b := l.get(op.Args[1], ws[1])
		if len(b) != 4*nK*nN {
			fail("internal error: mma B operand has %d registers", len(b))
		}
		bp = packAll(b)
	}
	aFrag := map[[2]int][]value.Value{}
	aTile := func(kk, i int) []value.Value { // a0..a3 of tile (i, kk)
		first := 4 * (i*nK + kk)
		if ap != nil {
			return ap[first : first+4]
		}
		key := [2]int{kk, i}
		if f, ok := aFrag[key]; ok {
			return f
		}
		f := packAll(loaders[0].load(first, []int{0, 1, 2, 3}))
		aFrag[key] = f
		return f
	}
	bFrag := map[[2]int][]value.Value{}
	bTile := func(kk, j int) []value.Value { // b0, b1 of tile (kk, j)
		first := 2 * (j*nK + kk)
		if bp != nil {
			return bp[first : first+2]
		}
		key := [2]int{kk, j}
		if f, ok := bFrag[key]; ok {
			return f
		}
		if j%2 == 0 && j+1 < nN {
			// One x4 for tiles j and j+1 (packed registers first+{0,1}
			// and first+2nK+{0,1}).
			f := packAll(loaders[1].load(first, []int{0, 1, 2 * nK, 2*nK + 1}))
			bFrag[key], bFrag[[2]int{kk, j + 1}] = f[:2], f[2:]
			return f[:2]
		}
		f := packAll(loaders[1].load(first, []int{0, 1}))
		bFrag[key] = f
		return f
	}

	acc := append([]value.Value(nil), c...)
	name := "llvm.nvvm.mma.m16n8k16.row.col.bf16"
	if f16 {
		name = "llvm.nvvm.mma.m16n8k16.row.col.f32.f32"
	}
	ret := types.NewStruct(types.Float, types.Float, types.Float, types.Float)
	for kk := 0; kk < nK; kk++ {
		for i := 0; i < nM; i++ {
			for j := 0; j < nN; j++ {
				a, b := aTile(kk, i), bTile(kk, j)
				cb := 4 * (i*nN + j)
				args := []value.Value{a[0], a[1], a[2], a[3], b[0], b[1], acc[cb], acc[cb+1], acc[cb+2], acc[cb+3]}
				r := l.call(name, ret, args...)
				for q := 0; q < 4; q++ {
					acc[cb+q] = l.b.NewExtractValue(r, uint64(q))
				}
			}
		}
	}
	l.inFlight -= len(tiles)
	return acc
}

// fmaDot is the general fallback (any element types, any shapes): A and B
// go to shared memory row-major, then every thread runs a k loop over its
// accumulator registers with one fma (or integer multiply-add) per element,
// rounding to the accumulator type after each step as the interpreter does.
func (l *lowerer) fmaDot(op *tir.Op, lay Layout, ws []Layout) []value.Value {
	at, bt, ct := op.Args[0].Type, op.Args[1].Type, op.Args[2].Type
	if at.Rank() != 2 || bt.Rank() != 2 || ct.Rank() != 2 {
		fail("%s: dot needs rank-2 operands", op.Pos)
	}
	M, K, N := at.Shape[0], at.Shape[1], bt.Shape[1]
	a := l.get(op.Args[0], ws[0])
	b := l.get(op.Args[1], ws[1])
	c := l.get(op.Args[2], ws[2])
	la, lb, lc := l.lin(ws[0], at.Shape), l.lin(ws[1], bt.Shape), l.lin(lay, ct.Shape)

	amt, bmt := l.sharedRepr(at), l.sharedRepr(bt)
	aBytes := M * K * typeBytes(amt)
	bOff := (aBytes + 15) &^ 15
	l.useShared(bOff + K*N*typeBytes(bmt))
	l.conversions++
	l.barrier()
	ast, bst := []int{K, 1}, []int{N, 1}
	ab := l.flatBase(la, ast)
	for r, v := range a {
		l.b.NewStore(l.toShared(v, at), l.sharedAt(amt, 0, l.addOff(ab, dotInts(la.regOffset(r), ast))))
	}
	bb := l.flatBase(lb, bst)
	for r, v := range b {
		l.b.NewStore(l.toShared(v, bt), l.sharedAt(bmt, bOff, l.addOff(bb, dotInts(lb.regOffset(r), bst))))
	}
	l.barrier()

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
	rowA := l.b.NewMul(cb[0], ci32(int64(K))) // A row base * K
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
	kv := body.NewPhi(ir.NewIncoming(ci32(0), pre))
	phis := make([]*ir.InstPhi, len(c))
	for r := range c {
		phis[r] = body.NewPhi(ir.NewIncoming(init[r], pre))
	}
	kRow := l.b.NewMul(kv, ci32(int64(N)))
	out := make([]value.Value, len(c))
	for r := range c {
		off := lc.regOffset(r)
		ai := l.b.NewAdd(l.addOff(rowA, int64(off[0]*K)), kv)
		bi := l.b.NewAdd(l.addOff(colB, int64(off[1])), kRow)
		av := operand(l.fromShared(l.b.NewLoad(amt, l.sharedAt(amt, 0, ai)), at), at.Elem)
		bv := operand(l.fromShared(l.b.NewLoad(bmt, l.sharedAt(bmt, bOff, bi)), bt), bt.Elem)
		var s value.Value
		if ce.IsFloat() {
			s = l.call("llvm.fma.f32", types.Float, av, bv, phis[r])
			if ce != tir.F32 {
				s = l.toF32(l.fromF32(s, ce), ce)
			}
		} else {
			s = l.b.NewAdd(phis[r], l.b.NewMul(av, bv))
		}
		out[r] = s
	}
	next := l.b.NewAdd(kv, ci32(1))
	latch := l.b
	latch.NewCondBr(l.b.NewICmp(enum.IPredSLT, next, ci32(int64(K))), body, exit)
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
