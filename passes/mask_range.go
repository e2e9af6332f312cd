package passes

import (
	"slices"
	"strings"

	"github.com/fac-compiler/fac/tir"
)

// maskRange rewrites the condition of a select of a constant on a 2-D tile
// (a masked block: scores selected with -inf, the backward's probabilities
// with 0) so that its conjuncts bounding the column position by row values
// become one per-row range [lo, hi) on the column index j of the tile:
//
//	%c = and %in_seq, %window     (kv < seqlen_k && q - 1024 <= kv && kv <= q)
//	%s = select %c, %x, %ninf : tensor<128x128xf32>
//
// becomes
//
//	%lo = min(max(q - 1024 - start, 0), 128)        : tensor<128x1xi32>
//	%hi = min(max(min(seqlen_k, q + 1) - start, 0), 128)
//	%c2 = and (cmp %lo_b, %j {pred = le}), (cmp %j, %hi_b {pred = lt})
//	%s  = select %c2, %x, %ninf
//
// where %j is the column index (arange(0, N), broadcast) and start the
// tile's first column. A conjunct qualifies when it is a comparison of two
// linear forms ±column + row value (the column value being a scalar plus
// arange, as attention's cols = start + arange(0, BLOCK_N)), or an and, or,
// or not of such conjuncts whose result is still one interval (FlexAttention's
// causal, sliding-window, prefix-LM and bottom-right causal masks, and the
// sequence-end test). Other conjuncts (document's doc[q] == doc[kv]) stay.
//
// Why: per element, the mask then costs two compares against immediates
// (the column offsets a thread holds are compile-time constants, which
// codegen compares lo - base and hi - base with) instead of one compare
// per conjunct, an and per conjunction and a predicate live per column.
// The per-row work is a few ops on [M, 1].
//
// Bounds are clamped to [0, N], which keeps the comparisons exact and
// lets codegen subtract the thread's column base without overflow.
//
// The rewrite never changes a result, i32 arithmetic wrapping included
// (issue 46 item 4: `kv_idx <= q_idx + offset` with offset = 2^31 - 1
// kept nothing). It takes, as attention's index arithmetic does
// everywhere, that the kernel's own positions and offsets do not overflow
// i32 (launch.Shape.Validate bounds them); a mod's values are arbitrary:
// its run-time parameters and aux tensors (parameters named mod.NAME),
// and constants beyond ±2^16 (sliding_window(0, 2147483647)). A
// comparison whose side without the column index reads such values
// computes its bound exactly: both sides are evaluated as the original
// does (wrapping i32 sums agree in any order), and their difference is
// saturated before the clamp (exactBound). A comparison whose column side
// reads them, where the column value itself could wrap within the tile,
// is left as it is.
//
// A range that no row value bounds (only the sequence end) is left as the
// per-column compare it is.
//
// It runs after canonicalize and cse (it needs the select sunk into its
// branch), so it folds and shares what it wrote by running them again when
// it changed anything: the pipeline stays a fixpoint.
func maskRange(m *tir.Module) error {
	changed := false
	for _, f := range m.Funcs {
		changed = rewriteMaskRanges(f.Body) || changed
	}
	if !changed {
		return nil
	}
	if err := canonicalize(m); err != nil {
		return err
	}
	return cse(m)
}

func rewriteMaskRanges(b *tir.Block) (changed bool) {
	for i := 0; i < len(b.Ops); i++ {
		op := b.Ops[i]
		for _, r := range op.Regions {
			changed = rewriteMaskRanges(r) || changed
		}
		if _, ok := op.SelectsConst(); !ok || op.Result().Type.Rank() != 2 {
			continue
		}
		nb := &tir.Builder{Block: &tir.Block{}, Pos: op.Pos}
		c, ok := rangeCond(nb, op.Args[0], op.Result().Type.Shape)
		if !ok {
			continue
		}
		op.Args[0] = c
		b.Ops = slices.Insert(b.Ops, i, nb.Block.Ops...)
		i += len(nb.Block.Ops)
		changed = true
	}
	return changed
}

// rangeCond builds the rewritten condition with nb, or reports that there
// is nothing to rewrite.
func rangeCond(nb *tir.Builder, c *tir.Value, shape []int) (*tir.Value, bool) {
	M, N := shape[0], shape[1]
	var keep []*tir.Value
	var lo, hi *rexpr
	done := true // every range conjunct is already lo <= j or j < hi
	nLo, nHi := 0, 0
	for _, x := range conjuncts(c) {
		r, ok := boundOf(x, false, M, N)
		if !ok {
			if x.Type.Shape[0] != M || x.Type.Shape[1] != N {
				x = nb.Broadcast(x, []int{M, N})
			}
			keep = append(keep, x)
			continue
		}
		if r.lo != nil {
			lo, nLo = maxR(lo, r.lo), nLo+1
		}
		if r.hi != nil {
			hi, nHi = minR(hi, r.hi), nHi+1
		}
		done = done && isFinalRange(x)
	}
	// A range no row value bounds (the sequence end) stays a [1, N]
	// compare, done once per column for all of a thread's rows: rewritten,
	// it cost the backward 5% on none and the ALiBi forwards 44 bytes of
	// spills. Beside a per-element conjunct (document's
	// doc[q] == doc[kv]) the rewrite measured +1.5% on the forward, within
	// what two builds differ by, and was not kept.
	if lo == nil && hi == nil || done && nLo <= 1 && nHi <= 1 || !lo.byRow(M) && !hi.byRow(M) {
		return nil, false
	}
	jt := nb.Reshape(nb.Arange(0, N), []int{1, N})
	j := nb.Broadcast(jt, []int{M, N})
	clamp := func(e *rexpr) *tir.Value {
		v := e.build(nb, M, N)
		v = nb.Binary(tir.OpMax, v, nb.Const(tir.Tensor(tir.I32, M, 1), int64(0)))
		v = nb.Binary(tir.OpMin, v, nb.Const(tir.Tensor(tir.I32, M, 1), int64(N)))
		return nb.Broadcast(v, []int{M, N})
	}
	conds := keep
	if lo != nil {
		conds = append(conds, nb.Cmp("le", clamp(lo), j))
	}
	if hi != nil {
		conds = append(conds, nb.Cmp("lt", j, clamp(hi)))
	}
	out := conds[0]
	for _, x := range conds[1:] {
		out = nb.Binary(tir.OpAnd, out, x)
	}
	return out, true
}

// conjuncts flattens an and tree (through broadcasts).
func conjuncts(c *tir.Value) []*tir.Value {
	d := c.Def
	if d != nil && d.Kind == tir.OpAnd {
		return append(conjuncts(d.Args[0]), conjuncts(d.Args[1])...)
	}
	if d != nil && d.Kind == tir.OpBroadcast && d.Args[0].Def != nil && d.Args[0].Def.Kind == tir.OpAnd {
		return conjuncts(d.Args[0])
	}
	return []*tir.Value{c}
}

// isFinalRange: x compares the bare column index with one other value, the
// form this pass writes (so a second run leaves it alone).
func isFinalRange(x *tir.Value) bool {
	d := x.Def
	if d == nil || d.Kind != tir.OpCmp {
		return false
	}
	for i := range 2 {
		if isColumnIndex(d.Args[i]) {
			return true
		}
	}
	return false
}

// isColumnIndex: v is arange(0, N) along the columns (reshaped to [1, N],
// perhaps broadcast).
func isColumnIndex(v *tir.Value) bool {
	if v.Def != nil && v.Def.Kind == tir.OpBroadcast {
		v = v.Def.Args[0]
	}
	if v.Def == nil || v.Def.Kind != tir.OpReshape || v.Type.Rank() != 2 || v.Type.Shape[0] != 1 {
		return false
	}
	a := v.Def.Args[0].Def
	return a != nil && a.Kind == tir.OpArange && a.IntAttr("start") == 0
}

// ---- linear forms ----

// lin is sigma·j + Σ ±parts + c, where j is the column index and the
// parts are row values (tensor<Mx1xi32>, tensor<1x1xi32>) or scalars.
type lin struct {
	sigma int
	parts []part
	c     int64
}

type part struct {
	v   *tir.Value
	neg bool
}

func (a lin) plus(b lin, sign int) lin {
	out := lin{sigma: a.sigma + sign*b.sigma, parts: slices.Clone(a.parts), c: a.c + int64(sign)*b.c}
	for _, p := range b.parts {
		out.parts = append(out.parts, part{p.v, p.neg != (sign < 0)})
	}
	return out
}

func (a lin) neg() lin { return lin{}.plus(a, -1) }

// linOf gives v's linear form over an [M, N] tile, if it has one.
func linOf(v *tir.Value, M, N int) (lin, bool) {
	t := v.Type
	if t.Elem != tir.I32 || t.Ptr {
		return lin{}, false
	}
	d := v.Def
	if d != nil && d.Kind == tir.OpConst {
		c, ok := d.Attr("value").(int64)
		return lin{c: c}, ok
	}
	switch {
	case t.IsScalar(), t.Rank() == 2 && t.Shape[1] == 1 && (t.Shape[0] == M || t.Shape[0] == 1):
		return lin{parts: []part{{v: v}}}, true // a row value
	case d == nil:
		return lin{}, false
	}
	// Only a value along the columns can hold j.
	if !(t.Rank() == 1 && t.Shape[0] == N || t.Rank() == 2 && t.Shape[1] == N) {
		return lin{}, false
	}
	switch d.Kind {
	case tir.OpBroadcast, tir.OpSplat:
		return linOf(d.Args[0], M, N)
	case tir.OpReshape:
		if t.Rank() == 2 && t.Shape[0] == 1 && d.Args[0].Type.Rank() == 1 {
			return linOf(d.Args[0], M, N)
		}
	case tir.OpArange:
		if t.Rank() == 1 {
			return lin{sigma: 1, c: d.IntAttr("start")}, true
		}
	case tir.OpAdd, tir.OpSub:
		a, ok1 := linOf(d.Args[0], M, N)
		b, ok2 := linOf(d.Args[1], M, N)
		sign := 1
		if d.Kind == tir.OpSub {
			sign = -1
		}
		r := a.plus(b, sign)
		return r, ok1 && ok2 && r.sigma >= -1 && r.sigma <= 1
	}
	return lin{}, false
}

// ---- bounds ----

// rexpr is a row expression: a linear form without j, an exact bound
// (ex), or the max or min of two.
type rexpr struct {
	k    tir.Kind // 0 for a leaf, else OpMax or OpMin
	l    lin
	ex   *exactBound // when set, the leaf is this instead of l
	a, b *rexpr
}

// exactBound is the leaf clamp(p - q + add, 0, N), computed without
// overflow: p and q are evaluated with i32's wrapping sums, as the
// original evaluates the two sides of its comparison, and their
// difference, which may not fit in i32, is saturated before it is
// clamped (build).
type exactBound struct {
	p, q lin
	add  int64 // 0 or 1
}

func maxR(a, b *rexpr) *rexpr { return combine(tir.OpMax, a, b) }
func minR(a, b *rexpr) *rexpr { return combine(tir.OpMin, a, b) }

func combine(k tir.Kind, a, b *rexpr) *rexpr {
	if a == nil {
		return b
	}
	if b == nil {
		return a
	}
	return &rexpr{k: k, a: a, b: b}
}

// byRow reports whether e depends on a row value (not only on scalars).
func (e *rexpr) byRow(M int) bool {
	if e == nil {
		return false
	}
	if e.k != 0 {
		return e.a.byRow(M) || e.b.byRow(M)
	}
	if e.ex != nil {
		return linByRow(e.ex.p, M) || linByRow(e.ex.q, M)
	}
	return linByRow(e.l, M)
}

func linByRow(l lin, M int) bool {
	for _, p := range l.parts {
		if !p.v.Type.IsScalar() && p.v.Type.Shape[0] == M && M > 1 {
			return true
		}
	}
	return false
}

// build emits e as a tensor<Mx1xi32>; N is the tile's width.
func (e *rexpr) build(nb *tir.Builder, M, N int) *tir.Value {
	if e.k != 0 {
		return nb.Binary(e.k, e.a.build(nb, M, N), e.b.build(nb, M, N))
	}
	if e.ex != nil {
		return e.ex.build(nb, M, N)
	}
	return buildLin(nb, e.l, M)
}

// build emits clamp(p - q + add, 0, N) exactly. d = p - q wraps when the
// true difference leaves i32; it did iff p >= q disagrees with d >= 0,
// and then the true difference is beyond either end of [0, N], on the
// side p >= q says.
func (x *exactBound) build(nb *tir.Builder, M, N int) *tir.Value {
	t := tir.Tensor(tir.I32, M, 1)
	c := func(v int64) *tir.Value { return nb.Const(t, v) }
	p, q := buildLin(nb, x.p, M), buildLin(nb, x.q, M)
	d := nb.Binary(tir.OpSub, p, q)
	ge := nb.Cmp("ge", p, q)
	neg := nb.Cmp("lt", d, c(0))
	wrapped := nb.Unary(tir.OpNot, nb.Binary(tir.OpXor, ge, neg))
	sat := nb.Select(wrapped, nb.Select(ge, c(int64(N)), c(-1)), d)
	// clamp(sat + add, 0, N) = clamp(sat, -add, N - add) + add, which
	// cannot overflow.
	v := nb.Binary(tir.OpMax, nb.Binary(tir.OpMin, sat, c(int64(N)-x.add)), c(-x.add))
	if x.add != 0 {
		v = nb.Binary(tir.OpAdd, v, c(x.add))
	}
	return v
}

// buildLin emits the linear form l (no column term) as a
// tensor<Mx1xi32>, with i32's wrapping sums: in any order they give the
// original's value.
func buildLin(nb *tir.Builder, l lin, M int) *tir.Value {
	l.c = int64(int32(l.c)) // the sum of the constants, wrapped as i32 wraps it
	col := []int{M, 1}
	var acc *tir.Value
	// Added terms first, so that the form reads a - b, not 0 - b + a.
	parts := slices.Clone(l.parts)
	slices.SortStableFunc(parts, func(x, y part) int {
		switch {
		case x.neg == y.neg:
			return 0
		case y.neg:
			return -1
		}
		return 1
	})
	// All terms subtracted: start from the constant (c - v, or 0 - v).
	allNeg := len(parts) > 0 && parts[0].neg
	if len(parts) == 0 || allNeg {
		acc = nb.Const(tir.Tensor(tir.I32, col...), l.c)
	}
	for _, p := range parts {
		v := p.v
		switch {
		case v.Type.IsScalar():
			v = nb.Splat(v, col)
		case v.Type.Shape[0] != M:
			v = nb.Broadcast(v, col)
		}
		switch {
		case acc == nil:
			acc = v
		case p.neg:
			acc = nb.Binary(tir.OpSub, acc, v)
		default:
			acc = nb.Binary(tir.OpAdd, acc, v)
		}
	}
	if !allNeg && len(parts) > 0 && l.c != 0 {
		acc = nb.Binary(tir.OpAdd, acc, nb.Const(tir.Tensor(tir.I32, col...), l.c))
	}
	return acc
}

// bnd is lo <= j < hi; nil is unbounded.
type bnd struct{ lo, hi *rexpr }

// boundOf gives the interval of columns where x (or !x, when neg) holds,
// per row, if it is one.
func boundOf(x *tir.Value, neg bool, M, N int) (bnd, bool) {
	d := x.Def
	if d == nil || x.Type.Elem != tir.I1 {
		return bnd{}, false
	}
	switch d.Kind {
	case tir.OpBroadcast:
		return boundOf(d.Args[0], neg, M, N)
	case tir.OpNot:
		return boundOf(d.Args[0], !neg, M, N)
	case tir.OpAnd, tir.OpOr:
		a, ok1 := boundOf(d.Args[0], neg, M, N)
		b, ok2 := boundOf(d.Args[1], neg, M, N)
		if !ok1 || !ok2 {
			return bnd{}, false
		}
		if (d.Kind == tir.OpAnd) != neg {
			return bnd{lo: maxR(a.lo, b.lo), hi: minR(a.hi, b.hi)}, true
		}
		// A union is an interval when both are bounded on the same side only.
		switch {
		case a.lo == nil && b.lo == nil && a.hi != nil && b.hi != nil:
			return bnd{hi: maxR(a.hi, b.hi)}, true
		case a.hi == nil && b.hi == nil && a.lo != nil && b.lo != nil:
			return bnd{lo: minR(a.lo, b.lo)}, true
		}
		return bnd{}, false
	case tir.OpCmp:
		return cmpBound(d, neg, M, N)
	}
	return bnd{}, false
}

var negPred = map[string]string{"lt": "ge", "le": "gt", "gt": "le", "ge": "lt", "eq": "ne", "ne": "eq"}
var flipPred = map[string]string{"lt": "gt", "le": "ge", "gt": "lt", "ge": "le", "eq": "eq", "ne": "ne"}

// cmpBound: x pred y with x - y = ±j + E.
func cmpBound(d *tir.Op, neg bool, M, N int) (bnd, bool) {
	p := d.IdentAttr("pred")
	if neg {
		p = negPred[p]
	}
	a, ok1 := linOf(d.Args[0], M, N)
	b, ok2 := linOf(d.Args[1], M, N)
	if !ok1 || !ok2 {
		return bnd{}, false
	}
	e := a.plus(b, -1) // x - y, compared with 0
	switch e.sigma {
	case -1:
		e, p = e.neg(), flipPred[p]
	case 1:
	default:
		return bnd{}, false
	}
	// The column side X = A ± j and the other side B (one side holds j:
	// both would give e.sigma 0 or ±2).
	x, y := a, b
	if x.sigma == 0 {
		x, y = b, a
	}
	if modValued(x) {
		// The original's X could wrap within the tile, where no interval
		// describes it: leave the comparison as it is.
		return bnd{}, false
	}
	// j + E p 0, that is j p F with F = -E.
	var F, F1 *rexpr
	if modValued(y) {
		// F = B - A (X = A + j) or A - B (X = A - j), exactly.
		x.sigma = 0
		pq := exactBound{p: y, q: x}
		if a.sigma+b.sigma < 0 {
			pq = exactBound{p: x, q: y}
		}
		pq1 := pq
		pq1.add = 1
		F, F1 = &rexpr{ex: &pq}, &rexpr{ex: &pq1}
	} else {
		f := e.neg()
		f.sigma = 0
		f1 := f
		f1.c++
		F, F1 = &rexpr{l: f}, &rexpr{l: f1}
	}
	switch p {
	case "lt":
		return bnd{hi: F}, true
	case "le":
		return bnd{hi: F1}, true
	case "gt":
		return bnd{lo: F1}, true
	case "ge":
		return bnd{lo: F}, true
	case "eq":
		return bnd{lo: F, hi: F1}, true
	}
	return bnd{}, false
}

// maxKernelConst bounds the constants taken for the kernel's own index
// arithmetic (tile sizes, offsets of a few tiles); a larger one is a
// mod's value, which may make a sum wrap.
const maxKernelConst = 1 << 16

// modValued reports whether l reads a value a mod chose: a parameter of a
// mod (a run-time parameter, or an aux tensor's data or length, named
// mod.NAME), or a constant beyond ±maxKernelConst (also in l's own sum).
// Such values are arbitrary i32s, so sums of them can wrap; the kernel's
// positions and offsets, by contrast, are bounded by the launch's shape
// checks.
func modValued(l lin) bool {
	if l.c < -maxKernelConst || l.c > maxKernelConst {
		return true
	}
	seen := map[*tir.Value]bool{}
	for _, p := range l.parts {
		if readsModValue(p.v, seen) {
			return true
		}
	}
	return false
}

func readsModValue(v *tir.Value, seen map[*tir.Value]bool) bool {
	if seen[v] {
		return false
	}
	seen[v] = true
	d := v.Def
	if d == nil {
		return strings.Contains(v.Name, ".") // mask.offset, mask.doc, score.slopes
	}
	if d.Kind == tir.OpConst {
		c, ok := d.Attr("value").(int64)
		return ok && (c < -maxKernelConst || c > maxKernelConst)
	}
	if len(d.Regions) > 0 {
		return true // a loop's or a branch's result: not followed
	}
	for _, a := range d.Args {
		if readsModValue(a, seen) {
			return true
		}
	}
	return false
}
