package core

import (
	"github.com/llir/llvm/ir/enum"
	"github.com/llir/llvm/ir/types"
	"github.com/llir/llvm/ir/value"

	"github.com/fac-compiler/fac/tir"
)

// last_arrival's inline asm (the simulator knows the same strings).
const (
	// AsmFenceGPU orders a thread's global accesses at gpu scope: before
	// the ticket, so its stores are the program's release; after the flag,
	// so its loads see the other programs' stores (L1 is not coherent
	// across multiprocessors).
	AsmFenceGPU = "fence.acq_rel.gpu;"
	// AsmTicket is thread 0's ticket on the counter at $1: an acq_rel
	// atomic add of 1 that returns, in $0, 1 when the count before it was
	// $2 (n - 1: this is the last program) and 0 otherwise. The last
	// program sets the counter back to 0: every other program has added by
	// then, so the store races with no increment of this launch.
	AsmTicket = "{\n\t.reg .pred p;\n\t.reg .b32 t;\n\tatom.acq_rel.gpu.global.add.u32 t, [$1], 1;\n\tsetp.eq.u32 p, t, $2;\n\tmov.u32 t, 0;\n\t@p st.relaxed.gpu.global.u32 [$1], t;\n\tselp.u32 $0, 1, 0, p;\n\t}"
)

// lowerLastArrival lowers last_arrival (the CUDA "last block" pattern):
// every thread fences its stores, a CTA barrier gathers them under thread
// 0, whose acq_rel ticket releases them to the other programs and
// acquires theirs; the flag goes to every thread through shared memory,
// and every thread fences again before it reads what the others wrote.
func (em *Emitter) lowerLastArrival(op *tir.Op) {
	em.checkLastArrival(op)
	counter := em.Get(op.Args[0], scalarL)[0]
	n := em.Get(op.Args[1], scalarL)[0]
	em.asm(types.Void, AsmFenceGPU, "~{memory}", true)
	em.Barrier()
	if em.bulkPending || em.bulkUsed || em.bulkStored {
		// Bulk copies write global memory asynchronously, unordered by the
		// fences.
		Fail("%s: last_arrival after bulk reductions or tensor stores (TMA): their writes would not be ordered before the ticket", op.Pos)
	}
	em.UseShared(4)
	ticket, done := em.newBlock("last_arrival.ticket"), em.newBlock("last_arrival.flag")
	em.b.NewCondBr(em.b.NewICmp(enum.IPredEQ, em.tid, ConstI32(0)), ticket, done)
	em.b = ticket
	last := em.asm(types.I32, AsmTicket, "=r,l,r,~{memory}", true, counter, em.b.NewSub(n, ConstI32(1)))
	em.b.NewStore(last, em.sharedAt(types.I32, 0, ConstI32(0)))
	em.b.NewBr(done)
	em.b = done
	em.Barrier()
	flag := em.b.NewLoad(types.I32, em.sharedAt(types.I32, 0, ConstI32(0)))
	em.asm(types.Void, AsmFenceGPU, "~{memory}", true)
	em.put(op.Result(), scalarL, []value.Value{em.b.NewICmp(enum.IPredNE, flag, ConstI32(0))})
}

// checkLastArrival refuses programs whose threads are not one CTA that
// meets at bar.sync 0: a producer warpgroup's program (its consumers'
// barrier leaves the producer out, whose copies the ticket does not
// order; the producer phase declines a kernel with last_arrival).
func (em *Emitter) checkLastArrival(op *tir.Op) {
	if pt, ok := em.target.(ProgramTarget); ok && pt.Threads(em.l) != 0 {
		Fail("internal error: %s: last_arrival in a kernel with a producer warpgroup (its CTA barrier must hold every thread of the program)", op.Pos)
	}
}

// checkArrivals refuses last_arrival in a kernel of consumer groups, at
// its entry: each group would take a ticket for one program.
func (em *Emitter) checkArrivals() {
	g, _ := em.f.Attr("consumer_groups").(int64)
	if g > 1 && em.f.Body.Any(func(op *tir.Op) bool { return op.Kind == tir.OpLastArrival }) {
		Fail("last_arrival in a kernel of %d consumer groups: each group would take a ticket for one program", g)
	}
}
