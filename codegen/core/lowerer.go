// Package core is the target-independent part of codegen: layouts and
// their assignment, the lowering of tile IR to LLVM IR (elementwise ops,
// reductions, global memory, layout conversions through shared memory,
// control flow, the FMA dot) and the phases every target shares. What
// depends on the GPU generation (tensor-core dots, operand staging) is
// asked of a Target (codegen/sm80, codegen/sm90), which imports this
// package; this package imports no target. See docs/codegen.md.
package core

import (
	"fmt"
	"sync/atomic"

	"github.com/llir/llvm/ir"
	"github.com/llir/llvm/ir/value"

	"github.com/fac-compiler/fac/artifact"
	"github.com/fac-compiler/fac/tir"
)

// ParamKind says how the runtime passes one kernel argument.
type ParamKind string

const (
	ParamU64       ParamKind = "u64"  // a device pointer (ptr<T>)
	ParamI32       ParamKind = "i32"  // i32, and i1 as 0/1
	ParamI64       ParamKind = "i64"  // i64
	ParamF32       ParamKind = "f32"  // f32, and f16/bf16 scalars (rounded in the kernel)
	ParamTensorMap ParamKind = "tmap" // a CUtensorMap by value (TMA)
)

// Param is one kernel parameter, in order.
type Param struct {
	Name string   // tile-IR name, e.g. "q" or "mask.doc"
	Type tir.Type // tile-IR type
	Kind ParamKind
	TMA  *artifact.TMA // ParamTensorMap: what the runtime encodes
}

// lateConversions counts conversions the demand analysis missed.
var lateConversions atomic.Int64

// LateConversions is the number of layout conversions emitted so far (in
// this process) that the assignment's demand pass did not announce; tests
// check it stays 0.
func LateConversions() int64 { return lateConversions.Load() }

type lowerError struct{ msg string }

func (e lowerError) Error() string { return e.msg }

// Fail aborts the lowering of the kernel with an error; the phase driver
// (Run) turns it into the error it returns.
func Fail(format string, args ...any) {
	panic(lowerError{fmt.Sprintf(format, args...)})
}

// Lowerer is the state of one kernel's lowering, shared by the phases and
// handed to the target's hooks.
type Lowerer struct {
	f      *tir.Func
	nw     int
	grp    *groupState // consumer groups (groups.go); nil: one
	arch   string
	target Target
	a      *assigner
	// What the phases run so far produced (what Print shows).
	assigned, planned, lowered bool

	mod   *ir.Module
	fn    *ir.Func
	entry *ir.Block // run-time constants (thread ids, layout bases); branches to the body
	b     *ir.Block // current insertion block

	env     map[*tir.Value]map[string][]value.Value
	lins    map[string]*Linear
	bases   map[string][]value.Value
	flats   map[string]value.Value
	smemPtr map[string]value.Value
	decls   map[string]*ir.Func

	tid, lane, warp value.Value
	smem            *ir.Global
	smemBytes       int
	conversions     int
	coalesced       int  // conversions of stored values into 16-byte vectors (coalesceStore)
	noCoalesce      bool // SetCoalesceStores(false)
	nblocks         int
	params          []Param
	extra           []*extraParam // parameters added by phases (params.go)
	notes           []string      // remarks on code generation choices (Note)

	// Staged tiles sit at the start of shared memory, the scratch area of
	// conversions and reductions starts at scratchBase.
	smemTiles map[*tir.Value]*Staged
	pipes     map[*tir.Op]*pipeline // loops whose staged loads are prefetched
	// prefetch, when set, issues a pipelined loop's next tiles at the next
	// Barrier at region depth prefetchDepth outside any branch.
	prefetch             func()
	armedPrefetch        func()          // the prefetch after its barrier: issued by issueArmedPrefetch
	release              *pendingRelease // a pipelined loop's buffers to hand back without a barrier (pipeline.go)
	depth, prefetchDepth int             // tile-IR region nesting
	branchDepth          int             // inside a run-time two-way branch (AlignedOr)
	scratchBase          int
	stagedIssued         int
	regionsLowered       int
	inFlight             int           // staged tiles loaded and not yet consumed
	async                []*asyncGroup // results not yet waited for, oldest first (async.go)
	// smemDirty: shared memory may have been accessed since the last
	// barrier on some path to here (a staged load must then sync first).
	smemDirty bool
	barriers  int // CTA barriers emitted (Barriers)
	// bulkPending: bulk reductions read the staging area since the last
	// barrier (their threads wait for the reads before the next one);
	// bulkUsed: some were issued (the kernel waits for them before it
	// exits).
	bulkPending, bulkUsed bool
	// bulkStored: bulk tensor stores were issued (TensorStoreTarget); the
	// kernel waits for their reads of shared memory before it exits.
	bulkStored bool
	// loops are the for loops being lowered, innermost last (bulk.go);
	// stagingFrom, when not 0, is where a bulk reduction's staging starts
	// in the scratch area, which later scratch uses in its loop must stay
	// below.
	loops       []*loopFrame
	stagingFrom int
	packs       []phiPack // packs of two loop-carried halves, fused when the kernel is done (pack.go)
	// bodyAhead are the values of a pipelined loop's scalar slice loads
	// for the iteration being lowered, read iterations before (pipeline.go);
	// inSlice > 0 while a slice is lowered for another iteration.
	bodyAhead map[*tir.Op]value.Value
	inSlice   int
	// deferred are emissions put off until the next op with regions in
	// their block, or its end (DeferToRegion).
	deferred []deferredEmit
	// bitTiles are the i1 tiles held as bits of words, by layout key
	// (bit_mask.go).
	bitTiles map[*tir.Value]map[string]*bitTile
	// ws, when set, is the producer warpgroup's plan (producer.go).
	ws *warpSpec
	// The ops of the block being lowered and the index of the current one
	// (Neighbor).
	curOps []*tir.Op
	curIdx int
}

// NewLowerer starts the lowering of kernel f for arch on target with nw
// warps per CTA. f must be verified; the phases do the rest.
func NewLowerer(f *tir.Func, arch string, t Target, nw int) *Lowerer {
	l := &Lowerer{
		f: f, nw: nw, arch: arch, target: t, a: newAssigner(nw),
		mod:     ir.NewModule(),
		env:     map[*tir.Value]map[string][]value.Value{},
		lins:    map[string]*Linear{},
		bases:   map[string][]value.Value{},
		flats:   map[string]value.Value{},
		smemPtr: map[string]value.Value{},
		decls:   map[string]*ir.Func{},

		smemTiles: map[*tir.Value]*Staged{},
	}
	l.a.l = l
	l.grp = newGroupState(f)
	return l
}

// Target is the GPU target lowering the kernel.
func (l *Lowerer) Target() Target { return l.target }

// Func is the kernel being lowered.
func (l *Lowerer) Func() *tir.Func { return l.f }

// Arch is the GPU arch lowered for, e.g. "sm_90a".
func (l *Lowerer) Arch() string { return l.arch }

// NumWarps is the number of warps per CTA.
func (l *Lowerer) NumWarps() int { return l.nw }

// ---- results (after lower-llvm) ----

// Text is the LLVM IR module (LLVM 14 syntax, typed pointers, no
// datalayout) with the kernel's nvvm annotations.
func (l *Lowerer) Text() string { return l.text() }

// EntryName is the PTX .entry name.
func (l *Lowerer) EntryName() string { return l.fn.Name() }

// LLFunc is the kernel's LLVM function, as Text prints it (without the
// module's annotations).
func (l *Lowerer) LLFunc() *ir.Func { return l.fn }

// SharedBytes is the dynamic shared memory the kernel needs.
func (l *Lowerer) SharedBytes() int { return l.smemBytes }

// Params are the kernel's parameters and how to pass them.
func (l *Lowerer) Params() []Param { return l.params }

// Conversions counts layout conversions through shared memory emitted,
// those of CoalescedStores aside.
func (l *Lowerer) Conversions() int { return l.conversions }

// CoalescedStores counts the stored values converted through shared
// memory into 16-byte vectors (coalesceStore).
func (l *Lowerer) CoalescedStores() int { return l.coalesced }

// SetCoalesceStores allows (the default) or forbids converting stored
// tiles into 16-byte vectors through shared memory (coalesceStore).
func (l *Lowerer) SetCoalesceStores(on bool) { l.noCoalesce = !on }

// CoalesceStores reports whether stored tiles may go through shared
// memory (SetCoalesceStores): a target's bulk tensor stores do too.
func (l *Lowerer) CoalesceStores() bool { return !l.noCoalesce }

// ---- assignment queries (after assign-layouts) ----

// LayoutOf is v's primary layout, or flex = true for a flexible value
// (rematerialized in every layout a consumer wants; lay is then nil).
func (l *Lowerer) LayoutOf(v *tir.Value) (lay Layout, flex bool) {
	in := l.a.get(v)
	return in.lay, in.flex
}

// DefiningBlock is the block defining v (an op result or region argument).
func (l *Lowerer) DefiningBlock(v *tir.Value) *tir.Block { return l.a.blockOf[v] }

// OperandWants is the layout op wants each operand in when its result is
// produced in lay (the answers the assignment recorded).
func (l *Lowerer) OperandWants(op *tir.Op, lay Layout) []Layout { return l.a.operandWants(op, lay) }

// Contiguity is, per dim, the length of the aligned runs along which v's
// values increase by one (valid before assignment too).
func (l *Lowerer) Contiguity(v *tir.Value) []int { return l.a.axis(v).contig }

// ---- emission helpers for targets (during lower-llvm) ----

// Block is the current insertion block. It changes when the lowering
// branches (AlignedOr), so ask again after such calls.
func (l *Lowerer) Block() *ir.Block { return l.b }

// Entry is the kernel's entry block, where per-thread constants (thread
// coordinates, layout bases) are computed once.
func (l *Lowerer) Entry() *ir.Block { return l.entry }

// LaneID is the thread's lane (tid.x % 32), defined in the entry block.
func (l *Lowerer) LaneID() value.Value { return l.lane }

// WarpID is the thread's warp in the CTA (tid.x / 32), defined in the
// entry block.
func (l *Lowerer) WarpID() value.Value { return l.warp }

// CountConversion records one layout conversion through shared memory.
func (l *Lowerer) CountConversion() { l.conversions++ }
