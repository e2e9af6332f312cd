package core

import (
	"github.com/llir/llvm/ir/types"
	"github.com/llir/llvm/ir/value"

	"github.com/fac-compiler/fac/tir"
)

// lowerAtomicAdd lowers atomic_add to one red.global.add.f32 per register
// (relaxed, gpu scope; no value comes back, and a masked lane's add is
// predicated off rather than branched around, so the 32 adds a thread
// makes per iteration of the backward's dQ are straight-line code), at
// addresses that are one register plus constant offsets when the pointers
// allow (affinePtrs). As for stores, the threads holding copies of an
// element leave the add to one of them: here a copy would add twice.
func (l *Lowerer) lowerAtomicAdd(op *tir.Op) {
	lay := l.a.storeLayout(op)
	ws := l.a.operandWants(op, lay)
	ptrs := l.Get(op.Args[0], ws[0])
	vals := l.Get(op.Args[1], ws[1])
	var mask []value.Value
	if len(op.Args) == 3 {
		mask = l.Get(op.Args[2], ws[2])
	}
	if e := op.Args[1].Type.Elem; e != tir.F32 {
		Fail("internal error: %s: atomic_add of %s (the verifier admits f32 only)", op.Pos, e)
	}
	ptrs = l.affinePtrs(op.Args[0], l.Lin(ws[0], op.Args[0].Type.Shape), ptrs)
	cont := l.guardCopies(l.Lin(lay, op.Args[0].Type.Shape), "atomic")
	const text = "{\n\t.reg .pred p;\n\tsetp.ne.b32 p, $2, 0;\n\t@p red.relaxed.gpu.global.add.f32 [$0], $1;\n\t}"
	for r, p := range ptrs {
		var on value.Value = ConstI32(1)
		if mask != nil {
			on = l.b.NewZExt(mask[r], types.I32)
		}
		l.asm(types.Void, text, "l,f,r,~{memory}", true, p, vals[r], on)
	}
	if cont != nil {
		l.b.NewBr(cont)
		l.b = cont
	}
}

// affinePtrs rewrites ptrs, the registers of pointer tensor p in layout
// lin, as ptrs[0] plus constant offsets when p is affine in its
// coordinates with constant strides (assigner.affine) and the layout's
// register bits never overlap its lane and warp bits in a dimension (so a
// register's coordinates are the thread's first register's plus
// RegOffset): LLVM folds the offsets into the accesses' immediates, and a
// thread keeps one 64-bit address live instead of one per register (the
// backward's 32 dQ adds: 64 registers).
func (l *Lowerer) affinePtrs(p *tir.Value, lin *Linear, ptrs []value.Value) []value.Value {
	strides, ok := l.a.affine(p)
	if !ok || len(ptrs) < 2 || len(strides) != len(lin.Shape()) {
		return ptrs
	}
	for d := range strides {
		regBits, others := 0, 0
		for _, b := range lin.RegBases() {
			regBits |= b[d]
		}
		for _, bs := range [][][]int{lin.LaneBases(), lin.WarpBases()} {
			for _, b := range bs {
				others |= b[d]
			}
		}
		if regBits&others != 0 {
			return ptrs
		}
	}
	elem := memType(p.Type.Elem)
	out := make([]value.Value, len(ptrs))
	out[0] = ptrs[0]
	for r := 1; r < len(ptrs); r++ {
		var off int64
		for d, c := range lin.RegOffset(r) {
			off += strides[d] * int64(c)
		}
		out[r] = l.ptrAdd(elem, ptrs[0], ConstI64(off))
	}
	return out
}
