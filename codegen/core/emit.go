package core

import (
	"github.com/llir/llvm/ir"
	"github.com/llir/llvm/ir/value"

	"github.com/fac-compiler/fac/tir"
)

// Emitter is lower-llvm's part of a kernel's lowering: the LLVM module it
// emits and the state of its walk over the tile IR (the current block,
// every value's registers, what shared memory and the asynchronous copies
// and results are doing at this point). It reads the Assignment and the
// Plan the earlier phases made. The Lowerer embeds it, so the target's
// hooks reach its helpers (Block, Asm, Get, Barrier, ...) as the
// Lowerer's.
type Emitter struct {
	*kernel
	l    *Lowerer    // handed to the target's hooks
	lay  *Assignment // assign-layouts'
	plan *Plan       // the staged tiles and shared memory
	// loadVia, while set, gives a load's registers (LowerLoadVia).
	loadVia func(ptrs Layout) []value.Value

	mod   *ir.Module
	fn    *ir.Func
	entry *ir.Block // run-time constants (thread ids, layout bases); branches to the body
	b     *ir.Block // current insertion block

	env     map[*tir.Value]map[string][]value.Value
	bases   map[string][]value.Value
	flats   map[string]value.Value
	smemPtr map[string]value.Value
	decls   map[string]*ir.Func

	tid, lane, warp value.Value
	smem            *ir.Global
	smemBytes       int // shared memory used: the plan's, and the scratch area's high-water mark
	conversions     int
	coalesced       int // conversions of stored values into 16-byte vectors (coalesceStore)
	nblocks         int
	params          []Param

	// Staged tiles sit at the start of shared memory, the scratch area of
	// conversions and reductions starts at the plan's scratchBase.
	smemTiles      map[*tir.Value]*Staged
	depth          int // tile-IR region nesting
	branchDepth    int // inside a run-time two-way branch (AlignedOr)
	stagedIssued   int
	regionsLowered int
	inFlight       int           // staged tiles loaded and not yet consumed
	async          []*asyncGroup // results not yet waited for, oldest first (waits.go)
	// smemDirty: shared memory may have been accessed since the last
	// barrier on some path to here (a staged load must then sync first).
	smemDirty bool
	barriers  int // CTA barriers emitted (Barriers)
	// bulkPending: bulk copies (reductions, tensor stores) read shared
	// memory since the last barrier (their threads wait for the reads
	// before the next one); bulkUsed: bulk reductions were issued (the
	// kernel waits for them before it exits); bulkStored: bulk tensor
	// stores were issued (the kernel waits for their reads before it
	// exits).
	bulkPending, bulkUsed, bulkStored bool
	// stagingFrom, when not 0, is where a staging area that lives across a
	// loop's iterations starts in the scratch area (PinScratch), which
	// later scratch uses in its loop must stay below.
	stagingFrom int
	packs       []phiPack // packs of two loop-carried halves, fused when the kernel is done (pack.go)
	// deferred are emissions put off until the next op with regions in
	// their block, or its end (DeferToRegion).
	deferred []deferredEmit
	// bitTiles are the i1 tiles held as bits of words, by layout key
	// (bit_mask.go).
	bitTiles map[*tir.Value]map[string]*bitTile
	// blockPrefix starts the names of new blocks (SetBlockPrefix).
	blockPrefix string
	// The ops of the block being lowered and the index of the current one
	// (Neighbor).
	curOps []*tir.Op
	curIdx int
}

// newEmitter starts l's emission, from its assignment and plan.
func newEmitter(l *Lowerer) *Emitter {
	return &Emitter{
		kernel: l.kernel, l: l, lay: l.layouts, plan: l.plan,
		mod:       ir.NewModule(),
		env:       map[*tir.Value]map[string][]value.Value{},
		bases:     map[string][]value.Value{},
		flats:     map[string]value.Value{},
		smemPtr:   map[string]value.Value{},
		decls:     map[string]*ir.Func{},
		smemBytes: l.plan.smemBytes,
		smemTiles: map[*tir.Value]*Staged{},
	}
}

// ---- results ----

// Text is the LLVM IR module (LLVM 14 syntax, typed pointers, no
// datalayout) with the kernel's nvvm annotations.
func (em *Emitter) Text() string { return em.text() }

// EntryName is the PTX .entry name.
func (em *Emitter) EntryName() string { return em.fn.Name() }

// LLFunc is the kernel's LLVM function, as Text prints it (without the
// module's annotations).
func (em *Emitter) LLFunc() *ir.Func { return em.fn }

// SharedBytes is the dynamic shared memory the kernel needs.
func (em *Emitter) SharedBytes() int { return em.smemBytes }

// Params are the kernel's parameters and how to pass them.
func (em *Emitter) Params() []Param { return em.params }

// Conversions counts layout conversions through shared memory emitted,
// those of CoalescedStores aside.
func (em *Emitter) Conversions() int { return em.conversions }

// CoalescedStores counts the stored values converted through shared
// memory into 16-byte vectors (coalesceStore).
func (em *Emitter) CoalescedStores() int { return em.coalesced }

// ---- helpers for the target's emission hooks ----

// Block is the current insertion block. It changes when the lowering
// branches (AlignedOr), so ask again after such calls.
func (em *Emitter) Block() *ir.Block { return em.b }

// Entry is the kernel's entry block, where per-thread constants (thread
// coordinates, layout bases) are computed once.
func (em *Emitter) Entry() *ir.Block { return em.entry }

// LaneID is the thread's lane (tid.x % 32), defined in the entry block.
func (em *Emitter) LaneID() value.Value { return em.lane }

// WarpID is the thread's warp in the CTA (tid.x / 32), defined in the
// entry block.
func (em *Emitter) WarpID() value.Value { return em.warp }

// CountConversion records one layout conversion through shared memory.
func (em *Emitter) CountConversion() { em.conversions++ }
