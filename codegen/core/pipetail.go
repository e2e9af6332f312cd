package core

import (
	"fmt"

	"github.com/llir/llvm/ir/value"

	"github.com/fac-compiler/fac/tir"
)

// A pipelined loop's tail: the overlap-softmax pass leaves, after the
// forward's kv loop, `if hi > lo { ...; dot P_last, load(V at the last
// block), acc }`. Loaded there, that V tile's copy is exposed: nothing else
// is left to run while it lands (the profile put about 5% of a
// sliding-window forward's time in it). Its address depends only
// on values from before the loop, so the loop's last iteration issues it
// instead, in its prefetch slot (which holds no next iteration), into the
// buffer that slot would have filled; the branch after the loop then only
// waits for it.
//
// Conditions: two stages for the loop's own last iteration to issue it
// (its prefetch slot is then the buffer the loop exits with; a producer
// warp issues it after its own loop into that buffer at any stage count,
// produceTail); buffers handed back without a CTA barrier (the target's
// release: the issuing thread is the one that freed the buffer), and the
// tail's copies completing on their own barrier
// (TileWaiter.OwnCompletion); a loop of a frame (planTails) and its tail in the first
// op with regions after it, an if on `hi > lo` whose then-branch holds the
// tail as its only staged load; the tail's address computed in that branch from values
// defined before the loop by pure ops; no store in the loop or between it
// and the branch; and the tail no bigger than one buffer of the loop's
// tile it was placed on (placeStaged puts tiles after the loop at the
// loop's first buffer).
type pipeTail struct {
	st     *Staged
	slice  []*tir.Op // the branch's ops the tail's operands depend on, in order
	base   *Staged   // the loop's tile whose buffers it takes
	branch *tir.Op   // the if holding it
	issued bool      // the loop's body issued it
}

// planTails finds the tails of the pipelined loops of the kernel's frames
// (its top level, and the body of a top-level loop: a persistent
// kernel's tile loop).
func (l *Lowerer) planTails() {
	l.planTailsIn(l.f.Body.Ops, nil)
	for i, op := range l.f.Body.Ops {
		if op.Kind == tir.OpFor && l.pipes[op] == nil {
			l.planTailsIn(op.Regions[0].Ops, l.f.Body.Ops[:i])
		}
	}
}

// planTailsIn finds the tails of the pipelined loops among ops; outer are
// the top-level ops before the loop holding ops, if any.
func (l *Lowerer) planTailsIn(ops, outer []*tir.Op) {
	for i, op := range ops {
		p := l.pipes[op]
		if p == nil || op.Regions[0].Any(func(o *tir.Op) bool { return o.Kind.IsMemWrite() }) {
			continue
		}
		for _, next := range ops[i+1:] {
			if next.Kind.IsMemWrite() {
				break
			}
			if len(next.Regions) == 0 {
				continue
			}
			if next.Kind == tir.OpIf && runsWith(next, op) {
				before := append(append([]*tir.Op(nil), outer...), ops[:i]...)
				p.tail = l.tailIn(p, before, next.Regions[0])
				if p.tail != nil {
					p.tail.st.tailOf, p.tail.branch = p, next
				}
			}
			break
		}
	}
}

// runsWith reports whether branch op's condition is `hi > lo` of loop:
// its then-branch runs exactly when the loop has an iteration, so a tail
// the loop issued is always waited for (a copy in flight at the kernel's
// exit would write shared memory no longer its own).
func runsWith(op, loop *tir.Op) bool {
	c := op.Args[0].Def
	return c != nil && c.Kind == tir.OpCmp && c.Attr("pred") == tir.Ident("gt") &&
		c.Args[0] == loop.Args[1] && c.Args[1] == loop.Args[0]
}

// tailIn is the tail in branch r of the loop whose preceding top-level ops
// are before, or nil.
func (l *Lowerer) tailIn(p *pipeline, before []*tir.Op, r *tir.Block) *pipeTail {
	var st *Staged
	for _, op := range r.Ops {
		if s := l.a.async[op]; s != nil {
			if st != nil {
				return nil
			}
			st = s
		}
		for _, rr := range op.Regions {
			if rr.Any(func(o *tir.Op) bool { return l.a.async[o] != nil }) {
				return nil
			}
		}
	}
	if st == nil || st.Stride != 0 || st.Resident {
		return nil
	}
	var base *Staged
	for _, b := range p.loads {
		if b.ByteOff == st.ByteOff && b.Stride >= st.Bytes {
			base = b
		}
	}
	if base == nil {
		return nil
	}
	earlier := map[*tir.Op]bool{}
	for _, op := range before {
		earlier[op] = true
		for _, rr := range op.Regions {
			rr.Walk(func(o *tir.Op) bool { earlier[o] = true; return true })
		}
	}
	in := map[*tir.Op]bool{}
	for _, op := range r.Ops {
		in[op] = true
	}
	need := map[*tir.Op]bool{}
	ok := true
	var visit func(v *tir.Value)
	visit = func(v *tir.Value) {
		d := v.Def
		if !ok || d == nil || need[d] {
			return // a kernel parameter, or seen
		}
		if !in[d] {
			ok = earlier[d]
			return
		}
		switch {
		case len(d.Regions) > 0, d.Kind.IsMemWrite(), d.Kind == tir.OpDot, d.Kind == tir.OpReduce, l.a.async[d] != nil:
			ok = false
			return
		}
		for _, res := range d.Results {
			if !res.Type.IsScalar() && !l.a.get(res).flex {
				ok = false
				return
			}
		}
		need[d] = true
		for _, a := range d.Args {
			visit(a)
		}
	}
	for _, a := range st.Load.Args {
		visit(a)
	}
	if !ok {
		return nil
	}
	t := &pipeTail{st: st, base: base}
	for _, op := range r.Ops {
		if need[op] {
			t.slice = append(t.slice, op)
		}
	}
	return t
}

// issueTail issues p's tail into buffer buf of its base tile when last
// holds, from the thread that refills the loop's buffers (inside the
// release's fill).
func (l *Lowerer) issueTail(p *pipeline, last, buf value.Value) {
	t := p.tail
	if t == nil {
		return
	}
	tw, ok := l.target.(TileWaiter)
	if !ok || !tw.OwnCompletion(t.st) || p.stages != 2 {
		return // loaded after the loop, as any other tile
	}
	var defs []*tir.Value
	for _, op := range t.slice {
		defs = append(defs, op.Results...)
	}
	saved := make([]map[string][]value.Value, len(defs))
	for i, v := range defs {
		saved[i] = l.env[v]
		delete(l.env, v)
	}
	for _, op := range t.slice {
		l.lowerOp(op)
	}
	st := t.st
	st.Guard, st.Elected = last, true
	st.dyn = l.b.NewMul(buf, ConstI32(int64(t.base.Stride)))
	l.target.LowerStagedLoad(l, st.Load, st)
	st.Guard, st.Elected, st.dyn = nil, false, nil
	l.stagedIssued++ // its (empty) cp.async group
	for i, v := range defs {
		if saved[i] == nil {
			delete(l.env, v)
		} else {
			l.env[v] = saved[i]
		}
	}
	if !t.issued {
		l.Note(fmt.Sprintf("load at %s: issued by the last iteration of the loop at %s (its tail)", st.Load.Pos, p.loop.Pos))
	}
	t.issued = true
}

// tailIssued reports whether st is a tail its loop issued and, if so,
// makes it the tile in flight in the buffer the loop exited with.
func (l *Lowerer) tailIssued(st *Staged) bool {
	p := st.tailOf
	if p == nil || !p.tail.issued || p.exitStage == nil {
		return false
	}
	st.dyn = l.b.NewMul(p.exitStage, ConstI32(int64(p.tail.base.Stride)))
	st.buf, st.parity = nil, nil
	st.live, st.ready = true, false
	st.seq = l.stagedIssued - 1
	st.regions = l.regionsLowered
	l.inFlight++
	return true
}
