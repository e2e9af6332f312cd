package async

import (
	"fmt"

	"github.com/llir/llvm/ir/value"

	"github.com/fac-compiler/fac/codegen/core"
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
// (BufferReleaser.OwnCompletion); a loop of a frame (pipelines.planTails)
// and its tail in the first op with regions after it, an if on `hi > lo`
// whose then-branch holds the tail as its only staged load; the tail's
// address computed in that branch from values defined before the loop by
// pure ops; no store in the loop or between it and the branch; and the
// tail no bigger than one buffer of the loop's tile it was placed on
// (core.Plan.PlaceStaged puts tiles after the loop at the loop's first
// buffer).
type pipeTail struct {
	st     *core.Staged
	slice  []*tir.Op    // the branch's ops the tail's operands depend on, in order
	base   *core.Staged // the loop's tile whose buffers it takes
	loop   *tir.Op      // the pipelined loop
	branch *tir.Op      // the if holding it
	issued bool         // the loop's body (or the producer) issued it
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

// tailIn is the tail in branch r of loop, whose tiles are loads and whose
// preceding top-level ops are before, or nil.
func tailIn(l *core.Lowerer, loop *tir.Op, loads []*core.Staged, before []*tir.Op, r *tir.Block) *pipeTail {
	var st *core.Staged
	for _, op := range r.Ops {
		if s := l.Plan().StagedLoad(op); s != nil {
			if st != nil {
				return nil
			}
			st = s
		}
		for _, rr := range op.Regions {
			if rr.Any(func(o *tir.Op) bool { return l.Plan().StagedLoad(o) != nil }) {
				return nil
			}
		}
	}
	if st == nil || st.Stride != 0 || st.Resident {
		return nil
	}
	var base *core.Staged
	for _, b := range loads {
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
		case len(d.Regions) > 0, d.Kind.OrdersMemory(), d.Kind == tir.OpDot, d.Kind == tir.OpReduce, l.Plan().StagedLoad(d) != nil:
			ok = false
			return
		}
		for _, res := range d.Results {
			if _, flex := l.Layouts().LayoutOf(res); !res.Type.IsScalar() && !flex {
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
	t := &pipeTail{st: st, base: base, loop: loop}
	for _, op := range r.Ops {
		if need[op] {
			t.slice = append(t.slice, op)
		}
	}
	return t
}

// issue issues t into buffer buf of its base tile when last holds, from
// the thread that refills the loop's buffers (inside the release's fill,
// where the loop has two stages and t completes on its own barrier:
// pipelines.issueTail).
func (t *pipeTail) issue(l *core.Lowerer, last, buf value.Value) {
	var defs []*tir.Value
	for _, op := range t.slice {
		defs = append(defs, op.Results...)
	}
	st := t.st
	l.Scope(defs, func() {
		for _, op := range t.slice {
			l.LowerOp(op)
		}
		st.Guard, st.Elected = last, true
		st.SetBuffer(st.Buffer(), l.Block().NewMul(buf, core.ConstI32(int64(t.base.Stride))), st.Parity())
		l.Target().LowerStagedLoad(l, st.Load, st)
		st.Guard, st.Elected = nil, false
		st.SetBuffer(st.Buffer(), nil, st.Parity())
		l.CountStaged(1, 0) // its (empty) cp.async group
	})
	if !t.issued {
		l.Note(fmt.Sprintf("load at %s: issued by the last iteration of the loop at %s (its tail)", st.Load.Pos, t.loop.Pos))
	}
	t.issued = true
}

// arrive reports whether t was issued ahead and, if so, makes it the tile
// in flight in buffer exitStage of its base tile, the one the loop exited
// with (nil: the loop was not lowered yet).
func (t *pipeTail) arrive(l *core.Lowerer, exitStage value.Value) bool {
	if !t.issued || exitStage == nil {
		return false
	}
	st := t.st
	st.SetBuffer(nil, l.Block().NewMul(exitStage, core.ConstI32(int64(t.base.Stride))), nil)
	l.AwaitTile(st, l.StagedIssued()-1)
	l.CountStaged(0, 1)
	return true
}
