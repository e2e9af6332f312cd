package sm80

import (
	"github.com/llir/llvm/ir/types"
	"github.com/llir/llvm/ir/value"

	"github.com/fac-compiler/fac/codegen/core"
	"github.com/fac-compiler/fac/tir"
)

// Asynchronous operand staging (sm_80+ cp.async).
//
// A 16-bit tile that is loaded only to feed an mma dot in the same block
// (directly, or through one trans: K^T; marked by select-async) never
// visits registers: the load is lowered to cp.async.cg 16-byte copies
// straight into the dot's padded shared-memory tile (zero-filling masked
// rows with the src-size operand), committed as one group; the dot waits
// for that group (letting later groups, e.g. V's, stay in flight),
// synchronizes the CTA and reads fragments with ldmatrix. The copies of a
// tile overlap everything between the load and its dot (for attention:
// V's load overlaps QK^T and the softmax). Misaligned global addresses
// take a fallback that loads into registers and stores to the same tile.

// planStaged gives a staged tile its ldmatrix plan, or false when its dot
// does not stage that operand itself (then it is loaded normally).
func planStaged(l *core.Lowerer, st *core.Staged) (int, bool) {
	m, _ := mmaLayout(l, st.Dot)
	if !fuseOperand(l, st.Dot, m, st.Operand) {
		return 0, false
	}
	to := core.DotOperand{OpIdx: st.Operand, Parent: m}
	lay, _ := l.Layouts().LayoutOf(st.View)
	shape := st.View.Type.Shape
	p, ok := planFrag(l.Lin(lay, shape), to, l.Lin(to, shape), st.View.Type)
	if !ok {
		core.Fail("internal error: staged operand has no ldmatrix plan")
	}
	st.Plan = p
	return p.bytes, true
}

// lowerAsyncLoad issues the copies of a staged load.
func lowerAsyncLoad(l *core.Lowerer, op *tir.Op, at *core.Staged) {
	lay, _ := l.Layouts().LayoutOf(op.Result())
	ws := l.Layouts().OperandWants(op, lay)
	t := op.Result().Type
	e := t.Elem
	ptrs := l.Get(op.Args[0], ws[0])
	var mask []value.Value
	if len(op.Args) == 3 {
		mask = l.Get(op.Args[1], ws[1])
	}
	mask = l.StagedMasks(at, mask, len(ptrs))
	x := l.Lin(lay, t.Shape)
	// Strides of the tile in the load's own coordinates: the view may be
	// the transpose.
	st := at.Plan.(*fragPlan).st
	if at.View != op.Result() {
		st = []int{st[1], st[0]}
	}
	base := l.FlatBase(x, st)
	if reg := x.RegBases(); len(reg) < 3 || !core.EqualBases(reg[:3], [][]int{{0, 1}, {0, 2}, {0, 4}}) {
		core.Fail("internal error: staged load layout %s has no 8-element chunks", lay)
	}
	l.CopyStaged(ptrs, mask, e, func(r int) value.Value {
		return l.StagedAddr(types.I16, at, l.AddOff(base, core.DotInts(x.RegOffset(r), st)))
	})
}

// waitAll waits for every cp.async copy issued so far.
func waitAll(l *core.Lowerer) {
	l.Block().NewCall(l.Decl("llvm.nvvm.cp.async.wait.group", types.Void, types.I32), core.ConstI32(0))
}
