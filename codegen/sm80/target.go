// Package sm80 is codegen's target for Ampere-class GPUs (sm_80, sm_86,
// sm_89, and any later arch without a target of its own): 16-bit dots on
// mma.sync.m16n8k16, tensor-core operands read from shared memory with
// ldmatrix, and dot operand tiles staged by cp.async. It implements
// core.Target; codegen picks it from the arch.
package sm80

import (
	"github.com/llir/llvm/ir/value"

	"github.com/fac-compiler/fac/codegen/core"
	"github.com/fac-compiler/fac/tir"
)

// Target is the sm80 target. The zero value is ready to use; it holds no
// state (per-kernel state lives in the core.Lowerer).
type Target struct{}

var _ core.Target = Target{}

// Phases is sm80's phase table.
func (Target) Phases() []core.Phase {
	return []core.Phase{core.CheckKernel, SelectAsync, core.AssignLayouts, core.PlanAsync, core.LowerLLVM, core.RemoveDead}
}

// DotLayout: 16-bit dots with f32 accumulation and tile-multiple shapes
// run on mma.sync m16n8k16, accumulating in the MMA (v2) layout.
func (Target) DotLayout(l *core.Lowerer, op *tir.Op) (core.Layout, bool) {
	m, ok := mmaLayout(l, op)
	if !ok {
		return nil, false
	}
	return m, true
}

// DotOperandLayout is the mma operand layout, or the operand's own layout
// when the dot stages it through shared memory itself (fuseOperand).
func (Target) DotOperandLayout(l *core.Lowerer, op *tir.Op, i int) core.Layout {
	return operandLayout(l, op, i)
}

// LowerDot emits mma.sync m16n8k16, reading staged operands with ldmatrix.
func (Target) LowerDot(l *core.Lowerer, op *tir.Op, ws []core.Layout) []value.Value {
	m, _ := mmaLayout(l, op)
	return mmaDot(l, op, m, ws)
}

// ConvertOperand converts 16-bit tensors into an mma operand layout with
// ldmatrix.
func (Target) ConvertOperand(l *core.Lowerer, src []value.Value, lin *core.Linear, to core.Layout, lout *core.Linear, t tir.Type) ([]value.Value, bool) {
	d, ok := to.(core.DotOperand)
	if !ok {
		return nil, false
	}
	return ldmatrixConvert(l, src, lin, d, lout, t)
}

// PlanStaged keeps a tile whose dot stages that operand (the padded
// ldmatrix tile), and sizes it.
func (Target) PlanStaged(l *core.Lowerer, st *core.Staged) (int, bool) { return planStaged(l, st) }

// LowerStagedLoad issues the tile's cp.async copies as one commit group.
func (Target) LowerStagedLoad(l *core.Lowerer, op *tir.Op, st *core.Staged) {
	lowerAsyncLoad(l, op, st)
}

// WaitStaged waits for all cp.async groups.
func (Target) WaitStaged(l *core.Lowerer) { waitAll(l) }
