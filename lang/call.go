package lang

import (
	"fmt"
	"math"
	"strings"

	"github.com/alecthomas/participle/v2/lexer"

	"github.com/fac-compiler/fac/tir"
)

// builtinFuncs are the functions of the language; builtinNames also holds
// names that cannot be redefined.
var builtinFuncs = map[string]bool{
	"program_id": true, "arange": true, "zeros": true, "full": true, "load": true, "store": true,
	"dot": true, "trans": true, "max": true, "min": true, "sum": true, "exp": true, "exp2": true,
	"log": true, "log2": true, "tanh": true, "sqrt": true, "abs": true, "select": true, "where": true,
	"cdiv": true, "atomic_add": true, "grad": true, "num_programs": true, "num_sms": true, "prefetch": true, "group_id": true,
	"last_arrival": true,
}

var builtinNames = func() map[string]bool {
	m := map[string]bool{"inf": true, "nan": true, "true": true, "false": true, "None": true,
		"seqlen_q": false, "f32": true, "f16": true, "bf16": true, "i32": true, "bool": true}
	for k := range builtinFuncs {
		m[k] = true
	}
	delete(m, "seqlen_q")
	return m
}()

func (l *lowerer) call(fn val, ca *CallArgs) val {
	switch {
	case fn.c != nil && fn.c.Kind == CType:
		a := l.bindArgs("conversion to "+fn.c.T.String(), ca, []string{"x"}, 1)
		return l.convert(a["x"], fn.c.T, ca.Pos)
	case fn.c != nil && fn.c.Kind == CMod:
		m := fn.c.Mod
		if m.Args == nil && len(m.Decl.CParams) > 0 {
			return constVal(Const{Kind: CMod, Mod: l.instantiate(m.Decl, ca)}, ca.Pos)
		}
		return l.callMod(l.bound(m, ca.Pos), ca)
	}
	l.fail(ca.Pos, "cannot call %s", fn.describe())
	return val{}
}

// bound returns m with default compile-time arguments filled in.
func (l *lowerer) bound(m *ModInst, pos lexer.Position) *ModInst {
	if m.Args != nil || len(m.Decl.CParams) == 0 {
		return m
	}
	return l.instantiate(m.Decl, &CallArgs{Pos: pos})
}

// instantiate binds a mod's compile-time parameters from call arguments.
func (l *lowerer) instantiate(md *ModDecl, ca *CallArgs) *ModInst {
	args := map[string]Const{}
	for i, a := range ca.Args {
		name := a.Name
		if name == "" {
			if i >= len(md.CParams) {
				l.fail(a.Pos, "%s takes %s, got %d", md.Name, plural(len(md.CParams), "compile-time argument"), len(ca.Args))
			}
			name = md.CParams[i].Name
		}
		v := l.expr(a.Value)
		if v.c == nil {
			l.fail(a.Pos, "argument %s of %s must be a compile-time constant", name, md.Name)
		}
		if _, dup := args[name]; dup {
			l.fail(a.Pos, "argument %s given twice", name)
		}
		c := *v.c
		for _, cp := range md.CParams {
			if cp.Name == name {
				// Check the kind here, to point at the argument.
				c = l.coerceConst(c, l.cparamKind(cp), cp, md.Kind+" "+md.Name, a.Pos)
			}
		}
		args[name] = c
	}
	saved := l.scope
	l.scope = nil
	l.push()
	consts := l.bindCParams(md.Kind+" "+md.Name, md.CParams, args, ca.Pos)
	l.scope = saved
	return &ModInst{Decl: md, Args: consts, prog: l.p}
}

// bindArgs matches positional and named arguments to parameter names; the
// first `required` are mandatory.
func (l *lowerer) bindArgs(what string, ca *CallArgs, names []string, required int) map[string]val {
	out := map[string]val{}
	named := false
	for i, a := range ca.Args {
		name := a.Name
		if name == "" {
			if named {
				l.fail(a.Pos, "positional argument after a named one in %s", what)
			}
			if i >= len(names) {
				l.fail(a.Pos, "%s takes at most %s, got %d", what, plural(len(names), "argument"), len(ca.Args))
			}
			name = names[i]
		} else {
			named = true
			ok := false
			for _, n := range names {
				ok = ok || n == name
			}
			if !ok {
				l.fail(a.Pos, "%s has no argument named %s (arguments: %s)", what, name, strings.Join(names, ", "))
			}
		}
		if _, dup := out[name]; dup {
			l.fail(a.Pos, "argument %s given twice in %s", name, what)
		}
		out[name] = l.expr(a.Value)
	}
	for _, n := range names[:required] {
		if _, ok := out[n]; !ok {
			l.fail(ca.Pos, "%s needs argument %s (%s)", what, n, strings.Join(names[:required], ", "))
		}
	}
	return out
}

// plural writes a count and a noun: "1 argument", "2 arguments".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

func (l *lowerer) constInt(v val, what string) int {
	if v.c == nil || v.c.Kind != CInt {
		l.fail(v.pos, "%s must be a compile-time integer, got %s", what, v.describe())
	}
	return int(v.c.I)
}

// shapeArg reads a shape written as a list of compile-time integers.
func (l *lowerer) shapeArg(ca *CallArgs, what string) []int {
	if len(ca.Args) == 0 || ca.Args[0].Name != "" {
		l.fail(ca.Pos, "%s needs a shape first, e.g. %s([64, 64], ...)", what, what)
	}
	e := ca.Args[0].Value
	var list *List
	if e.Left != nil && len(e.Right) == 0 && len(e.Left.Right) == 0 && e.Left.Left.Op == "" &&
		len(e.Left.Left.Left.Rest) == 0 && len(e.Left.Left.Left.Left.Rest) == 0 {
		if u := e.Left.Left.Left.Left.Left; u.Postfix != nil && len(u.Postfix.Suffix) == 0 {
			list = u.Postfix.Primary.List
		}
	}
	if list == nil || len(list.Items) == 0 {
		l.fail(e.Pos, "%s needs a shape written as a list, e.g. [BLOCK_M, HEAD_DIM]", what)
	}
	shape := make([]int, len(list.Items))
	for i, it := range list.Items {
		shape[i] = l.constInt(l.expr(it), "a shape dimension")
		if shape[i] <= 0 {
			l.fail(it.Pos, "shape dimensions must be positive, got %d", shape[i])
		}
	}
	return shape
}

func (l *lowerer) dtypeArg(v val, what string) tir.Elem {
	if v.c == nil || v.c.Kind != CType {
		l.fail(v.pos, "%s must be a type (f32, bf16, ...), got %s", what, v.describe())
	}
	return v.c.T
}

var unaryKinds = map[string]tir.Kind{"exp": tir.OpExp, "exp2": tir.OpExp2, "log": tir.OpLog, "log2": tir.OpLog2,
	"tanh": tir.OpTanh, "sqrt": tir.OpSqrt, "abs": tir.OpAbs}

var unaryFold = map[string]func(float64) float64{"exp": math.Exp, "exp2": math.Exp2, "log": math.Log,
	"log2": math.Log2, "tanh": math.Tanh, "sqrt": math.Sqrt, "abs": math.Abs}

func (l *lowerer) builtin(name string, ca *CallArgs) val {
	pos := ca.Pos
	switch name {
	case "atomic_add":
		return l.atomicAdd(ca)
	case "grad":
		return l.grad(ca)
	case "last_arrival":
		return l.lastArrival(ca)
	case "program_id", "num_programs":
		a := l.bindArgs(name, ca, []string{"axis"}, 1)
		axis := l.constInt(a["axis"], name+"'s axis")
		if axis < 0 || axis > 2 {
			l.fail(pos, "%s axis must be 0, 1 or 2, got %d", name, axis)
		}
		if name == "num_programs" {
			return val{v: l.b.NumPrograms(axis), pos: pos}
		}
		return val{v: l.b.ProgramID(axis), pos: pos}
	case "num_sms", "group_id":
		l.bindArgs(name, ca, nil, 0)
		l.kernelOnly(name, pos)
		if name == "group_id" {
			return val{v: l.b.GroupID(), pos: pos}
		}
		return val{v: l.b.NumSMs(), pos: pos}
	case "prefetch":
		a := l.bindArgs(name, ca, []string{"ptr", "mask"}, 1)
		l.kernelOnly(name, pos)
		p := l.pointerArg(a["ptr"], "prefetch")
		var mv *tir.Value
		if m, ok := a["mask"]; ok {
			mv = l.maskArg(m, p.Type.Shape, "prefetch")
		}
		l.b.Prefetch(p, mv)
		return val{pos: pos}
	case "arange":
		a := l.bindArgs(name, ca, []string{"start", "end"}, 2)
		s, e := l.constInt(a["start"], "arange's start"), l.constInt(a["end"], "arange's end")
		if e <= s {
			l.fail(pos, "arange needs end > start, got arange(%d, %d)", s, e)
		}
		l.checkTile([]int{int(l.intOp("-", int64(e), int64(s), pos))}, pos, "arange")
		return val{v: l.b.Arange(s, e), pos: pos}
	case "cdiv":
		a := l.bindArgs(name, ca, []string{"a", "b"}, 2)
		x, y := l.constInt(a["a"], "cdiv's a"), l.constInt(a["b"], "cdiv's b")
		if y <= 0 {
			l.fail(pos, "cdiv needs a positive divisor")
		}
		// (x + y - 1) / y, exactly: x + y - 1 may not fit in 64 bits when
		// the result does, and for x >= 0 it is x / y rounded up.
		q := int64(x / y)
		if x >= 0 && x%y != 0 {
			q++
		} else if x < 0 {
			q = int64((x + y - 1) / y)
		}
		return constVal(IntConst(q), pos)
	case "zeros", "full":
		shape := l.shapeArg(ca, name)
		l.checkTile(shape, pos, name)
		rest := &CallArgs{Pos: ca.Pos, Args: ca.Args[1:]}
		var fill val
		var e tir.Elem
		if name == "zeros" {
			a := l.bindArgs(name, rest, []string{"dtype"}, 1)
			e, fill = l.dtypeArg(a["dtype"], "zeros' dtype"), constVal(IntConst(0), pos)
		} else {
			a := l.bindArgs(name, rest, []string{"value", "dtype"}, 2)
			e, fill = l.dtypeArg(a["dtype"], "full's dtype"), a["value"]
		}
		if fill.c == nil {
			return val{v: l.broadcastTo(l.convertValue(l.runtime(fill), e, fill.pos), shape), pos: pos}
		}
		if fill.c.Kind == CBool && e == tir.I1 {
			return val{v: l.b.Const(tir.Tensor(e, shape...), fill.c.B), pos: pos}
		}
		if fill.c.Kind == CFloat && !e.IsFloat() {
			l.fail(fill.pos, "cannot fill %s with %s", e, fill.describe())
		}
		if e.IsFloat() {
			return val{v: l.b.Const(tir.Tensor(e, shape...), fill.c.float()), pos: pos}
		}
		if fill.c.Kind != CInt {
			l.fail(fill.pos, "cannot fill %s with %s", e, fill.describe())
		}
		return val{v: l.b.Const(tir.Tensor(e, shape...), fill.c.I), pos: pos}
	case "load":
		a := l.bindArgs(name, ca, []string{"ptr", "mask", "other"}, 1)
		p := l.pointerArg(a["ptr"], "load")
		m, hasMask := a["mask"]
		o, hasOther := a["other"]
		if !hasMask {
			if hasOther {
				l.fail(pos, "load's other needs a mask")
			}
			return val{v: l.b.Load(p, nil, nil), pos: pos}
		}
		mv := l.maskArg(m, p.Type.Shape, "load")
		if !hasOther {
			o = constVal(IntConst(0), pos)
			if p.Type.Elem == tir.I1 {
				o = constVal(BoolConst(false), pos)
			}
		}
		ov := l.materialize(o, p.Type.Elem)
		if ov.Type.Elem != p.Type.Elem || !canBroadcastTo(ov.Type.Shape, p.Type.Shape) {
			l.fail(o.pos, "load's other must be %s broadcastable to %s, got %s", p.Type.Elem, tir.ShapeString(p.Type.Shape), o.describe())
		}
		return val{v: l.b.Load(p, mv, l.broadcastTo(ov, p.Type.Shape)), pos: pos}
	case "store":
		a := l.bindArgs(name, ca, []string{"ptr", "value", "mask"}, 2)
		p := l.pointerArg(a["ptr"], "store")
		vv := a["value"]
		v := l.materialize(vv, p.Type.Elem)
		if v.Type.Ptr || v.Type.Elem != p.Type.Elem {
			l.fail(vv.pos, "store of %s through %s: element types differ (convert with %s(x))", typeName(v.Type), typeName(p.Type), p.Type.Elem)
		}
		if !canBroadcastTo(v.Type.Shape, p.Type.Shape) {
			l.fail(vv.pos, "shape mismatch in store: value %s, pointers %s", tir.ShapeString(v.Type.Shape), tir.ShapeString(p.Type.Shape))
		}
		var mv *tir.Value
		if m, ok := a["mask"]; ok {
			mv = l.maskArg(m, p.Type.Shape, "store")
		}
		l.b.Store(p, l.broadcastTo(v, p.Type.Shape), mv)
		return val{pos: pos}
	case "dot":
		a := l.bindArgs(name, ca, []string{"a", "b", "acc"}, 2)
		x, y := l.runtime(a["a"]), l.runtime(a["b"])
		if x.Type.Rank() != 2 || y.Type.Rank() != 2 {
			l.fail(pos, "dot needs 2-D tiles, got %s and %s", typeName(x.Type), typeName(y.Type))
		}
		if x.Type.Shape[1] != y.Type.Shape[0] {
			l.fail(pos, "shape mismatch in dot: %s x %s (inner dimensions %d and %d differ)", tir.ShapeString(x.Type.Shape), tir.ShapeString(y.Type.Shape), x.Type.Shape[1], y.Type.Shape[0])
		}
		if x.Type.Elem != y.Type.Elem || !x.Type.Elem.IsFloat() || x.Type.Ptr || y.Type.Ptr {
			l.fail(pos, "dot needs two float tiles of one type, got %s and %s", typeName(x.Type), typeName(y.Type))
		}
		shape := []int{x.Type.Shape[0], y.Type.Shape[1]}
		l.checkTile(shape, pos, "dot")
		var acc *tir.Value
		if c, ok := a["acc"]; ok {
			acc = l.materialize(c, tir.F32)
			if acc.Type.Elem != tir.F32 || !canBroadcastTo(acc.Type.Shape, shape) {
				l.fail(c.pos, "dot's acc must be f32%s, got %s", tir.ShapeString(shape), c.describe())
			}
			acc = l.broadcastTo(acc, shape)
		} else {
			acc = l.b.Const(tir.Tensor(tir.F32, shape...), 0.0)
		}
		return val{v: l.b.Dot(x, y, acc), pos: pos}
	case "trans":
		a := l.bindArgs(name, ca, []string{"x"}, 1)
		x := l.runtime(a["x"])
		if x.Type.Rank() != 2 {
			l.fail(pos, "trans needs a 2-D tile, got %s", typeName(x.Type))
		}
		return val{v: l.b.Trans(x), pos: pos}
	case "max", "min", "sum":
		a := l.bindArgs(name, ca, []string{"x", "y", "axis"}, 1)
		if ax, ok := a["axis"]; ok {
			if _, two := a["y"]; two {
				l.fail(pos, "%s takes either two values or one value and axis=", name)
			}
			x := l.runtime(a["x"])
			axis := l.constInt(ax, name+"'s axis")
			if axis < 0 {
				axis += x.Type.Rank()
			}
			if axis < 0 || axis >= x.Type.Rank() {
				l.fail(ax.pos, "axis %d out of range for %s", l.constInt(ax, "axis"), typeName(x.Type))
			}
			if x.Type.Ptr || x.Type.Elem == tir.I1 {
				l.fail(pos, "cannot reduce %s", typeName(x.Type))
			}
			return val{v: l.b.Reduce(name, x, axis), pos: pos}
		}
		y, two := a["y"]
		if name == "sum" || !two {
			l.fail(pos, "%s(x, axis=N) reduces one axis; %s", name, map[bool]string{true: "sum takes no second value", false: "max(a, b) and min(a, b) take two values"}[name == "sum"])
		}
		x := a["x"]
		if x.c != nil && y.c != nil {
			fx, fy := x.c.float(), y.c.float()
			r := *x.c
			if (fx > fy) != (name == "max") {
				r = *y.c
			}
			return constVal(r, pos)
		}
		k := tir.OpMax
		if name == "min" {
			k = tir.OpMin
		}
		xv, yv := l.unify(x, y, pos, name)
		if xv.Type.Elem == tir.I1 || xv.Type.Ptr {
			l.fail(pos, "%s needs numbers, got %s", name, typeName(xv.Type))
		}
		return val{v: l.b.Binary(k, xv, yv), pos: pos}
	case "select", "where":
		a := l.bindArgs(name, ca, []string{"cond", "a", "b"}, 3)
		c := a["cond"]
		if c.c != nil {
			if c.c.Kind != CBool {
				l.fail(c.pos, "%s's condition must be bool, got %s", name, c.describe())
			}
			if c.c.B {
				return a["a"]
			}
			return a["b"]
		}
		cv := l.runtime(c)
		if cv.Type.Elem != tir.I1 || cv.Type.Ptr {
			l.fail(c.pos, "%s's condition must be bool, got %s", name, c.describe())
		}
		x, y := l.unify(a["a"], a["b"], pos, name)
		shape, ok := tir.BroadcastShapes(cv.Type.Shape, x.Type.Shape)
		if !ok {
			l.fail(pos, "shape mismatch in %s: condition %s, values %s", name, tir.ShapeString(cv.Type.Shape), tir.ShapeString(x.Type.Shape))
		}
		l.checkTile(shape, pos, name)
		return val{v: l.b.Select(l.broadcastTo(cv, shape), l.broadcastTo(x, shape), l.broadcastTo(y, shape)), pos: pos}
	}
	// Elementwise math.
	a := l.bindArgs(name, ca, []string{"x"}, 1)
	x := a["x"]
	if x.c != nil && (x.c.Kind == CInt || x.c.Kind == CFloat) {
		if name == "abs" && x.c.Kind == CInt {
			if x.c.I < 0 {
				return constVal(IntConst(l.intNeg(x.c.I, pos)), pos)
			}
			return *&x
		}
		return constVal(FloatConst(unaryFold[name](x.c.float())), pos)
	}
	v := l.runtime(x)
	if v.Type.Ptr || v.Type.Elem == tir.I1 || (name != "abs" && !v.Type.Elem.IsFloat()) {
		l.fail(x.pos, "%s needs a float argument, got %s (convert with f32(x))", name, x.describe())
	}
	return val{v: l.b.Unary(unaryKinds[name], v), pos: pos}
}

// kernelOnly rejects a built-in that a mod must not call: a mod's value
// may depend only on its arguments, the same on every device.
func (l *lowerer) kernelOnly(name string, pos lexer.Position) {
	if l.inMod() {
		l.fail(pos, "%s is for kernels, not mods: a mod's value depends only on its arguments", name)
	}
}

func (l *lowerer) pointerArg(v val, what string) *tir.Value {
	if v.v == nil || !v.v.Type.Ptr {
		l.fail(v.pos, "%s needs pointers, got %s", what, v.describe())
	}
	return v.v
}

func (l *lowerer) maskArg(m val, shape []int, what string) *tir.Value {
	if m.c != nil && m.c.Kind != CBool {
		l.fail(m.pos, "%s's mask must be bool, got %s", what, m.describe())
	}
	mv := l.materialize(m, tir.I1)
	if mv.Type.Elem != tir.I1 || mv.Type.Ptr {
		l.fail(m.pos, "%s's mask must be bool, got %s", what, m.describe())
	}
	if !canBroadcastTo(mv.Type.Shape, shape) {
		l.fail(m.pos, "shape mismatch in %s: mask %s, pointers %s", what, tir.ShapeString(mv.Type.Shape), tir.ShapeString(shape))
	}
	return l.broadcastTo(mv, shape)
}

// convert implements T(x) conversions.
func (l *lowerer) convert(x val, e tir.Elem, pos lexer.Position) val {
	if x.c != nil {
		c := *x.c
		switch {
		case e.IsFloat() && (c.Kind == CInt || c.Kind == CFloat):
			return constVal(FloatConst(c.float()), pos)
		case e.IsInt() && c.Kind == CInt:
			return constVal(c, pos)
		case e.IsInt() && c.Kind == CFloat:
			return constVal(IntConst(l.floatToInt(c.F, pos)), pos)
		case e == tir.I1 && c.Kind == CBool:
			return constVal(c, pos)
		}
		l.fail(pos, "cannot convert %s to %s", x.describe(), e)
	}
	return val{v: l.convertValue(l.runtime(x), e, pos), pos: pos}
}

func (l *lowerer) convertValue(v *tir.Value, e tir.Elem, pos lexer.Position) *tir.Value {
	if v.Type.Ptr {
		l.fail(pos, "cannot convert pointers")
	}
	if e == tir.I1 && v.Type.Elem != tir.I1 {
		l.fail(pos, "cannot convert %s to bool; compare instead (x != 0)", typeName(v.Type))
	}
	return l.b.Cast(v, e)
}
