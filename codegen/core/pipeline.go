package core

import (
	"github.com/llir/llvm/ir"
	"github.com/llir/llvm/ir/enum"
	"github.com/llir/llvm/ir/types"
	"github.com/llir/llvm/ir/value"

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
	stages int          // buffers per tile: iterations i+1 .. i+stages-1 are in flight during i
	loads  []*Staged    // program order
	slice  []*tir.Op    // body ops the loads' operands depend on, in order
	defs   []*tir.Value // values the slice defines, and the induction variable
	active bool         // the loop body is being lowered
	// phaseVar holds the buffers' fill parities between runs of the loop
	// (pipePhase).
	phaseVar *ir.InstAlloca
	// release: the target hands every load's buffers back by
	// TileWaiter.ReleaseBuffer, so the body needs no CTA barrier for them.
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
	// tail is the staged load after the loop that its last iteration
	// issues (pipetail.go), or nil; exitStage the buffer index the loop
	// exits with (the header's phi).
	tail      *pipeTail
	exitStage value.Value
	exitRan   value.Value // i1 at the exit: the loop ran an iteration
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

// releaseBuffers arms the pending release: every asynchronous dot issued
// so far (the previous iteration's, which read the buffers) is waited
// for here, and after the asynchronous dots that follow, the buffers are
// handed back, the last thread to do so issuing the prefetch into them.
// No thread waits for another.
func (l *Lowerer) releaseBuffers() {
	r := l.release
	l.release = nil
	l.awaitForBarrier()
	dirty := l.smemDirty // no barrier: what the body read stays unordered
	l.armedPrefetch = func() {
		l.target.(TileWaiter).ReleaseBuffer(l, r.p.loads, r.buf, r.cond, func() {
			for _, st := range r.p.loads {
				st.Elected = true
			}
			r.prefetch()
			for _, st := range r.p.loads {
				st.Elected = false
			}
		})
		l.smemDirty = dirty
	}
}

// releases reports whether the target hands p's buffers back itself.
func (l *Lowerer) releases(p *pipeline) bool {
	tw, ok := l.target.(TileWaiter)
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

// PipelineLoads is the optional phase that multi-buffers the staged loads
// of loops whose load addresses depend only on the induction variable and
// prefetches them num_stages - 1 iterations ahead (num_stages: the kernel's
// compile-time argument of that name, Triton's, default 2).
var PipelineLoads = Phase{
	Name: "pipeline-loads",
	Doc:  "multi-buffer staged loads in loops (num_stages, default 2) and issue iteration i+num_stages-1's copies in iteration i",
	Run: func(l *Lowerer) error {
		l.planPipelines()
		return nil
	},
}

// MaxStages is the most num_stages a kernel may ask for (codegen.Lower
// checks; more buffers than this do not fit a multiprocessor's shared
// memory for any tile worth pipelining).
const MaxStages = 8

// planPipelines finds the loops to pipeline and re-places the staged tiles
// (num_stages buffers each for theirs; num_stages = 1 pipelines nothing).
func (l *Lowerer) planPipelines() {
	l.pipes = map[*tir.Op]*pipeline{}
	stages := 2
	if n, ok := l.f.Attr("num_stages").(int64); ok {
		stages = int(n)
	}
	if stages < 2 {
		return
	}
	l.f.Body.Walk(func(op *tir.Op) bool {
		if op.Kind == tir.OpFor {
			if p := l.pipelineFor(op); p != nil {
				p.stages = stages
				l.pipes[op] = p
				for _, st := range p.loads {
					st.pipe = p
					st.Stride = roundUpTo(st.Bytes, 1024)
					st.Bytes = stages * st.Stride
				}
			}
		}
		return true
	})
	if len(l.pipes) > 0 {
		l.placeStaged()
		l.planTails()
	}
}

// pipelineFor is loop's pipeline, or nil when it has no staged load to
// prefetch: its staged loads must sit directly in the body (none in nested
// regions, so wait counts stay static), and their operands must be
// computed in the body only from the induction variable, values defined
// outside the loop, and scalar or flexible values of pure ops (loads of
// scalars included: those are safe to repeat).
func (l *Lowerer) pipelineFor(loop *tir.Op) *pipeline {
	body := loop.Regions[0]
	in := map[*tir.Op]bool{}
	var loads []*Staged
	nested := false
	for _, op := range body.Ops {
		in[op] = true
		if st := l.a.async[op]; st != nil {
			loads = append(loads, st)
		}
		for _, r := range op.Regions {
			nested = nested || r.Any(func(o *tir.Op) bool { return l.a.async[o] != nil })
		}
	}
	if len(loads) == 0 || nested {
		return nil
	}
	iv := body.Args[0]
	carried := map[*tir.Value]bool{}
	for _, a := range body.Args[1:] {
		carried[a] = true
	}
	need := map[*tir.Op]bool{}
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
		case len(d.Regions) > 0, d.Kind == tir.OpStore, d.Kind == tir.OpAtomicAdd, d.Kind == tir.OpDot,
			d.Kind == tir.OpReduce, l.a.async[d] != nil:
			ok = false
			return
		}
		for _, r := range d.Results {
			if !r.Type.IsScalar() && !l.a.get(r).flex {
				ok = false // an anchored tensor would need conversions
				return
			}
		}
		need[d] = true
		for _, a := range d.Args {
			visit(a)
		}
	}
	for _, st := range loads {
		for _, a := range st.Load.Args {
			visit(a)
		}
	}
	if !ok {
		return nil
	}
	p := &pipeline{loop: loop, loads: loads, defs: []*tir.Value{iv}}
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
	return p
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
func (l *Lowerer) issueStaged(p *pipeline, iv, guard, buf value.Value) []value.Value {
	var ahead []value.Value
	l.inSliceEnv(p, iv, func() {
		read := map[*tir.Op]value.Value{}
		if p.aheadCur != nil {
			for i, op := range p.ahead {
				read[op] = p.aheadCur[i]
			}
		}
		for _, op := range p.slice {
			if v, ok := read[op]; ok {
				l.put(op.Result(), scalarL, []value.Value{v})
				continue
			}
			l.lowerOp(op)
		}
		for _, op := range p.ahead {
			ahead = append(ahead, l.Get(op.Result(), scalarL)[0])
		}
		for _, st := range p.loads {
			st.Guard = guard
			st.dyn, st.buf = nil, buf
			if buf != nil {
				st.dyn = l.b.NewMul(buf, ConstI32(int64(st.Stride)))
			}
			l.target.LowerStagedLoad(l, st.Load, st)
			st.Guard, st.buf = nil, nil
			l.stagedIssued++
			l.inFlight++
		}
	})
	return ahead
}

// inSliceEnv runs lower with p's slice values in a private environment and
// the induction variable = iv: the body lowers them again for its own
// iteration.
func (l *Lowerer) inSliceEnv(p *pipeline, iv value.Value, lower func()) {
	saved := make([]map[string][]value.Value, len(p.defs))
	for i, v := range p.defs {
		saved[i] = l.env[v]
		delete(l.env, v)
	}
	l.put(p.defs[0], scalarL, []value.Value{iv})
	l.inSlice++
	lower()
	l.inSlice--
	for i, v := range p.defs {
		if saved[i] == nil {
			delete(l.env, v)
		} else {
			l.env[v] = saved[i]
		}
	}
}

// readAhead returns the values of p's scalar loads in iteration iv,
// lowered in the slice environment (inSliceEnv).
func (l *Lowerer) readAhead(p *pipeline, iv value.Value) []value.Value {
	out := make([]value.Value, len(p.ahead))
	l.inSliceEnv(p, iv, func() {
		for _, op := range p.aheadSlice {
			l.lowerOp(op)
		}
		for i, op := range p.ahead {
			out[i] = l.Get(op.Result(), scalarL)[0]
		}
	})
	return out
}

// aheadIter is the iteration k steps after iv, or iv when that is past the
// end (so that the slice reads what a real iteration reads).
func aheadIter(b *ir.Block, iv, step, hi value.Value, k int) (it, guard value.Value) {
	next := b.NewAdd(iv, b.NewMul(step, ConstI32(int64(k))))
	guard = b.NewICmp(enum.IPredSLT, next, hi)
	return b.NewSelect(guard, next, iv), guard
}

// pipePrologue issues the copies of iterations lo .. lo+(stages-2)·step
// into buffers 0 .. stages-2 when the loop runs at all (the slice may read
// out of bounds for an empty loop, e.g. an empty block list); those past
// the end are guarded off and evaluate the slice at lo.
func (l *Lowerer) pipePrologue(p *pipeline, lo, hi, step value.Value) {
	p.release = l.releases(p)
	pro, join := l.newBlock("pipe.pro"), l.newBlock("pipe.join")
	pre := l.b
	l.b.NewCondBr(l.b.NewICmp(enum.IPredSLT, lo, hi), pro, join)
	l.b = pro
	// The block-list entries of iterations lo .. lo+stages-2 for their
	// bodies (bodyPhis).
	entries := [][]value.Value{l.issueStaged(p, lo, nil, nil)}
	for k := 1; k < p.stages-1; k++ {
		it, guard := aheadIter(l.b, lo, step, hi, k)
		entries = append(entries, l.issueStaged(p, it, guard, ConstI32(int64(k))))
	}
	// The block-list entries of the loop's first prefetch (a producer
	// warp's consumers prefetch nothing).
	var first []value.Value
	if len(p.ahead) > 0 && l.ws == nil {
		it, _ := aheadIter(l.b, lo, step, hi, p.stages-1)
		first = l.readAhead(p, it)
	}
	proEnd := l.b
	l.b.NewBr(join)
	l.b = join
	merge := func(vs []value.Value) []value.Value {
		var out []value.Value
		for i, v := range vs {
			out = append(out, join.NewPhi(ir.NewIncoming(v, proEnd), ir.NewIncoming(l.constant(p.ahead[i].Result().Type, int64(0)), pre)))
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
	l.smemDirty = true
}

// pipeBodyTop runs at the top of the loop body: the current tiles are
// those committed stages-1 iterations before (in program order), and the
// copies of the next stages-2 iterations are in flight behind them; the
// body's loads only name the current buffers. Iteration i+stages-1's copies
// go into the buffers iteration i-1 used, at the body's first CTA barrier
// (Barrier; lowerFor adds one at the end of a body that has none): before
// it, a thread still in the previous iteration may be reading those
// buffers, after it none is, so the prefetch needs no barrier of its own.
// stage (0 .. stages-1) is the buffer in use.
//
// phase holds, in bit s, the parity of the fills of buffer s consumed so
// far (see pipePhase).
func (l *Lowerer) pipeBodyTop(p *pipeline, iv, step, lo, hi, stage, phase value.Value) {
	for _, st := range p.loads {
		st.seq = l.stagedIssued
		st.live, st.ready = true, false
		l.stagedIssued++
	}
	l.stagedIssued += (p.stages - 2) * len(p.loads) // the later iterations' groups
	b := l.b
	ivc, guard := aheadIter(b, iv, step, hi, p.stages-1)
	if len(p.ahead) > 0 {
		// The next iteration's prefetch reads its block-list entries now,
		// so that the thread issuing it does not wait for global memory.
		// Beside a producer warp, only the bodies need them: iteration
		// i+stages-1's, the last the body phis carry.
		k := p.stages
		if l.ws != nil {
			k--
		} else {
			p.aheadCur = phiValues(p.aheadPhis)
		}
		it, _ := aheadIter(b, iv, step, hi, k)
		p.aheadNext = l.readAhead(p, it)
		// This iteration's own entries, read stages iterations ago.
		l.bodyAhead = map[*tir.Op]value.Value{}
		for i, op := range p.ahead {
			l.bodyAhead[op] = p.bodyPhis[0][i]
		}
	}
	other := prevStage(b, stage, p.stages)
	// The last iteration (iv + step >= hi) also issues the loop's tail.
	last := b.NewICmp(enum.IPredSGE, b.NewAdd(iv, step), hi)
	cur := map[*Staged]value.Value{}
	parity := fillParity(b, phase, stage)
	for _, st := range p.loads {
		cur[st] = b.NewMul(stage, ConstI32(int64(st.Stride)))
		st.dyn, st.buf, st.parity = cur[st], stage, parity
	}
	prefetch := func() {
		l.issueStaged(p, ivc, guard, other)
		if p.release {
			l.issueTail(p, last, other)
		}
		for _, st := range p.loads {
			st.dyn, st.buf = cur[st], stage
		}
	}
	if p.release {
		// Handed back after the first wait for this iteration's tiles (or
		// at the end of the body), with no CTA barrier.
		l.release = &pendingRelease{p: p, buf: other, cond: b.NewICmp(enum.IPredNE, iv, lo), prefetch: prefetch}
	} else {
		l.prefetch = prefetch
	}
	l.prefetchDepth = l.depth
	p.active = true
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
func (l *Lowerer) pipeExit(p *pipeline, ran value.Value) {
	p.active = false
	if l.ws != nil {
		l.awaitForBarrier()
		l.target.(TileWaiter).ReleaseBuffer(l, p.loads, prevStage(l.b, p.exitStage, p.stages), ran, nil)
	}
	if p.release {
		l.Barrier()
	}
	l.prefetch, l.armedPrefetch, l.release = nil, nil, nil
	p.aheadCur, p.aheadNext, p.aheadPhis = nil, nil, nil
	p.bodyPhis, p.bodyNext, l.bodyAhead = nil, nil, nil
	for _, st := range p.loads {
		st.dyn, st.buf, st.parity = nil, nil, nil
		st.live, st.ready = false, false
	}
	l.target.WaitStaged(l)
	l.inFlight -= (p.stages - 1) * len(p.loads)
	l.smemDirty = true
	if p.reused && !p.release {
		l.Barrier()
	}
}

// pipeStage is the phi of the buffer in use: 0 on entry, advanced by the
// latch (nextStage; see lowerFor).
func pipeStage(hdr *ir.Block, pre *ir.Block) *ir.InstPhi {
	return hdr.NewPhi(ir.NewIncoming(ConstI32(0), pre))
}

// pipePhase is the phi of the per-buffer fill parities (bit s for buffer
// s); each iteration consumes one fill of its buffer (nextPhase). The
// parities outlive the loop: a loop nested in another (the backward's GQA
// loop) starts where its previous run ended, through a variable that
// LLVM promotes to registers (0 at kernel entry; the loop's exit stores
// it).
func (l *Lowerer) pipePhase(p *pipeline, hdr *ir.Block, pre *ir.Block) *ir.InstPhi {
	return hdr.NewPhi(ir.NewIncoming(pre.NewLoad(types.I32, l.phaseVarOf(p)), pre))
}

// phaseVarOf is p's variable of fill parities (0 at kernel entry).
func (l *Lowerer) phaseVarOf(p *pipeline) *ir.InstAlloca {
	if p.phaseVar == nil {
		p.phaseVar = l.entry.NewAlloca(types.I32)
		l.entry.NewStore(ConstI32(0), p.phaseVar)
	}
	return p.phaseVar
}

// fillParity is bit stage of phase: the parity of buffer stage's fills
// consumed so far.
func fillParity(b *ir.Block, phase, stage value.Value) value.Value {
	return b.NewAnd(b.NewLShr(phase, stage), ConstI32(1))
}

// nextPhase flips the bit of the buffer this iteration consumed.
func nextPhase(b *ir.Block, phase, stage value.Value) value.Value {
	return b.NewXor(phase, b.NewShl(ConstI32(1), stage))
}

// nextStage is (stage + 1) mod n.
func nextStage(b *ir.Block, stage value.Value, n int) value.Value {
	if n == 2 {
		return b.NewXor(stage, ConstI32(1))
	}
	inc := b.NewAdd(stage, ConstI32(1))
	return b.NewSelect(b.NewICmp(enum.IPredEQ, inc, ConstI32(int64(n))), ConstI32(0), inc)
}

// prevStage is (stage - 1) mod n: the buffers the previous iteration read.
func prevStage(b *ir.Block, stage value.Value, n int) value.Value {
	if n == 2 {
		return b.NewXor(stage, ConstI32(1))
	}
	return b.NewSelect(b.NewICmp(enum.IPredEQ, stage, ConstI32(0)), ConstI32(int64(n-1)), b.NewSub(stage, ConstI32(1)))
}
