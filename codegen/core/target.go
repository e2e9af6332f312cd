package core

import (
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
// The hooks receive the kernel's Lowerer. DotLayout and DotOperandLayout
// are asked during layout assignment (only assignment queries are valid
// then); the others during planning and emission.
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

// BulkReduceTarget is implemented by targets that can add a tile of f32 to
// global memory from shared memory in bulk (sm90: cp.reduce.async.bulk).
// BulkReduce reports whether atomic_add should take that path (bulk.go).
type BulkReduceTarget interface {
	BulkReduce(l *Lowerer) bool
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
