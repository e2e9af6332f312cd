package core

import (
	"fmt"
	"maps"
	"slices"

	"github.com/llir/llvm/ir"
	"github.com/llir/llvm/ir/enum"
	"github.com/llir/llvm/ir/types"
	"github.com/llir/llvm/ir/value"

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
// (TileWaiter.ReleasesBuffers), tiles before it loaded once (resident),
// and its tail (pipetail.go); every copy's operands computed at the top
// level, in the outer loop's body, in the loop's slice or in the tail's
// branch, by scalar ops.

// ProducerTarget is a target whose staged copies one thread can issue
// for the whole CTA (sm90's TMA).
type ProducerTarget interface {
	TileWaiter
	// CopyOperands are the scalar values the copy of st reads when one
	// thread issues it (sm90: the tensor coordinates), or ok = false when
	// st's copy is not issued that way.
	CopyOperands(st *Staged) (vals []*tir.Value, ok bool)
	// IssueCopy issues st's copy into its buffer in use from the calling
	// thread (the producer).
	IssueCopy(l *Lowerer, st *Staged)
	// WaitEmpty waits until the consumers handed back buffer buf of tiles
	// (a pipelined loop's): the phase of parity parity (i32 0/1) of its
	// empty barrier completed.
	WaitEmpty(l *Lowerer, tiles []*Staged, buf, parity value.Value)
	// SetMaxRegs moves the calling warpgroup's registers to regs per
	// thread (setmaxnreg): down for the producer, up for the consumers.
	SetMaxRegs(l *Lowerer, regs int, up bool)
	// WaitRefill waits, in the producer, until the consumers handed back
	// resident tile st for its next fill (HandBack): a tile loaded in the
	// loop around the pipelined one is filled once per iteration. It does
	// nothing for a tile filled once.
	WaitRefill(l *Lowerer, st *Staged)
	// HandBack hands resident tile st back for its next fill, from the
	// consumers, once the loop whose dots read it is done (their reads are
	// complete).
	HandBack(l *Lowerer, st *Staged)
}

// warpSpec is the producer program's plan (PlanProducer).
type warpSpec struct {
	pt                         ProducerTarget
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

// WarpSpecialized reports whether the kernel has a producer warpgroup.
func (l *Lowerer) WarpSpecialized() bool { return l.ws != nil }

// InProducer reports whether the producer program is being lowered.
func (l *Lowerer) InProducer() bool { return l.ws != nil && l.ws.producing }

// Threads is the CTA's size: num_warps warps, and the producer's
// warpgroup when the kernel has one.
func (l *Lowerer) Threads() int {
	if l.ws != nil {
		return l.ConsumerWarps()*32 + 128
	}
	return l.nw * 32
}

// PlanProducer gives the kernel a producer warpgroup when its copies
// qualify (see the top of this file) and reports why not otherwise.
func (l *Lowerer) PlanProducer(pt ProducerTarget) (why string) {
	if l.nw%4 != 0 {
		return "num_warps is not a multiple of 4"
	}
	if len(l.pipes) != 1 {
		return fmt.Sprintf("%d pipelined loops (want one)", len(l.pipes))
	}
	var p *pipeline
	for _, q := range l.pipes {
		p = q
	}
	// avail: the ops the producer may run, the top level's and those of
	// the loop around the pipelined one, if any (the backward's GQA loop).
	top, avail := map[*tir.Op]bool{}, map[*tir.Op]bool{}
	frame := l.f.Body.Ops // the ops the producer may run, in order
	for _, op := range l.f.Body.Ops {
		top[op], avail[op] = true, true
	}
	var outer *tir.Op
	if !top[p.loop] {
		for _, op := range l.f.Body.Ops {
			if op.Kind == tir.OpFor && slices.Contains(op.Regions[0].Ops, p.loop) {
				outer = op
			}
		}
		if outer == nil {
			return "the pipelined loop is nested deeper than one loop"
		}
		for _, op := range outer.Regions[0].Ops {
			avail[op] = true
		}
		frame = append(slices.Clone(frame), outer.Regions[0].Ops...)
	}
	if !l.releases(p) {
		return "the loop's buffers go back through a CTA barrier"
	}
	ws := &warpSpec{pt: pt, need: map[*tir.Op]bool{}, carried: map[int]bool{}, pipe: p, outer: outer, producerRegs: ProducerRegs}
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
		case len(d.Regions) > 0, d.Kind.IsMemWrite(), d.Kind == tir.OpDot, d.Kind == tir.OpReduce, l.a.async[d] != nil:
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
	inside := func(ops []*tir.Op, sts []*Staged) string {
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
		return w
	}
	for _, loop := range []*tir.Op{p.loop, outer} {
		if loop == nil {
			continue
		}
		ws.need[loop] = true
		for _, a := range loop.Args[:3] {
			if w := closure(a); w != "" {
				return w
			}
		}
	}
	var bad string
	l.f.Body.Walk(func(op *tir.Op) bool {
		st := l.a.async[op]
		if st == nil || bad != "" {
			return bad == ""
		}
		switch {
		case st.pipe == p:
		case p.tail != nil && st == p.tail.st:
			for _, br := range frame {
				if br.Kind == tir.OpIf && br.Regions[0] == l.a.blockOf[op.Result()] {
					ws.need[br] = true
					if w := closure(br.Args[0]); w != "" {
						bad = w
					}
				}
			}
			if bad == "" {
				bad = inside(p.tail.slice, []*Staged{st})
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
		return bad
	}
	if p.tail != nil {
		p.tail.issued = true // by the producer
		l.Note(fmt.Sprintf("load at %s: issued by the producer warp after the loop at %s (its tail)", p.tail.st.Load.Pos, p.loop.Pos))
	}
	if outer != nil && l.grp != nil {
		return "consumer groups with a loop around the pipelined one"
	}
	ws.consumerRegs = consumerRegs(l.ConsumerWarps(), ws.producerRegs)
	ws.copyOnly = l.copyOnlyOps(pt)
	// The consumers read ahead only the block-list entries they use.
	p.ahead = slices.DeleteFunc(p.ahead, func(op *tir.Op) bool { return ws.copyOnly[op] })
	p.aheadSlice = sliceOf(p.slice, p.ahead)
	l.ws = ws
	return ""
}

// copyOnlyOps are the ops whose results only the producer's copies read:
// the coordinates, masks and block-list entries of the staged loads one
// thread issues, and whatever only those depend on. The consumers skip
// them (lowerOp): the copies they stand for are not theirs, and the
// block-list loads among them, which LLVM cannot delete (a masked load is
// an asm with side effects), would cost each consumer thread two global
// loads and their address arithmetic an iteration (flash_fwd's V index,
// one block behind K's).
func (l *Lowerer) copyOnlyOps(pt ProducerTarget) map[*tir.Op]bool {
	users := map[*tir.Value][]*tir.Op{}
	var ops []*tir.Op
	l.f.Body.Walk(func(op *tir.Op) bool {
		ops = append(ops, op)
		for _, a := range op.Args {
			users[a] = append(users[a], op)
		}
		return true
	})
	copied := func(op *tir.Op) bool {
		st := l.a.async[op]
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
			if only[op] || len(op.Results) == 0 || len(op.Regions) > 0 || op.Kind.HasSideEffects() || l.a.async[op] != nil {
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
func (l *Lowerer) splitWarps() {
	ws := l.ws
	b := l.b
	prod, run, done, cons := l.newBlock("producer"), l.newBlock("producer.run"), l.newBlock("producer.done"), l.newBlock("consumer")
	b.NewCondBr(l.isProducerThread(false), prod, cons)
	l.b = prod
	many := l.Threads() > 256 // fewer threads get all the registers they can use anyway
	if many {
		ws.pt.SetMaxRegs(l, ws.producerRegs, false)
	}
	l.b.NewCondBr(l.isProducerThread(true), run, done)
	l.b = run
	l.lowerProducer()
	l.b.NewBr(done)
	done.NewRet(nil)
	l.b = cons
	if many {
		ws.pt.SetMaxRegs(l, ws.consumerRegs, true)
	}
	ws.consumer = true
}

// lowerProducer emits the producer program: the top-level ops the copies
// need, the loop's fills and the tail's.
func (l *Lowerer) lowerProducer() {
	ws := l.ws
	saved := maps.Clone(l.env)
	ws.producing = true
	defer func() { ws.producing = false; l.env = saved }()
	l.produceBlock(l.f.Body)
}

// produceBlock lowers the ops of b the producer needs.
func (l *Lowerer) produceBlock(b *tir.Block) {
	ws := l.ws
	for _, op := range b.Ops {
		if !ws.need[op] {
			continue
		}
		switch st := l.a.async[op]; {
		case op == ws.pipe.loop:
			l.produceLoop(ws.pipe)
		case op == ws.outer:
			l.produceOuter(op)
		case op.Kind == tir.OpIf:
			l.produceTail(ws.pipe, op)
		case st != nil && l.IsGroupPrivate(st.ByteOff):
			l.produceGroups(st)
		case st != nil:
			ws.pt.WaitRefill(l, st)
			l.issueCopy(st, nil, 0, nil)
		default:
			l.lowerOp(op)
		}
	}
}

// produceOuter runs the loop around the pipelined one for its induction
// variable and the carried values the copies need (ws.carried).
func (l *Lowerer) produceOuter(op *tir.Op) {
	body := op.Regions[0]
	idx := slices.Sorted(maps.Keys(l.ws.carried))
	var inits []value.Value
	for _, i := range idx {
		inits = append(inits, l.Get(op.Args[3+i], scalarL)[0])
	}
	l.producerFor(op, inits, func(iv value.Value, phis []*ir.InstPhi) []value.Value {
		l.put(body.Args[0], scalarL, []value.Value{iv})
		for k, i := range idx {
			l.put(body.Args[1+i], scalarL, []value.Value{phis[k]})
		}
		l.produceBlock(body)
		yield := body.Ops[len(body.Ops)-1]
		next := make([]value.Value, len(idx))
		for k, i := range idx {
			next[k] = l.Get(yield.Args[i], scalarL)[0]
		}
		return next
	})
}

// producerFor emits a loop over op's range (its lo, hi and step, already
// lowered) carrying phis that start at inits; body lowers an iteration
// and returns the phis' next values. It returns the phis: at the exit,
// their values after the last iteration.
func (l *Lowerer) producerFor(op *tir.Op, inits []value.Value, body func(iv value.Value, phis []*ir.InstPhi) []value.Value) []*ir.InstPhi {
	lo := l.Get(op.Args[0], scalarL)[0]
	hi := l.Get(op.Args[1], scalarL)[0]
	step := l.Get(op.Args[2], scalarL)[0]
	pre := l.b
	hdr, blk, exit := l.newBlock("for.hdr"), l.newBlock("for.body"), l.newBlock("for.exit")
	pre.NewBr(hdr)
	iv := hdr.NewPhi(ir.NewIncoming(lo, pre))
	var phis []*ir.InstPhi
	for _, v := range inits {
		phis = append(phis, hdr.NewPhi(ir.NewIncoming(v, pre)))
	}
	hdr.NewCondBr(hdr.NewICmp(enum.IPredSLT, iv, hi), blk, exit)
	l.b = blk
	next := body(iv, phis)
	latch := l.b
	for i, ph := range phis {
		ph.Incs = append(ph.Incs, ir.NewIncoming(next[i], latch))
	}
	iv.Incs = append(iv.Incs, ir.NewIncoming(latch.NewAdd(iv, step), latch))
	latch.NewBr(hdr)
	l.b = exit
	return phis
}

// issueCopy issues st's copy from the producer into buffer buf (nil: its
// only one) of stride bytes, completing on st's mbarrier of index bar
// (nil: 0).
func (l *Lowerer) issueCopy(st *Staged, buf value.Value, stride int, bar value.Value) {
	if buf != nil {
		st.dyn = l.b.NewMul(buf, ConstI32(int64(stride)))
	}
	st.buf, st.Elected = bar, true
	l.ws.pt.IssueCopy(l, st)
	st.Elected, st.dyn, st.buf = false, nil, nil
}

// produceLoop fills p's buffers for iterations lo .. hi-1 in order, each
// after the consumers emptied it (the first fill of a buffer waits on the
// phase before the barrier's first, which counts as complete).
func (l *Lowerer) produceLoop(p *pipeline) {
	sub := sliceOf(p.slice, copyRoots(l.ws.pt, p.slice, p.loads))
	// Each run starts at buffer 0, as the consumers' does; the parities
	// carry over from the previous run (a loop nested in another).
	if l.ws.phaseVar == nil {
		l.ws.phaseVar = l.entry.NewAlloca(types.I32)
		l.entry.NewStore(ConstI32(0), l.ws.phaseVar)
	}
	phis := l.producerFor(p.loop, []value.Value{ConstI32(0), l.b.NewLoad(types.I32, l.ws.phaseVar)},
		func(iv value.Value, phis []*ir.InstPhi) []value.Value {
			stage, phase := phis[0], phis[1]
			l.inSliceEnv(p, iv, func() {
				// The block-list entries load before the wait, so that
				// they are in by the time the buffer is free.
				for _, op := range sub {
					l.lowerOp(op)
				}
				l.ws.pt.WaitEmpty(l, p.loads, stage, emptyParity(l.b, phase, stage))
				for _, st := range p.loads {
					l.issueCopy(st, stage, st.Stride, stage)
				}
			})
			return []value.Value{nextStage(l.b, stage, p.stages), nextPhase(l.b, phase, stage)}
		})
	l.b.NewStore(phis[1], l.ws.phaseVar)
	l.ws.prodStage, l.ws.prodPhase = phis[0], phis[1]
}

// produceTail issues p's tail in branch op (its condition is the loop's
// `hi > lo`) into the buffer the loop exits with, once the consumers
// emptied it.
func (l *Lowerer) produceTail(p *pipeline, op *tir.Op) {
	t := p.tail
	cond := l.Get(op.Args[0], scalarL)[0]
	l.IfThen(cond, "tail", func() {
		for _, o := range sliceOf(t.slice, copyRoots(l.ws.pt, t.slice, []*Staged{t.st})) {
			l.lowerOp(o)
		}
		stage := l.ws.prodStage
		l.ws.pt.WaitEmpty(l, p.loads, stage, emptyParity(l.b, l.ws.prodPhase, stage))
		l.issueCopy(t.st, stage, t.base.Stride, nil) // on the tail's own mbarrier
		// A fill of the buffer all the same: the consumers hand it back
		// (handBackTail), and the next run's fill of it waits for that.
		l.b.NewStore(nextPhase(l.b, l.ws.prodPhase, stage), l.ws.phaseVar)
	})
}

// copyRoots are the ops of ops (a slice) that define operands of the
// copies of sts (ProducerTarget.CopyOperands).
func copyRoots(pt ProducerTarget, ops []*tir.Op, sts []*Staged) []*tir.Op {
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
	return b.NewXor(fillParity(b, phase, stage), ConstI32(1))
}

// handBackTail hands the buffer of the pipelined loop's tail back after
// the branch that reads it, in an iteration of a loop around the
// pipelined one, once its dot is complete (the epilogue right after waits
// for it anyway), so that the next run's fill of that buffer goes ahead
// while the consumers store this run's output.
func (l *Lowerer) handBackTail() {
	p := l.ws.pipe
	if p.exitRan == nil {
		return
	}
	l.awaitForBarrier()
	l.ws.pt.ReleaseBuffer(l, p.loads, p.exitStage, p.exitRan, nil)
}

// consumerBarrier is the consumers' CTA barrier once the producer went
// its own way: bar.sync 0 counted over the consumer threads, or with
// consumer groups each group's own named barrier (groupBarrier).
func (l *Lowerer) consumerBarrier() {
	if l.grp != nil {
		l.groupBarrier()
		return
	}
	l.asm(types.Void, fmt.Sprintf("bar.sync 0, %d;", l.nw*32), "~{memory}", true)
}
