package core

import (
	"github.com/llir/llvm/ir"
	"github.com/llir/llvm/ir/value"

	"github.com/fac-compiler/fac/tir"
)

// Target is what the core asks of a GPU generation (codegen/sm80,
// codegen/sm90), in the manner of wazevo's backend.Machine: which dots run
// on tensor cores and how they are emitted, how a tensor reaches a
// tensor-core operand layout, how staged loads are placed and copied, and
// the target's phase table. The core never imports a target; package
// codegen picks one from the arch.
//
// The hooks receive the kernel's Lowerer, which holds what each phase
// decided: DotLayout and DotOperandLayout are asked during assign-layouts
// (the assignment so far is l.Layouts()), PlanStaged during plan-async
// (l.Plan()), the others during lower-llvm, whose Emitter the Lowerer
// embeds (l.Block, l.Asm, l.Get, ...).
type Target interface {
	// Phases is the target's phase table, in run order.
	Phases() []Phase

	// DotLayout is the accumulator layout of dot op when the target lowers
	// it on tensor cores; false leaves the dot to the core's FMA loop.
	DotLayout(l *Lowerer, op *tir.Op) (Layout, bool)
	// DotOperandLayout is the layout a tensor-core dot (DotLayout true)
	// wants operand i (0: A, 1: B) in.
	DotOperandLayout(l *Lowerer, op *tir.Op, i int) Layout
	// LowerDot emits a tensor-core dot; ws are the layouts of A, B and C.
	// It returns the accumulator registers in DotLayout's layout.
	LowerDot(l *Lowerer, op *tir.Op, ws []Layout) []value.Value

	// ConvertOperand converts a whole tensor of type t from layout from
	// (concrete: lin) to layout to (lout) when to is a tensor-core operand
	// layout the target has a fast path for; false lets the core use its
	// shared-memory exchange.
	ConvertOperand(l *Lowerer, src []value.Value, lin *Linear, to Layout, lout *Linear, t tir.Type) ([]value.Value, bool)

	// PlanStaged returns the shared-memory bytes of staged tile st (and
	// fills st.Plan), or false when st's dot does not read that operand
	// from shared memory after all: the load is then lowered normally.
	PlanStaged(l *Lowerer, st *Staged) (bytes int, ok bool)
	// LowerStagedLoad issues the copies of staged load op into its tile.
	LowerStagedLoad(l *Lowerer, op *tir.Op, st *Staged)
	// WaitStaged waits until every staged copy issued so far has landed
	// (after a pipelined loop: its last prefetch).
	WaitStaged(l *Lowerer)
}

// CTAsTarget is implemented by targets that may ask ptxas to fit more than
// one CTA on a multiprocessor (sm90: ctas-per-sm). CTAsPerSM is that
// number, or 0 for ptxas's default; a kernel with a producer warpgroup
// keeps one (lower.go).
type CTAsTarget interface {
	CTAsPerSM() int
}

// TensorStoreTarget is implemented by targets that can write a stored
// tile from shared memory in bulk (sm90: a TMA store, tma-store=on).
// TensorStore reports whether store op takes that path; it is decided
// before assign-layouts (coalesceStore then leaves the value in its own
// layout), only where CoalesceStores allows stores through shared memory.
// LowerTensorStore emits the store from vals, the value's registers in
// layout lay, or returns false (nothing emitted) to leave it to the core's
// store from registers.
type TensorStoreTarget interface {
	TensorStore(op *tir.Op) bool
	LowerTensorStore(l *Lowerer, op *tir.Op, vals []value.Value, lay Layout) bool
}

// PrologueTarget is implemented by targets that emit code at the start of
// the kernel body, before the first tile-IR op (sm90: mbarrier set-up).
type PrologueTarget interface {
	Prologue(l *Lowerer)
}

// ---- hooks for a target's asynchronous machinery ----
//
// Beyond the one-shot staging above, Hopper runs copies and reductions
// asynchronously across a kernel's structure: pipelined loops, a producer
// warpgroup feeding consumer warpgroups (in groups), reductions deferred
// to the next iteration. That machinery is codegen/async's (a later
// target reuses it); the core knows none of it. It calls these hooks,
// through its Target, at fixed points of its phases; a target without
// them (sm80) gets the plain lowering.

// ProgramTarget shapes the CTA's program (codegen/async: a producer
// warpgroup beside the consumers, consumer groups).
type ProgramTarget interface {
	// Threads is the CTA's size, 0 for num_warps warps.
	Threads(l *Lowerer) int
	// OneCTA reports that the program counts on one CTA a multiprocessor
	// (setmaxnreg): the kernel is annotated minctasm 1.
	OneCTA(l *Lowerer) bool
	// EntryThread is called in the entry block with the thread's index in
	// the CTA; it returns the index the layouts count from (a consumer
	// group's thread: its index in the group).
	EntryThread(l *Lowerer, tid value.Value) value.Value
	// Start runs after the target's prologue, before the kernel's first
	// op: it may branch off another program (the producer's) and continue
	// with the one the core lowers.
	Start(l *Lowerer)
	// Finish runs after the kernel's last op, before it returns.
	Finish(l *Lowerer)
	// Barrier emits the CTA barrier of the program being lowered (its
	// threads only), or reports false for bar.sync 0 over the CTA.
	Barrier(l *Lowerer) bool
	// GroupID is the value of group_id: the consumer group being lowered.
	GroupID(l *Lowerer) value.Value
}

// SharedTarget places parts of shared memory of its own (codegen/async:
// consumer groups, each with a copy of the tiles loaded before the
// pipelined loop and of the scratch area).
type SharedTarget interface {
	// PlaceShared runs after the staged tiles are placed, ending at end;
	// it may move them and returns where the tiles end now.
	PlaceShared(l *Lowerer, end int) int
	// ReserveShared places bytes of the target's own (ReserveShared),
	// or reports false to leave them to the core.
	ReserveShared(l *Lowerer, bytes int) (off int, ok bool)
	// SharedShift is the bytes added at run time to an address at byte
	// off (a consumer group's own copy), or nil.
	SharedShift(l *Lowerer, off int) value.Value
	// ScratchPinned reports that the staged tiles are never free, so the
	// scratch area always follows them (Scratch).
	ScratchPinned(l *Lowerer) bool
}

// ScheduleTarget schedules work around the core's walk of the kernel
// during lower-llvm (codegen/async: pipelined loops' prefetches and
// buffer releases, the producer's share of the ops, deferred bulk
// reductions).
type ScheduleTarget interface {
	// Loop is the schedule of for loop op, or nil; asked as its lowering
	// starts.
	Loop(l *Lowerer, op *tir.Op) LoopSchedule
	// BeforeOp runs before op is lowered, ahead of the waits for its
	// operands (a prefetch armed by a barrier goes there).
	BeforeOp(l *Lowerer, op *tir.Op)
	// OwnsOp reports that op, whose operands were waited for, needs no
	// lowering of the core's: the schedule bound its results itself (a
	// pipelined loop's block-list entries, read iterations before), or
	// another program computes them (the producer's copy operands).
	OwnsOp(l *Lowerer, op *tir.Op) bool
	// AfterOp runs after op is lowered in the walk of its block.
	AfterOp(l *Lowerer, op *tir.Op)
	// AfterBarrier runs after each CTA barrier (Barrier).
	AfterBarrier(l *Lowerer)
	// AfterTileWait runs after a dot's wait for its staged tiles
	// (AwaitStaged): the buffers the previous iteration read may go back.
	AfterTileWait(l *Lowerer)
	// IssuedAhead reports that staged tile st, whose load is reached, was
	// issued already (a pipelined loop's, or its tail): the load issues
	// nothing.
	IssuedAhead(l *Lowerer, st *Staged) bool
	// KeepResident reports, for resident tile st loaded in a loop whose
	// inner loop (all its dots) is done, that the schedule keeps it: it
	// is handed back for the next fill, and its shared memory stays.
	KeepResident(l *Lowerer, st *Staged) bool
	// AtomicAdd lowers f32 atomic_add op (operand layouts ws; registers
	// ptrs, vals and mask, nil without) from shared memory in bulk, or
	// reports false (nothing emitted) for the core's red per element.
	AtomicAdd(l *Lowerer, op *tir.Op, ws []Layout, ptrs, vals, mask []value.Value) bool
	// OpNote is what --print-ir-after shows of the schedule's plan for op
	// (st: op is that staged load, else nil), "" for nothing.
	OpNote(l *Lowerer, op *tir.Op, st *Staged) string
}

// LoopSchedule is what a ScheduleTarget adds to one for loop, called as
// lowerFor emits it:
//
//	Prologue   before the loop (the first iterations' copies)
//	Header     in the header, after the induction variable's phi iv
//	BodyTop    at the top of the body, once the carried values are bound
//	BodyEnd    after the body's ops, before its yield
//	Latch      in the latch, before its branch back
//	Exit       at the top of the exit block
type LoopSchedule interface {
	// BulkReads reports that the body issues bulk copies reading shared
	// memory that the next iteration's first barrier must wait for.
	BulkReads() bool
	Prologue(lo, hi, step value.Value)
	Header(hdr, pre *ir.Block, iv *ir.InstPhi)
	BodyTop()
	BodyEnd()
	Latch(latch *ir.Block)
	Exit()
}
