package passes

import (
	"fmt"
	"slices"

	"github.com/fac-compiler/fac/tir"
)

// overlapSoftmax rotates the accumulating dot of a loop into the next
// iteration in kernels whose compile-time argument overlap is true
// (FlashAttention-3's intra-warpgroup overlap). In attention, iteration j
// then issues S_j = Q·K_jᵀ and O += P_{j-1}·V_{j-1} together, and the
// softmax of S_j runs while the tensor cores compute P_{j-1}·V_{j-1}
// (codegen waits for a dot's result only where it is read, core.DeferWait).
//
//	for %iv = lo, hi, step carrying %acc, ... {
//	  ...; %c = f(%acc)                          // the rescale
//	  %d = dot %a, %b, %c                        // %b from %iv only
//	  yield %d, ...
//	}
//
// becomes
//
//	for %iv carrying %x = acc0, %ap = 0, ... {
//	  %b' = <%b's ops with %iv -> max(%iv - step, lo)>
//	  %d' = dot %ap, %b', %x                     // after the loop's first other dot
//	  ...; %c = f(%d')
//	  yield %c, %a, ...
//	}
//	%acc = if hi > lo { dot %ap_last, <%b at the last iv>, %x_last } else { %x_last }
//
// The first iteration's dot multiplies a zero %ap (a real iteration's %b,
// so every load stays in range); the one after the loop adds the last
// block. One dot per loop (a loop holding a rotated dot, one whose A is
// carried, is left alone). Conditions: the loop steps by a positive
// constant and stores nothing;
// %d feeds only the yield; the loop-carried %acc is read only on the way to
// %c; %b is computed in the body from the induction variable and values
// from outside the loop (pure ops and loads, no regions).
func overlapSoftmax(m *tir.Module) error {
	for _, f := range m.Funcs {
		if on, _ := f.Attr("overlap").(bool); on {
			overlapBlock(f.Body)
		}
	}
	return nil
}

func overlapBlock(b *tir.Block) {
	for i := 0; i < len(b.Ops); i++ {
		op := b.Ops[i]
		for _, r := range op.Regions {
			overlapBlock(r)
		}
		if op.Kind != tir.OpFor {
			continue
		}
		if e := rotateDot(op); e != nil {
			// The loop's result is read only after it (the epilogue is not
			// in b yet).
			b.ReplaceAllUses(op.Results[e.slot], e.op.Result())
			if z := sameConst(b.Ops[:i], e.before[0]); z != nil {
				// Reuse an equal constant (as cse would: the pipeline
				// stays a fixpoint).
				op.Args[len(op.Args)-1] = z
				e.before = nil
			}
			rest := b.Ops[i+1:]
			ops := append([]*tir.Op(nil), b.Ops[:i]...)
			ops = append(append(append(ops, e.before...), op), e.after...)
			b.Ops = append(ops, rest...)
			i += len(e.before) + len(e.after)
		}
	}
}

// epilogue is what surrounds a rotated loop: ops before it (the zero A of
// the first iteration) and after it, the last of which (op) gives the
// loop's result slot its final value.
type epilogue struct {
	before, after []*tir.Op
	op            *tir.Op
	slot          int
}

// rotateDot rotates one dot of loop (see overlapSoftmax) and returns the
// ops to put after it, or nil when no dot qualifies.
func rotateDot(loop *tir.Op) *epilogue {
	body := loop.Regions[0]
	n := len(body.Ops)
	if n == 0 || body.Ops[n-1].Kind != tir.OpYield || !positiveConst(loop.Args[2]) {
		return nil
	}
	yield := body.Ops[n-1]
	iv := body.Args[0]
	uses := map[*tir.Value]int{}
	stores := false
	body.Walk(func(o *tir.Op) bool {
		for _, a := range o.Args {
			uses[a]++
		}
		stores = stores || o.Kind.OrdersMemory()
		return true
	})
	if stores {
		return nil
	}
	index := map[*tir.Op]int{}
	for i, o := range body.Ops {
		index[o] = i
		if o.Kind == tir.OpDot && carriedArg(body, o.Args[0]) {
			return nil // rotated already: one dot per loop, so a second run finds none
		}
	}
	for slot := range yield.Args {
		d := yield.Args[slot].Def
		if d == nil || d.Kind != tir.OpDot || uses[d.Result()] != 1 {
			continue
		}
		if _, in := index[d]; !in {
			continue
		}
		acc := body.Args[1+slot]
		chain, ok := rescaleChain(body, acc, d)
		if !ok {
			continue
		}
		slice, ok := ivSlice(body, d.Args[1], iv)
		if !ok {
			continue
		}
		// The dot goes after the loop's first other dot (whose result can
		// then be waited for while this one runs) and before the rescale;
		// its B before that other dot, with the loop's other loads, so that
		// one wait covers them all.
		pos := n - 1
		if len(chain) > 0 {
			pos = index[chain[0]]
		}
		bPos := pos
		for i, o := range body.Ops[:pos] {
			if o.Kind == tir.OpDot && o != d {
				bPos, pos = i, i+1
				break
			}
		}
		return rotate(loop, slot, d, chain, slice, bPos, pos)
	}
	return nil
}

// carriedArg reports whether v is one of body's carried arguments.
func carriedArg(body *tir.Block, v *tir.Value) bool {
	for _, a := range body.Args[1:] {
		if a == v {
			return true
		}
	}
	return false
}

// rescaleChain lists, in body order, the ops that compute d's accumulator
// from the carried acc; false when acc or a chain result is read by
// anything else (or inside a region).
func rescaleChain(body *tir.Block, acc *tir.Value, d *tir.Op) ([]*tir.Op, bool) {
	in := map[*tir.Value]bool{acc: true}
	var chain []*tir.Op
	for _, o := range body.Ops {
		if o == d {
			continue
		}
		reads := false
		for _, a := range o.Args {
			reads = reads || in[a]
		}
		inRegion := false
		for _, r := range o.Regions {
			r.Walk(func(x *tir.Op) bool {
				for _, a := range x.Args {
					inRegion = inRegion || in[a]
				}
				return true
			})
		}
		if inRegion {
			return nil, false
		}
		if reads {
			if o.Kind == tir.OpYield || len(o.Regions) > 0 || len(o.Results) != 1 {
				return nil, false
			}
			chain = append(chain, o)
			in[o.Result()] = true
		}
	}
	// Every chain value must end in d's accumulator, and only there.
	if !in[d.Args[2]] || in[d.Args[0]] || in[d.Args[1]] {
		return nil, false
	}
	users := map[*tir.Value]int{}
	for _, o := range body.Ops {
		for _, a := range o.Args {
			if in[a] {
				users[a]++
			}
		}
	}
	for v := range in {
		if v != d.Args[2] && users[v] == 0 {
			return nil, false // a dead branch of the chain: keep it simple
		}
	}
	if users[d.Args[2]] != 1 {
		return nil, false
	}
	return chain, true
}

// ivSlice lists, in body order, the ops computing v from the induction
// variable and values defined outside the body; false when v depends on
// anything else (a carried value, a region, a side effect other than a
// load).
func ivSlice(body *tir.Block, v, iv *tir.Value) ([]*tir.Op, bool) {
	defs := map[*tir.Value]*tir.Op{}
	for _, o := range body.Ops {
		for _, r := range o.Results {
			defs[r] = o
		}
	}
	args := map[*tir.Value]bool{}
	for _, a := range body.Args[1:] {
		args[a] = true
	}
	need := map[*tir.Op]bool{}
	ok := true
	var visit func(x *tir.Value)
	visit = func(x *tir.Value) {
		if args[x] {
			ok = false
			return
		}
		o := defs[x]
		if o == nil || need[o] {
			return
		}
		if len(o.Regions) > 0 || (o.Kind.HasSideEffects() && o.Kind != tir.OpLoad) {
			ok = false
			return
		}
		need[o] = true
		for _, a := range o.Args {
			visit(a)
		}
	}
	visit(v)
	if !ok {
		return nil, false
	}
	var slice []*tir.Op
	for _, o := range body.Ops {
		if need[o] {
			slice = append(slice, o)
		}
	}
	return slice, true
}

// rotate rewrites loop (see overlapSoftmax): d leaves the body, its copy
// reading the previous iteration's operands goes in at body index pos, the
// copy of B's ops at bPos (≤ pos).
func rotate(loop *tir.Op, slot int, d *tir.Op, chain, slice []*tir.Op, bPos, pos int) *epilogue {
	body := loop.Regions[0]
	iv, acc := body.Args[0], body.Args[1+slot]
	lo, hi := loop.Args[0], loop.Args[1]
	a := d.Args[0]
	at := d.Pos

	// The previous iteration's A is carried, zero on entry.
	zero := tir.NewOp(tir.OpConst, nil, a.Type)
	zero.Pos = at
	zero.SetAttr("value", zeroOf(a.Type))
	loop.Args = append(loop.Args, zero.Result())
	aPrev := &tir.Value{Type: a.Type}
	body.Args = append(body.Args, aPrev)
	aLast := &tir.Value{Type: a.Type, Def: loop}
	loop.Results = append(loop.Results, aLast)
	yield := body.Ops[len(body.Ops)-1]
	yield.Args = append(yield.Args, a)

	// In the body: B of iteration max(iv - 1, lo), then the dot onto acc.
	var ins []*tir.Op
	emit := func(k tir.Kind, t tir.Type, args ...*tir.Value) *tir.Op {
		o := tir.NewOp(k, args, t)
		o.Pos = at
		ins = append(ins, o)
		return o
	}
	step := loop.Args[2]
	prev := emit(tir.OpMax, iv.Type, emit(tir.OpSub, iv.Type, iv, step).Result(), lo).Result()
	vm := map[*tir.Value]*tir.Value{iv: prev}
	for _, o := range slice {
		ins = append(ins, cloneOp(o, vm))
	}
	bIns := ins
	ins = nil
	nd := emit(tir.OpDot, d.Result().Type, aPrev, mapValue(d.Args[1], vm), acc)
	nd.Attrs = slices.Clone(d.Attrs) // k_extent, n_extent
	for _, o := range chain {
		for i, x := range o.Args {
			if x == acc {
				o.Args[i] = nd.Result()
			}
		}
	}
	if len(chain) == 0 {
		yield.Args[slot] = nd.Result()
	} else {
		yield.Args[slot] = d.Args[2]
	}
	var ops []*tir.Op
	for i, o := range body.Ops {
		if i == bPos {
			ops = append(ops, bIns...)
		}
		if i == pos {
			ops = append(ops, ins...)
		}
		if o != d {
			ops = append(ops, o)
		}
	}
	body.Ops = ops

	// After the loop: the last iteration's dot, when there was one.
	x := loop.Results[slot]
	var after []*tir.Op
	cond := tir.NewOp(tir.OpCmp, []*tir.Value{hi, lo}, tir.Scalar(tir.I1))
	cond.SetAttr("pred", tir.Ident("gt"))
	cond.Pos = at
	after = append(after, cond)
	then := &tir.Block{}
	ins = nil
	// The last iteration: hi - 1 - (hi - 1 - lo) % step.
	one := step
	if !isConst(step, 1, false) {
		o := emit(tir.OpConst, iv.Type)
		o.SetAttr("value", int64(1))
		one = o.Result()
	}
	end := emit(tir.OpSub, iv.Type, hi, one).Result()
	if one != step {
		span := end // hi - 1 - lo, written as canonicalize would leave it
		if !isConst(lo, 0, false) {
			span = emit(tir.OpSub, iv.Type, end, lo).Result()
		}
		off := emit(tir.OpRem, iv.Type, span, step).Result()
		end = emit(tir.OpSub, iv.Type, end, off).Result()
	}
	vm = map[*tir.Value]*tir.Value{iv: end}
	for _, o := range slice {
		ins = append(ins, cloneOp(o, vm))
	}
	last := emit(tir.OpDot, d.Result().Type, aLast, mapValue(d.Args[1], vm), x)
	last.Attrs = slices.Clone(d.Attrs)
	ins = append(ins, tir.NewOp(tir.OpYield, []*tir.Value{last.Result()}))
	then.Ops = ins
	els := &tir.Block{Ops: []*tir.Op{tir.NewOp(tir.OpYield, []*tir.Value{x})}}
	fin := tir.NewOp(tir.OpIf, []*tir.Value{cond.Result()}, x.Type)
	fin.Regions = []*tir.Block{then, els}
	fin.Pos = at
	after = append(after, fin)
	return &epilogue{before: []*tir.Op{zero}, after: after, op: fin, slot: slot}
}

// sameConst is an op of ops giving the same constant as c, or nil.
func sameConst(ops []*tir.Op, c *tir.Op) *tir.Value {
	for _, o := range ops {
		if o.Kind == tir.OpConst && o.Result().Type.String() == c.Result().Type.String() &&
			fmt.Sprint(o.Attr("value")) == fmt.Sprint(c.Attr("value")) {
			return o.Result()
		}
	}
	return nil
}

// positiveConst reports whether v is an integer constant > 0.
func positiveConst(v *tir.Value) bool {
	c, ok := constOf(v)
	n, isInt := c.(int64)
	return ok && isInt && n > 0
}

// zeroOf is the constant zero of t's element type.
func zeroOf(t tir.Type) any {
	if t.Elem.IsFloat() {
		return 0.0
	}
	if t.Elem == tir.I1 {
		return false
	}
	return int64(0)
}
