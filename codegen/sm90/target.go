// Package sm90 is codegen's target for Hopper (sm_90, sm_90a). It is where
// the Hopper lowering goes: an MMAv3 accumulator layout and wgmma.mma_async
// for 16-bit dots with operands in swizzled shared memory, TMA
// (cp.async.bulk.tensor) with mbarriers for operand staging, warp
// specialization and setmaxnreg, as phases of its own table. Until those
// land, every hook uses sm80's strategy (mma.sync, ldmatrix, cp.async),
// which Hopper runs too; each hook below names what replaces it.
package sm90

import (
	"github.com/llir/llvm/ir/value"

	"github.com/fac-compiler/fac/codegen/core"
	"github.com/fac-compiler/fac/codegen/sm80"
	"github.com/fac-compiler/fac/tir"
)

// Target is the sm90 target for one arch: wgmma and setmaxnreg need the
// arch-specific sm_90a, so the choice of strategy will depend on it.
type Target struct {
	// Arch is sm_90 or sm_90a.
	Arch string
	// base holds the sm80 strategies used until Hopper's own land.
	base sm80.Target
}

var _ core.Target = (*Target)(nil)

// New returns the target for arch (sm_90 or sm_90a).
func New(arch string) *Target { return &Target{Arch: arch} }

// Phases is sm90's phase table: today sm80's phases; pipelining, warp
// specialization, TMA lowering and fence insertion go here.
func (t *Target) Phases() []core.Phase {
	return []core.Phase{core.CheckKernel, sm80.SelectAsync, core.AssignLayouts, core.PlanAsync, core.LowerLLVM}
}

// DotLayout: the mma.sync accumulator; wgmma's MMAv3 layout (64xN per
// warpgroup) replaces it on sm_90a.
func (t *Target) DotLayout(l *core.Lowerer, op *tir.Op) (core.Layout, bool) {
	return t.base.DotLayout(l, op)
}

// DotOperandLayout: sm80's; wgmma reads A from registers or shared memory
// and B from shared memory (matrix descriptors).
func (t *Target) DotOperandLayout(l *core.Lowerer, op *tir.Op, i int) core.Layout {
	return t.base.DotOperandLayout(l, op, i)
}

// LowerDot: mma.sync m16n8k16; wgmma.mma_async replaces it.
func (t *Target) LowerDot(l *core.Lowerer, op *tir.Op, ws []core.Layout) []value.Value {
	return t.base.LowerDot(l, op, ws)
}

// ConvertOperand: ldmatrix (stmatrix and swizzled tiles later).
func (t *Target) ConvertOperand(l *core.Lowerer, src []value.Value, lin *core.Linear, to core.Layout, lout *core.Linear, ty tir.Type) ([]value.Value, bool) {
	return t.base.ConvertOperand(l, src, lin, to, lout, ty)
}

// PlanStaged: sm80's padded ldmatrix tiles; TMA needs swizzled tiles and an
// mbarrier per stage.
func (t *Target) PlanStaged(l *core.Lowerer, st *core.Staged) (int, bool) {
	return t.base.PlanStaged(l, st)
}

// LowerStagedLoad: cp.async; cp.async.bulk.tensor (TMA) replaces it.
func (t *Target) LowerStagedLoad(l *core.Lowerer, op *tir.Op, st *core.Staged) {
	t.base.LowerStagedLoad(l, op, st)
}
