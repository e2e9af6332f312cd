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
// e.g. the block-sparse list walk of the attention kernels), the copies
// for iteration i+1 are issued at the top of iteration i into a second
// buffer, so they overlap all of iteration i's work instead of only the
// part after the load. The prologue issues iteration lo's copies before
// the loop; a prefetch past the last iteration is guarded off (copies
// nothing); the loop's exit waits for every copy before shared memory is
// reused.
//
// The loads' operand computations (the slice) are lowered a second time
// for the next iteration, with the induction variable replaced by
// min(iv + step, iv when past the end), so every scalar load in the slice
// reads what some real iteration reads.

// pipeline is one loop whose staged loads are prefetched one iteration
// ahead.
type pipeline struct {
	loop   *tir.Op
	loads  []*Staged    // program order
	slice  []*tir.Op    // body ops the loads' operands depend on, in order
	defs   []*tir.Value // values the slice defines, and the induction variable
	active bool         // the loop body is being lowered
}

// PipelineLoads is the optional phase that double-buffers the staged
// loads of loops whose load addresses depend only on the induction
// variable and prefetches them one iteration ahead.
var PipelineLoads = Phase{
	Name: "pipeline-loads",
	Doc:  "double-buffer staged loads in loops and issue iteration i+1's copies at the top of iteration i",
	Run: func(l *Lowerer) error {
		l.planPipelines()
		return nil
	},
}

// planPipelines finds the loops to pipeline and re-places the staged tiles
// (two buffers each for theirs).
func (l *Lowerer) planPipelines() {
	l.pipes = map[*tir.Op]*pipeline{}
	l.f.Body.Walk(func(op *tir.Op) bool {
		if op.Kind == tir.OpFor {
			if p := l.pipelineFor(op); p != nil {
				l.pipes[op] = p
				for _, st := range p.loads {
					st.pipe = p
					st.Stride = roundUpTo(st.Bytes, 1024)
					st.Bytes = 2 * st.Stride
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

// pipePrologue issues iteration lo's copies when the loop runs at all (the
// slice may read out of bounds for an empty loop, e.g. an empty block
// list).
func (l *Lowerer) pipePrologue(p *pipeline, lo, hi value.Value) {
	pro, join := l.newBlock("pipe.pro"), l.newBlock("pipe.join")
	l.b.NewCondBr(l.b.NewICmp(enum.IPredSLT, lo, hi), pro, join)
	l.b = pro
	l.issueStaged(p, lo, nil, nil)
	l.b.NewBr(join)
	l.b = join
	l.smemDirty = true
}

// pipeBodyTop runs at the top of the loop body: the current tiles are
// those committed before (in program order); the body's loads only name
// them. The next iteration's copies go into the other buffers at the
// body's first CTA barrier (Barrier; lowerFor adds one at the end of a body
// that has none): before it, a thread still in the previous iteration may
// be reading those buffers, after it none is, so the prefetch needs no
// barrier of its own. stage (0 or 1) is the buffer in use.
func (l *Lowerer) pipeBodyTop(p *pipeline, iv, step, hi, stage value.Value) {
	for _, st := range p.loads {
		st.seq = l.stagedIssued
		l.stagedIssued++
	}
	b := l.b
	next := b.NewAdd(iv, step)
	guard := b.NewICmp(enum.IPredSLT, next, hi)
	ivc := b.NewSelect(guard, next, iv)
	other := b.NewXor(stage, ConstI32(1))
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

// pipeExit runs after the loop: the last prefetch (guarded off, but
// cp.async still zero-fills) must land before shared memory is reused.
func (l *Lowerer) pipeExit(p *pipeline) {
	p.active = false
	l.prefetch = nil
	for _, st := range p.loads {
		st.dyn = nil
	}
	l.target.WaitStaged(l)
	l.inFlight -= len(p.loads)
	l.smemDirty = true
}

// pipeStage is the phi of the buffer in use: 0 on entry, flipped by the
// latch (see lowerFor).
func pipeStage(hdr *ir.Block, pre *ir.Block) *ir.InstPhi {
	return hdr.NewPhi(ir.NewIncoming(ConstI32(0), pre))
}
