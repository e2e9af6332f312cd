package core

import (
	"github.com/llir/llvm/ir/enum"
	"github.com/llir/llvm/ir/value"

	"github.com/fac-compiler/fac/tir"
)

// lowerAtomicAdd lowers atomic_add to one `atomicrmw fadd` on global
// memory per register (monotonic: relaxed, like PTX red.global.add.f32),
// a masked one under a branch on its lane's mask. As for stores, the
// threads holding copies of an element leave the add to one of them:
// here a copy would add twice.
func (l *Lowerer) lowerAtomicAdd(op *tir.Op) {
	lay := l.a.storeLayout(op)
	ws := l.a.operandWants(op, lay)
	ptrs := l.Get(op.Args[0], ws[0])
	vals := l.Get(op.Args[1], ws[1])
	var mask []value.Value
	if len(op.Args) == 3 {
		mask = l.Get(op.Args[2], ws[2])
	}
	cont := l.guardCopies(l.Lin(lay, op.Args[0].Type.Shape), "atomic")
	for r, p := range ptrs {
		if mask == nil {
			l.b.NewAtomicRMW(enum.AtomicOpFAdd, p, vals[r], enum.AtomicOrderingMonotonic)
			continue
		}
		then, next := l.newBlock("atomic.lane"), l.newBlock("atomic.next")
		l.b.NewCondBr(mask[r], then, next)
		l.b = then
		l.b.NewAtomicRMW(enum.AtomicOpFAdd, p, vals[r], enum.AtomicOrderingMonotonic)
		l.b.NewBr(next)
		l.b = next
	}
	if cont != nil {
		l.b.NewBr(cont)
		l.b = cont
	}
}
