package lang

import (
	"fmt"
	"strings"

	"github.com/alecthomas/participle/v2/lexer"

	"github.com/fac-compiler/fac/tir"
)

// Functions (`fn NAME(PARAMS) -> RESULTS { ... }`) are code that kernels,
// mods and other functions share. A call is expanded where it is lowered,
// into the caller's block: its arguments are evaluated first, left to
// right, in the caller's scope; then the body is lowered in a scope of its
// own, which sees the parameters and the program's global names only; its
// results are the values of its last statement, `return a, b`. No call or
// function is left in the tile IR, so a kernel written with functions
// lowers to the same IR, value for value, as the same kernel written out
// by hand: the kernel identities, which hash the lowered IR, do not move
// when code moves into a function.
//
// A parameter is bound like a let: a run-time value stays one, and a
// constant, a type or a mod stays a compile-time value (so it can be a
// shape, a conversion, a compile-time if's condition, a mod to call).

// callFn expands a call of fd and returns its results.
func (l *lowerer) callFn(fd *FnDecl, ca *CallArgs) []val {
	for i, n := range l.fnStack {
		if n == fd.Name {
			l.fail(ca.Pos, "%s calls itself%s; recursion is not allowed", fd.Name, cyclePath(l.fnStack[i:], fd.Name))
		}
	}
	if len(l.fnStack) >= MaxRefDepth {
		l.fail(ca.Pos, "functions call each other too deep: calling %s here makes a chain of %d (%s -> ... -> %s), and at most %d functions may nest",
			fd.Name, len(l.fnStack)+1, l.fnStack[0], fd.Name, MaxRefDepth)
	}
	l.fnCalls++
	if l.fnCalls > MaxFnCalls {
		l.fail(ca.Pos, "too many function calls: calling %s here expands call number %d of one kernel or mod, and at most %d are expanded (functions are inlined: one that calls another twice doubles its size)",
			fd.Name, l.fnCalls, MaxFnCalls)
	}
	args := l.fnArgs(fd, ca)

	saved, savedBody, savedPos := l.scope, l.fnBody, l.b.Pos
	l.fnStack = append(l.fnStack, fd.Name)
	inBody := false
	defer func() {
		l.scope, l.fnBody, l.b.Pos = saved, savedBody, savedPos
		l.fnStack = l.fnStack[:len(l.fnStack)-1]
		if r := recover(); r != nil {
			// An error in the body says where the function was called;
			// one in an argument is at the call already.
			if f, ok := r.(failure); ok && inBody {
				f.err = calledFrom(f.err, fd.Name, ca.Pos)
				r = f
			}
			panic(r)
		}
	}()
	l.fnBody = fd
	l.scope = nil // a function sees its parameters and the globals only
	l.push()
	for i, prm := range fd.Params {
		if prm.Type != nil {
			// In the function's scope: a type may name a parameter before.
			l.checkFnType(prm.Type, args[i], "argument "+prm.Name+" of "+fd.Name, args[i].pos)
		}
		v := args[i]
		v.pos = prm.Pos
		l.define(prm.Name, v, false, prm.Pos)
	}
	inBody = true
	stmts := fd.Body.Stmts
	var ret *ReturnStmt
	if n := len(stmts); n > 0 && stmts[n-1].Return != nil {
		ret, stmts = stmts[n-1].Return, stmts[:n-1]
	}
	l.push()
	for _, s := range stmts {
		l.stmt(s, false)
	}
	var out []val
	at := fd.Body.Close()
	if ret != nil {
		l.b.Pos = irPos(ret.Pos)
		at = ret.Pos
		if ret.Value != nil {
			for _, e := range append([]*Expr{ret.Value}, ret.More...) {
				v := l.expr(e)
				l.checkStorable(v, e.Pos)
				out = append(out, v)
			}
		}
	}
	if fd.Results != nil {
		if len(out) != len(fd.Results) {
			l.fail(at, "fn %s declares %s but returns %d", fd.Name, plural(len(fd.Results), "result"), len(out))
		}
		for i, t := range fd.Results {
			l.checkFnType(t, out[i], fmt.Sprintf("result %d of %s", i+1, fd.Name), out[i].pos)
		}
	}
	l.pop()
	l.pop()
	return out
}

// calledFrom adds to a positioned error raised inside a function's body
// where the function was called: `... (in fn f called at k.fa:3:12)`, and
// for nested calls `(in fn g called at f.fa:2:9, fn f called at ...)`.
func calledFrom(err error, fn string, at lexer.Position) error {
	e, ok := err.(*Error)
	if !ok {
		return err
	}
	site := fmt.Sprintf("fn %s called at %s:%d:%d", fn, at.Filename, at.Line, at.Column)
	ne := *e
	if i := strings.LastIndex(ne.Msg, " (in fn "); i >= 0 && strings.HasSuffix(ne.Msg, ")") {
		ne.Msg = ne.Msg[:len(ne.Msg)-1] + ", " + site + ")"
	} else {
		ne.Msg += " (in " + site + ")"
	}
	return &ne
}

// fnArgs evaluates a call's arguments, in the caller's scope and in the
// order written, and puts them in parameter order.
func (l *lowerer) fnArgs(fd *FnDecl, ca *CallArgs) []val {
	names := fnParamNames(fd)
	if len(ca.Args) != len(names) {
		l.fail(ca.Pos, "fn %s takes %s (%s), got %d", fd.Name, plural(len(names), "argument"), strings.Join(names, ", "), len(ca.Args))
	}
	out := make([]val, len(names))
	set := make([]bool, len(names))
	named := false
	for i, a := range ca.Args {
		k := i
		if a.Name == "" {
			if named {
				l.fail(a.Pos, "positional argument after a named one in call of %s", fd.Name)
			}
		} else {
			named = true
			k = -1
			for j, n := range names {
				if n == a.Name {
					k = j
				}
			}
			if k < 0 {
				l.fail(a.Pos, "fn %s has no parameter named %s (parameters: %s)", fd.Name, a.Name, strings.Join(names, ", "))
			}
			if set[k] {
				l.fail(a.Pos, "argument %s given twice in call of %s", a.Name, fd.Name)
			}
		}
		v := l.expr(a.Value)
		if v.c == nil && v.v == nil && v.aux == nil {
			l.fail(a.Value.Pos, "argument %s of %s has no value", names[k], fd.Name)
		}
		v.pos = a.Value.Pos
		out[k], set[k] = v, true
	}
	return out
}

// checkFnType checks a value against a function's written parameter or
// result type: an element type (f32, bool, a type parameter such as DTYPE)
// takes a run-time value of that element type, of any shape, or a
// constant that can have it; ptr[T] takes pointers to T; type a type;
// mask and score a mod of that kind.
func (l *lowerer) checkFnType(t *TypeRef, v val, what string, pos lexer.Position) {
	bad := func(want string) {
		l.fail(pos, "%s must be %s, got %s", what, want, v.describe())
	}
	switch t.Name {
	case "type":
		if v.c == nil || v.c.Kind != CType {
			bad("a type")
		}
		return
	case "mask", "score":
		if v.c != nil && v.c.Kind == CMod && v.c.Mod.Kind() != t.Name {
			l.fail(pos, "%s must be a %s mod, got %s mod %s", what, t.Name, v.c.Mod.Kind(), v.c.Mod)
		}
		if v.c == nil || v.c.Kind != CMod {
			bad("a " + t.Name + " mod")
		}
		return
	case "tensor":
		l.fail(t.Pos, "tensor[...] is only for aux tensor parameters of mods; leave the type out to take an aux tensor")
	}
	want := l.typeRef(t)
	name := typeName(want)
	switch {
	case v.v != nil:
		if v.v.Type.Elem != want.Elem || v.v.Type.Ptr != want.Ptr {
			bad(name)
		}
	case v.c != nil && !want.Ptr:
		ok := false
		switch v.c.Kind {
		case CInt:
			ok = want.Elem.IsInt() || want.Elem.IsFloat()
		case CFloat:
			ok = want.Elem.IsFloat()
		case CBool:
			ok = want.Elem == tir.I1
		}
		if !ok {
			bad(name)
		}
	default:
		bad(name)
	}
}

// values evaluates e for n names: one value, or for n > 1 the results of
// a function call, which e must be.
func (l *lowerer) values(e *Expr, n int) []val {
	if n == 1 {
		return []val{l.expr(e)}
	}
	if fd, ca := l.fnCall(e); fd != nil {
		vs := l.callFn(fd, ca)
		if len(vs) != n {
			l.fail(e.Pos, "%s returns %s, but %d names are given", fd.Name, plural(len(vs), "value"), n)
		}
		return vs
	}
	l.fail(e.Pos, "%d names take the results of a function call, e.g. a, b = f(x)", n)
	return nil
}

// fnCall returns the function e calls and the call's arguments when e is
// just a call of a function, `f(x, y)`.
func (l *lowerer) fnCall(e *Expr) (*FnDecl, *CallArgs) {
	pf := e.bare()
	if pf == nil || pf.Primary.Ident == nil || len(pf.Suffix) != 1 || pf.Suffix[0].Call == nil || l.lookup(*pf.Primary.Ident) != nil {
		return nil, nil
	}
	fd := l.p.fns[*pf.Primary.Ident]
	if fd == nil {
		return nil, nil
	}
	return fd, pf.Suffix[0].Call
}

// oneResult is the value of a function call used in an expression.
func (l *lowerer) oneResult(fd *FnDecl, vs []val, pos lexer.Position) val {
	switch len(vs) {
	case 0:
		return val{pos: pos, noValue: fd.Name}
	case 1:
		v := vs[0]
		v.pos = pos
		return v
	}
	l.fail(pos, "%s", bindHint(fd.Name, len(vs)))
	return val{}
}
