package lang

import (
	"sort"
	"strings"

	"github.com/alecthomas/participle/v2/lexer"

	"github.com/fac-compiler/fac/tir"
)

// block lowers statements in a new scope. In a kernel, return is refused;
// in a mod, modBody collects it.
func (l *lowerer) block(b *Block, inKernel bool) {
	l.push()
	defer l.pop()
	for _, s := range b.Stmts {
		l.stmtChecked(s, inKernel)
	}
}

func (l *lowerer) stmt(s *Stmt, inKernel bool) {
	l.b.Pos = irPos(s.Pos)
	switch {
	case s.Let != nil:
		names := append([]string{s.Let.Name}, s.Let.More...)
		vs := l.values(s.Let.Value, len(names))
		for i, n := range names {
			l.checkStorable(vs[i], s.Let.Value.Pos)
			l.define(n, vs[i], false, s.Let.Pos)
			l.letSeqlen(n, vs[i])
		}
	case s.Var != nil:
		names := append([]string{s.Var.Name}, s.Var.More...)
		vs := l.values(s.Var.Value, len(names))
		for i, n := range names {
			v := vs[i]
			l.checkStorable(v, s.Var.Value.Pos)
			if v.c != nil && v.c.Kind != CType && v.c.Kind != CMod {
				// A var changes at run time: give it a concrete type now.
				v = val{v: l.materialize(v, defaultElem(*v.c)), pos: v.pos}
			}
			l.define(n, v, true, s.Var.Pos)
		}
	case s.Assign != nil:
		l.assign(s.Assign)
	case s.For != nil:
		l.forStmt(s.For, inKernel)
	case s.If != nil:
		l.ifStmt(s.If, inKernel)
	case s.Return != nil:
		if l.fnBody != nil {
			l.fail(s.Pos, "return is only allowed as the last statement of a function")
		}
		l.fail(s.Pos, "return is only allowed as the last statement of a mod")
	case s.Expr != nil:
		v := l.expr(s.Expr)
		if v.v != nil || v.c != nil {
			l.fail(s.Pos, "expression value is unused")
		}
	}
}

func (l *lowerer) checkStorable(v val, pos lexer.Position) {
	if v.noValue != "" {
		l.fail(pos, "%s returns no value", v.noValue)
	}
	if v.c == nil && v.v == nil && v.aux == nil {
		l.fail(pos, "expression has no value")
	}
}

func defaultElem(c Const) tir.Elem {
	switch c.Kind {
	case CFloat:
		return tir.F32
	case CBool:
		return tir.I1
	}
	return tir.I32
}

func (l *lowerer) assign(a *AssignStmt) {
	names := append([]string{a.Name}, a.More...)
	binds := make([]*binding, len(names))
	for i, n := range names {
		b := l.lookup(n)
		if b == nil {
			l.fail(a.Pos, "undefined: %s%s", n, didYouMean(n, l.visibleNames()))
		}
		if !b.mutable {
			l.fail(a.Pos, "cannot assign to %s: declared with let (use var)", n)
		}
		for _, prev := range names[:i] {
			if prev == n {
				l.fail(a.Pos, "%s is assigned twice in one statement", n)
			}
		}
		binds[i] = b
	}
	// Every value is computed before any var changes, as in Go.
	vs := l.values(a.Value, len(names))
	for i, n := range names {
		l.assignOne(n, binds[i], vs[i], a.Value.Pos)
	}
}

// assignOne gives the var b (named name) the value v, computed by the
// expression at.
func (l *lowerer) assignOne(name string, b *binding, v val, at lexer.Position) {
	old := b.v.v
	if v.c != nil {
		v = val{v: l.materialize(v, old.Type.Elem), pos: v.pos}
	}
	if v.v == nil {
		l.fail(at, "cannot assign %s to %s", v.describe(), name)
	}
	if !v.v.Type.Equal(old.Type) {
		// Allow growing a scalar or broadcastable value to the var's shape.
		if v.v.Type.Elem == old.Type.Elem && !v.v.Type.Ptr && canBroadcastTo(v.v.Type.Shape, old.Type.Shape) {
			v.v = l.broadcastTo(v.v, old.Type.Shape)
		} else {
			l.fail(at, "cannot assign %s to %s of type %s", typeName(v.v.Type), name, typeName(old.Type))
		}
	}
	b.v = v
}

// assignedNames lists outer mutable vars assigned anywhere in stmts.
func (l *lowerer) assignedNames(stmts []*Stmt) []string {
	seen := map[string]bool{}
	var walk func([]*Stmt)
	var walkIf func(*IfStmt)
	walkIf = func(s *IfStmt) {
		walk(s.Then.Stmts)
		if s.ElseIf != nil {
			walkIf(s.ElseIf)
		}
		if s.Else != nil {
			walk(s.Else.Stmts)
		}
	}
	walk = func(ss []*Stmt) {
		for _, s := range ss {
			switch {
			case s.Assign != nil:
				for _, n := range append([]string{s.Assign.Name}, s.Assign.More...) {
					if b := l.lookup(n); b != nil && b.mutable {
						seen[n] = true
					}
				}
			case s.For != nil:
				walk(s.For.Body.Stmts)
			case s.If != nil:
				walkIf(s.If)
			}
		}
	}
	walk(stmts)
	out := make([]string, 0, len(seen))
	for n := range seen {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

func (l *lowerer) forStmt(f *ForStmt, inKernel bool) {
	var bounds []val
	for _, a := range f.Args {
		if a.Name != "" {
			l.fail(a.Pos, "range takes no named arguments")
		}
		bounds = append(bounds, l.expr(a.Value))
	}
	if len(bounds) < 1 || len(bounds) > 3 {
		l.fail(f.Pos, "range takes 1 to 3 arguments (stop | start, stop | start, stop, step), got %d", len(bounds))
	}
	lo, step := constVal(IntConst(0), f.Pos), constVal(IntConst(1), f.Pos)
	hi := bounds[0]
	if len(bounds) >= 2 {
		lo, hi = bounds[0], bounds[1]
	}
	if len(bounds) == 3 {
		step = bounds[2]
		if step.c != nil && step.c.Kind == CInt && step.c.I <= 0 {
			l.fail(step.pos, "range step must be positive, got %d", step.c.I)
		}
	}
	scal := func(v val) *tir.Value {
		x := l.materialize(v, tir.I32)
		if !x.Type.Equal(tir.Scalar(tir.I32)) {
			l.fail(v.pos, "range bounds must be i32 scalars, got %s", v.describe())
		}
		return x
	}
	lov, hiv, stv := scal(lo), scal(hi), scal(step)

	names := l.assignedNames(f.Body.Stmts)
	binds := make([]*binding, len(names))
	inits := make([]*tir.Value, len(names))
	for i, n := range names {
		binds[i] = l.lookup(n)
		inits[i] = binds[i].v.v
	}
	op, body := l.b.For(lov, hiv, stv, inits)
	op.Pos = irPos(f.Pos)
	outer := l.b
	l.b = body
	for i, b := range binds {
		b.v = val{v: body.Block.Args[i+1], pos: b.pos}
	}
	l.push()
	l.define(f.Var, val{v: body.Block.Args[0], pos: f.Pos}, false, f.Pos)
	l.block(f.Body, inKernel)
	l.pop()
	yields := make([]*tir.Value, len(binds))
	for i, b := range binds {
		yields[i] = b.v.v
	}
	l.b.Yield(yields...)
	l.b = outer
	for i, b := range binds {
		b.v = val{v: op.Results[i], pos: b.pos}
	}
}

func (l *lowerer) ifStmt(s *IfStmt, inKernel bool) {
	cond := l.expr(s.Cond)
	if cond.c != nil {
		if cond.c.Kind != CBool {
			l.fail(s.Cond.Pos, "if condition must be bool, got %s", cond.describe())
		}
		// Compile-time condition: only the taken arm exists.
		switch {
		case cond.c.B:
			l.block(s.Then, inKernel)
		case s.ElseIf != nil:
			l.ifStmt(s.ElseIf, inKernel)
		case s.Else != nil:
			l.block(s.Else, inKernel)
		}
		return
	}
	if cond.v == nil || !cond.v.Type.Equal(tir.Scalar(tir.I1)) {
		if cond.v != nil && cond.v.Type.Elem == tir.I1 && !cond.v.Type.Ptr && l.inMod() {
			l.fail(s.Cond.Pos, "if condition must be a scalar bool, but here it is %s: kernels call mods with tiles of positions (use select(cond, a, b) instead of if)", cond.describe())
		}
		l.fail(s.Cond.Pos, "if condition must be a scalar bool, got %s (use select for tensors)", cond.describe())
	}
	stmts := append([]*Stmt(nil), s.Then.Stmts...)
	if s.ElseIf != nil {
		stmts = append(stmts, &Stmt{If: s.ElseIf})
	}
	if s.Else != nil {
		stmts = append(stmts, s.Else.Stmts...)
	}
	names := l.assignedNames(stmts)
	binds := make([]*binding, len(names))
	before := make([]val, len(names))
	types := make([]tir.Type, len(names))
	for i, n := range names {
		binds[i] = l.lookup(n)
		before[i] = binds[i].v
		types[i] = before[i].v.Type
	}
	op, thenB, elseB := l.b.If(cond.v, types)
	op.Pos = irPos(s.Pos)
	outer := l.b
	arm := func(bld *tir.Builder, run func()) {
		l.b = bld
		for i, b := range binds {
			b.v = before[i]
		}
		run()
		ys := make([]*tir.Value, len(binds))
		for i, b := range binds {
			ys[i] = b.v.v
		}
		l.b.Yield(ys...)
	}
	arm(thenB, func() { l.block(s.Then, inKernel) })
	arm(elseB, func() {
		switch {
		case s.ElseIf != nil:
			l.push()
			l.ifStmt(s.ElseIf, inKernel)
			l.pop()
		case s.Else != nil:
			l.block(s.Else, inKernel)
		}
	})
	l.b = outer
	for i, b := range binds {
		b.v = val{v: op.Results[i], pos: b.pos}
	}
}

// inMod reports whether a mod body is being lowered.
func (l *lowerer) inMod() bool {
	for _, n := range l.modStack {
		if !strings.HasPrefix(n, "const ") {
			return true
		}
	}
	return false
}

// letSeqlen makes a kernel's `let seqlen_q = ...` (or seqlen_k), an i32
// scalar, the length its later mod calls see, when no parameter has that
// name: a varlen kernel computes each sequence's lengths in the program.
func (l *lowerer) letSeqlen(name string, v val) {
	if v.v == nil || !v.v.Type.IsScalar() || v.v.Type.Ptr || v.v.Type.Elem != tir.I32 {
		return
	}
	switch {
	case name == "seqlen_q" && l.seqlenQ == nil:
		l.seqlenQ = v.v
	case name == "seqlen_k" && l.seqlenK == nil:
		l.seqlenK = v.v
	}
}
