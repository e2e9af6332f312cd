package lang

import (
	"fmt"
	"math"
	"strconv"

	"github.com/alecthomas/participle/v2/lexer"

	"github.com/fac-compiler/fac/tir"
)

func (l *lowerer) expr(e *Expr) val {
	v := l.andExpr(e.Left)
	for _, r := range e.Right {
		v = l.logical(tir.OpOr, v, l.andExpr(r), r.Pos)
	}
	return v
}

func (l *lowerer) andExpr(e *AndExpr) val {
	v := l.cmpExpr(e.Left)
	for _, r := range e.Right {
		v = l.logical(tir.OpAnd, v, l.cmpExpr(r), r.Pos)
	}
	return v
}

var cmpPreds = map[string]string{"==": "eq", "!=": "ne", "<": "lt", "<=": "le", ">": "gt", ">=": "ge"}

func (l *lowerer) cmpExpr(e *CmpExpr) val {
	v := l.addExpr(e.Left)
	// participle may leave Op set from a failed try at a comparison, as in
	// the `>` that closes compile-time parameters: `score = identity>(`.
	if e.Op == "" || e.Right == nil {
		return v
	}
	return l.compare(cmpPreds[e.Op], v, l.addExpr(e.Right), e.Pos)
}

func (l *lowerer) addExpr(e *AddExpr) val {
	v := l.mulExpr(e.Left)
	for _, r := range e.Rest {
		k := tir.OpAdd
		if r.Op == "-" {
			k = tir.OpSub
		}
		v = l.arith(k, v, l.mulExpr(r.Right), r.Pos)
	}
	return v
}

func (l *lowerer) mulExpr(e *MulExpr) val {
	v := l.unary(e.Left)
	for _, r := range e.Rest {
		k := map[string]tir.Kind{"*": tir.OpMul, "/": tir.OpDiv, "%": tir.OpRem}[r.Op]
		v = l.arith(k, v, l.unary(r.Right), r.Pos)
	}
	return v
}

func (l *lowerer) unary(u *Unary) val {
	if u.Postfix != nil {
		return l.postfix(u.Postfix)
	}
	x := l.unary(u.Operand)
	x.pos = u.Pos
	if u.Op == "-" {
		return l.negate(x, u.Pos)
	}
	return l.not(x, u.Pos)
}

func (l *lowerer) negate(x val, pos lexer.Position) val {
	if x.c != nil {
		switch x.c.Kind {
		case CInt:
			return constVal(IntConst(l.intNeg(x.c.I, pos)), pos)
		case CFloat:
			return constVal(FloatConst(-x.c.F), pos)
		}
		l.fail(pos, "cannot negate %s", x.describe())
	}
	v := l.runtime(x)
	if v.Type.Ptr || v.Type.Elem == tir.I1 {
		l.fail(pos, "cannot negate %s", x.describe())
	}
	return val{v: l.b.Unary(tir.OpNeg, v), pos: pos}
}

func (l *lowerer) not(x val, pos lexer.Position) val {
	if x.c != nil {
		if x.c.Kind != CBool {
			l.fail(pos, "! needs a bool, got %s", x.describe())
		}
		return constVal(BoolConst(!x.c.B), pos)
	}
	v := l.runtime(x)
	if v.Type.Elem != tir.I1 || v.Type.Ptr {
		l.fail(pos, "! needs a bool, got %s", x.describe())
	}
	return val{v: l.b.Unary(tir.OpNot, v), pos: pos}
}

// runtime returns x as a run-time value, refusing aux tensors and types.
func (l *lowerer) runtime(x val) *tir.Value {
	switch {
	case x.v != nil:
		return x.v
	case x.aux != nil:
		l.fail(x.pos, "aux tensor %s can only be indexed, e.g. %s[q_idx]", x.aux.name, x.aux.name)
	case x.c != nil && (x.c.Kind == CType || x.c.Kind == CMod):
		l.fail(x.pos, "%s is not a value", x.describe())
	case x.c != nil:
		return l.materialize(x, defaultElem(*x.c))
	case x.noValue != "":
		l.fail(x.pos, "%s returns no value", x.noValue)
	}
	l.fail(x.pos, "expression has no value")
	return nil
}

// materialize turns a compile-time number into a run-time constant of elem e.
func (l *lowerer) materialize(x val, e tir.Elem) *tir.Value {
	if x.c == nil {
		return l.runtime(x)
	}
	c := *x.c
	switch c.Kind {
	case CInt:
		if e.IsFloat() {
			return l.b.Const(tir.Scalar(e), float64(c.I))
		}
		if e.IsInt() {
			if e == tir.I32 && (c.I > math.MaxInt32 || c.I < math.MinInt32) {
				l.fail(x.pos, "constant %d overflows i32", c.I)
			}
			return l.b.Const(tir.Scalar(e), c.I)
		}
	case CFloat:
		if e.IsFloat() {
			return l.b.Const(tir.Scalar(e), c.F)
		}
		if e == tir.I32 || e == tir.I64 {
			l.fail(x.pos, "cannot use float constant %s as %s (convert explicitly, e.g. i32(x))", c.String(), e)
		}
	case CBool:
		if e == tir.I1 {
			return l.b.Const(tir.Scalar(tir.I1), c.B)
		}
	}
	l.fail(x.pos, "cannot use %s as %s", x.describe(), typeName(tir.Scalar(e)))
	return nil
}

func canBroadcastTo(from, to []int) bool {
	s, ok := tir.BroadcastShapes(from, to)
	if !ok || len(s) != len(to) {
		return false
	}
	for i := range s {
		if s[i] != to[i] {
			return false
		}
	}
	return true
}

// broadcastTo expands v to shape with splat, reshape and broadcast.
func (l *lowerer) broadcastTo(v *tir.Value, shape []int) *tir.Value {
	t := v.Type
	if len(shape) == 0 || (len(t.Shape) == len(shape) && t.Equal(t.WithShape(shape))) {
		return v
	}
	if t.IsScalar() {
		return l.b.Splat(v, shape)
	}
	if len(t.Shape) < len(shape) {
		ones := make([]int, len(shape)-len(t.Shape))
		for i := range ones {
			ones[i] = 1
		}
		v = l.b.Reshape(v, append(ones, t.Shape...))
	}
	if !v.Type.Equal(v.Type.WithShape(shape)) {
		v = l.b.Broadcast(v, shape)
	}
	return v
}

// unify gives two operands one element type and one shape.
func (l *lowerer) unify(a, b val, pos lexer.Position, what string) (*tir.Value, *tir.Value) {
	var x, y *tir.Value
	switch {
	case a.c != nil && b.c != nil:
		e := defaultElem(*a.c)
		if defaultElem(*b.c) == tir.F32 {
			e = tir.F32
		}
		x, y = l.materialize(a, e), l.materialize(b, e)
	case a.c != nil:
		y = l.runtime(b)
		x = l.materialize(a, y.Type.Elem)
	case b.c != nil:
		x = l.runtime(a)
		y = l.materialize(b, x.Type.Elem)
	default:
		x, y = l.runtime(a), l.runtime(b)
	}
	if x.Type.Elem != y.Type.Elem || x.Type.Ptr != y.Type.Ptr {
		l.fail(pos, "mismatched types %s and %s in %s (convert one, e.g. f32(x))", typeName(x.Type), typeName(y.Type), what)
	}
	shape, ok := tir.BroadcastShapes(x.Type.Shape, y.Type.Shape)
	if !ok {
		l.fail(pos, "shape mismatch in %s: %s and %s do not broadcast", what, tir.ShapeString(x.Type.Shape), tir.ShapeString(y.Type.Shape))
	}
	l.checkTile(shape, pos, what)
	return l.broadcastTo(x, shape), l.broadcastTo(y, shape)
}

var opSymbols = map[tir.Kind]string{tir.OpAdd: "+", tir.OpSub: "-", tir.OpMul: "*", tir.OpDiv: "/", tir.OpRem: "%",
	tir.OpAnd: "&&", tir.OpOr: "||"}

func (l *lowerer) arith(k tir.Kind, a, b val, pos lexer.Position) val {
	sym := opSymbols[k]
	if a.c != nil && b.c != nil {
		return constVal(l.foldArith(k, *a.c, *b.c, pos), pos)
	}
	// Pointer arithmetic: ptr + int offsets.
	if a.v != nil && a.v.Type.Ptr {
		if k != tir.OpAdd {
			l.fail(pos, "only + is defined on pointers")
		}
		off := l.materialize(b, tir.I32)
		if off.Type.Ptr || !off.Type.Elem.IsInt() {
			l.fail(pos, "pointer offset must be an integer, got %s", typeName(off.Type))
		}
		shape, ok := tir.BroadcastShapes(a.v.Type.Shape, off.Type.Shape)
		if !ok {
			l.fail(pos, "shape mismatch in +: %s and %s do not broadcast", tir.ShapeString(a.v.Type.Shape), tir.ShapeString(off.Type.Shape))
		}
		l.checkTile(shape, pos, "+")
		return val{v: l.b.AddPtr(l.broadcastTo(a.v, shape), l.broadcastTo(off, shape)), pos: pos}
	}
	if b.v != nil && b.v.Type.Ptr {
		if k == tir.OpAdd {
			return l.arith(k, b, a, pos)
		}
		l.fail(pos, "only ptr + int is defined on pointers")
	}
	x, y := l.unify(a, b, pos, sym)
	switch {
	case x.Type.Elem == tir.I1:
		l.fail(pos, "%s is not defined on bool", sym)
	case k == tir.OpRem && x.Type.Elem.IsFloat():
		l.fail(pos, "%% is only defined on integers")
	}
	return val{v: l.b.Binary(k, x, y), pos: pos}
}

func (l *lowerer) foldArith(k tir.Kind, a, b Const, pos lexer.Position) Const {
	sym := opSymbols[k]
	if a.Kind == CInt && b.Kind == CInt {
		switch k {
		case tir.OpAdd, tir.OpSub, tir.OpMul:
			return IntConst(l.intOp(sym, a.I, b.I, pos))
		case tir.OpDiv, tir.OpRem:
			if b.I == 0 {
				l.fail(pos, "integer division by zero")
			}
			return IntConst(l.intOp(sym, a.I, b.I, pos))
		}
	}
	if (a.Kind == CInt || a.Kind == CFloat) && (b.Kind == CInt || b.Kind == CFloat) {
		x, y := a.float(), b.float()
		switch k {
		case tir.OpAdd:
			return FloatConst(x + y)
		case tir.OpSub:
			return FloatConst(x - y)
		case tir.OpMul:
			return FloatConst(x * y)
		case tir.OpDiv:
			return FloatConst(x / y)
		}
	}
	l.fail(pos, "%s is not defined on %s and %s", sym, constVal(a, pos).describe(), constVal(b, pos).describe())
	return a
}

func (l *lowerer) compare(pred string, a, b val, pos lexer.Position) val {
	if a.c != nil && b.c != nil {
		x, y := *a.c, *b.c
		var r bool
		switch {
		case x.Kind == CInt && y.Kind == CInt:
			r = cmpOrdered(pred, x.I, y.I)
		case (x.Kind == CInt || x.Kind == CFloat) && (y.Kind == CInt || y.Kind == CFloat):
			r = cmpFloat(pred, x.float(), y.float())
		case x.Kind == CBool && y.Kind == CBool && (pred == "eq" || pred == "ne"):
			r = (x.B == y.B) == (pred == "eq")
		case x.Kind == CType && y.Kind == CType && (pred == "eq" || pred == "ne"):
			r = (x.T == y.T) == (pred == "eq")
		default:
			l.fail(pos, "cannot compare %s and %s", a.describe(), b.describe())
		}
		return constVal(BoolConst(r), pos)
	}
	x, y := l.unify(a, b, pos, "comparison")
	if x.Type.Ptr {
		l.fail(pos, "cannot compare pointers")
	}
	if x.Type.Elem == tir.I1 && pred != "eq" && pred != "ne" {
		l.fail(pos, "bools compare only with == and !=")
	}
	return val{v: l.b.Cmp(pred, x, y), pos: pos}
}

func cmpOrdered[T int64 | float64](pred string, x, y T) bool {
	switch pred {
	case "eq":
		return x == y
	case "ne":
		return x != y
	case "lt":
		return x < y
	case "le":
		return x <= y
	case "gt":
		return x > y
	}
	return x >= y
}

func cmpFloat(pred string, x, y float64) bool { return cmpOrdered(pred, x, y) }

func (l *lowerer) logical(k tir.Kind, a, b val, pos lexer.Position) val {
	sym := opSymbols[k]
	if a.c != nil && b.c != nil {
		if a.c.Kind != CBool || b.c.Kind != CBool {
			l.fail(pos, "%s needs bools, got %s and %s", sym, a.describe(), b.describe())
		}
		if k == tir.OpAnd {
			return constVal(BoolConst(a.c.B && b.c.B), pos)
		}
		return constVal(BoolConst(a.c.B || b.c.B), pos)
	}
	for _, v := range []val{a, b} {
		if (v.c != nil && v.c.Kind != CBool) || (v.v != nil && (v.v.Type.Elem != tir.I1 || v.v.Type.Ptr)) || v.aux != nil {
			l.fail(v.pos, "%s needs bools, got %s", sym, v.describe())
		}
	}
	x, y := l.unify(a, b, pos, sym)
	return val{v: l.b.Binary(k, x, y), pos: pos}
}

func (l *lowerer) postfix(p *Postfix) val {
	suffix := p.Suffix
	var v val
	if id := p.Primary.Ident; id != nil && builtinFuncs[*id] && l.lookup(*id) == nil && len(suffix) > 0 && suffix[0].Call != nil {
		v = l.builtin(*id, suffix[0].Call)
		suffix = suffix[1:]
	} else if fd := l.p.fns[deref(id)]; fd != nil && l.lookup(*id) == nil && len(suffix) > 0 && suffix[0].Call != nil {
		v = l.oneResult(fd, l.callFn(fd, suffix[0].Call), suffix[0].Call.Pos)
		suffix = suffix[1:]
	} else {
		v = l.primary(p.Primary)
	}
	for _, s := range suffix {
		if s.Call != nil {
			v = l.call(v, s.Call)
		} else {
			v = l.index(v, s.Index)
		}
	}
	return v
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func (l *lowerer) primary(p *Primary) val {
	switch {
	case p.Float != nil:
		f, err := strconv.ParseFloat(*p.Float, 64)
		if err != nil {
			l.fail(p.Pos, "bad float literal %s", *p.Float)
		}
		return constVal(FloatConst(f), p.Pos)
	case p.Int != nil:
		i, err := strconv.ParseInt(*p.Int, 10, 64)
		if err != nil || i > math.MaxInt32 {
			l.fail(p.Pos, "integer literal %s overflows i32", *p.Int)
		}
		return constVal(IntConst(i), p.Pos)
	case p.True:
		return constVal(BoolConst(true), p.Pos)
	case p.False:
		return constVal(BoolConst(false), p.Pos)
	case p.Paren != nil:
		v := l.expr(p.Paren)
		return v
	case p.List != nil:
		l.fail(p.Pos, "a list is only allowed as a shape argument, e.g. zeros([64, 64], f32)")
	}
	return l.ident(*p.Ident, p.Pos)
}

// ident resolves a name: local bindings, then global constants, mods and
// built-in values.
func (l *lowerer) ident(name string, pos lexer.Position) val {
	if b := l.lookup(name); b != nil {
		v := b.v
		v.pos = pos
		return v
	}
	switch name {
	case "inf":
		return constVal(FloatConst(math.Inf(1)), pos)
	case "nan":
		return constVal(FloatConst(math.NaN()), pos)
	case "seqlen_q", "seqlen_k", "batch", "num_heads":
		l.fail(pos, "%s is only available in mods and in kernels that declare it as a parameter", name)
	}
	if e, ok := elemByLangName(name); ok {
		return constVal(TypeConst(e), pos)
	}
	if cd, ok := l.p.consts[name]; ok {
		return l.globalConst(cd, pos)
	}
	if md, ok := l.p.mods[name]; ok {
		return constVal(Const{Kind: CMod, Mod: &ModInst{Decl: md, prog: l.p}}, pos)
	}
	if _, ok := l.p.fns[name]; builtinFuncs[name] || ok {
		l.fail(pos, "%s is a function; call it: %s(...)", name, name)
	}
	if _, ok := l.p.kernels[name]; ok {
		l.fail(pos, "kernel %s cannot be used as a value", name)
	}
	l.fail(pos, "undefined: %s%s", name, didYouMean(name, l.visibleNames()))
	return val{}
}

func (l *lowerer) globalConst(cd *ConstDecl, pos lexer.Position) val {
	// A constant's value depends on nothing but the program, so it is
	// computed once: else `const A = B + B`, `const B = C + C`, ... takes
	// exponential time. The cached value is used only where its chain of
	// constants fits under MaxRefDepth, so that the cache never changes
	// what is reported.
	cacheable := cd.Type == nil || cd.Type.Elem == nil && isBuiltinElem(cd.Type.Name)
	if cacheable {
		if c, h, ok := l.p.cachedConst(cd); ok && len(l.constBusy)+h <= MaxRefDepth {
			l.constHeight = max(l.constHeight, h)
			return constVal(c, pos)
		}
	}
	if i, busy := l.constBusy[cd.Name]; busy {
		l.fail(cd.Pos, "constant %s refers to itself%s", cd.Name, cyclePath(l.modStack[i:], cd.Name))
	}
	if len(l.constBusy) >= MaxRefDepth {
		l.fail(pos, "constants use each other too deep: using %s here makes a chain of %d constants, and at most %d may nest",
			cd.Name, len(l.constBusy)+1, MaxRefDepth)
	}
	outer := l.constHeight
	l.constHeight = 0
	c := l.evalConst(cd)
	h := 1 + l.constHeight
	l.constHeight = max(outer, h)
	if cacheable {
		l.p.cacheConst(cd, c, h)
	}
	return constVal(c, pos)
}

// evalConst computes a global constant's value; it sees only globals.
func (l *lowerer) evalConst(cd *ConstDecl) Const {
	if l.constBusy == nil {
		l.constBusy = map[string]int{} // a map: chains of constants can be long
	}
	l.constBusy[cd.Name] = len(l.modStack)
	l.modStack = append(l.modStack, "const "+cd.Name)
	saved, savedB := l.scope, l.b
	l.scope, l.b = nil, scratchBuilder() // a constant adds no ops to the function being lowered
	l.push()
	v := l.expr(cd.Value)
	l.scope, l.b = saved, savedB
	l.modStack = l.modStack[:len(l.modStack)-1]
	delete(l.constBusy, cd.Name)
	if v.c == nil {
		l.fail(cd.Value.Pos, "constant %s must have a compile-time value", cd.Name)
	}
	c := *v.c
	if cd.Type != nil {
		e := l.elemType(cd.Type)
		switch {
		case e.IsFloat() && (c.Kind == CInt || c.Kind == CFloat):
			c = FloatConst(c.float())
		case e.IsInt() && c.Kind == CInt, e == tir.I1 && c.Kind == CBool:
		default:
			l.fail(cd.Value.Pos, "constant %s: cannot use %s as %s", cd.Name, v.describe(), cd.Type.Name)
		}
	}
	return c
}

func isBuiltinElem(name string) bool {
	_, ok := elemByLangName(name)
	return ok
}

// index handles x[:, None] (reshape) and aux[i, j] (gather).
func (l *lowerer) index(x val, ix *IndexArgs) val {
	if a := x.aux; a != nil {
		rank := max(1, len(a.dims))
		for _, it := range ix.Items {
			if it.Expr == nil {
				l.fail(it.Pos, "aux tensor %s is indexed by positions, e.g. %s; ':' and None reshape tiles", a.name, indexExample(a.name, rank))
			}
		}
		if len(ix.Items) != rank {
			n := "one index"
			if rank > 1 {
				n = fmt.Sprintf("%d indices", rank)
			}
			l.fail(ix.Pos, "aux tensor %s is %s, with %s: index it with %s, e.g. %s",
				a.name, a.param().Type(), plural(rank, "dimension"), n, indexExample(a.name, rank))
		}
		return l.gather(a, ix.Items)
	}
	if x.c != nil {
		l.fail(ix.Pos, "cannot index %s", x.describe())
	}
	v := x.v
	var shape []int
	dim := 0
	for _, it := range ix.Items {
		switch {
		case it.Slice:
			if dim >= v.Type.Rank() {
				l.fail(it.Pos, "too many ':' for %s", typeName(v.Type))
			}
			shape = append(shape, v.Type.Shape[dim])
			dim++
		case it.None:
			shape = append(shape, 1)
		default:
			l.fail(it.Pos, "tiles are indexed with ':' and None only (got an expression); to read memory use load")
		}
	}
	if dim != v.Type.Rank() {
		l.fail(ix.Pos, "index has %d ':' but %s has rank %d", dim, typeName(v.Type), v.Type.Rank())
	}
	return val{v: l.b.Reshape(v, shape), pos: ix.Pos}
}

func indexExample(name string, rank int) string {
	ex := []string{"q_idx", "h, q_idx", "h, q_idx, kv_idx", "b, h, q_idx, kv_idx"}
	if rank <= len(ex) {
		return name + "[" + ex[rank-1] + "]"
	}
	return name + "[...]"
}

// gather reads aux[i, j, ...] elementwise, the indices broadcast together.
// An index outside its dimension reads 0, so padded rows and columns of a
// tile stay safe; so does an element past the tensor's length, which
// keeps memory safe whatever the caller passed.
func (l *lowerer) gather(a *auxTensor, items []*IndexItem) val {
	var idxs []*tir.Value
	var shape []int
	for _, it := range items {
		i := l.expr(it.Expr)
		if i.c != nil && i.c.Kind != CInt {
			l.fail(it.Pos, "aux tensor %s must be indexed by an integer, got %s", a.name, i.describe())
		}
		idx := l.materialize(i, tir.I32)
		if idx.Type.Ptr || idx.Type.Elem != tir.I32 {
			l.fail(it.Pos, "aux tensor %s must be indexed by an integer, got %s", a.name, typeName(idx.Type))
		}
		s, ok := tir.BroadcastShapes(shape, idx.Type.Shape)
		if !ok {
			l.fail(it.Pos, "shape mismatch in index of %s: %s and %s do not broadcast", a.name, tir.ShapeString(shape), tir.ShapeString(idx.Type.Shape))
		}
		shape = s
		l.checkTile(shape, it.Pos, "index of "+a.name)
		idxs = append(idxs, idx)
	}
	pos := items[0].Pos
	dims := []*tir.Value{a.len}
	if a.dims != nil {
		dims = dims[:0]
		for _, d := range a.dims {
			dims = append(dims, l.dimValue(d))
		}
	}
	zero := l.broadcastTo(l.b.Const(tir.Scalar(tir.I32), int64(0)), shape)
	var ok, flat *tir.Value
	for k, idx := range idxs {
		i := l.broadcastTo(idx, shape)
		n := l.broadcastTo(dims[k], shape)
		in := l.b.Binary(tir.OpAnd, l.b.Cmp("ge", i, zero), l.b.Cmp("lt", i, n))
		if k == 0 {
			ok, flat = in, i
			continue
		}
		ok = l.b.Binary(tir.OpAnd, ok, in)
		flat = l.b.Binary(tir.OpAdd, l.b.Binary(tir.OpMul, flat, n), i)
	}
	if a.dims != nil {
		ok = l.b.Binary(tir.OpAnd, ok, l.b.Cmp("lt", flat, l.broadcastTo(a.len, shape)))
	}
	safe := l.b.Select(ok, flat, zero)
	ptrs := l.b.AddPtr(l.broadcastTo(a.ptr, shape), safe)
	var other *tir.Value
	if a.elem == tir.I1 {
		other = l.broadcastTo(l.b.Const(tir.Scalar(tir.I1), false), shape)
	} else if a.elem.IsFloat() {
		other = l.broadcastTo(l.b.Const(tir.Scalar(a.elem), 0.0), shape)
	} else {
		other = l.broadcastTo(l.b.Const(tir.Scalar(a.elem), int64(0)), shape)
	}
	return val{v: l.b.Load(ptrs, ok, other), pos: pos}
}

// dimValue computes a declared dimension in the mod being lowered, from
// its sequence lengths, batch and num_heads.
func (l *lowerer) dimValue(d Dim) *tir.Value {
	c := func(x int64) *tir.Value { return l.b.Const(tir.Scalar(tir.I32), x) }
	var sum *tir.Value
	for _, t := range []struct {
		k int64
		v *tir.Value
	}{{d.Batch, l.env.batch}, {d.Heads, l.env.heads}, {d.SeqQ, l.seqlenQ}, {d.SeqK, l.seqlenK}} {
		if t.k == 0 {
			continue
		}
		x := t.v
		if t.k != 1 {
			x = l.b.Binary(tir.OpMul, c(t.k), x)
		}
		if sum == nil {
			sum = x
		} else {
			sum = l.b.Binary(tir.OpAdd, sum, x)
		}
	}
	switch {
	case sum == nil:
		return c(d.Const)
	case d.Const != 0:
		return l.b.Binary(tir.OpAdd, sum, c(d.Const))
	}
	return sum
}
