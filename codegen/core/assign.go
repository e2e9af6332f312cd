package core

import (
	"fmt"

	"github.com/fac-compiler/fac/tir"
)

// Layout assignment.
//
// Every tensor value is either
//   - flexible: a cheap value (const, arange, splat and anything computed
//     from flexible values by elementwise ops, broadcast, reshape, trans)
//     that is rematerialized directly in each layout a consumer wants,
//     never converted; or
//   - anchored: it has one primary layout, in which its defining op
//     produces it; consumers wanting another layout get a conversion
//     emitted once, right after the definition.
//
// The forward pass (fwd*) picks primary layouts: loads get a blocked
// layout (staged loads the target's copy layout), dots the target's
// accumulator layout (Target.DotLayout) or a blocked one, reductions a
// Slice of their operand's layout, and elementwise ops the
// highest-priority layout among their anchored operands (mma-derived
// beats blocked), so that the attention kernel's softmax stays in the
// accumulator layout. Loop-carried values start from their initial
// value's layout and are raised to the yielded value's layout until a
// fixpoint.
//
// The backward pass (bwd*) records which layout each op wants each operand
// in (operandWants) and collects the set of layouts every value is
// demanded in: flexible values are lowered once per demanded layout,
// anchored values converted once per extra demanded layout.
//
// The Assignment is assign-layouts' part of the lowering (Lowerer.Layouts):
// plan-async, the target's planning phases and lower-llvm read it.
type Assignment struct {
	*kernel
	l    *Lowerer // for the target's hooks
	info map[*tir.Value]*vinfo
	// forLays holds the carried layouts of each for loop and the result
	// layouts of each if.
	forLays map[*tir.Op][]Layout
	// opWants records, per op and result layout, the operand layouts the
	// backward pass decided (the lowering must use the same ones).
	opWants map[*tir.Op]map[string][]Layout
	// storeLays records the layout each store writes from.
	storeLays map[*tir.Op]Layout
	// loopOps are the ops inside for loops (inLoop).
	loopOps map[*tir.Op]bool
	// blockOf is the block defining each value (op results, region args).
	blockOf map[*tir.Value]*tir.Block
}

type vinfo struct {
	flex bool
	lay  Layout // primary layout (nil when flex)
	// weak marks anchored values that may be produced in any layout at no
	// extra cost: loads, and elementwise/shape ops whose anchored operands
	// are all weak. The backward pass moves a weak value to the layout its
	// consumers want when they all want the same mma-derived one (e.g. a
	// gathered document id vector feeding the score mask), instead of
	// converting it.
	weak  bool
	wants []Layout // every layout consumers want, in first-want order
}

// demands are the layouts v must be materialized in besides its primary.
func (in *vinfo) demands() []Layout {
	if in.flex {
		return in.wants
	}
	var out []Layout
	for _, l := range in.wants {
		if l.String() != in.lay.String() {
			out = append(out, l)
		}
	}
	return out
}

var scalarL Layout = scalarLayout{}

// assignLayouts is the assign-layouts phase: l's kernel's values get their
// layouts. The target's hooks that it asks (Target.DotLayout, ...) find
// the assignment so far as l.Layouts().
func assignLayouts(l *Lowerer) *Assignment {
	a := &Assignment{kernel: l.kernel, l: l, info: map[*tir.Value]*vinfo{}, forLays: map[*tir.Op][]Layout{},
		opWants: map[*tir.Op]map[string][]Layout{}, storeLays: map[*tir.Op]Layout{}, blockOf: map[*tir.Value]*tir.Block{}}
	l.layouts = a
	a.assign(l.f)
	return a
}

// LayoutOf is v's primary layout, or flex = true for a flexible value
// (rematerialized in every layout a consumer wants; lay is then nil).
func (a *Assignment) LayoutOf(v *tir.Value) (lay Layout, flex bool) {
	in := a.get(v)
	return in.lay, in.flex
}

// DefiningBlock is the block defining v (an op result or region argument).
func (a *Assignment) DefiningBlock(v *tir.Value) *tir.Block { return a.blockOf[v] }

// OperandWants is the layout op wants each operand in when its result is
// produced in lay (the answers the assignment recorded).
func (a *Assignment) OperandWants(op *tir.Op, lay Layout) []Layout { return a.operandWants(op, lay) }

func (a *Assignment) get(v *tir.Value) *vinfo {
	in := a.info[v]
	if in == nil {
		panic(lowerError{fmt.Sprintf("value %s used before it is defined (not verified?)", v.Type)})
	}
	return in
}

func (a *Assignment) set(v *tir.Value, flex bool, l Layout) {
	if v.Type.IsScalar() {
		flex, l = false, scalarL
	}
	a.info[v] = &vinfo{flex: flex, lay: l}
}

func (a *Assignment) defaultFor(t tir.Type) Layout {
	if t.IsScalar() {
		return scalarL
	}
	return DefaultBlocked(t.Shape, a.nw)
}

// layoutOrDefault is v's primary layout, or the default one for a flexible
// value that an anchored consumer needs materialized in some layout.
func (a *Assignment) layoutOrDefault(v *tir.Value) Layout {
	in := a.get(v)
	if in.flex {
		return a.defaultFor(v.Type)
	}
	return in.lay
}

// dotLayout is the target's accumulator layout for a tensor-core dot.
func (a *Assignment) dotLayout(op *tir.Op) (Layout, bool) {
	return a.target.DotLayout(a.l, op)
}

// expandDim reports whether out is in with one unit dim inserted, and where.
func expandDim(in, out []int) (int, bool) {
	if len(out) != len(in)+1 {
		return 0, false
	}
	for d := range out {
		if out[d] == 1 && EqualVec(removeDim(out, d), in) {
			return d, true
		}
	}
	return 0, false
}

// reshapeLayout is the free layout of a reshape's result when the operand is
// in lay: adding a unit dim d to Slice(d, P) gives P, removing unit dim d
// gives Slice(d, lay).
func (a *Assignment) reshapeLayout(lay Layout, in, out []int) (Layout, bool) {
	if d, ok := expandDim(in, out); ok {
		if s, ok := lay.(Slice); ok && s.Dim == d {
			return s.Parent, true
		}
		return nil, false
	}
	if d, ok := expandDim(out, in); ok {
		return Slice{Dim: d, Parent: lay}, true
	}
	return nil, false
}

func transPerm(rank int) []int {
	if rank != 2 {
		return nil
	}
	return []int{1, 0}
}

// ---- forward ----

func (a *Assignment) fwdBlock(b *tir.Block) {
	for _, v := range b.Args {
		a.blockOf[v] = b
	}
	for _, op := range b.Ops {
		for _, r := range op.Results {
			a.blockOf[r] = b
		}
		a.fwdOp(op)
	}
}

func (a *Assignment) fwdOp(op *tir.Op) {
	k := op.Kind
	switch {
	case k == tir.OpCall:
		panic(lowerError{fmt.Sprintf("%s: call to %s not inlined (run the inline pass before codegen)", op.Pos, op.IdentAttr("callee"))})
	case k == tir.OpConst || k == tir.OpArange || k == tir.OpSplat:
		a.set(op.Result(), true, nil)
	case k == tir.OpProgramID || k == tir.OpNumPrograms || k == tir.OpNumSMs || k == tir.OpGroupID || k == tir.OpLastArrival:
		a.set(op.Result(), false, scalarL)
	case k.IsElementwise():
		var best Layout
		weak := true
		for _, x := range op.Args {
			in := a.get(x)
			if in.flex || x.Type.IsScalar() {
				continue
			}
			weak = weak && in.weak
			if best == nil || priority(in.lay) > priority(best) ||
				priority(in.lay) == priority(best) && a.regsPerThread(in.lay, op.Result()) < a.regsPerThread(best, op.Result()) {
				best = in.lay
			}
		}
		a.set(op.Result(), best == nil, best)
		a.info[op.Result()].weak = best != nil && weak
	case k == tir.OpBroadcast:
		in := a.get(op.Args[0])
		a.set(op.Result(), in.flex, in.lay)
		a.info[op.Result()].weak = in.weak
	case k == tir.OpReshape:
		in := a.get(op.Args[0])
		if in.flex {
			a.set(op.Result(), true, nil)
			break
		}
		l, ok := a.reshapeLayout(in.lay, op.Args[0].Type.Shape, op.Result().Type.Shape)
		if !ok {
			l = a.defaultFor(op.Result().Type)
		}
		a.set(op.Result(), false, l)
		a.info[op.Result()].weak = in.weak
	case k == tir.OpTrans:
		in := a.get(op.Args[0])
		if in.flex {
			a.set(op.Result(), true, nil)
			break
		}
		if b, ok := in.lay.(Blocked); ok && b.Rank() == 2 {
			a.set(op.Result(), false, b.permute(transPerm(2)))
		} else {
			a.set(op.Result(), false, a.defaultFor(op.Result().Type))
		}
		a.info[op.Result()].weak = in.weak
	case k == tir.OpLoad && a.l.plan.StagedLoad(op) != nil:
		lay := a.l.plan.StagedLoad(op).Layout
		if lay == nil {
			lay = a.defaultFor(op.Result().Type)
		}
		a.set(op.Result(), false, lay)
	case k == tir.OpLoad:
		p := a.get(op.Args[0])
		if !p.flex && !op.Args[0].Type.IsScalar() {
			a.set(op.Result(), false, p.lay)
		} else {
			a.set(op.Result(), false, a.defaultFor(op.Result().Type))
		}
		a.info[op.Result()].weak = !op.Result().Type.IsScalar() && (p.flex || p.weak)
	case k == tir.OpDot:
		if m, ok := a.dotLayout(op); ok {
			a.set(op.Result(), false, m)
		} else {
			a.set(op.Result(), false, a.defaultFor(op.Result().Type))
		}
	case k == tir.OpReduce:
		r := op.Result()
		if r.Type.IsScalar() {
			a.set(r, false, scalarL)
		} else {
			a.set(r, false, Slice{Dim: int(op.IntAttr("axis")), Parent: a.layoutOrDefault(op.Args[0])})
		}
	case k == tir.OpFor:
		a.fwdFor(op)
	case k == tir.OpIf:
		a.fwdIf(op)
	case k.IsMemWrite() || k == tir.OpPrefetch || k == tir.OpYield || k == tir.OpReturn:
	default:
		panic(lowerError{fmt.Sprintf("%s: codegen does not support op %s", op.Pos, k)})
	}
}

// regsPerThread is how many registers a thread holds for v in layout l.
// Between operand layouts of equal priority an elementwise op takes the
// one that spreads its result over the most threads: the layout a
// broadcast carries over from a small operand (w[:, None] of a [4] vector
// against a loaded [4, 128] tile) can put a whole dimension in every
// thread, and everything after it, down to the stores, would follow.
func (a *Assignment) regsPerThread(l Layout, v *tir.Value) int {
	return 1 << len(a.Lin(l, v.Type.Shape).RegBases())
}

// raise returns the layout a carried value should take when its current
// layout cur meets a yielded value y.
func (a *Assignment) raise(cur Layout, y *tir.Value) Layout {
	in := a.get(y)
	if in.flex || y.Type.IsScalar() {
		return cur
	}
	if priority(in.lay) > priority(cur) {
		return in.lay
	}
	return cur
}

func (a *Assignment) fwdFor(op *tir.Op) {
	body := op.Regions[0]
	inits := op.Args[3:]
	lays := make([]Layout, len(inits))
	for i, x := range inits {
		lays[i] = a.layoutOrDefault(x)
	}
	a.set(body.Args[0], false, scalarL)
	for iter := 0; ; iter++ {
		for i, v := range body.Args[1:] {
			a.set(v, false, lays[i])
		}
		a.fwdBlock(body)
		y := terminator(body)
		changed := false
		for i := range lays {
			if i >= len(y.Args) {
				break
			}
			if n := a.raise(lays[i], y.Args[i]); n.String() != lays[i].String() {
				lays[i], changed = n, true
			}
		}
		if !changed || iter > 8 {
			break
		}
	}
	a.forLays[op] = lays
	for i, r := range op.Results {
		a.set(r, false, lays[i])
	}
}

func (a *Assignment) fwdIf(op *tir.Op) {
	lays := make([]Layout, len(op.Results))
	for _, r := range op.Regions {
		a.fwdBlock(r)
	}
	for i, res := range op.Results {
		var l Layout
		weak := true
		for _, r := range op.Regions {
			y := terminator(r)
			if y == nil || i >= len(y.Args) {
				continue
			}
			in := a.get(y.Args[i])
			if in.flex || res.Type.IsScalar() {
				continue
			}
			weak = weak && in.weak
			if l == nil || priority(in.lay) > priority(l) {
				l = in.lay
			}
		}
		if l == nil {
			l = a.defaultFor(res.Type)
		}
		lays[i] = l
		a.set(res, false, l)
		// Yields that are flexible or weak can be produced in any layout:
		// the result may move to its consumers' layout (e.g. a mask built
		// under `if is_partial`, consumed in the accumulator layout).
		a.info[res].weak = weak && !res.Type.IsScalar()
	}
	a.forLays[op] = lays
}

func terminator(b *tir.Block) *tir.Op {
	if len(b.Ops) == 0 {
		return nil
	}
	t := b.Ops[len(b.Ops)-1]
	if !t.Kind.IsTerminator() {
		return nil
	}
	return t
}

// ---- backward ----

// storeLayout is the layout a store writes from: the value's own layout
// when it has one (no conversion before the store), else the pointers'
// (a prefetch's: the pointers').
func (a *Assignment) storeLayout(op *tir.Op) Layout {
	if l, ok := a.storeLays[op]; ok {
		return l
	}
	p := op.Args[0]
	if p.Type.IsScalar() {
		return scalarL
	}
	if op.Kind == tir.OpPrefetch {
		// No value: the pointers' layout, or the default, whose vectors
		// along the contiguous dim a warp's prefetch coalesces into lines.
		if in := a.get(p); !in.flex {
			return in.lay
		}
		return a.defaultFor(p.Type)
	}
	if in := a.get(op.Args[1]); !in.flex {
		if c, ok := a.coalesceStore(op, in.lay); ok {
			return c
		}
		return in.lay
	}
	if in := a.get(p); !in.flex {
		return in.lay
	}
	return a.defaultFor(p.Type)
}

// resultLayout is the layout an op's (first) result is produced in, for
// anchored ops; for stores, the layout it stores from.
func (a *Assignment) resultLayout(op *tir.Op) Layout {
	if op.Kind.IsMemWrite() || op.Kind == tir.OpPrefetch {
		return a.storeLayout(op)
	}
	return a.get(op.Result()).lay
}

// operandWants gives the layout op wants each operand in when its result
// is produced in l (scalar operands: the scalar layout). The backward pass
// records its answers and the lowering reuses them, so both agree even
// though later decisions change primary layouts the rules look at.
func (a *Assignment) operandWants(op *tir.Op, l Layout) []Layout {
	key := "<none>"
	if l != nil {
		key = l.String()
	}
	if m, ok := a.opWants[op]; ok {
		if w, ok := m[key]; ok {
			return w
		}
	}
	w := a.computeWants(op, l)
	if a.opWants[op] == nil {
		a.opWants[op] = map[string][]Layout{}
	}
	a.opWants[op][key] = w
	return w
}

func (a *Assignment) computeWants(op *tir.Op, l Layout) []Layout {
	w := make([]Layout, len(op.Args))
	for i, x := range op.Args {
		if x.Type.IsScalar() {
			w[i] = scalarL
		}
	}
	fill := func(l Layout) {
		for i := range w {
			if w[i] == nil {
				w[i] = l
			}
		}
	}
	switch k := op.Kind; {
	case k.IsElementwise(), k == tir.OpBroadcast, k == tir.OpLoad, k.IsMemWrite(), k == tir.OpPrefetch:
		fill(l)
	case k == tir.OpReshape:
		in, out := op.Args[0].Type.Shape, op.Result().Type.Shape
		if d, ok := expandDim(in, out); ok {
			w[0] = Slice{Dim: d, Parent: l}
		} else if s, ok := l.(Slice); ok && len(out)+1 == len(in) && in[s.Dim] == 1 && EqualVec(removeDim(in, s.Dim), out) {
			w[0] = s.Parent
		} else {
			w[0] = a.layoutOrDefault(op.Args[0])
		}
	case k == tir.OpTrans:
		if b, ok := l.(Blocked); ok && b.Rank() == 2 {
			w[0] = b.permute(transPerm(2))
		} else {
			w[0] = a.layoutOrDefault(op.Args[0])
		}
	case k == tir.OpDot:
		if _, ok := a.dotLayout(op); ok {
			for i := 0; i < 2; i++ {
				w[i] = a.target.DotOperandLayout(a.l, op, i)
			}
			w[2] = l
		} else {
			w[0] = a.layoutOrDefault(op.Args[0])
			w[1] = a.layoutOrDefault(op.Args[1])
			w[2] = l
		}
	case k == tir.OpReduce:
		w[0] = a.layoutOrDefault(op.Args[0])
	case k == tir.OpFor:
		for i, lay := range a.forLays[op] {
			w[3+i] = lay
		}
	}
	return w
}

// demand records that v is wanted in layout l.
func (a *Assignment) demand(v *tir.Value, l Layout) {
	if l == nil || v.Type.IsScalar() {
		return
	}
	in := a.get(v)
	for _, d := range in.wants {
		if d.String() == l.String() {
			return
		}
	}
	in.wants = append(in.wants, l)
}

func (a *Assignment) bwdBlock(b *tir.Block, yieldLays []Layout) {
	for i := len(b.Ops) - 1; i >= 0; i-- {
		op := b.Ops[i]
		if op.Kind == tir.OpYield {
			for j, x := range op.Args {
				if j < len(yieldLays) {
					a.demand(x, yieldLays[j])
				}
			}
			continue
		}
		a.bwdOp(op)
	}
}

func (a *Assignment) bwdOp(op *tir.Op) {
	switch op.Kind {
	case tir.OpFor:
		a.bwdBlock(op.Regions[0], a.forLays[op])
	case tir.OpIf:
		lays := a.forLays[op]
		for i, res := range op.Results {
			if in := a.get(res); in.weak && len(in.wants) == 1 && priority(in.wants[0]) == 3 {
				in.lay, lays[i] = in.wants[0], in.wants[0]
			}
		}
		for _, r := range op.Regions {
			a.bwdBlock(r, lays)
		}
	}
	var lays []Layout
	if len(op.Results) == 1 && a.get(op.Result()).flex {
		lays = a.get(op.Result()).wants
	} else if op.Kind.IsMemWrite() || op.Kind == tir.OpPrefetch {
		l := a.storeLayout(op)
		a.storeLays[op] = l
		lays = []Layout{l}
	} else if len(op.Results) == 1 {
		in := a.get(op.Result())
		if in.weak && len(in.wants) == 1 && priority(in.wants[0]) == 3 {
			in.lay = in.wants[0]
		}
		lays = []Layout{in.lay}
	} else {
		lays = []Layout{nil} // for, if, return: operand wants don't depend on a result layout
	}
	for _, l := range lays {
		for i, w := range a.operandWants(op, l) {
			a.demand(op.Args[i], w)
		}
	}
}

// assign runs both passes over a kernel body.
func (a *Assignment) assign(f *tir.Func) {
	for _, p := range f.Params {
		a.set(p, false, scalarL)
	}
	a.fwdBlock(f.Body)
	a.bwdBlock(f.Body, nil)
}
