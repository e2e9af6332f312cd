package async

import (
	"github.com/llir/llvm/ir"
	"github.com/llir/llvm/ir/enum"
	"github.com/llir/llvm/ir/types"
	"github.com/llir/llvm/ir/value"

	"github.com/fac-compiler/fac/codegen/core"
	"github.com/fac-compiler/fac/tir"
)

// Software pipelining of staged loads (FlashAttention-2's prefetch, the
// first step of Triton's pipeliner): in a loop whose staged loads' operands
// depend only on the induction variable (through scalars and index math,
// e.g. the block-sparse list walk of the attention kernels), each such tile
// gets num_stages buffers (the kernel's compile-time argument, default 2)
// and the copies for iteration i+num_stages-1 are issued in iteration i,
// so they overlap num_stages-1 iterations of work instead of only the part
// after the load. The prologue issues iterations lo .. lo+num_stages-2
// before the loop; a prefetch past the last iteration is guarded off
// (copies nothing); the loop's exit waits for every copy before shared
// memory is reused.
//
// The loads' operand computations (the slice) are lowered a second time
// for the prefetched iteration, with the induction variable replaced by
// iv + (num_stages-1)·step, or iv when that is past the end, so every
// scalar load in the slice reads what some real iteration reads.

// pipeline is one loop whose staged loads are prefetched one iteration
// ahead.
type pipeline struct {
	loop   *tir.Op
	stages int            // buffers per tile: iterations i+1 .. i+stages-1 are in flight during i
	loads  []*core.Staged // program order
	slice  []*tir.Op      // body ops the loads' operands depend on, in order
	defs   []*tir.Value   // values the slice defines, and the induction variable
	active bool           // the loop body is being lowered
	// phaseVar holds the buffers' fill parities between runs of the loop
	// (pipePhase).
	phaseVar *ir.InstAlloca
	// release: the target hands every load's buffers back by
	// BufferReleaser.ReleaseBuffer, so the body needs no CTA barrier for them.
	release bool
	// reused: staged tiles after the loop take its buffers (placeStaged),
	// so its exit frees them with a CTA barrier.
	reused bool
	// ahead are the slice's scalar loads (the block-list entries of the
	// attention kernels) and aheadSlice the slice ops they depend on, in
	// order. They are read one iteration before the prefetch that needs
	// them (readAhead): aheadPhis carry the values into the iteration that
	// prefetches, aheadNext are the next iteration's.
	ahead      []*tir.Op
	aheadSlice []*tir.Op
	aheadPhis  []*ir.InstPhi
	aheadNext  []value.Value
	aheadCur   []value.Value // the values for this iteration's prefetch
	// bodyPhis carry the same entries on to the iterations that use them
	// in their own body (bodyPhis[k]: iteration i+k's, k < stages-1), so
	// that the body's block-list loads do not wait for global memory
	// either; bodyNext are their values on entry (from the prologue).
	bodyPhis [][]*ir.InstPhi
	bodyNext [][]value.Value
	// tail is the staged load after the loop that its last iteration (or
	// the producer) issues (pipetail.go), or nil; exitStage the buffer
	// index the loop exits with (the header's phi).
	tail      *pipeTail
	exitStage value.Value
	exitRan   value.Value // i1 at the exit: the loop ran an iteration
}

// pipelines is the kernel's pipelining: the loops pipeline-loads planned
// and the state of lower-llvm's walk through them.
type pipelines struct {
	pipes map[*tir.Op]*pipeline      // the loops whose staged loads are prefetched
	tails map[*core.Staged]*pipeline // the loops whose last iteration issues a tile after them
	// producer: a producer warpgroup issues the loops' copies
	// (producer.go); the consumers prefetch nothing and hand the last
	// iteration's buffer back at the exit.
	producer bool

	// prefetch, when set, issues a pipelined loop's next tiles at the next
	// barrier at region depth prefetchDepth outside any branch
	// (afterBarrier); armedPrefetch is the prefetch after its barrier
	// (issueArmedPrefetch); release, a pipelined loop's buffers to hand
	// back without a barrier (afterTileWait).
	prefetch      func()
	armedPrefetch func()
	release       *pendingRelease
	prefetchDepth int
	// bodyAhead are the values of a pipelined loop's scalar slice loads
	// for the iteration being lowered, read iterations before (ownsOp);
	// inSlice > 0 while a slice is lowered for another iteration.
	bodyAhead map[*tir.Op]value.Value
	inSlice   int
}

// AsyncDotTarget is implemented by targets whose tensor-core dots may
// complete asynchronously (they hand their results to core.DeferWait): a
// prefetch armed by a barrier waits for the next op that is not such a
// dot (issueArmedPrefetch).
type AsyncDotTarget interface {
	AsyncDot(l *core.Lowerer, op *tir.Op) bool
}

// asyncDot reports whether op is a dot the target issues asynchronously.
func asyncDot(l *core.Lowerer, op *tir.Op) bool {
	t, ok := l.Target().(AsyncDotTarget)
	return ok && op.Kind == tir.OpDot && t.AsyncDot(l, op)
}

// afterBarrier: a pipelined loop's prefetch waits for the body's first
// barrier (core.ScheduleTarget.AfterBarrier); beside asynchronous dots it
// waits for the next op that is not one.
func (pl *pipelines) afterBarrier(l *core.Lowerer) {
	if f := pl.prefetch; f != nil && l.Depth() == pl.prefetchDepth && !l.InBranch() {
		pl.prefetch = nil
		if _, ok := l.Target().(AsyncDotTarget); ok {
			pl.armedPrefetch = f // issued before the next op that is not an asynchronous dot
		} else {
			f()
		}
	}
}

// afterTileWait: the buffers the previous iteration of a pipelined loop
// read go back after the body's first wait for its tiles
// (core.ScheduleTarget.AfterTileWait).
func (pl *pipelines) afterTileWait(l *core.Lowerer) {
	if r := pl.release; r != nil && r.p.active && l.Depth() == pl.prefetchDepth && !l.InBranch() {
		pl.releaseBuffers(l)
	}
}

// issuedAhead: a pipelined loop's tiles, issued by the previous iteration
// or the prologue (counted at the top of the body), and a tail its loop
// issued (core.ScheduleTarget.IssuedAhead).
func (pl *pipelines) issuedAhead(l *core.Lowerer, st *core.Staged) bool {
	if p := pl.tails[st]; p != nil && p.tail.arrive(l, p.exitStage) {
		return true
	}
	p := pl.pipeOf(st)
	return p != nil && p.active
}

// ownsOp: a pipelined loop's body takes its block-list entries from the
// iterations that read them ahead.
func (pl *pipelines) ownsOp(l *core.Lowerer, op *tir.Op) bool {
	v, ok := pl.bodyAhead[op]
	if !ok || pl.inSlice != 0 {
		return false
	}
	l.Bind(op.Result(), v)
	return true
}

// pendingRelease is the release of the buffers the previous iteration
// read, armed at the body's first wait for its tiles (releaseBuffers);
// the thread that releases them last refills them.
type pendingRelease struct {
	p        *pipeline
	buf      value.Value // the buffer index the previous iteration read
	cond     value.Value // i1: there was a previous iteration
	prefetch func()
}

// BufferReleaser is implemented by targets that hand a pipelined loop's
// buffers back for their next fill without a CTA barrier (sm90's TMA
// tiles, on mbarriers and release counters).
type BufferReleaser interface {
	// ReleasesBuffers reports whether the buffers of pipelined tile st are
	// handed back for their next fill by ReleaseBuffer instead of by a CTA
	// barrier.
	ReleasesBuffers(st *core.Staged) bool
	// ReleaseBuffer marks buffer buf (i32) of tiles free for its next
	// fill when cond (i1) holds (the calling thread's reads of it, its
	// asynchronous dots included, are complete), and calls fill, which
	// issues the next fill's copies from the calling thread
	// (Staged.Elected), in the one thread that frees it last.
	ReleaseBuffer(l *core.Lowerer, tiles []*core.Staged, buf, cond value.Value, fill func())
	// OwnCompletion reports whether st's copies complete on their own
	// barrier (core.TileWaiter.WaitTile waits for them wherever they were
	// issued, by whichever thread), so that they may be issued early from
	// inside a loop (a pipelined loop's tail, pipetail.go).
	OwnCompletion(st *core.Staged) bool
}

// releaseBuffers arms the pending release: every asynchronous dot issued
// so far (the previous iteration's, which read the buffers) is waited
// for here, and after the asynchronous dots that follow, the buffers are
// handed back, the last thread to do so issuing the prefetch into them.
// No thread waits for another.
func (pl *pipelines) releaseBuffers(l *core.Lowerer) {
	r := pl.release
	pl.release = nil
	l.AwaitAllAsync()
	dirty := !l.SharedClean() // no barrier: what the body read stays unordered
	pl.armedPrefetch = func() {
		l.Target().(BufferReleaser).ReleaseBuffer(l, r.p.loads, r.buf, r.cond, func() {
			for _, st := range r.p.loads {
				st.Elected = true
			}
			r.prefetch()
			for _, st := range r.p.loads {
				st.Elected = false
			}
		})
		l.SetSharedDirty(dirty)
	}
}

// releases reports whether the target hands p's buffers back itself.
func releases(l *core.Lowerer, p *pipeline) bool {
	tw, ok := l.Target().(BufferReleaser)
	if !ok {
		return false
	}
	for _, st := range p.loads {
		if !tw.ReleasesBuffers(st) {
			return false
		}
	}
	return true
}

// pipeOf is the pipelined loop that prefetches st, or nil.
func (pl *pipelines) pipeOf(st *core.Staged) *pipeline {
	if loop := st.PipeLoop(); loop != nil {
		return pl.pipes[loop]
	}
	return nil
}

// issueArmedPrefetch issues a pipelined loop's prefetch that the body's
// barrier armed, before op (nil: at the end of the body). Asynchronous
// dots go first: their issue does not wait for the prefetch's index loads
// and address math, which then run while the tensor cores work.
func (pl *pipelines) issueArmedPrefetch(l *core.Lowerer, op *tir.Op) {
	f := pl.armedPrefetch
	if f == nil || l.Depth() != pl.prefetchDepth || l.InBranch() || (op != nil && asyncDot(l, op)) {
		return
	}
	pl.armedPrefetch = nil
	// Only asynchronous dots ran since the barrier, reading this iteration's
	// buffers: the ones the prefetch writes are still free.
	l.SetSharedDirty(false)
	f()
}

// MaxStages is the most num_stages a kernel may ask for (codegen.Lower
// checks; more buffers than this do not fit a multiprocessor's shared
// memory for any tile worth pipelining).
const MaxStages = 8

// plan finds the loops to pipeline and re-places the staged tiles
// (num_stages buffers each for theirs; num_stages = 1 pipelines nothing),
// and the loops' tails (pipetail.go).
func (pl *pipelines) plan(l *core.Lowerer) {
	pl.pipes = map[*tir.Op]*pipeline{}
	stages := 2
	if n, ok := l.Func().Attr("num_stages").(int64); ok {
		stages = int(n)
	}
	if stages < 2 {
		return
	}
	l.Func().Body.Walk(func(op *tir.Op) bool {
		if op.Kind == tir.OpFor {
			if p := pipelineFor(l, op); p != nil {
				p.stages = stages
				pl.pipes[op] = p
				for _, st := range p.loads {
					st.SetPipeline(op, stages)
					st.Stride = roundUpTo(st.Bytes, 1024)
					st.Bytes = stages * st.Stride
				}
			}
		}
		return true
	})
	if len(pl.pipes) > 0 {
		pl.placeStaged(l)
		pl.planTails(l)
	}
}

// placeStaged places the staged tiles again, the pipelined loops' buffers
// reused by the tiles after them (core.Lowerer.PlaceStaged).
func (pl *pipelines) placeStaged(l *core.Lowerer) {
	rings := map[*tir.Op]bool{}
	for op := range pl.pipes {
		rings[op] = true
	}
	reused := l.Plan().PlaceStaged(rings)
	for op, p := range pl.pipes {
		p.reused = reused[op]
	}
}

// planTails finds the tails of the pipelined loops of the kernel's frames
// (its top level, and the body of a top-level loop: a persistent
// kernel's tile loop).
func (pl *pipelines) planTails(l *core.Lowerer) {
	body := l.Func().Body
	pl.planTailsIn(l, body.Ops, nil)
	for i, op := range body.Ops {
		if op.Kind == tir.OpFor && pl.pipes[op] == nil {
			pl.planTailsIn(l, op.Regions[0].Ops, body.Ops[:i])
		}
	}
}

// planTailsIn finds the tails of the pipelined loops among ops; outer are
// the top-level ops before the loop holding ops, if any.
func (pl *pipelines) planTailsIn(l *core.Lowerer, ops, outer []*tir.Op) {
	for i, op := range ops {
		p := pl.pipes[op]
		if p == nil || op.Regions[0].Any(func(o *tir.Op) bool { return o.Kind.OrdersMemory() }) {
			continue
		}
		for _, next := range ops[i+1:] {
			if next.Kind.OrdersMemory() {
				break
			}
			if len(next.Regions) == 0 {
				continue
			}
			if next.Kind == tir.OpIf && runsWith(next, op) {
				before := append(append([]*tir.Op(nil), outer...), ops[:i]...)
				p.tail = tailIn(l, op, p.loads, before, next.Regions[0])
				if p.tail != nil {
					p.tail.st.MarkTail()
					p.tail.branch = next
					if pl.tails == nil {
						pl.tails = map[*core.Staged]*pipeline{}
					}
					pl.tails[p.tail.st] = p
				}
			}
			break
		}
	}
}

// pipelineFor is loop's pipeline, or nil when it has no staged load to
// prefetch: its staged loads must sit directly in the body (none in nested
// regions, so wait counts stay static), and their operands must be
// computed in the body only from the induction variable, values defined
// outside the loop, and scalar or flexible values of pure ops (loads of
// scalars included: those are safe to repeat). A body with a last_arrival
// is not pipelined: the next iteration's loads would move before it.
func pipelineFor(l *core.Lowerer, loop *tir.Op) *pipeline {
	body := loop.Regions[0]
	if body.Any(func(o *tir.Op) bool { return o.Kind == tir.OpLastArrival }) {
		return nil
	}
	var loads []*core.Staged
	nested := false
	for _, op := range body.Ops {
		if st := l.Plan().StagedLoad(op); st != nil {
			loads = append(loads, st)
		}
		for _, r := range op.Regions {
			nested = nested || r.Any(func(o *tir.Op) bool { return l.Plan().StagedLoad(o) != nil })
		}
	}
	if len(loads) == 0 || nested {
		return nil
	}
	var roots []*tir.Value
	for _, st := range loads {
		roots = append(roots, st.Load.Args...)
	}
	need := map[*tir.Op]bool{}
	if !sliceNeeds(l, body, roots, need) {
		return nil
	}
	p := &pipeline{loop: loop, loads: loads}
	p.setSlice(need)
	return p
}

// sliceNeeds adds to need the ops of loop body body that roots depend on,
// and reports whether the roots depend only on the induction variable
// (through scalars and index math: no loop-carried value, region, store,
// dot, reduction, staged load, or anchored tensor).
func sliceNeeds(l *core.Lowerer, body *tir.Block, roots []*tir.Value, need map[*tir.Op]bool) bool {
	in := map[*tir.Op]bool{}
	for _, op := range body.Ops {
		in[op] = true
	}
	iv := body.Args[0]
	carried := map[*tir.Value]bool{}
	for _, a := range body.Args[1:] {
		carried[a] = true
	}
	ok := true
	var visit func(v *tir.Value)
	visit = func(v *tir.Value) {
		if !ok || v == iv {
			return
		}
		if carried[v] {
			ok = false
			return
		}
		d := v.Def
		if d == nil || !in[d] || need[d] {
			return // defined outside the loop, or seen
		}
		switch {
		case len(d.Regions) > 0, d.Kind.OrdersMemory(), d.Kind == tir.OpDot,
			d.Kind == tir.OpReduce, l.Plan().StagedLoad(d) != nil:
			ok = false
			return
		}
		for _, r := range d.Results {
			if _, flex := l.Layouts().LayoutOf(r); !r.Type.IsScalar() && !flex {
				ok = false // an anchored tensor would need conversions
				return
			}
		}
		need[d] = true
		for _, a := range d.Args {
			visit(a)
		}
	}
	for _, r := range roots {
		visit(r)
	}
	return ok
}

// setSlice makes the ops of need p's slice, in body order, with their
// results and the induction variable its definitions and its scalar loads
// the values read ahead.
func (p *pipeline) setSlice(need map[*tir.Op]bool) {
	body := p.loop.Regions[0]
	p.slice, p.ahead = nil, nil
	p.defs = []*tir.Value{body.Args[0]}
	for _, op := range body.Ops {
		if need[op] {
			p.slice = append(p.slice, op)
			p.defs = append(p.defs, op.Results...)
			if op.Kind == tir.OpLoad && op.Result().Type.IsScalar() {
				p.ahead = append(p.ahead, op)
			}
		}
	}
	p.aheadSlice = sliceOf(p.slice, p.ahead)
}

// AddToSlice has pipelined loop loop's slice compute roots too (scalars
// the target's copies need for the iteration they prefetch), and reports
// whether it can: they must depend only on the induction variable, as the
// staged loads' operands do. It is for the phases between pipeline-loads
// and lower-llvm.
func (s *Scheduler) AddToSlice(l *core.Lowerer, loop *tir.Op, roots []*tir.Value) bool {
	p := s.pl.pipes[loop]
	if p == nil {
		return false
	}
	need := map[*tir.Op]bool{}
	for _, op := range p.slice {
		need[op] = true
	}
	if !sliceNeeds(l, loop.Regions[0], roots, need) {
		return false
	}
	p.setSlice(need)
	return true
}

// sliceOf returns the ops of slice (in order) that roots depend on, roots
// included.
func sliceOf(slice, roots []*tir.Op) []*tir.Op {
	in := map[*tir.Op]bool{}
	for _, op := range slice {
		in[op] = true
	}
	need := map[*tir.Op]bool{}
	var visit func(op *tir.Op)
	visit = func(op *tir.Op) {
		if !in[op] || need[op] {
			return
		}
		need[op] = true
		for _, a := range op.Args {
			if a.Def != nil {
				visit(a.Def)
			}
		}
	}
	for _, r := range roots {
		visit(r)
	}
	var out []*tir.Op
	for _, op := range slice {
		if need[op] {
			out = append(out, op)
		}
	}
	return out
}

// issueStaged lowers p's slice with the induction variable = iv and
// issues the copies of its loads into buffer buf (nil: the first), under
// guard (nil: always), in the slice environment (inSliceEnv). It returns
// the values of the slice's scalar loads (p.ahead) at iv.
func (pl *pipelines) issueStaged(l *core.Lowerer, p *pipeline, iv, guard, buf value.Value) []value.Value {
	var ahead []value.Value
	pl.inSliceEnv(l, p, iv, func() {
		read := map[*tir.Op]value.Value{}
		if p.aheadCur != nil {
			for i, op := range p.ahead {
				read[op] = p.aheadCur[i]
			}
		}
		for _, op := range p.slice {
			if v, ok := read[op]; ok {
				l.Bind(op.Result(), v)
				continue
			}
			l.LowerOp(op)
		}
		for _, op := range p.ahead {
			ahead = append(ahead, l.Scalar(op.Result()))
		}
		for _, st := range p.loads {
			st.Guard = guard
			var dyn value.Value
			if buf != nil {
				dyn = l.Block().NewMul(buf, core.ConstI32(int64(st.Stride)))
			}
			st.SetBuffer(buf, dyn, st.Parity())
			l.Target().LowerStagedLoad(l, st.Load, st)
			st.Guard = nil
			st.SetBuffer(nil, st.StagedDyn(), st.Parity())
			l.CountStaged(1, 1)
		}
	})
	return ahead
}

// inSliceEnv runs lower with p's slice values in a private environment and
// the induction variable = iv: the body lowers them again for its own
// iteration.
func (pl *pipelines) inSliceEnv(l *core.Lowerer, p *pipeline, iv value.Value, lower func()) {
	l.Scope(p.defs, func() {
		l.Bind(p.defs[0], iv)
		pl.inSlice++
		lower()
		pl.inSlice--
	})
}

// readAhead returns the values of p's scalar loads in iteration iv,
// lowered in the slice environment (inSliceEnv).
func (pl *pipelines) readAhead(l *core.Lowerer, p *pipeline, iv value.Value) []value.Value {
	out := make([]value.Value, len(p.ahead))
	pl.inSliceEnv(l, p, iv, func() {
		for _, op := range p.aheadSlice {
			l.LowerOp(op)
		}
		for i, op := range p.ahead {
			out[i] = l.Scalar(op.Result())
		}
	})
	return out
}

// aheadIter is the iteration k steps after iv, or iv when that is past the
// end (so that the slice reads what a real iteration reads).
func aheadIter(b *ir.Block, iv, step, hi value.Value, k int) (it, guard value.Value) {
	next := b.NewAdd(iv, b.NewMul(step, core.ConstI32(int64(k))))
	guard = b.NewICmp(enum.IPredSLT, next, hi)
	return b.NewSelect(guard, next, iv), guard
}

// pipePrologue issues the copies of iterations lo .. lo+(stages-2)·step
// into buffers 0 .. stages-2 when the loop runs at all (the slice may read
// out of bounds for an empty loop, e.g. an empty block list); those past
// the end are guarded off and evaluate the slice at lo.
func (pl *pipelines) pipePrologue(l *core.Lowerer, p *pipeline, lo, hi, step value.Value) {
	p.release = releases(l, p)
	pro, join := l.NewBlock("pipe.pro"), l.NewBlock("pipe.join")
	pre := l.Block()
	pre.NewCondBr(pre.NewICmp(enum.IPredSLT, lo, hi), pro, join)
	l.SetBlock(pro)
	// The block-list entries of iterations lo .. lo+stages-2 for their
	// bodies (bodyPhis).
	entries := [][]value.Value{pl.issueStaged(l, p, lo, nil, nil)}
	for k := 1; k < p.stages-1; k++ {
		it, guard := aheadIter(l.Block(), lo, step, hi, k)
		entries = append(entries, pl.issueStaged(l, p, it, guard, core.ConstI32(int64(k))))
	}
	// The block-list entries of the loop's first prefetch (a producer
	// warp's consumers prefetch nothing).
	var first []value.Value
	if len(p.ahead) > 0 && !pl.producer {
		it, _ := aheadIter(l.Block(), lo, step, hi, p.stages-1)
		first = pl.readAhead(l, p, it)
	}
	proEnd := l.Block()
	proEnd.NewBr(join)
	l.SetBlock(join)
	merge := func(vs []value.Value) []value.Value {
		var out []value.Value
		for i, v := range vs {
			out = append(out, join.NewPhi(ir.NewIncoming(v, proEnd), ir.NewIncoming(l.Const(p.ahead[i].Result().Type, int64(0)), pre)))
		}
		return out
	}
	p.aheadNext = merge(first)
	p.bodyNext = nil
	if len(p.ahead) > 0 {
		for _, e := range entries {
			p.bodyNext = append(p.bodyNext, merge(e))
		}
	}
	l.SetSharedDirty(true)
}

// pipeBodyTop runs at the top of the loop body: the current tiles are
// those committed stages-1 iterations before (in program order), and the
// copies of the next stages-2 iterations are in flight behind them; the
// body's loads only name the current buffers. Iteration i+stages-1's copies
// go into the buffers iteration i-1 used, at the body's first CTA barrier
// (AfterBarrier; the loop's BodyEnd adds one at the end of a body that
// has none): before it, a thread still in the previous iteration may be
// reading those buffers, after it none is, so the prefetch needs no
// barrier of its own. stage (0 .. stages-1) is the buffer in use.
//
// phase holds, in bit s, the parity of the fills of buffer s consumed so
// far (see pipePhase).
func (pl *pipelines) pipeBodyTop(l *core.Lowerer, p *pipeline, iv, step, lo, hi, stage, phase value.Value) {
	for _, st := range p.loads {
		l.AwaitTile(st, l.StagedIssued())
		l.CountStaged(1, 0)
	}
	l.CountStaged((p.stages-2)*len(p.loads), 0) // the later iterations' groups
	b := l.Block()
	ivc, guard := aheadIter(b, iv, step, hi, p.stages-1)
	if len(p.ahead) > 0 {
		// The next iteration's prefetch reads its block-list entries now,
		// so that the thread issuing it does not wait for global memory.
		// Beside a producer warp, only the bodies need them: iteration
		// i+stages-1's, the last the body phis carry.
		k := p.stages
		if pl.producer {
			k--
		} else {
			p.aheadCur = phiValues(p.aheadPhis)
		}
		it, _ := aheadIter(b, iv, step, hi, k)
		p.aheadNext = pl.readAhead(l, p, it)
		// This iteration's own entries, read stages iterations ago.
		pl.bodyAhead = map[*tir.Op]value.Value{}
		for i, op := range p.ahead {
			pl.bodyAhead[op] = p.bodyPhis[0][i]
		}
	}
	other := prevStage(b, stage, p.stages)
	// The last iteration (iv + step >= hi) also issues the loop's tail.
	last := b.NewICmp(enum.IPredSGE, b.NewAdd(iv, step), hi)
	cur := map[*core.Staged]value.Value{}
	parity := fillParity(b, phase, stage)
	for _, st := range p.loads {
		cur[st] = b.NewMul(stage, core.ConstI32(int64(st.Stride)))
		st.SetBuffer(stage, cur[st], parity)
	}
	prefetch := func() {
		pl.issueStaged(l, p, ivc, guard, other)
		if p.release {
			issueTail(l, p, last, other)
		}
		for _, st := range p.loads {
			st.SetBuffer(stage, cur[st], st.Parity())
		}
	}
	if p.release {
		// Handed back after the first wait for this iteration's tiles (or
		// at the end of the body), with no CTA barrier.
		pl.release = &pendingRelease{p: p, buf: other, cond: b.NewICmp(enum.IPredNE, iv, lo), prefetch: prefetch}
	} else {
		pl.prefetch = prefetch
	}
	pl.prefetchDepth = l.Depth()
	p.setActive(true)
}

// setActive records whether p's body is being lowered (its tiles were
// issued ahead: core.Staged.SetAhead).
func (p *pipeline) setActive(on bool) {
	p.active = on
	for _, st := range p.loads {
		st.SetAhead(on)
	}
}

// pipeExit runs after the loop: the last prefetches (guarded off, but
// cp.async still zero-fills) must land before shared memory is reused.
//
// Released buffers: a CTA barrier here frees them all (the last
// iteration's was not released), so that a later run of the loop (inside
// another) fills them from its prologue without waiting.
//
// Beside a producer warp, the last iteration's buffer (ran: there was one)
// goes back on its empty barrier first, so that a later run of the loop
// (inside another) finds every buffer handed back.
func (pl *pipelines) pipeExit(l *core.Lowerer, p *pipeline, ran value.Value) {
	p.setActive(false)
	if pl.producer {
		l.AwaitAllAsync()
		l.Target().(BufferReleaser).ReleaseBuffer(l, p.loads, prevStage(l.Block(), p.exitStage, p.stages), ran, nil)
	}
	if p.release {
		l.Barrier()
	}
	pl.prefetch, pl.armedPrefetch, pl.release = nil, nil, nil
	p.aheadCur, p.aheadNext, p.aheadPhis = nil, nil, nil
	p.bodyPhis, p.bodyNext, pl.bodyAhead = nil, nil, nil
	for _, st := range p.loads {
		st.SetBuffer(nil, nil, nil)
		l.TileDone(st)
	}
	l.Target().WaitStaged(l)
	l.CountStaged(0, -(p.stages-1)*len(p.loads))
	l.SetSharedDirty(true)
	if p.reused && !p.release {
		l.Barrier()
	}
}

// header makes p's phis in the loop's header hdr (pre: the block before
// it): the buffer in use, the fill parities, and the block-list entries
// read ahead.
func (pl *pipelines) header(l *core.Lowerer, p *pipeline, hdr, pre *ir.Block) (stage, phase *ir.InstPhi) {
	stage, phase = pipeStage(hdr, pre), pl.pipePhase(l, p, hdr, pre)
	p.aheadPhis = nil
	for _, v := range p.aheadNext {
		p.aheadPhis = append(p.aheadPhis, hdr.NewPhi(ir.NewIncoming(v, pre)))
	}
	p.bodyPhis = nil
	for _, vs := range p.bodyNext {
		var ps []*ir.InstPhi
		for _, v := range vs {
			ps = append(ps, hdr.NewPhi(ir.NewIncoming(v, pre)))
		}
		p.bodyPhis = append(p.bodyPhis, ps)
	}
	return stage, phase
}

// bodyEnd ends the body of p's loop: a body without a barrier gets one
// for its prefetch, a body without a wait its buffers' release, and the
// prefetch armed by either is issued.
func (pl *pipelines) bodyEnd(l *core.Lowerer) {
	if pl.prefetch != nil {
		l.Barrier() // no barrier in the body: one here issues the prefetch
	}
	if pl.release != nil {
		pl.releaseBuffers(l) // no wait in the body: the release and prefetch go here
	}
}

// latch gives p's phis their values for the next iteration, in latch.
func (pl *pipelines) latch(p *pipeline, latch *ir.Block, stage, phase *ir.InstPhi) {
	stage.Incs = append(stage.Incs, ir.NewIncoming(nextStage(latch, stage, p.stages), latch))
	phase.Incs = append(phase.Incs, ir.NewIncoming(nextPhase(latch, phase, stage), latch))
	for i, ph := range p.aheadPhis {
		ph.Incs = append(ph.Incs, ir.NewIncoming(p.aheadNext[i], latch))
	}
	// The body's entries shift by one iteration; the last come from
	// this iteration's prefetch (read one iteration before).
	for k, ps := range p.bodyPhis {
		for i, ph := range ps {
			var v value.Value
			switch {
			case k+1 < len(p.bodyPhis):
				v = p.bodyPhis[k+1][i]
			case pl.producer:
				v = p.aheadNext[i] // read in this iteration (no prefetch to carry them for)
			default:
				v = p.aheadPhis[i]
			}
			ph.Incs = append(ph.Incs, ir.NewIncoming(v, latch))
		}
	}
}

// exit runs at the top of the exit block of p's loop (lo, hi: its range):
// it keeps the fill parities and the buffer the loop exits with
// (pipeExit).
func (pl *pipelines) exit(l *core.Lowerer, p *pipeline, stage, phase *ir.InstPhi, lo, hi value.Value) {
	b := l.Block()
	b.NewStore(phase, p.phaseVar)
	p.exitStage = stage
	p.exitRan = b.NewICmp(enum.IPredSLT, lo, hi)
	pl.pipeExit(l, p, p.exitRan)
}

// issueTail issues p's tail (pipetail.go), if it has one, from its last
// iteration into buffer buf when last holds: where the loop has two
// stages (its prefetch slot is then the buffer the loop exits with) and
// the tail completes on its own barrier (BufferReleaser.OwnCompletion);
// else the tail is loaded after the loop, as any other tile.
func issueTail(l *core.Lowerer, p *pipeline, last, buf value.Value) {
	t := p.tail
	if t == nil {
		return
	}
	if tw, ok := l.Target().(BufferReleaser); ok && tw.OwnCompletion(t.st) && p.stages == 2 {
		t.issue(l, last, buf)
	}
}

// pipeStage is the phi of the buffer in use: 0 on entry, advanced by the
// latch (nextStage).
func pipeStage(hdr *ir.Block, pre *ir.Block) *ir.InstPhi {
	return hdr.NewPhi(ir.NewIncoming(core.ConstI32(0), pre))
}

// pipePhase is the phi of the per-buffer fill parities (bit s for buffer
// s); each iteration consumes one fill of its buffer (nextPhase). The
// parities outlive the loop: a loop nested in another (the backward's GQA
// loop) starts where its previous run ended, through a variable that
// LLVM promotes to registers (0 at kernel entry; the loop's exit stores
// it).
func (pl *pipelines) pipePhase(l *core.Lowerer, p *pipeline, hdr *ir.Block, pre *ir.Block) *ir.InstPhi {
	return hdr.NewPhi(ir.NewIncoming(pre.NewLoad(types.I32, phaseVarOf(l, p)), pre))
}

// phaseVarOf is p's variable of fill parities (0 at kernel entry).
func phaseVarOf(l *core.Lowerer, p *pipeline) *ir.InstAlloca {
	if p.phaseVar == nil {
		p.phaseVar = l.Entry().NewAlloca(types.I32)
		l.Entry().NewStore(core.ConstI32(0), p.phaseVar)
	}
	return p.phaseVar
}

// fillParity is bit stage of phase: the parity of buffer stage's fills
// consumed so far.
func fillParity(b *ir.Block, phase, stage value.Value) value.Value {
	return b.NewAnd(b.NewLShr(phase, stage), core.ConstI32(1))
}

// nextPhase flips the bit of the buffer this iteration consumed.
func nextPhase(b *ir.Block, phase, stage value.Value) value.Value {
	return b.NewXor(phase, b.NewShl(core.ConstI32(1), stage))
}

// nextStage is (stage + 1) mod n.
func nextStage(b *ir.Block, stage value.Value, n int) value.Value {
	if n == 2 {
		return b.NewXor(stage, core.ConstI32(1))
	}
	inc := b.NewAdd(stage, core.ConstI32(1))
	return b.NewSelect(b.NewICmp(enum.IPredEQ, inc, core.ConstI32(int64(n))), core.ConstI32(0), inc)
}

// prevStage is (stage - 1) mod n: the buffers the previous iteration read.
func prevStage(b *ir.Block, stage value.Value, n int) value.Value {
	if n == 2 {
		return b.NewXor(stage, core.ConstI32(1))
	}
	return b.NewSelect(b.NewICmp(enum.IPredEQ, stage, core.ConstI32(0)), core.ConstI32(int64(n-1)), b.NewSub(stage, core.ConstI32(1)))
}

func phiValues(ps []*ir.InstPhi) []value.Value {
	out := make([]value.Value, len(ps))
	for i, p := range ps {
		out[i] = p
	}
	return out
}

func roundUpTo(n, a int) int { return (n + a - 1) / a * a }
