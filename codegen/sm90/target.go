// Package sm90 is codegen's target for Hopper (sm_90, sm_90a). It is where
// the Hopper lowering goes: an MMAv3 accumulator layout and wgmma.mma_async
// for 16-bit dots with operands in swizzled shared memory, TMA
// (cp.async.bulk.tensor) with mbarriers for operand staging, warp
// specialization and setmaxnreg, as phases of its own table.
//
// Today: wgmma (wgmma.go, tile.go) on sm_90a (opt out with the environment
// variable FAC_WGMMA=0), operands staged by cp.async into swizzled tiles and
// prefetched one iteration ahead (pipeline-loads); everything else (sm_90,
// the opt-out, dots wgmma cannot take) uses sm80's strategy (mma.sync,
// ldmatrix, cp.async), which Hopper runs too.
package sm90

import (
	"os"
	"strconv"

	"github.com/llir/llvm/ir/types"
	"github.com/llir/llvm/ir/value"

	"github.com/fac-compiler/fac/codegen/core"
	"github.com/fac-compiler/fac/codegen/sm80"
	"github.com/fac-compiler/fac/tir"
)

// EnvWGMMA is the environment variable that opts sm_90a out of wgmma
// ("0"; anything else keeps it). It is read when the target is made (once
// per kernel lowered); codegen.Variant puts the choice into the kernel's
// identity, so the two paths never share a cache entry or bundle slot.
const EnvWGMMA = "FAC_WGMMA"

// EnvDQBulk ("1") makes atomic_add of f32 tiles in loops go through shared
// memory and cp.reduce.async.bulk (the backward's dQ; core/bulk.go) instead
// of a red per element; its own identity (variant "wgmma-dqbulk"). Not the
// default: with dQᵀ's GEMM issued first, the reds were faster (session 14).
const EnvDQBulk = "FAC_DQ_BULK"

// EnvTMAStore ("1") writes eligible stored tiles (the forward's O) from
// shared memory with TMA stores (tmastore.go) instead of 16-byte vectors
// per thread; its own identity (codegen.Variant adds "-tmastore"). Not the
// default until it is timed on the GPU.
const EnvTMAStore = "FAC_TMA_STORE"

// EnvCTAsPerSM (an integer n ≥ 2; experiments) asks ptxas to fit n CTAs
// on a multiprocessor in every kernel, in place of each kernel's own
// ctas_per_sm argument (the minctasm annotation, PTX .minnctapersm), which
// caps each thread's registers at 65536 / (n × threads), so that one CTA's
// start and end run under another's main loop. Kernels with a producer
// warpgroup ignore it (their setmaxnreg counts on one CTA a
// multiprocessor, and say so); other values are ignored. Its own identity
// (codegen.Variant adds "-ctas<n>").
const EnvCTAsPerSM = "FAC_CTAS_PER_SM"

// ctasPerSM is FAC_CTAS_PER_SM when it is an integer of at least 2, else 0.
func ctasPerSM() int {
	n, err := strconv.Atoi(os.Getenv(EnvCTAsPerSM))
	if err != nil || n < 2 {
		return 0
	}
	return n
}

// CTAsPerSM: core.CTAsTarget (FAC_CTAS_PER_SM).
func (t *Target) CTAsPerSM() int { return t.CTAs }

// BulkReduce: core.BulkReduceTarget (FAC_DQ_BULK=1).
func (t *Target) BulkReduce(*core.Lowerer) bool { return t.DQBulk }

// VectorReduce: core.VectorReduceTarget. red.global.add.v2.f32 and .v4
// are sm_90's (PTX ISA 8.1), on both archs.
func (t *Target) VectorReduce() bool { return true }

// Target is the sm90 target for one arch: wgmma and setmaxnreg need the
// arch-specific sm_90a, so the choice of strategy depends on it.
type Target struct {
	// Arch is sm_90 or sm_90a.
	Arch string
	// WGMMA lowers eligible dots to wgmma.mma_async (sm_90a only).
	WGMMA bool
	// TMA copies eligible staged wgmma tiles with cp.async.bulk.tensor
	// (tma.go; with WGMMA, unless FAC_TMA=0).
	TMA bool
	// Release hands a pipelined TMA tile's buffers back without a CTA
	// barrier per iteration (unless FAC_TMA=barrier): through release
	// counters, or through empty mbarriers to a producer warpgroup
	// (warpspec.go).
	Release bool
	// DQBulk adds f32 atomic_add tiles in loops through shared memory
	// with cp.reduce.async.bulk (core.BulkReduceTarget; with TMA and
	// FAC_DQ_BULK=1).
	DQBulk bool
	// TMAStore writes eligible stored tiles by TMA in every kernel
	// (tmastore.go; with TMA and FAC_TMA_STORE=1); a kernel's own
	// tma_store argument asks the same for that kernel.
	TMAStore bool
	// CTAs is the CTAs a multiprocessor ptxas is asked to fit
	// (FAC_CTAS_PER_SM with wgmma), 0 for its default.
	CTAs int
	// tmaStores are the stores tma-store planned, by op.
	tmaStores map[*tir.Op]*tmaStore
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

// New returns the target for arch (sm_90 or sm_90a), with wgmma when arch
// is sm_90a unless FAC_WGMMA=0.
func New(arch string) *Target {
	w := arch == "sm_90a" && os.Getenv(EnvWGMMA) != "0"
	tma := w && !tmaOff()
	t := &Target{Arch: arch, WGMMA: w, TMA: tma, Release: tma && !tmaBarrier(), DQBulk: tma && os.Getenv(EnvDQBulk) == "1",
		TMAStore: tma && os.Getenv(EnvTMAStore) == "1"}
	if w {
		t.CTAs = ctasPerSM()
	}
	return t
}

// Phases is sm90's phase table: sm80's phases with Hopper's own operand
// staging (select-async for shared tiles, stage-resident, tma-loads);
// warp specialization goes here.
// tma-store (a kernel's tma_store argument, or FAC_TMA_STORE=1) picks the
// TMA stores before assign-layouts (their values keep their own layouts).
func (t *Target) Phases() []core.Phase {
	return []core.Phase{core.CheckKernel, SelectAsync, StageResident, TMAStores, core.AssignLayouts, core.PlanAsync, core.PipelineLoads, TMALoads, WarpSpecialize, core.LowerLLVM}
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
		return planTile(st)
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
