package passes

import (
	"slices"

	"github.com/fac-compiler/fac/tir"
)

// persistentPrefetch reads a persistent kernel's per-tile header one tile
// early. The header is the scalar loads at the top of the tile loop's body
// whose addresses come from the tile's coordinates and the kernel's
// parameters alone (flash_fwd's block counts). Each tile used to start
// with their latency, and that of the tile decode's divisions, in series
// before its first copy could be waited for: a non-persistent launch hides
// it behind Q's copy, a persistent one, whose Q is already there, did not.
// The loop now carries each such load: the value for the first tile is
// loaded before the loop, and each iteration loads the next tile's after
// its last region (the kv loop, the tail), so the latency runs under the
// epilogue; past the last tile the loads are masked off.
//
//	for %pid, %n, %P {
//	^(%s: i32):
//	  …
//	  %c = load %p : i32          // %p from %s and parameters only
//	  for … { … }                  // the tile's loops
//	  …epilogue…
//	  yield
//	}
//
// becomes
//
//	%c0 = load %p[%s := %pid], %pid < %n, 0
//	%r = for %pid, %n, %P, %c0 : i32 {
//	^(%s: i32, %c: i32):
//	  …
//	  for … { … }
//	  %c1 = load %p[%s := %s + %P], %s + %P < %n, 0
//	  …epilogue…
//	  yield %c1
//	}
//
// Reading tile s + P's header before tile s has stored anything is what a
// non-persistent launch may do anyway (its tiles run in any order, at
// once), so the only condition is that nothing in the kernel writes
// through the loads' pointer parameters (the header may not be the
// kernel's own output).
//
// It runs canonicalize and cse on what it wrote (the header's copies bring
// their own constants), as mask-range does, so that the pipeline stays a
// fixpoint.
func persistentPrefetch(m *tir.Module) error {
	changed := false
	for _, f := range m.Funcs {
		if on, _ := f.Attr("persistent").(bool); !on || !f.Kernel {
			continue
		}
		if loop := tileLoop(f); loop != nil {
			changed = prefetchHeader(f, loop) || changed
		}
	}
	if !changed {
		return nil
	}
	if err := canonicalize(m); err != nil {
		return err
	}
	return cse(m)
}

// tileLoop is the loop the persistent pass made: the top-level for
// stepping by grid.programs.
func tileLoop(f *tir.Func) *tir.Op {
	for _, op := range f.Body.Ops {
		if op.Kind == tir.OpFor && op.Args[2].Def == nil && op.Args[2].Name == tir.GridParams[3] {
			return op
		}
	}
	return nil
}

// prefetchHeader rewrites loop, reporting whether it had a header to read
// ahead.
func prefetchHeader(f *tir.Func, loop *tir.Op) bool {
	written, ok := writtenRoots(f)
	if !ok {
		return false
	}
	body := loop.Regions[0]
	iv := body.Args[0]
	inBody := map[*tir.Value]*tir.Op{}
	for _, op := range body.Ops {
		for _, r := range op.Results {
			inBody[r] = op
		}
	}
	// header: the top-level ops a header load depends on, by op; ok says
	// whether it qualifies (memoized).
	header := map[*tir.Op]bool{}
	var qualifies func(op *tir.Op) bool
	qualifies = func(op *tir.Op) bool {
		if q, seen := header[op]; seen {
			return q
		}
		header[op] = false // a cycle cannot happen in SSA; this bounds it anyway
		q := len(op.Regions) == 0 && len(op.Results) == 1 && op.Result().Type.IsScalar() &&
			!op.Kind.HasSideEffects() && op.Kind != tir.OpProgramID
		if q && op.Kind == tir.OpLoad {
			// Not a load of pointers: its "other" would need a null.
			root := ptrRoot(op.Args[0])
			q = root != nil && !written[root] && !op.Result().Type.Ptr
		}
		for _, a := range op.Args {
			if !q {
				break
			}
			if d := inBody[a]; d != nil {
				q = qualifies(d)
			} else {
				q = a == iv || !slices.Contains(body.Args[1:], a)
			}
		}
		header[op] = q
		return q
	}
	// Loads whose values only reach the yield are a header read ahead
	// already (this pass's own, on a second run).
	ahead := map[*tir.Op]bool{}
	users := map[*tir.Value][]*tir.Op{}
	for _, op := range body.Ops {
		for _, r := range op.Regions {
			r.Walk(func(in *tir.Op) bool {
				for _, a := range in.Args {
					users[a] = append(users[a], op) // a use inside op's regions
				}
				return true
			})
		}
		for _, a := range op.Args {
			users[a] = append(users[a], op)
		}
	}
	for i := len(body.Ops) - 1; i >= 0; i-- {
		op := body.Ops[i]
		if len(op.Results) != 1 || len(op.Regions) > 0 {
			continue
		}
		us := users[op.Result()]
		only := len(us) > 0
		for _, u := range us {
			only = only && (u.Kind == tir.OpYield || ahead[u])
		}
		ahead[op] = only
	}
	var loads []*tir.Op
	for _, op := range body.Ops {
		if op.Kind == tir.OpLoad && !ahead[op] && qualifies(op) {
			loads = append(loads, op)
		}
	}
	if len(loads) == 0 {
		return false
	}
	need := map[*tir.Op]bool{}
	var mark func(op *tir.Op)
	mark = func(op *tir.Op) {
		if need[op] {
			return
		}
		need[op] = true
		for _, a := range op.Args {
			if d := inBody[a]; d != nil {
				mark(d)
			}
		}
	}
	for _, op := range loads {
		mark(op)
	}
	lo, hi, step := loop.Args[0], loop.Args[1], loop.Args[2]

	// copyHeader clones the header for tile s into new ops: the loads'
	// values, in loads' order.
	copyHeader := func(s *tir.Value) ([]*tir.Op, []*tir.Value) {
		valid := tir.NewOp(tir.OpCmp, []*tir.Value{s, hi}, tir.Scalar(tir.I1))
		valid.Attrs = []tir.Attr{{Key: "pred", Val: tir.Ident("lt")}}
		ops := []*tir.Op{valid}
		vm := map[*tir.Value]*tir.Value{iv: s}
		for _, op := range body.Ops {
			if !need[op] {
				continue
			}
			c := cloneOp(op, vm)
			if op.Kind == tir.OpLoad {
				mask, other := valid.Result(), (*tir.Value)(nil)
				if len(c.Args) == 3 {
					and := tir.NewOp(tir.OpAnd, []*tir.Value{c.Args[1], mask}, tir.Scalar(tir.I1))
					ops = append(ops, and)
					mask, other = and.Result(), c.Args[2]
				} else {
					zero := tir.NewOp(tir.OpConst, nil, c.Result().Type)
					zero.Attrs = []tir.Attr{{Key: "value", Val: zeroOf(c.Result().Type)}}
					ops = append(ops, zero)
					other = zero.Result()
				}
				c.Args = []*tir.Value{c.Args[0], mask, other}
			}
			ops = append(ops, c)
		}
		vals := make([]*tir.Value, len(loads))
		for i, op := range loads {
			vals[i] = vm[op.Result()]
		}
		return ops, vals
	}

	// Before the loop: the first tile's header.
	initOps, inits := copyHeader(lo)
	at := 0
	for i, op := range f.Body.Ops {
		if op == loop {
			at = i
		}
	}
	f.Body.Ops = append(f.Body.Ops[:at], append(initOps, f.Body.Ops[at:]...)...)

	// In the body, after its last region: the next tile's.
	next := tir.NewOp(tir.OpAdd, []*tir.Value{iv, step}, tir.Scalar(tir.I32))
	nextOps, nexts := copyHeader(next.Result())
	nextOps = append([]*tir.Op{next}, nextOps...)
	after := 0
	for i, op := range body.Ops {
		if len(op.Regions) > 0 {
			after = i + 1
		}
	}
	// The carried values replace the loads, which go.
	sub := map[*tir.Value]*tir.Value{}
	for i, op := range loads {
		arg := &tir.Value{Type: op.Result().Type}
		body.Args = append(body.Args, arg)
		loop.Args = append(loop.Args, inits[i])
		loop.Results = append(loop.Results, &tir.Value{Type: op.Result().Type, Def: loop})
		sub[op.Result()] = arg
	}
	var ops []*tir.Op
	for i, op := range body.Ops {
		if i == after {
			ops = append(ops, nextOps...)
		}
		if slices.Contains(loads, op) {
			continue
		}
		if op.Kind == tir.OpYield {
			op.Args = append(op.Args, nexts...)
		}
		ops = append(ops, op)
	}
	body.Ops = ops
	body.ReplaceUses(sub)
	return true
}

// writtenRoots lists the pointer parameters that some store, atomic or
// last_arrival writes through; ok is false when a written pointer's parameter cannot be
// told (then any load may alias it).
func writtenRoots(f *tir.Func) (map[*tir.Value]bool, bool) {
	written := map[*tir.Value]bool{}
	ok := true
	f.Body.Walk(func(op *tir.Op) bool {
		if op.Kind.OrdersMemory() {
			if r := ptrRoot(op.Args[0]); r != nil {
				written[r] = true
			} else {
				ok = false
			}
		}
		return ok
	})
	return written, ok
}

// ptrRoot is the kernel parameter pointer v offsets, nil when v is not
// built from one by addptr and shape ops.
func ptrRoot(v *tir.Value) *tir.Value {
	for v != nil && v.Def != nil {
		switch v.Def.Kind {
		case tir.OpAddPtr, tir.OpSplat, tir.OpBroadcast, tir.OpReshape, tir.OpTrans:
			v = v.Def.Args[0]
		default:
			return nil
		}
	}
	if v == nil || !v.Type.Ptr {
		return nil
	}
	return v
}
