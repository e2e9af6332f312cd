package core

import (
	"github.com/llir/llvm/ir/types"
	"github.com/llir/llvm/ir/value"

	"github.com/fac-compiler/fac/tir"
)

// lowerAtomicAdd lowers atomic_add to one red.global.add.f32 per register
// (relaxed, gpu scope; no value comes back, and a masked lane's add is
// predicated off rather than branched around, so the 32 adds a thread
// makes per iteration of the backward's dQ are straight-line code). As for
// stores, the threads holding copies of an element leave the add to one of
// them: here a copy would add twice.
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
