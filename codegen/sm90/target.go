// Package sm90 is codegen's target for Hopper (sm_90, sm_90a). It is where
// the Hopper lowering goes: an MMAv3 accumulator layout and wgmma.mma_async
// for 16-bit dots with operands in swizzled shared memory, TMA
// (cp.async.bulk.tensor) with mbarriers for operand staging, stores and
// reductions, and setmaxnreg, as phases of its own table. The
// asynchronous machinery around them (pipelined loops, the producer
// warpgroup and consumer groups, deferred reductions) is codegen/async's,
// which the target embeds (async.Scheduler) and serves with Hopper's
// instructions (warpspec.go, tma.go, tmareduce.go).
//
// wgmma (wgmma.go, tile.go) runs on sm_90a unless the target config opts
// out (core.TargetConfig, wgmma=off); everything else (sm_90, the opt-out,
// dots wgmma cannot take) uses sm80's strategy (mma.sync, ldmatrix,
// cp.async), which Hopper runs too. The config's other switches choose
// among Hopper's own paths (TMA or cp.async staging, how buffers are
// released, dQ's adds, TMA stores, CTAs a multiprocessor).
package sm90

import (
	"github.com/llir/llvm/ir/types"
	"github.com/llir/llvm/ir/value"

	"github.com/fac-compiler/fac/codegen/async"
	"github.com/fac-compiler/fac/codegen/core"
	"github.com/fac-compiler/fac/codegen/sm80"
	"github.com/fac-compiler/fac/tir"
)

// CTAsPerSM: core.CTAsTarget (the config's ctas-per-sm).
func (t *Target) CTAsPerSM() int { return t.CTAs }

// BulkReduce: async.BulkReduceTarget (the config's dq=bulk, or the
// kernel's dq_bulk schedule argument).
func (t *Target) BulkReduce(l *core.Lowerer) bool {
	on, _ := l.Func().Attr("dq_bulk").(bool)
	return t.DQBulk || on
}

// VectorReduce: core.VectorReduceTarget. red.global.add.v2.f32 and .v4
// are sm_90's (PTX ISA 8.1), on both archs.
func (t *Target) VectorReduce() bool { return true }

// Target is the sm90 target for one arch: wgmma and setmaxnreg need the
// arch-specific sm_90a, so the choice of strategy depends on it.
type Target struct {
	// Scheduler is the kernel's asynchronous machinery (pipelined loops,
	// the producer warpgroup, consumer groups, deferred reductions): it
	// makes the target the core's ProgramTarget, SharedTarget and
	// ScheduleTarget.
	*async.Scheduler
	// Arch is sm_90 or sm_90a.
	Arch string
	// WGMMA lowers eligible dots to wgmma.mma_async (sm_90a only).
	WGMMA bool
	// TMA copies eligible staged wgmma tiles with cp.async.bulk.tensor
	// (tma.go; with WGMMA, unless tma=off).
	TMA bool
	// Release hands a pipelined TMA tile's buffers back without a CTA
	// barrier per iteration (unless release=barrier): through release
	// counters, or through empty mbarriers to a producer warpgroup
	// (warpspec.go).
	Release bool
	// DQBulk adds f32 atomic_add tiles in loops through shared memory
	// with cp.reduce.async.bulk (async.BulkReduceTarget; with TMA and
	// dq=bulk).
	DQBulk bool
	// DQTMA adds f32 atomic_add tiles in loops that tma-reduce planned by
	// TMA tensor reductions (tmareduce.go; the config's dq=tma with TMA).
	DQTMA bool
	// TMAStore writes eligible stored tiles by TMA in every kernel
	// (tmastore.go; with TMA and tma-store=on); a kernel's own tma_store
	// argument asks the same for that kernel.
	TMAStore bool
	// Riders copies a pipelined loop's vector loads with its first TMA
	// tile (riders.go; with TMA, unless riders=off).
	Riders bool
	// CTAs is the CTAs a multiprocessor ptxas is asked to fit
	// (ctas-per-sm, with wgmma), 0 for each kernel's own.
	CTAs int
	// tmaStores are the stores tma-store planned, by op.
	tmaStores map[*tir.Op]*tmaStore
	// tmaReduces are the atomic_adds tma-reduce planned, by op.
	tmaReduces map[*tir.Op]*tmaReduce
	// riders are the vectors tma-riders copies with TMA tiles, by load.
	riders map[*tir.Op]*rider
	// tmaBars are the arrival counts of the TMA tiles' mbarriers, 8 bytes
	// each from tmaBase.
	tmaBars []int
	tmaBase int
	// tmaMaps are the tensor-map parameters the copies use
	// (core.Lowerer.TensorMapParam), each once.
	tmaMaps []int
	// base holds the sm80 strategies used where Hopper's own are not.
	base sm80.Target
	// bases caches per-kernel tile offsets of layout bases (entry block).
	bases map[string]value.Value
	// ppEntry: the pingpong schedule's first arrive is in the entry block.
	ppEntry bool
	// scratchRead: a wgmma read operands it wrote to the scratch area, with
	// no CTA barrier since (core.Lowerer.Barriers was scratchBar then).
	scratchRead bool
	scratchBar  int
}

var _ core.Target = (*Target)(nil)

// New returns the target for cfg (cfg.Arch sm_90 or sm_90a): wgmma when
// the arch is sm_90a unless cfg opts out, and the switches of cfg that
// apply (core.TargetConfig.Effective).
func New(cfg core.TargetConfig) *Target {
	e := cfg.Effective()
	return &Target{Scheduler: async.New(), Arch: cfg.Arch, WGMMA: e.WGMMA(), TMA: e.TMA(), Release: e.TMA() && e.Release == core.ReleaseCounters,
		DQBulk: e.DQ == core.DQBulk, DQTMA: e.TMA() && e.DQ == core.DQTMA, TMAStore: e.TMAStore, Riders: e.TMA() && !e.NoRiders, CTAs: e.CTAsPerSM}
}

// Phases is sm90's phase table: sm80's phases with Hopper's own operand
// staging (select-async for shared tiles, stage-resident, tma-loads),
// codegen/async's pipelining, and warp specialization.
// tma-store (a kernel's tma_store argument, or tma-store=on) picks the
// TMA stores before assign-layouts (their values keep their own layouts).
func (t *Target) Phases() []core.Phase {
	return []core.Phase{core.CheckKernel, SelectAsync, StageResident, TMAStores, TMAReduces, core.AssignLayouts, core.PlanAsync, async.PipelineLoads, TMALoads, TMARiders, WarpSpecialize, core.LowerLLVM, core.RemoveDead}
}

// OpNote: what --print-ir-after shows of the schedule's plan for op
// (async.Scheduler.OpNote: the producer's share), and of sm90's own
// phases': the stores tma-store writes by TMA, the atomic_adds tma-reduce
// adds by TMA tensor reductions, the loads tma-riders copies with a tile.
func (t *Target) OpNote(l *core.Lowerer, op *tir.Op, st *core.Staged) string {
	n := t.Scheduler.OpNote(l, op, st)
	var own string
	if s := t.tmaStores[op]; s != nil {
		own = "TMA store into " + s.tensor
	} else if r := t.tmaReduces[op]; r != nil {
		own = "TMA tensor reductions into " + r.tensor
	} else if r := t.riders[op]; r != nil {
		own = "rides with " + r.host.Plan.(*tilePlan).tma.tensor + "'s TMA copies"
	}
	switch {
	case own == "":
		return n
	case n == "":
		return own
	}
	return n + ", " + own
}

// DotLayout: MMA v3 for dots on wgmma, else the mma.sync accumulator.
func (t *Target) DotLayout(l *core.Lowerer, op *tir.Op) (core.Layout, bool) {
	if m, ok := t.wgmmaLayout(l, op); ok {
		return m, true
	}
	return t.base.DotLayout(l, op)
}

// AsyncDot: wgmma dots complete asynchronously (their waits are the
// core's, core.DeferWait).
func (t *Target) AsyncDot(l *core.Lowerer, op *tir.Op) bool {
	_, ok := t.wgmmaLayout(l, op)
	return ok
}

// DotOperandLayout: for wgmma, B in its own layout (read from shared
// memory) and A in the A fragment or, when staged, its own; else sm80's.
func (t *Target) DotOperandLayout(l *core.Lowerer, op *tir.Op, i int) core.Layout {
	if m, ok := t.wgmmaLayout(l, op); ok {
		return wgmmaOperandLayout(l, op, m, i)
	}
	return t.base.DotOperandLayout(l, op, i)
}

// LowerDot: wgmma.mma_async or mma.sync m16n8k16.
func (t *Target) LowerDot(l *core.Lowerer, op *tir.Op, ws []core.Layout) []value.Value {
	if m, ok := t.wgmmaLayout(l, op); ok {
		return t.wgmmaDot(l, op, m, ws)
	}
	return t.base.LowerDot(l, op, ws)
}

// ConvertOperand: ldmatrix (the wgmma A fragment is per warp the
// m16n8k16 one, so it serves both; stmatrix and swizzled tiles later).
func (t *Target) ConvertOperand(l *core.Lowerer, src []value.Value, lin *core.Linear, to core.Layout, lout *core.Linear, ty tir.Type) ([]value.Value, bool) {
	return t.base.ConvertOperand(l, src, lin, to, lout, ty)
}

// PlanStaged: a swizzled tile for wgmma dots, sm80's padded ldmatrix tile
// otherwise. With wgmma every tile is a multiple of 1024 bytes, so all
// start on the 128B swizzle pattern (TMA needs swizzled tiles and an
// mbarrier per stage later).
func (t *Target) PlanStaged(l *core.Lowerer, st *core.Staged) (int, bool) {
	if _, ok := t.wgmmaLayout(l, st.Dot); ok {
		return t.planTile(l, st)
	}
	n, ok := t.base.PlanStaged(l, st)
	if ok && t.WGMMA {
		n = roundUp(n, tileAlign)
	}
	return n, ok
}

// LowerStagedLoad: TMA (tma-loads planned it), else cp.async into the
// tile (swizzled for wgmma).
func (t *Target) LowerStagedLoad(l *core.Lowerer, op *tir.Op, st *core.Staged) {
	if p, ok := st.Plan.(*tilePlan); ok && p.tma != nil {
		t.lowerTMA(l, st, p)
		if st.Resident {
			// Copied once, before the loops that read it: wait for it
			// just before the first of them (TMA writes through the async
			// proxy, which wgmma reads: no fence), so that the copy lands
			// while the scalar loads and the loop's first copies issue.
			l.DeferToRegion(func() { t.WaitTile(l, st) })
		}
		return
	}
	if p, ok := st.Plan.(*tilePlan); ok {
		t.lowerTileLoad(l, op, st, p)
		if st.Resident {
			// Copied once and read by every iteration: wait for it here
			// (the dots then only wait for their streamed tiles) and hand
			// it to the async proxy; the first dot's barrier publishes it.
			t.WaitStaged(l)
			l.Asm(types.Void, "fence.proxy.async.shared::cta;", "~{memory}", true)
		}
		return
	}
	t.base.LowerStagedLoad(l, op, st)
}

// WaitStaged: cp.async groups, as sm80 (TMA tiles: WaitTile).
func (t *Target) WaitStaged(l *core.Lowerer) { t.base.WaitStaged(l) }
