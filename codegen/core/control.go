package core

import (
	"slices"

	"github.com/llir/llvm/ir"
	"github.com/llir/llvm/ir/constant"
	"github.com/llir/llvm/ir/enum"
	"github.com/llir/llvm/ir/types"
	"github.com/llir/llvm/ir/value"

	"github.com/fac-compiler/fac/tir"
)

// lowerFor lowers a for loop: a header with phis for the induction
// variable and every register of every carried value, `iv < hi`, the body,
// and a latch that steps iv.
func (em *Emitter) lowerFor(op *tir.Op) {
	em.regionsLowered++
	em.depth++
	defer func() { em.depth-- }()
	em.smemDirty = true
	defer func() { em.smemDirty = true }()
	var ls LoopSchedule
	if t, ok := em.target.(ScheduleTarget); ok {
		ls = t.Loop(em.l, op)
	}
	if (ls != nil && ls.BulkReads()) || op.Regions[0].Any(em.tensorStore) {
		// The previous iteration's bulk reductions or tensor stores may
		// still read their staging area: the body's first barrier waits
		// for them.
		em.bulkPending = true
		defer func() { em.bulkPending = true }()
	}
	lays := em.lay.forLays[op]
	lo := em.Get(op.Args[0], scalarL)[0]
	hi := em.Get(op.Args[1], scalarL)[0]
	step := em.Get(op.Args[2], scalarL)[0]
	inits := make([][]value.Value, len(lays))
	for i := range lays {
		inits[i] = em.Get(op.Args[3+i], lays[i])
	}
	if ls != nil {
		ls.Prologue(lo, hi, step)
	}
	// Waits put off until this loop go after its prologue's copies, so
	// that their latencies overlap.
	em.runDeferred(em.depth - 1)
	pre := em.b
	hdr, body, exit := em.newBlock("for.hdr"), em.newBlock("for.body"), em.newBlock("for.exit")
	pre.NewBr(hdr)
	iv := hdr.NewPhi(ir.NewIncoming(lo, pre))
	if ls != nil {
		ls.Header(hdr, pre, iv)
	}
	phis := make([][]*ir.InstPhi, len(lays))
	for i, regs := range inits {
		for _, r := range regs {
			phis[i] = append(phis[i], hdr.NewPhi(ir.NewIncoming(r, pre)))
		}
	}
	hdr.NewCondBr(hdr.NewICmp(enum.IPredSLT, iv, hi), body, exit)

	em.b = body
	rb := op.Regions[0]
	em.put(rb.Args[0], scalarL, []value.Value{iv})
	for i, a := range rb.Args[1:] {
		em.put(a, lays[i], phiValues(phis[i]))
		em.convertDemands(a)
	}
	if ls != nil {
		ls.BodyTop()
	}
	y := em.lowerBlock(rb)
	if ls != nil {
		ls.BodyEnd()
	}
	if y == nil || y.Kind != tir.OpYield || len(y.Args) != len(lays) {
		Fail("%s: for body must end with yield of %d values", op.Pos, len(lays))
	}
	yields := make([][]value.Value, len(lays))
	for i := range lays {
		yields[i] = em.Get(y.Args[i], lays[i])
	}
	next := em.b.NewAdd(iv, step)
	latch := em.b
	if ls != nil {
		ls.Latch(latch)
	}
	latch.NewBr(hdr)
	iv.Incs = append(iv.Incs, ir.NewIncoming(next, latch))
	for i := range phis {
		for j, p := range phis[i] {
			p.Incs = append(p.Incs, ir.NewIncoming(yields[i][j], latch))
		}
	}
	em.b = exit
	if ls != nil {
		ls.Exit()
	}
	em.retireResident(op)
	for i, r := range op.Results {
		em.put(r, lays[i], phiValues(phis[i]))
		em.convertDemands(r)
	}
}

// retireResident ends the life of the resident tiles that only loop op's
// dots read and that were loaded in op's block (not in an enclosing loop,
// which runs op again): past the loop their shared memory is free, so the
// scratch area of the conversions after it (the epilogue's stores) starts
// at 0 again instead of past every tile.
func (em *Emitter) retireResident(op *tir.Op) {
	inside := map[*tir.Op]bool{}
	op.Regions[0].Walk(func(o *tir.Op) bool { inside[o] = true; return true })
	seen := map[*Staged]bool{}
	for _, st := range em.smemTiles {
		if !st.Resident || !st.live || seen[st] {
			continue
		}
		seen[st] = true
		blk := em.lay.blockOf[st.Load.Result()]
		if blk == nil || !slices.Contains(blk.Ops, op) {
			continue
		}
		all := true
		for _, u := range st.Uses() {
			all = all && inside[u.Dot]
		}
		if all && blk != em.f.Body {
			// Loaded again by the next iteration of the loop around: the
			// target may keep it (a producer refills it), its shared
			// memory kept (Scratch).
			if t, ok := em.target.(ScheduleTarget); ok && t.KeepResident(em.l, st) {
				continue
			}
		}
		if all {
			st.live = false
			em.inFlight--
		}
	}
}

func phiValues(ps []*ir.InstPhi) []value.Value {
	out := make([]value.Value, len(ps))
	for i, p := range ps {
		out[i] = p
	}
	return out
}

// lowerIf lowers an if: branches to the two arms (an empty else when there
// is none) and phis for the results in the merge block.
func (em *Emitter) lowerIf(op *tir.Op) {
	em.regionsLowered++
	em.depth++
	defer func() { em.depth-- }()
	lays := em.lay.forLays[op]
	cond := em.Get(op.Args[0], scalarL)[0]
	// Each arm starts from the state before the if; after it, shared
	// memory is dirty when either arm left it so.
	before, dirty := em.smemDirty, false
	bulkBefore, bulk := em.bulkPending, false
	thenB, elseB, merge := em.newBlock("if.then"), em.newBlock("if.else"), em.newBlock("if.end")
	em.b.NewCondBr(cond, thenB, elseB)
	arm := func(i int, start *ir.Block) ([][]value.Value, *ir.Block) {
		em.b = start
		em.smemDirty, em.bulkPending = before, bulkBefore
		defer func() { dirty, bulk = dirty || em.smemDirty, bulk || em.bulkPending }()
		var ys [][]value.Value
		if i < len(op.Regions) {
			y := em.lowerBlock(op.Regions[i])
			if len(lays) > 0 {
				if y == nil || y.Kind != tir.OpYield || len(y.Args) != len(lays) {
					Fail("%s: if region must end with yield of %d values", op.Pos, len(lays))
				}
				for j := range lays {
					ys = append(ys, em.Get(y.Args[j], lays[j]))
				}
			}
		} else if len(lays) > 0 {
			Fail("%s: if with results needs an else region", op.Pos)
		}
		end := em.b
		end.NewBr(merge)
		return ys, end
	}
	ty, te := arm(0, thenB)
	ey, ee := arm(1, elseB)
	em.b = merge
	em.smemDirty, em.bulkPending = dirty, bulk
	for i, r := range op.Results {
		regs := make([]value.Value, len(ty[i]))
		for j := range regs {
			regs[j] = merge.NewPhi(ir.NewIncoming(ty[i][j], te), ir.NewIncoming(ey[i][j], ee))
		}
		em.put(r, lays[i], regs)
		em.convertDemands(r)
	}
}

// IfThen emits `if cond { then() }` at the current block (a run-time
// branch inside one tile-IR op's lowering: then must not lower tile-IR
// ops) and continues after it.
func (em *Emitter) IfThen(cond value.Value, name string, then func()) {
	body, join := em.newBlock(name), em.newBlock(name+".end")
	em.b.NewCondBr(cond, body, join)
	em.b = body
	then()
	em.b.NewBr(join)
	em.b = join
}

// ThreadID is the thread's index in the CTA (tid.x, entry block), or in
// its consumer group (ProgramTarget.EntryThread).
func (em *Emitter) ThreadID() value.Value { return em.tid }

// Depth is the tile-IR region nesting of the op being lowered.
func (em *Emitter) Depth() int { return em.depth }

// InBranch reports that the code being emitted runs on one path of a
// run-time two-way branch inside one op's lowering (AlignedOr).
func (em *Emitter) InBranch() bool { return em.branchDepth != 0 }

// Scalar is the lowered value of scalar v.
func (em *Emitter) Scalar(v *tir.Value) value.Value { return em.Get(v, scalarL)[0] }

// SchedulingFence ends the current basic block with a branch ptxas cannot
// resolve: a kernel parameter compared with a value no launch passes
// (-0x7fffffff), whose taken arm is an empty `membar.cta`. ptxas schedules
// within basic blocks, so nothing after the fence moves above it. The sm90
// target puts one before the wait for a wgmma whose A operand is in
// registers: without it ptxas packed the next P into the registers the
// in-flight P·V still reads, which drags the wait (and with it the whole
// P·V) above the softmax it should overlap. The arm costs nothing when not
// taken, and is harmless if it ever were. No i32 parameter: no fence.
func (em *Emitter) SchedulingFence() {
	for _, p := range em.fn.Params {
		if p.Type().Equal(types.I32) {
			cond := em.b.NewICmp(enum.IPredEQ, p, constant.NewInt(types.I32, -0x7fffffff))
			em.IfThen(cond, "sched.fence", func() { em.Asm(types.Void, "membar.cta;", "~{memory}", true) })
			return
		}
	}
}

// deferredEmit is code put off by DeferToRegion, with the region depth of
// the block it was put off in.
type deferredEmit struct {
	depth int
	emit  func()
}

// DeferToRegion puts emit off until just before the next op with regions
// of the current block (for a pipelined loop: after its prologue has
// issued its copies), or the block's end. sm90 waits there for the TMA
// copy of a resident tile (read only inside loops nested in its block),
// so that the copy's latency overlaps the scalar loads and copies issued
// in between instead of stalling the block at the load.
func (em *Emitter) DeferToRegion(emit func()) {
	em.deferred = append(em.deferred, deferredEmit{em.depth, emit})
}

// runDeferred emits, in order, what was put off at region depth depth or
// deeper.
func (em *Emitter) runDeferred(depth int) {
	var keep []deferredEmit
	var run []func()
	for _, d := range em.deferred {
		if d.depth >= depth {
			run = append(run, d.emit)
		} else {
			keep = append(keep, d)
		}
	}
	em.deferred = keep
	for _, f := range run {
		f()
	}
}
