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
func (l *Lowerer) lowerFor(op *tir.Op) {
	l.regionsLowered++
	l.depth++
	defer func() { l.depth-- }()
	l.smemDirty = true
	defer func() { l.smemDirty = true }()
	if l.bulkIn(op.Regions[0]) || op.Regions[0].Any(l.tensorStore) {
		// The previous iteration's bulk reductions or tensor stores may
		// still read their staging area: the body's first barrier waits
		// for them.
		l.bulkPending = true
		defer func() { l.bulkPending = true }()
	}
	lays := l.a.forLays[op]
	lo := l.Get(op.Args[0], scalarL)[0]
	hi := l.Get(op.Args[1], scalarL)[0]
	step := l.Get(op.Args[2], scalarL)[0]
	inits := make([][]value.Value, len(lays))
	for i := range lays {
		inits[i] = l.Get(op.Args[3+i], lays[i])
	}
	pl := l.pipes[op]
	if pl != nil {
		l.pipePrologue(pl, lo, hi, step)
	}
	// Waits put off until this loop go after its prologue's copies, so
	// that their latencies overlap.
	l.runDeferred(l.depth - 1)
	pre := l.b
	hdr, body, exit := l.newBlock("for.hdr"), l.newBlock("for.body"), l.newBlock("for.exit")
	pre.NewBr(hdr)
	iv := hdr.NewPhi(ir.NewIncoming(lo, pre))
	var stage, phase *ir.InstPhi
	if pl != nil {
		stage, phase = pipeStage(hdr, pre), l.pipePhase(pl, hdr, pre)
		pl.aheadPhis = nil
		for _, v := range pl.aheadNext {
			pl.aheadPhis = append(pl.aheadPhis, hdr.NewPhi(ir.NewIncoming(v, pre)))
		}
		pl.bodyPhis = nil
		for _, vs := range pl.bodyNext {
			var ps []*ir.InstPhi
			for _, v := range vs {
				ps = append(ps, hdr.NewPhi(ir.NewIncoming(v, pre)))
			}
			pl.bodyPhis = append(pl.bodyPhis, ps)
		}
	}
	phis := make([][]*ir.InstPhi, len(lays))
	for i, regs := range inits {
		for _, r := range regs {
			phis[i] = append(phis[i], hdr.NewPhi(ir.NewIncoming(r, pre)))
		}
	}
	hdr.NewCondBr(hdr.NewICmp(enum.IPredSLT, iv, hi), body, exit)

	l.b = body
	rb := op.Regions[0]
	fr := l.pushLoop(rb, iv, lo, hi, step)
	l.put(rb.Args[0], scalarL, []value.Value{iv})
	for i, a := range rb.Args[1:] {
		l.put(a, lays[i], phiValues(phis[i]))
		l.convertDemands(a)
	}
	if pl != nil {
		l.pipeBodyTop(pl, iv, step, lo, hi, stage, phase)
	}
	y := l.lowerBlock(rb)
	if pl != nil && l.prefetch != nil {
		l.Barrier() // no barrier in the body: one here issues the prefetch
	}
	if pl != nil && l.release != nil {
		l.releaseBuffers() // no wait in the body: the release and prefetch go here
	}
	l.issueArmedPrefetch(nil)
	if y == nil || y.Kind != tir.OpYield || len(y.Args) != len(lays) {
		Fail("%s: for body must end with yield of %d values", op.Pos, len(lays))
	}
	yields := make([][]value.Value, len(lays))
	for i := range lays {
		yields[i] = l.Get(y.Args[i], lays[i])
	}
	next := l.b.NewAdd(iv, step)
	latch := l.b
	if pl != nil {
		stage.Incs = append(stage.Incs, ir.NewIncoming(nextStage(latch, stage, pl.stages), latch))
		phase.Incs = append(phase.Incs, ir.NewIncoming(nextPhase(latch, phase, stage), latch))
		for i, ph := range pl.aheadPhis {
			ph.Incs = append(ph.Incs, ir.NewIncoming(pl.aheadNext[i], latch))
		}
		// The body's entries shift by one iteration; the last come from
		// this iteration's prefetch (read one iteration before).
		for k, ps := range pl.bodyPhis {
			for i, ph := range ps {
				var v value.Value
				switch {
				case k+1 < len(pl.bodyPhis):
					v = pl.bodyPhis[k+1][i]
				case l.ws != nil:
					v = pl.aheadNext[i] // read in this iteration (no prefetch to carry them for)
				default:
					v = pl.aheadPhis[i]
				}
				ph.Incs = append(ph.Incs, ir.NewIncoming(v, latch))
			}
		}
	}
	latch.NewBr(hdr)
	iv.Incs = append(iv.Incs, ir.NewIncoming(next, latch))
	for i := range phis {
		for j, p := range phis[i] {
			p.Incs = append(p.Incs, ir.NewIncoming(yields[i][j], latch))
		}
	}
	l.b = exit
	if pl != nil {
		l.b.NewStore(phase, pl.phaseVar)
		pl.exitStage = stage
		pl.exitRan = l.b.NewICmp(enum.IPredSLT, lo, hi)
		l.pipeExit(pl, pl.exitRan)
	}
	l.popLoop(fr)
	l.retireResident(op)
	for i, r := range op.Results {
		l.put(r, lays[i], phiValues(phis[i]))
		l.convertDemands(r)
	}
}

// retireResident ends the life of the resident tiles that only loop op's
// dots read and that were loaded in op's block (not in an enclosing loop,
// which runs op again): past the loop their shared memory is free, so the
// scratch area of the conversions after it (the epilogue's stores) starts
// at 0 again instead of past every tile.
func (l *Lowerer) retireResident(op *tir.Op) {
	inside := map[*tir.Op]bool{}
	op.Regions[0].Walk(func(o *tir.Op) bool { inside[o] = true; return true })
	seen := map[*Staged]bool{}
	for _, st := range l.smemTiles {
		if !st.Resident || !st.live || seen[st] {
			continue
		}
		seen[st] = true
		blk := l.a.blockOf[st.Load.Result()]
		if blk == nil || !slices.Contains(blk.Ops, op) {
			continue
		}
		all := true
		for _, u := range st.Uses() {
			all = all && inside[u.Dot]
		}
		if all && l.ws != nil && l.ws.consumer && blk != l.f.Body {
			// Loaded again by the next iteration of the loop around:
			// back to the producer, its shared memory kept (Scratch).
			l.ws.pt.HandBack(l, st)
			continue
		}
		if all {
			st.live = false
			l.inFlight--
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
func (l *Lowerer) lowerIf(op *tir.Op) {
	l.regionsLowered++
	l.depth++
	defer func() { l.depth-- }()
	lays := l.a.forLays[op]
	cond := l.Get(op.Args[0], scalarL)[0]
	// Each arm starts from the state before the if; after it, shared
	// memory is dirty when either arm left it so.
	before, dirty := l.smemDirty, false
	bulkBefore, bulk := l.bulkPending, false
	thenB, elseB, merge := l.newBlock("if.then"), l.newBlock("if.else"), l.newBlock("if.end")
	l.b.NewCondBr(cond, thenB, elseB)
	arm := func(i int, start *ir.Block) ([][]value.Value, *ir.Block) {
		l.b = start
		l.smemDirty, l.bulkPending = before, bulkBefore
		defer func() { dirty, bulk = dirty || l.smemDirty, bulk || l.bulkPending }()
		var ys [][]value.Value
		if i < len(op.Regions) {
			y := l.lowerBlock(op.Regions[i])
			if len(lays) > 0 {
				if y == nil || y.Kind != tir.OpYield || len(y.Args) != len(lays) {
					Fail("%s: if region must end with yield of %d values", op.Pos, len(lays))
				}
				for j := range lays {
					ys = append(ys, l.Get(y.Args[j], lays[j]))
				}
			}
		} else if len(lays) > 0 {
			Fail("%s: if with results needs an else region", op.Pos)
		}
		end := l.b
		end.NewBr(merge)
		return ys, end
	}
	ty, te := arm(0, thenB)
	ey, ee := arm(1, elseB)
	l.b = merge
	l.smemDirty, l.bulkPending = dirty, bulk
	for i, r := range op.Results {
		regs := make([]value.Value, len(ty[i]))
		for j := range regs {
			regs[j] = merge.NewPhi(ir.NewIncoming(ty[i][j], te), ir.NewIncoming(ey[i][j], ee))
		}
		l.put(r, lays[i], regs)
		l.convertDemands(r)
	}
}

// IfThen emits `if cond { then() }` at the current block (a run-time
// branch inside one tile-IR op's lowering: then must not lower tile-IR
// ops) and continues after it.
func (l *Lowerer) IfThen(cond value.Value, name string, then func()) {
	body, join := l.newBlock(name), l.newBlock(name+".end")
	l.b.NewCondBr(cond, body, join)
	l.b = body
	then()
	l.b.NewBr(join)
	l.b = join
}

// ThreadID is the thread's index in the CTA (tid.x, entry block).
func (l *Lowerer) ThreadID() value.Value { return l.tid }

// Scalar is the lowered value of scalar v.
func (l *Lowerer) Scalar(v *tir.Value) value.Value { return l.Get(v, scalarL)[0] }

// SchedulingFence ends the current basic block with a branch ptxas cannot
// resolve: a kernel parameter compared with a value no launch passes
// (-0x7fffffff), whose taken arm is an empty `membar.cta`. ptxas schedules
// within basic blocks, so nothing after the fence moves above it. The sm90
// target puts one before the wait for a wgmma whose A operand is in
// registers: without it ptxas packed the next P into the registers the
// in-flight P·V still reads, which drags the wait (and with it the whole
// P·V) above the softmax it should overlap. The arm costs nothing when not
// taken, and is harmless if it ever were. No i32 parameter: no fence.
func (l *Lowerer) SchedulingFence() {
	for _, p := range l.fn.Params {
		if p.Type().Equal(types.I32) {
			cond := l.b.NewICmp(enum.IPredEQ, p, constant.NewInt(types.I32, -0x7fffffff))
			l.IfThen(cond, "sched.fence", func() { l.Asm(types.Void, "membar.cta;", "~{memory}", true) })
			return
		}
	}
}

// bulkIn reports that b holds an atomic_add the target may lower to bulk
// or tensor reductions (atomicAddBulk, atomicAddTensor).
func (l *Lowerer) bulkIn(b *tir.Block) bool {
	bulk := false
	if t, ok := l.target.(BulkReduceTarget); ok {
		bulk = t.BulkReduce(l)
	}
	return b.Any(func(op *tir.Op) bool { return op.Kind == tir.OpAtomicAdd && (bulk || l.tensorReducer(op) != nil) })
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
func (l *Lowerer) DeferToRegion(emit func()) {
	l.deferred = append(l.deferred, deferredEmit{l.depth, emit})
}

// runDeferred emits, in order, what was put off at region depth depth or
// deeper.
func (l *Lowerer) runDeferred(depth int) {
	var keep []deferredEmit
	var run []func()
	for _, d := range l.deferred {
		if d.depth >= depth {
			run = append(run, d.emit)
		} else {
			keep = append(keep, d)
		}
	}
	l.deferred = keep
	for _, f := range run {
		f()
	}
}
