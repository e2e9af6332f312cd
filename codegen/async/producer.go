package async

import (
	"fmt"
	"maps"
	"slices"

	"github.com/llir/llvm/ir"
	"github.com/llir/llvm/ir/enum"
	"github.com/llir/llvm/ir/types"
	"github.com/llir/llvm/ir/value"

	"github.com/fac-compiler/fac/codegen/core"
	"github.com/fac-compiler/fac/tir"
)

// Warp specialization (FlashAttention-3's producer warp). The CTA gets
// one warpgroup more than num_warps: its first thread runs the producer
// program, which walks the kernel's control flow as far as the copies
// need it (the block lists, the loop bounds, the tail's branch) and
// issues every copy one thread can issue for all (sm90's TMA), each
// after the consumers handed its buffer back (an "empty" barrier per
// buffer). The num_warps consumer warps run the kernel as before, except
// that they issue nothing: they wait for the fills and hand the buffers
// back. The producer then refills a buffer as soon as the last consumer
// warpgroup released it, without taking a consumer's instruction slots,
// and the registers it does not need go to the consumers (setmaxnreg).
//
// Shape of what qualifies (PlanProducer): one pipelined loop, at the top
// level or in the body of a top-level loop, whose tiles are all released by the target
// (BufferReleaser.ReleasesBuffers), tiles before it loaded once (resident),
// and its tail (pipetail.go); every copy's operands computed at the top
// level, in the outer loop's body, in the loop's slice or in the tail's
// branch, by scalar ops.

// ProducerTarget is a target whose staged copies one thread can issue
// for the whole CTA (sm90's TMA).
type ProducerTarget interface {
	BufferReleaser
	// CopyOperands are the scalar values the copy of st reads when one
	// thread issues it (sm90: the tensor coordinates), or ok = false when
	// st's copy is not issued that way.
	CopyOperands(st *core.Staged) (vals []*tir.Value, ok bool)
	// IssueCopy issues st's copy into its buffer in use from the calling
	// thread (the producer).
	IssueCopy(l *core.Lowerer, st *core.Staged)
	// WaitEmpty waits until the consumers handed back buffer buf of tiles
	// (a pipelined loop's): the phase of parity parity (i32 0/1) of its
	// empty barrier completed.
	WaitEmpty(l *core.Lowerer, tiles []*core.Staged, buf, parity value.Value)
	// SetMaxRegs moves the calling warpgroup's registers to regs per
	// thread (setmaxnreg): down for the producer, up for the consumers.
	SetMaxRegs(l *core.Lowerer, regs int, up bool)
	// WaitRefill waits, in the producer, until the consumers handed back
	// resident tile st for its next fill (HandBack): a tile loaded in the
	// loop around the pipelined one is filled once per iteration. It does
	// nothing for a tile filled once.
	WaitRefill(l *core.Lowerer, st *core.Staged)
	// HandBack hands resident tile st back for its next fill, from the
	// consumers, once the loop whose dots read it is done (their reads are
	// complete).
	HandBack(l *core.Lowerer, st *core.Staged)
}

// warpSpec is the producer program's plan (planProducer) and the state of
// its lowering.
type warpSpec struct {
	pt                         ProducerTarget
	pl                         *pipelines       // the kernel's pipelining
	grp                        *groupState      // its consumer groups (nil: one)
	need                       map[*tir.Op]bool // ops the producer lowers (top level, and the outer loop's body)
	pipe                       *pipeline
	copyOnly                   map[*tir.Op]bool // ops only the producer's copies read (copyOnlyOps)
	outer                      *tir.Op          // the loop around pipe's, or nil
	carried                    map[int]bool     // the values outer carries that the producer needs, by index
	producerRegs, consumerRegs int
	consumer                   bool // the consumer program is being lowered
	producing                  bool // the producer program is being lowered
	// prodStage and prodPhase are, after the producer's loop, the buffer
	// its next fill would take and the parities of its empty waits;
	// phaseVar keeps the parities between runs of the loop.
	prodStage, prodPhase value.Value
	phaseVar             *ir.InstAlloca
}

// ProducerRegs is what setmaxnreg leaves the producer warpgroup: it walks
// scalars only.
const ProducerRegs = 24

// consumerRegs is what setmaxnreg.inc may give each of nw consumer warps'
// threads: the registers the CTA got at entry (ptxas gives each of its
// threads 65536 / threads, rounded down to a multiple of 8 and at most 255:
// the kernel has one CTA per multiprocessor) less the producer warpgroup's
// share, rounded down to setmaxnreg's multiple of 8. An increase past that
// pool would wait forever for registers no warp frees: 240 for two
// consumer warpgroups (168 at entry), 112 for four (96 at entry), not the
// 120 that the multiprocessor's 65536 alone would give.
func consumerRegs(nw, producerRegs int) int {
	threads := nw*32 + 128
	entry := min(255, 65536/threads) &^ 7
	return min(256, (entry*threads-128*producerRegs)/(nw*32)) &^ 7
}

// planProducer is the plan of a producer warpgroup for the kernel of l,
// whose pipelining is pl and consumer groups grp, when its copies qualify
// (see the top of this file), or why not.
func planProducer(l *core.Lowerer, pt ProducerTarget, pl *pipelines, grp *groupState) (ws *warpSpec, why string) {
	if l.Func().Body.Any(func(op *tir.Op) bool { return op.Kind == tir.OpLastArrival }) {
		return nil, "the kernel calls last_arrival, whose CTA barrier must hold every thread, the producer's too"
	}
	if l.NumWarps()%4 != 0 {
		return nil, "num_warps is not a multiple of 4"
	}
	if len(pl.pipes) != 1 {
		return nil, fmt.Sprintf("%d pipelined loops (want one)", len(pl.pipes))
	}
	var p *pipeline
	for _, q := range pl.pipes {
		p = q
	}
	// avail: the ops the producer may run, the top level's and those of
	// the loop around the pipelined one, if any (the backward's GQA loop).
	top, avail := map[*tir.Op]bool{}, map[*tir.Op]bool{}
	body := l.Func().Body
	frame := body.Ops // the ops the producer may run, in order
	for _, op := range body.Ops {
		top[op], avail[op] = true, true
	}
	var outer *tir.Op
	if !top[p.loop] {
		for _, op := range body.Ops {
			if op.Kind == tir.OpFor && slices.Contains(op.Regions[0].Ops, p.loop) {
				outer = op
			}
		}
		if outer == nil {
			return nil, "the pipelined loop is nested deeper than one loop"
		}
		for _, op := range outer.Regions[0].Ops {
			avail[op] = true
		}
		frame = append(slices.Clone(frame), outer.Regions[0].Ops...)
	}
	if !releases(l, p) {
		return nil, "the loop's buffers go back through a CTA barrier"
	}
	ws = &warpSpec{pt: pt, pl: pl, grp: grp, need: map[*tir.Op]bool{}, carried: map[int]bool{}, pipe: p, outer: outer, producerRegs: ProducerRegs}
	// closure marks the available ops that v depends on.
	var closure func(v *tir.Value) string
	closure = func(v *tir.Value) string {
		d := v.Def
		if d == nil && outer != nil {
			// A value the outer loop carries (a persistent kernel's
			// prefetched header): the producer carries it too, from the
			// same initial value and the same next one.
			if i := slices.Index(outer.Regions[0].Args[1:], v); i >= 0 {
				if ws.carried[i] {
					return ""
				}
				ws.carried[i] = true
				if w := closure(outer.Args[3+i]); w != "" {
					return w
				}
				body := outer.Regions[0].Ops
				return closure(body[len(body)-1].Args[i])
			}
		}
		if d == nil || ws.need[d] {
			return "" // a kernel parameter or the outer loop's induction variable, or seen
		}
		switch {
		case !avail[d]:
			return fmt.Sprintf("a copy reads a value defined inside a region (%s)", d.Pos)
		case len(d.Regions) > 0, d.Kind.OrdersMemory(), d.Kind == tir.OpDot, d.Kind == tir.OpReduce, l.Plan().StagedLoad(d) != nil:
			return fmt.Sprintf("a copy depends on the %s at %s", d.Kind, d.Pos)
		case !v.Type.IsScalar():
			return fmt.Sprintf("a copy depends on a tensor (%s)", d.Pos)
		}
		ws.need[d] = true
		for _, a := range d.Args {
			if w := closure(a); w != "" {
				return w
			}
		}
		return ""
	}
	// inside: the copies' operands defined among ops (the loop's slice,
	// the tail's), whose own inputs from the top level go to closure.
	inside := func(ops []*tir.Op, sts []*core.Staged) string {
		in := map[*tir.Op]bool{}
		for _, op := range ops {
			in[op] = true
		}
		for _, st := range sts {
			vals, ok := pt.CopyOperands(st)
			if !ok {
				return fmt.Sprintf("the load at %s is not copied by one thread", st.Load.Pos)
			}
			for _, v := range vals {
				if v.Def == nil || !in[v.Def] {
					if w := closure(v); w != "" {
						return w
					}
				}
			}
		}
		for _, op := range sliceOf(ops, copyRoots(pt, ops, sts)) {
			if !op.Result().Type.IsScalar() {
				return fmt.Sprintf("a copy depends on a tensor (%s)", op.Pos)
			}
			for _, a := range op.Args {
				if a.Def == nil || !in[a.Def] {
					if w := closure(a); w != "" {
						return w
					}
				}
			}
		}
		return ""
	}
	if w := inside(p.slice, p.loads); w != "" {
		return nil, w
	}
	for _, loop := range []*tir.Op{p.loop, outer} {
		if loop == nil {
			continue
		}
		ws.need[loop] = true
		for _, a := range loop.Args[:3] {
			if w := closure(a); w != "" {
				return nil, w
			}
		}
	}
	var bad string
	body.Walk(func(op *tir.Op) bool {
		st := l.Plan().StagedLoad(op)
		if st == nil || bad != "" {
			return bad == ""
		}
		switch {
		case pl.pipeOf(st) == p:
		case p.tail != nil && st == p.tail.st:
			for _, br := range frame {
				if br.Kind == tir.OpIf && br.Regions[0] == l.Layouts().DefiningBlock(op.Result()) {
					ws.need[br] = true
					if w := closure(br.Args[0]); w != "" {
						bad = w
					}
				}
			}
			if bad == "" {
				bad = inside(p.tail.slice, []*core.Staged{st})
			}
		case st.Resident && avail[op]:
			if vals, ok := pt.CopyOperands(st); !ok {
				bad = fmt.Sprintf("the load at %s is not copied by one thread", op.Pos)
			} else {
				ws.need[op] = true
				for _, v := range vals {
					if w := closure(v); w != "" {
						bad = w
					}
				}
			}
		default:
			bad = fmt.Sprintf("the load at %s is neither the loop's, nor its tail, nor loaded once before it", op.Pos)
		}
		return bad == ""
	})
	if bad != "" {
		return nil, bad
	}
	if p.tail != nil {
		p.tail.issued = true // by the producer
		l.Note(fmt.Sprintf("load at %s: issued by the producer warp after the loop at %s (its tail)", p.tail.st.Load.Pos, p.loop.Pos))
	}
	if outer != nil && grp != nil {
		return nil, "consumer groups with a loop around the pipelined one"
	}
	ws.consumerRegs = consumerRegs(grp.consumerWarps(l), ws.producerRegs)
	ws.copyOnly = copyOnlyOps(l, pt)
	// The consumers read ahead only the block-list entries they use.
	p.ahead = slices.DeleteFunc(p.ahead, func(op *tir.Op) bool { return ws.copyOnly[op] })
	p.aheadSlice = sliceOf(p.slice, p.ahead)
	return ws, ""
}

// copyOnlyOps are the ops whose results only the producer's copies read:
// the coordinates, masks and block-list entries of the staged loads one
// thread issues, and whatever only those depend on. The consumers skip
// them (lowerOp): the copies they stand for are not theirs, and the
// block-list loads among them, which LLVM cannot delete (a masked load is
// an asm with side effects), would cost each consumer thread two global
// loads and their address arithmetic an iteration (flash_fwd's V index,
// one block behind K's).
func copyOnlyOps(l *core.Lowerer, pt ProducerTarget) map[*tir.Op]bool {
	users := map[*tir.Value][]*tir.Op{}
	var ops []*tir.Op
	l.Func().Body.Walk(func(op *tir.Op) bool {
		ops = append(ops, op)
		for _, a := range op.Args {
			users[a] = append(users[a], op)
		}
		return true
	})
	copied := func(op *tir.Op) bool {
		st := l.Plan().StagedLoad(op)
		if st == nil {
			return false
		}
		_, ok := pt.CopyOperands(st)
		return ok
	}
	only := map[*tir.Op]bool{}
	for changed := true; changed; {
		changed = false
		for i := len(ops) - 1; i >= 0; i-- {
			op := ops[i]
			if only[op] || len(op.Results) == 0 || len(op.Regions) > 0 || op.Kind.HasSideEffects() || l.Plan().StagedLoad(op) != nil {
				continue
			}
			used := false
			for _, r := range op.Results {
				for _, u := range users[r] {
					used = used || !(only[u] || copied(u))
				}
			}
			if !used {
				only[op], changed = true, true
			}
		}
	}
	return only
}

// splitWarps runs at the top of the kernel, after the target's prologue:
// the producer warpgroup lowers its registers and its first thread runs
// the producer program; the others return. The consumers continue with
// the kernel.
func (ws *warpSpec) splitWarps(l *core.Lowerer) {
	b := l.Block()
	prod, run, done, cons := l.NewBlock("producer"), l.NewBlock("producer.run"), l.NewBlock("producer.done"), l.NewBlock("consumer")
	b.NewCondBr(ws.isProducerThread(l, false), prod, cons)
	l.SetBlock(prod)
	many := l.Threads() > 256 // fewer threads get all the registers they can use anyway
	if many {
		ws.pt.SetMaxRegs(l, ws.producerRegs, false)
	}
	l.Block().NewCondBr(ws.isProducerThread(l, true), run, done)
	l.SetBlock(run)
	ws.lowerProducer(l)
	l.Block().NewBr(done)
	done.NewRet(nil)
	l.SetBlock(cons)
	if many {
		ws.pt.SetMaxRegs(l, ws.consumerRegs, true)
	}
	ws.consumer = true
}

// lowerProducer emits the producer program: the top-level ops the copies
// need, the loop's fills and the tail's. Its values are its own: the
// consumers lower the same ops again.
func (ws *warpSpec) lowerProducer(l *core.Lowerer) {
	ws.setProducing(true)
	l.SetBlockPrefix("producer.") // the producer warp's blocks read as such
	defer func() { ws.setProducing(false); l.SetBlockPrefix("") }()
	l.Isolated(func() { ws.produceBlock(l, l.Func().Body) })
}

// setProducing records whether the producer program is being lowered (its
// consumer group's too).
func (ws *warpSpec) setProducing(on bool) {
	ws.producing = on
	if ws.grp != nil {
		ws.grp.producing = on
	}
}

// produceBlock lowers the ops of b the producer needs.
func (ws *warpSpec) produceBlock(l *core.Lowerer, b *tir.Block) {
	for _, op := range b.Ops {
		if !ws.need[op] {
			continue
		}
		switch st := l.Plan().StagedLoad(op); {
		case op == ws.pipe.loop:
			ws.produceLoop(l, ws.pipe)
		case op == ws.outer:
			ws.produceOuter(l, op)
		case op.Kind == tir.OpIf:
			ws.produceTail(l, ws.pipe, op)
		case st != nil && ws.grp.private(st.ByteOff):
			ws.produceGroups(l, st)
		case st != nil:
			ws.pt.WaitRefill(l, st)
			ws.issueCopy(l, st, nil, 0, nil)
		default:
			l.LowerOp(op)
		}
	}
}

// produceOuter runs the loop around the pipelined one for its induction
// variable and the carried values the copies need (ws.carried).
func (ws *warpSpec) produceOuter(l *core.Lowerer, op *tir.Op) {
	body := op.Regions[0]
	idx := slices.Sorted(maps.Keys(ws.carried))
	var inits []value.Value
	for _, i := range idx {
		inits = append(inits, l.Scalar(op.Args[3+i]))
	}
	producerFor(l, op, inits, func(iv value.Value, phis []*ir.InstPhi) []value.Value {
		l.Bind(body.Args[0], iv)
		for k, i := range idx {
			l.Bind(body.Args[1+i], phis[k])
		}
		ws.produceBlock(l, body)
		yield := body.Ops[len(body.Ops)-1]
		next := make([]value.Value, len(idx))
		for k, i := range idx {
			next[k] = l.Scalar(yield.Args[i])
		}
		return next
	})
}

// producerFor emits a loop over op's range (its lo, hi and step, already
// lowered) carrying phis that start at inits; body lowers an iteration
// and returns the phis' next values. It returns the phis: at the exit,
// their values after the last iteration.
func producerFor(l *core.Lowerer, op *tir.Op, inits []value.Value, body func(iv value.Value, phis []*ir.InstPhi) []value.Value) []*ir.InstPhi {
	lo := l.Scalar(op.Args[0])
	hi := l.Scalar(op.Args[1])
	step := l.Scalar(op.Args[2])
	pre := l.Block()
	hdr, blk, exit := l.NewBlock("for.hdr"), l.NewBlock("for.body"), l.NewBlock("for.exit")
	pre.NewBr(hdr)
	iv := hdr.NewPhi(ir.NewIncoming(lo, pre))
	var phis []*ir.InstPhi
	for _, v := range inits {
		phis = append(phis, hdr.NewPhi(ir.NewIncoming(v, pre)))
	}
	hdr.NewCondBr(hdr.NewICmp(enum.IPredSLT, iv, hi), blk, exit)
	l.SetBlock(blk)
	next := body(iv, phis)
	latch := l.Block()
	for i, ph := range phis {
		ph.Incs = append(ph.Incs, ir.NewIncoming(next[i], latch))
	}
	iv.Incs = append(iv.Incs, ir.NewIncoming(latch.NewAdd(iv, step), latch))
	latch.NewBr(hdr)
	l.SetBlock(exit)
	return phis
}

// issueCopy issues st's copy from the producer into buffer buf (nil: its
// only one) of stride bytes, completing on st's mbarrier of index bar
// (nil: 0).
func (ws *warpSpec) issueCopy(l *core.Lowerer, st *core.Staged, buf value.Value, stride int, bar value.Value) {
	dyn := st.StagedDyn()
	if buf != nil {
		dyn = l.Block().NewMul(buf, core.ConstI32(int64(stride)))
	}
	st.SetBuffer(bar, dyn, st.Parity())
	st.Elected = true
	ws.pt.IssueCopy(l, st)
	st.Elected = false
	st.SetBuffer(nil, nil, st.Parity())
}

// produceLoop fills p's buffers for iterations lo .. hi-1 in order, each
// after the consumers emptied it (the first fill of a buffer waits on the
// phase before the barrier's first, which counts as complete).
func (ws *warpSpec) produceLoop(l *core.Lowerer, p *pipeline) {
	sub := sliceOf(p.slice, copyRoots(ws.pt, p.slice, p.loads))
	// Each run starts at buffer 0, as the consumers' does; the parities
	// carry over from the previous run (a loop nested in another).
	if ws.phaseVar == nil {
		ws.phaseVar = l.Entry().NewAlloca(types.I32)
		l.Entry().NewStore(core.ConstI32(0), ws.phaseVar)
	}
	phis := producerFor(l, p.loop, []value.Value{core.ConstI32(0), l.Block().NewLoad(types.I32, ws.phaseVar)},
		func(iv value.Value, phis []*ir.InstPhi) []value.Value {
			stage, phase := phis[0], phis[1]
			ws.pl.inSliceEnv(l, p, iv, func() {
				// The block-list entries load before the wait, so that
				// they are in by the time the buffer is free.
				for _, op := range sub {
					l.LowerOp(op)
				}
				ws.pt.WaitEmpty(l, p.loads, stage, emptyParity(l.Block(), phase, stage))
				for _, st := range p.loads {
					ws.issueCopy(l, st, stage, st.Stride, stage)
				}
			})
			b := l.Block()
			return []value.Value{nextStage(b, stage, p.stages), nextPhase(b, phase, stage)}
		})
	l.Block().NewStore(phis[1], ws.phaseVar)
	ws.prodStage, ws.prodPhase = phis[0], phis[1]
}

// produceTail issues p's tail in branch op (its condition is the loop's
// `hi > lo`) into the buffer the loop exits with, once the consumers
// emptied it.
func (ws *warpSpec) produceTail(l *core.Lowerer, p *pipeline, op *tir.Op) {
	t := p.tail
	cond := l.Scalar(op.Args[0])
	l.IfThen(cond, "tail", func() {
		for _, o := range sliceOf(t.slice, copyRoots(ws.pt, t.slice, []*core.Staged{t.st})) {
			l.LowerOp(o)
		}
		stage := ws.prodStage
		ws.pt.WaitEmpty(l, p.loads, stage, emptyParity(l.Block(), ws.prodPhase, stage))
		ws.issueCopy(l, t.st, stage, t.base.Stride, nil) // on the tail's own mbarrier
		// A fill of the buffer all the same: the consumers hand it back
		// (handBackTail), and the next run's fill of it waits for that.
		b := l.Block()
		b.NewStore(nextPhase(b, ws.prodPhase, stage), ws.phaseVar)
	})
}

// copyRoots are the ops of ops (a slice) that define operands of the
// copies of sts (ProducerTarget.CopyOperands).
func copyRoots(pt ProducerTarget, ops []*tir.Op, sts []*core.Staged) []*tir.Op {
	in := map[*tir.Op]bool{}
	for _, op := range ops {
		in[op] = true
	}
	var roots []*tir.Op
	for _, st := range sts {
		vals, _ := pt.CopyOperands(st)
		for _, v := range vals {
			if v.Def != nil && in[v.Def] {
				roots = append(roots, v.Def)
			}
		}
	}
	return roots
}

// emptyParity is the parity of the empty-barrier phase that frees buffer
// stage for its next fill: the one before the fill's (phase: the fills'
// parities, bit per buffer).
func emptyParity(b *ir.Block, phase, stage value.Value) value.Value {
	return b.NewXor(fillParity(b, phase, stage), core.ConstI32(1))
}

// handBackTail hands the buffer of the pipelined loop's tail back after
// the branch that reads it, in an iteration of a loop around the
// pipelined one, once its dot is complete (the epilogue right after waits
// for it anyway), so that the next run's fill of that buffer goes ahead
// while the consumers store this run's output.
func (ws *warpSpec) handBackTail(l *core.Lowerer) {
	p := ws.pipe
	if p.exitRan == nil {
		return
	}
	l.AwaitAllAsync()
	ws.pt.ReleaseBuffer(l, p.loads, p.exitStage, p.exitRan, nil)
}

// note marks the top-level ops the producer warp runs too
// (warp-specialize).
func (ws *warpSpec) note(op *tir.Op) string {
	switch {
	case ws == nil || !ws.need[op]:
		return ""
	case op == ws.pipe.loop:
		return "producer: fills each buffer once the consumers emptied it"
	case op.Kind == tir.OpIf:
		return "producer: the tail's fill"
	}
	return "producer too"
}

// isProducerThread is whether the thread at the CTA index tid is the
// producer warpgroup's (tid >= the consumers' threads), or its first.
func (ws *warpSpec) isProducerThread(l *core.Lowerer, first bool) value.Value {
	n := core.ConstI32(int64(ws.grp.consumerWarps(l) * 32))
	b := l.Block()
	if first {
		return b.NewICmp(enum.IPredEQ, ws.grp.ctaThread(l), n)
	}
	return b.NewICmp(enum.IPredUGE, ws.grp.ctaThread(l), n)
}

// barrier is the consumers' CTA barrier once the producer went its own
// way: bar.sync 0 counted over the consumer threads, or with consumer
// groups each group's own named barrier.
func (ws *warpSpec) barrier(l *core.Lowerer) {
	if ws.grp != nil {
		ws.grp.barrier(l)
		return
	}
	l.Asm(types.Void, fmt.Sprintf("bar.sync 0, %d;", l.NumWarps()*32), "~{memory}", true)
}

// skips reports whether the consumers skip op: only the producer's copies
// read it (copyOnlyOps).
func (ws *warpSpec) skips(op *tir.Op) bool {
	return ws != nil && ws.consumer && !ws.producing && ws.copyOnly[op]
}

// produceGroups issues a private tile's copy once a group, from the
// producer: the ops before it that depend on group_id are lowered again
// with each group's id (the tile's coordinates), last group first so that
// group 0's values, which the pipelined loop's copies read, stay.
func (ws *warpSpec) produceGroups(l *core.Lowerer, st *core.Staged) {
	dep := map[*tir.Value]bool{}
	var redo []*tir.Op
	for _, op := range l.Func().Body.Ops {
		if op == st.Load {
			break
		}
		if !ws.need[op] || len(op.Regions) > 0 {
			continue
		}
		d := op.Kind == tir.OpGroupID
		for _, a := range op.Args {
			d = d || dep[a]
		}
		if d {
			for _, r := range op.Results {
				dep[r] = true
			}
			redo = append(redo, op)
		}
	}
	for g := ws.grp.n - 1; g >= 0; g-- {
		ws.grp.prodGroup = g
		for _, op := range redo {
			l.LowerOp(op)
		}
		ws.pt.WaitRefill(l, st)
		ws.issueCopy(l, st, nil, 0, nil)
	}
}
