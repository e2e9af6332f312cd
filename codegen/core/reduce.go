package core

import (
	"fmt"

	"github.com/llir/llvm/ir/constant"
	"github.com/llir/llvm/ir/types"
	"github.com/llir/llvm/ir/value"

	"github.com/fac-compiler/fac/tir"
)

// lowerReduce reduces one axis in three steps, each only where the layout
// spreads that axis: within a thread over registers, across lanes with
// shfl.sync.bfly (every lane of a group ends with the total), across warps
// through shared memory (every warp writes its partial, every thread folds
// all partials in warp order). f16/bf16 are reduced in f32 and rounded once
// at the end.
func (em *Emitter) lowerReduce(op *tir.Op, lay Layout, ws []Layout) []value.Value {
	x := op.Args[0]
	axis := int(op.IntAttr("axis"))
	kind := op.IdentAttr("kind")
	if kind != "max" && kind != "min" && kind != "sum" {
		Fail("%s: reduce kind %q", op.Pos, kind)
	}
	e := x.Type.Elem
	if x.Type.Ptr {
		Fail("%s: reduce of pointers", op.Pos)
	}
	src := em.Get(x, ws[0])
	lin := em.Lin(ws[0], x.Type.Shape)
	rt := op.Result().Type
	lout := em.Lin(lay, rt.Shape)

	wide := func(v value.Value) value.Value {
		switch {
		case e.IsFloat():
			return em.toF32(v, e)
		case e == tir.I1:
			return em.b.NewZExt(v, types.I32)
		}
		return v
	}
	combine := func(a, b value.Value) value.Value {
		switch {
		case e.IsFloat():
			return em.binary(reduceKind(kind), tir.F32, a, b)
		case e == tir.I1:
			k := map[string]tir.Kind{"max": tir.OpOr, "min": tir.OpAnd, "sum": tir.OpXor}[kind]
			return em.binary(k, tir.I32, a, b)
		}
		return em.binary(reduceKind(kind), e, a, b)
	}

	idx := lout.regIndex()
	parts := make([][]value.Value, lout.NumRegs())
	for r, v := range src {
		key := fmt.Sprint(removeDim(lin.RegOffset(r), axis))
		j, ok := idx[key]
		if !ok {
			Fail("internal error: reduce: %s is not a slice of %s", lay, ws[0])
		}
		parts[j] = append(parts[j], wide(v))
	}
	acc := make([]value.Value, len(parts))
	for j, p := range parts {
		if len(p) == 0 {
			Fail("internal error: reduce: output register %d has no input", j)
		}
		acc[j] = pairwise(p, combine)
	}
	for i, b := range lin.lane {
		if b[axis] == 0 {
			continue
		}
		for j := range acc {
			acc[j] = combine(acc[j], em.shuffleXor(acc[j], 1<<i))
		}
	}
	var wbits []int
	for i, b := range lin.warp {
		if b[axis] != 0 {
			wbits = append(wbits, i)
		}
	}
	if len(wbits) > 0 {
		nOut := 1
		for _, d := range rt.Shape {
			nOut *= d
		}
		ct := acc[0].Type()
		nW := 1 << len(wbits)
		em.UseShared(nOut * nW * typeBytes(ct))
		em.conversions++
		// The warp's index along the axis: its axis bits, compressed.
		var wi value.Value = ConstI32(0)
		for k, bit := range wbits {
			t := em.entry.NewAnd(em.entry.NewLShr(em.warp, ConstI32(int64(bit))), ConstI32(1))
			if k > 0 {
				wi = em.entry.NewOr(wi, em.entry.NewShl(t, ConstI32(int64(k))))
			} else {
				wi = t
			}
		}
		st := rowMajorStrides(rt.Shape)
		ob := em.FlatBase(lout, st)
		em.Barrier()
		mine := em.b.NewAdd(em.b.NewMul(wi, ConstI32(int64(nOut))), ob)
		for j, v := range acc {
			em.b.NewStore(v, em.sharedAt(ct, 0, em.AddOff(mine, DotInts(lout.RegOffset(j), st))))
		}
		em.Barrier()
		for j := range acc {
			off := DotInts(lout.RegOffset(j), st)
			var r value.Value
			for w := 0; w < nW; w++ {
				v := em.b.NewLoad(ct, em.sharedAt(ct, 0, em.AddOff(ob, int64(w*nOut)+off)))
				if r == nil {
					r = v
				} else {
					r = combine(r, v)
				}
			}
			acc[j] = r
		}
	}
	for j, v := range acc {
		switch {
		case e.IsFloat():
			acc[j] = em.fromF32(v, e)
		case e == tir.I1:
			acc[j] = em.b.NewTrunc(v, types.I1)
		}
	}
	return acc
}

// pairwise folds vs as a balanced tree: the dependent chain is log2(n)
// long instead of n (a 128-wide row of the attention softmax: 6 steps, not
// 63), which leaves the scheduler independent instructions to interleave.
func pairwise[T any](vs []T, combine func(a, b T) T) T {
	for len(vs) > 1 {
		next := make([]T, 0, (len(vs)+1)/2)
		for i := 0; i+1 < len(vs); i += 2 {
			next = append(next, combine(vs[i], vs[i+1]))
		}
		if len(vs)%2 == 1 {
			next = append(next, vs[len(vs)-1])
		}
		vs = next
	}
	return vs[0]
}

func reduceKind(kind string) tir.Kind {
	switch kind {
	case "max":
		return tir.OpMax
	case "min":
		return tir.OpMin
	}
	return tir.OpAdd
}

// shuffleXor is shfl.sync.bfly over the full warp.
func (em *Emitter) shuffleXor(v value.Value, mask int) value.Value {
	all := constant.NewInt(types.I32, -1)
	m, c := ConstI32(int64(mask)), ConstI32(31)
	switch t := v.Type().(type) {
	case *types.FloatType:
		return em.Call("llvm.nvvm.shfl.sync.bfly.f32", types.Float, all, v, m, c)
	case *types.IntType:
		switch t.BitSize {
		case 32:
			return em.Call("llvm.nvvm.shfl.sync.bfly.i32", types.I32, all, v, m, c)
		case 64:
			var lo, hi value.Value = em.b.NewTrunc(v, types.I32), em.b.NewTrunc(em.b.NewLShr(v, ci64(32)), types.I32)
			lo = em.Call("llvm.nvvm.shfl.sync.bfly.i32", types.I32, all, lo, m, c)
			hi = em.Call("llvm.nvvm.shfl.sync.bfly.i32", types.I32, all, hi, m, c)
			return em.b.NewOr(em.b.NewZExt(lo, types.I64), em.b.NewShl(em.b.NewZExt(hi, types.I64), ci64(32)))
		}
	}
	Fail("internal error: shuffle of %s", v.Type())
	return nil
}
