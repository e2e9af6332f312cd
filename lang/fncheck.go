package lang

import (
	"strings"

	"github.com/alecthomas/participle/v2/lexer"
)

// checkFn checks a function's declaration alone, for what does not depend
// on its arguments: parameter and result types, names (each defined
// before use, none shadowed, none assigned unless declared with var),
// return statements, the arity of the functions it calls, and recursion.
// What depends on the arguments (types of expressions, shapes) is checked
// where the function is called, as a kernel or a mod that calls it is
// lowered.
func (p *Program) checkFn(fd *FnDecl) error {
	c := &fnChecker{p: p}
	if err := c.check(fd); err != nil {
		return err
	}
	return p.fnCycle(fd)
}

// fnChecker walks a function's body with the scoping rules of lowering.
type fnChecker struct {
	p      *Program
	fd     *FnDecl
	scopes []map[string]fnLocal
	calls  []fnEdge // the function calls in the body, in order
}

type fnLocal struct {
	mutable bool
	line    int
}

type fnEdge struct {
	fn  string
	pos lexer.Position
}

func (c *fnChecker) fail(pos lexer.Position, format string, args ...any) {
	panic(failure{err: c.p.errorf(pos, format, args...)})
}

func (c *fnChecker) check(fd *FnDecl) (err error) {
	defer func() {
		if r := recover(); r != nil {
			f, ok := r.(failure)
			if !ok {
				panic(r)
			}
			err = f.err
		}
	}()
	c.fn(fd)
	return nil
}

func (c *fnChecker) push() { c.scopes = append(c.scopes, map[string]fnLocal{}) }
func (c *fnChecker) pop()  { c.scopes = c.scopes[:len(c.scopes)-1] }

func (c *fnChecker) lookup(name string) (fnLocal, bool) {
	for i := len(c.scopes) - 1; i >= 0; i-- {
		if b, ok := c.scopes[i][name]; ok {
			return b, true
		}
	}
	return fnLocal{}, false
}

func (c *fnChecker) define(name string, mutable bool, pos lexer.Position) {
	if builtinNames[name] {
		c.fail(pos, "%s is a built-in name and cannot be redefined", name)
	}
	if prev, ok := c.lookup(name); ok {
		c.fail(pos, "%s is already defined at line %d (names cannot be shadowed)", name, prev.line)
	}
	c.scopes[len(c.scopes)-1][name] = fnLocal{mutable: mutable, line: pos.Line}
}

func (c *fnChecker) fn(fd *FnDecl) {
	c.fd = fd
	c.push()
	for _, prm := range fd.Params {
		if prm.Type != nil {
			c.typ(prm.Type)
		}
		c.define(prm.Name, false, prm.Pos)
	}
	for _, t := range fd.Results {
		c.typ(t)
	}
	c.push()
	stmts := fd.Body.Stmts
	for i, s := range stmts {
		if s.Return != nil && i < len(stmts)-1 {
			c.fail(s.Pos, "return is only allowed as the last statement of a function")
		}
		c.stmt(s)
	}
	if fd.Results != nil {
		if n := returnCount(fd); n != len(fd.Results) {
			at := fd.Body.Close()
			if len(stmts) > 0 && stmts[len(stmts)-1].Return != nil {
				at = stmts[len(stmts)-1].Pos
			}
			c.fail(at, "fn %s declares %s but returns %d", fd.Name, plural(len(fd.Results), "result"), n)
		}
	}
	c.pop()
	c.pop()
}

// fnResults is how many values a call of fd gives: its declared results,
// or else the values of its last statement, a return.
func fnResults(fd *FnDecl) int {
	if fd.Results != nil {
		return len(fd.Results)
	}
	return returnCount(fd)
}

// returnCount is how many values fd's body returns.
func returnCount(fd *FnDecl) int {
	stmts := fd.Body.Stmts
	if len(stmts) == 0 || stmts[len(stmts)-1].Return == nil || stmts[len(stmts)-1].Return.Value == nil {
		return 0
	}
	return 1 + len(stmts[len(stmts)-1].Return.More)
}

// typ checks a written parameter or result type: an element type or a
// parameter declared before (a type parameter), ptr[T], type, mask, score.
func (c *fnChecker) typ(t *TypeRef) {
	switch t.Name {
	case "type", "mask", "score":
		if t.Elem != nil || t.Shape != nil {
			c.fail(t.Pos, "%s takes no element type", t.Name)
		}
		return
	case "tensor":
		c.fail(t.Pos, "tensor[...] is only for aux tensor parameters of mods; leave the type out to take an aux tensor")
	case "ptr":
		if t.Elem == nil {
			c.fail(t.Pos, "ptr needs an element type: ptr[f32]")
		}
		if t.Shape != nil {
			c.fail(t.Pos, "only aux tensors have a shape: tensor[%s]%s", t.Name, "[...]")
		}
		c.elem(t.Elem)
		return
	}
	c.elem(t)
}

func (c *fnChecker) elem(t *TypeRef) {
	if t.Elem != nil || t.Shape != nil {
		c.fail(t.Pos, "expected an element type, got %s[...]", t.Name)
	}
	if _, ok := elemByLangName(t.Name); ok {
		return
	}
	if _, ok := c.lookup(t.Name); ok {
		return // a type parameter, checked where the function is called
	}
	c.fail(t.Pos, "unknown type %s (want f32, f16, bf16, i32, bool, or a type parameter)", t.Name)
}

func (c *fnChecker) block(b *Block) {
	c.push()
	for _, s := range b.Stmts {
		if s.Return != nil {
			c.fail(s.Pos, "return is only allowed as the last statement of a function")
		}
		c.stmt(s)
	}
	c.pop()
}

func (c *fnChecker) stmt(s *Stmt) {
	switch {
	case s.Let != nil:
		c.binding(s.Let.Value, len(s.Let.More)+1)
		for _, n := range append([]string{s.Let.Name}, s.Let.More...) {
			c.define(n, false, s.Let.Pos)
		}
	case s.Var != nil:
		c.binding(s.Var.Value, len(s.Var.More)+1)
		for _, n := range append([]string{s.Var.Name}, s.Var.More...) {
			c.define(n, true, s.Var.Pos)
		}
	case s.Assign != nil:
		for _, n := range append([]string{s.Assign.Name}, s.Assign.More...) {
			b, ok := c.lookup(n)
			if !ok {
				c.fail(s.Assign.Pos, "undefined: %s%s", n, didYouMean(n, c.visibleNames()))
			}
			if !b.mutable {
				c.fail(s.Assign.Pos, "cannot assign to %s: declared with let (use var)", n)
			}
		}
		c.binding(s.Assign.Value, len(s.Assign.More)+1)
	case s.For != nil:
		for _, a := range s.For.Args {
			c.expr(a.Value, 1)
		}
		c.push()
		c.define(s.For.Var, false, s.For.Pos)
		c.block(s.For.Body)
		c.pop()
	case s.If != nil:
		for i := s.If; i != nil; i = i.ElseIf {
			c.expr(i.Cond, 1)
			c.block(i.Then)
			if i.Else != nil {
				c.block(i.Else)
			}
		}
	case s.Return != nil:
		if s.Return.Value != nil {
			for _, e := range append([]*Expr{s.Return.Value}, s.Return.More...) {
				c.expr(e, 1)
			}
		}
	case s.Expr != nil:
		c.expr(s.Expr, -1) // a statement: a call of a function with no results
	}
}

// binding checks the value of a let, var or assignment of n names.
func (c *fnChecker) binding(e *Expr, n int) {
	if n == 1 {
		c.expr(e, 1)
		return
	}
	if pf := e.bare(); pf != nil && pf.Primary.Ident != nil && len(pf.Suffix) == 1 && pf.Suffix[0].Call != nil {
		if _, local := c.lookup(*pf.Primary.Ident); !local && c.p.fns[*pf.Primary.Ident] != nil {
			c.expr(e, n)
			return
		}
	}
	c.fail(e.Pos, "%d names take the results of a function call, e.g. a, b = f(x)", n)
}

// expr checks an expression; want is how many values a function call that
// is the whole expression must return (-1: none or any, a statement).
func (c *fnChecker) expr(e *Expr, want int) {
	if pf := e.bare(); pf != nil {
		c.postfix(pf, want)
		return
	}
	c.and(e.Left)
	for _, r := range e.Right {
		c.and(r)
	}
}

func (c *fnChecker) and(e *AndExpr) {
	c.cmp(e.Left)
	for _, r := range e.Right {
		c.cmp(r)
	}
}

func (c *fnChecker) cmp(e *CmpExpr) {
	c.add(e.Left)
	if e.Op != "" && e.Right != nil {
		c.add(e.Right)
	}
}

func (c *fnChecker) add(e *AddExpr) {
	c.mul(e.Left)
	for _, r := range e.Rest {
		c.mul(r.Right)
	}
}

func (c *fnChecker) mul(e *MulExpr) {
	c.unary(e.Left)
	for _, r := range e.Rest {
		c.unary(r.Right)
	}
}

func (c *fnChecker) unary(u *Unary) {
	if u.Postfix != nil {
		c.postfix(u.Postfix, 1)
		return
	}
	c.unary(u.Operand)
}

func (c *fnChecker) postfix(pf *Postfix, want int) {
	suffix := pf.Suffix
	var call *CallArgs
	if len(suffix) > 0 {
		call = suffix[0].Call
	}
	if id := pf.Primary.Ident; id != nil {
		c.ident(*id, pf.Primary.Pos, call, want)
	} else {
		c.primary(pf.Primary)
	}
	for _, s := range suffix {
		if s.Call != nil {
			for _, a := range s.Call.Args {
				c.expr(a.Value, 1)
			}
			continue
		}
		for _, it := range s.Index.Items {
			if it.Expr != nil {
				c.expr(it.Expr, 1)
			}
		}
	}
}

func (c *fnChecker) primary(p *Primary) {
	switch {
	case p.Paren != nil:
		c.expr(p.Paren, 1)
	case p.List != nil:
		for _, e := range p.List.Items {
			c.expr(e, 1)
		}
	}
}

// ident resolves a name as lowering does: locals, then built-in values,
// types, constants, mods, functions and built-in functions.
func (c *fnChecker) ident(name string, pos lexer.Position, call *CallArgs, want int) {
	called := call != nil
	if _, ok := c.lookup(name); ok {
		return
	}
	switch name {
	case "inf", "nan":
		return
	case "seqlen_q", "seqlen_k", "batch", "num_heads":
		c.fail(pos, "%s is not visible in a function, which sees its parameters and the global names only: pass it as an argument", name)
	}
	if _, ok := elemByLangName(name); ok {
		return
	}
	if _, ok := c.p.consts[name]; ok {
		return
	}
	if _, ok := c.p.mods[name]; ok {
		return
	}
	if fd, ok := c.p.fns[name]; ok {
		if !called {
			c.fail(pos, "%s is a function; call it: %s(...)", name, name)
		}
		c.calls = append(c.calls, fnEdge{fn: name, pos: call.Pos})
		c.arity(fd, call)
		n := fnResults(fd)
		switch {
		case want > 1 && n != want:
			c.fail(pos, "%s returns %s, but %d names are given", name, plural(n, "value"), want)
		case want <= 1 && n > 1:
			c.fail(call.Pos, "%s", bindHint(name, n))
		case want == 1 && n == 0:
			c.fail(pos, "%s returns no value", name)
		}
		return
	}
	if builtinFuncs[name] {
		if !called {
			c.fail(pos, "%s is a function; call it: %s(...)", name, name)
		}
		return
	}
	if _, ok := c.p.kernels[name]; ok {
		c.fail(pos, "kernel %s cannot be used as a value", name)
	}
	c.fail(pos, "undefined: %s%s", name, didYouMean(name, c.visibleNames()))
}

// visibleNames lists the names in scope in the function: its locals, the
// program's global names and the built-in ones.
func (c *fnChecker) visibleNames() []string {
	var out []string
	for _, s := range c.scopes {
		for n := range s {
			out = append(out, n)
		}
	}
	return append(out, c.p.globalNames()...)
}

// fnCycle reports a chain of function calls from fd that comes back to a
// function in it: functions are expanded where they are called, so they
// cannot recurse.
func (p *Program) fnCycle(fd *FnDecl) error {
	edges := map[*FnDecl][]fnEdge{}
	callsOf := func(f *FnDecl) []fnEdge {
		if e, ok := edges[f]; ok {
			return e
		}
		c := &fnChecker{p: p}
		_ = c.check(f) // the calls before an error, if any: the error is f's own
		edges[f] = c.calls
		return c.calls
	}
	done := map[*FnDecl]bool{}
	var path []string
	var visit func(f *FnDecl) error
	visit = func(f *FnDecl) error {
		path = append(path, f.Name)
		defer func() { path = path[:len(path)-1] }()
		for _, e := range callsOf(f) {
			for i, n := range path {
				if n == e.fn {
					return p.errorf(e.pos, "%s calls itself%s; recursion is not allowed", e.fn, cyclePath(path[i:], e.fn))
				}
			}
			g := p.fns[e.fn]
			if done[g] {
				continue
			}
			if err := visit(g); err != nil {
				return err
			}
		}
		done[f] = true
		return nil
	}
	return visit(fd)
}

// arity checks the arguments of a call of fd against its parameters, as
// fnArgs does when the call is expanded.
func (c *fnChecker) arity(fd *FnDecl, ca *CallArgs) {
	names := fnParamNames(fd)
	if len(ca.Args) != len(names) {
		c.fail(ca.Pos, "fn %s takes %s (%s), got %d", fd.Name, plural(len(names), "argument"), strings.Join(names, ", "), len(ca.Args))
	}
	named := false
	seen := map[string]bool{}
	for _, a := range ca.Args {
		if a.Name == "" {
			if named {
				c.fail(a.Pos, "positional argument after a named one in call of %s", fd.Name)
			}
			continue
		}
		named = true
		found := false
		for _, n := range names {
			found = found || n == a.Name
		}
		if !found {
			c.fail(a.Pos, "fn %s has no parameter named %s (parameters: %s)", fd.Name, a.Name, strings.Join(names, ", "))
		}
		if seen[a.Name] {
			c.fail(a.Pos, "argument %s given twice in call of %s", a.Name, fd.Name)
		}
		seen[a.Name] = true
	}
}

// fnParamNames lists the parameters of fd.
func fnParamNames(fd *FnDecl) []string {
	names := make([]string, len(fd.Params))
	for i, p := range fd.Params {
		names[i] = p.Name
	}
	return names
}

// bindHint is the error for a call of a function of n > 1 results used as
// one value.
func bindHint(fn string, n int) string {
	names := make([]string, n)
	for i := range names {
		names[i] = string(rune('a' + i%26))
	}
	return fn + " returns " + plural(n, "value") + ": bind them with let " + strings.Join(names, ", ") + " = " + fn + "(...)"
}
