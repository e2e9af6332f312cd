package core

import (
	"github.com/llir/llvm/ir"
	"github.com/llir/llvm/ir/enum"
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
			r.Walk(func(o *tir.Op) bool {
				if l.a.async[o] != nil {
					nested = true
				}
				return true
			})
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
		}
	}
	return p
}

// issueStaged lowers p's slice with the induction variable = iv and
// issues the copies of its loads into the buffer at dyn (nil: the first),
// under guard (nil: always). The slice's values are lowered in a private
// environment: the body lowers them again for its own iteration.
func (l *Lowerer) issueStaged(p *pipeline, iv, guard value.Value, dyn func(*Staged) value.Value) {
	saved := make([]map[string][]value.Value, len(p.defs))
	for i, v := range p.defs {
		saved[i] = l.env[v]
		delete(l.env, v)
	}
	l.put(p.defs[0], scalarL, []value.Value{iv})
	for _, op := range p.slice {
		l.lowerOp(op)
	}
	for _, st := range p.loads {
		st.Guard = guard
		st.dyn = nil
		if dyn != nil {
			st.dyn = dyn(st)
		}
		l.target.LowerStagedLoad(l, st.Load, st)
		st.Guard = nil
		l.stagedIssued++
		l.inFlight++
	}
	for i, v := range p.defs {
		if saved[i] == nil {
			delete(l.env, v)
		} else {
			l.env[v] = saved[i]
		}
	}
}

// pipePrologue issues the copies of iterations lo .. lo+(stages-2)·step
// into buffers 0 .. stages-2 when the loop runs at all (the slice may read
// out of bounds for an empty loop, e.g. an empty block list); those past
// the end are guarded off and evaluate the slice at lo.
func (l *Lowerer) pipePrologue(p *pipeline, lo, hi, step value.Value) {
	pro, join := l.newBlock("pipe.pro"), l.newBlock("pipe.join")
	l.b.NewCondBr(l.b.NewICmp(enum.IPredSLT, lo, hi), pro, join)
	l.b = pro
	l.issueStaged(p, lo, nil, nil)
	for k := 1; k < p.stages-1; k++ {
		it := l.b.NewAdd(lo, l.b.NewMul(step, ConstI32(int64(k))))
		guard := l.b.NewICmp(enum.IPredSLT, it, hi)
		l.issueStaged(p, l.b.NewSelect(guard, it, lo), guard, func(st *Staged) value.Value {
			return ConstI32(int64(k * st.Stride))
		})
	}
	l.b.NewBr(join)
	l.b = join
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
func (l *Lowerer) pipeBodyTop(p *pipeline, iv, step, hi, stage value.Value) {
	for _, st := range p.loads {
		st.seq = l.stagedIssued
		st.live, st.ready = true, false
		l.stagedIssued++
	}
	l.stagedIssued += (p.stages - 2) * len(p.loads) // the later iterations' groups
	b := l.b
	next := b.NewAdd(iv, b.NewMul(step, ConstI32(int64(p.stages-1))))
	guard := b.NewICmp(enum.IPredSLT, next, hi)
	ivc := b.NewSelect(guard, next, iv)
	other := prevStage(b, stage, p.stages)
	cur := map[*Staged]value.Value{}
	for _, st := range p.loads {
		cur[st] = b.NewMul(stage, ConstI32(int64(st.Stride)))
		st.dyn = cur[st]
	}
	l.prefetch = func() {
		l.issueStaged(p, ivc, guard, func(st *Staged) value.Value {
			return l.b.NewMul(other, ConstI32(int64(st.Stride)))
		})
		for _, st := range p.loads {
			st.dyn = cur[st]
		}
	}
	l.prefetchDepth = l.depth
	p.active = true
}

// pipeExit runs after the loop: the last prefetches (guarded off, but
// cp.async still zero-fills) must land before shared memory is reused.
func (l *Lowerer) pipeExit(p *pipeline) {
	p.active = false
	l.prefetch, l.armedPrefetch = nil, nil
	for _, st := range p.loads {
		st.dyn = nil
		st.live, st.ready = false, false
	}
	l.target.WaitStaged(l)
	l.inFlight -= (p.stages - 1) * len(p.loads)
	l.smemDirty = true
}

// pipeStage is the phi of the buffer in use: 0 on entry, advanced by the
// latch (nextStage; see lowerFor).
func pipeStage(hdr *ir.Block, pre *ir.Block) *ir.InstPhi {
	return hdr.NewPhi(ir.NewIncoming(ConstI32(0), pre))
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
