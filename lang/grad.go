package lang

import (
	"errors"
	"fmt"
	"strings"

	"github.com/alecthomas/participle/v2/lexer"

	"github.com/fac-compiler/fac/passes"
	"github.com/fac-compiler/fac/tir"
)

// The built-ins for backward kernels: atomic_add and grad.

// atomicAdd lowers atomic_add(ptr, value, mask?): like store, but adding
// into f32 memory atomically, so many programs can accumulate into one
// buffer.
func (l *lowerer) atomicAdd(ca *CallArgs) val {
	a := l.bindArgs("atomic_add", ca, []string{"ptr", "value", "mask"}, 2)
	p := l.pointerArg(a["ptr"], "atomic_add")
	if p.Type.Elem != tir.F32 {
		l.fail(a["ptr"].pos, "atomic_add needs f32 pointers, got %s", typeName(p.Type))
	}
	vv := a["value"]
	v := l.materialize(vv, tir.F32)
	if v.Type.Ptr || v.Type.Elem != tir.F32 {
		l.fail(vv.pos, "atomic_add of %s: the value must be f32 (convert with f32(x))", vv.describe())
	}
	if !canBroadcastTo(v.Type.Shape, p.Type.Shape) {
		l.fail(vv.pos, "shape mismatch in atomic_add: value %s, pointers %s", tir.ShapeString(v.Type.Shape), tir.ShapeString(p.Type.Shape))
	}
	var mv *tir.Value
	if m, ok := a["mask"]; ok {
		mv = l.maskArg(m, p.Type.Shape, "atomic_add")
	}
	l.b.AtomicAdd(p, l.broadcastTo(v, p.Type.Shape), mv)
	return val{pos: ca.Pos}
}

// grad lowers grad(m, ds, s, b, h, q_idx, kv_idx, aux=true): the gradient
// through score mod m. ds is the gradient of a loss with respect to m's
// result at (s, b, h, q_idx, kv_idx); the value is the gradient with
// respect to s (ds · ∂m/∂s, shaped like s). With aux (a compile-time bool,
// default true) and a kernel's score parameter that reads float aux
// tensors, it also adds ds · ∂m/∂aux into each one's gradient buffer: a
// kernel parameter `<param>.<aux>.grad` (ptr[f32], as long as the aux
// tensor), added to the kernel where grad is first called.
//
// The derivative comes from passes.Differentiate on m's tile IR, lowered
// for these argument shapes; an op it cannot differentiate is an error at
// that op in m's source.
func (l *lowerer) grad(ca *CallArgs) val {
	pos := ca.Pos
	a := l.bindArgs("grad", ca, []string{"mod", "ds", "s", "b", "h", "q_idx", "kv_idx", "aux"}, 7)
	mv := a["mod"]
	if mv.c == nil || mv.c.Kind != CMod || mv.c.Mod.Kind() != "score" {
		l.fail(mv.pos, "grad's first argument must be a score mod, got %s", mv.describe())
	}
	m := l.bound(mv.c.Mod, pos)
	withAux := true
	if x, ok := a["aux"]; ok {
		if x.c == nil || x.c.Kind != CBool {
			l.fail(x.pos, "grad's aux must be a compile-time bool, got %s", x.describe())
		}
		withAux = x.c.B
	}

	// The mod's arguments, as a call of the mod takes them.
	names := []string{"s", "b", "h", "q_idx", "kv_idx"}
	var args []*tir.Value
	var types []tir.Type
	var shape []int
	for i, n := range names {
		e := tir.I32
		if i == 0 {
			e = tir.F32
		}
		v := a[n]
		x := l.materialize(v, e)
		if x.Type.Ptr || x.Type.Elem != e {
			l.fail(v.pos, "argument %s of grad must be %s, got %s", n, e, v.describe())
		}
		s, ok := tir.BroadcastShapes(shape, x.Type.Shape)
		if !ok {
			l.fail(v.pos, "shape mismatch in grad of %s: %s and %s do not broadcast", m.Name(), tir.ShapeString(shape), tir.ShapeString(x.Type.Shape))
		}
		shape = s
		args = append(args, x)
		types = append(types, x.Type)
	}
	l.checkTile(shape, pos, "grad of "+m.Name())
	dv := a["ds"]
	ds := l.materialize(dv, tir.F32)
	if ds.Type.Ptr || ds.Type.Elem != tir.F32 || !canBroadcastTo(ds.Type.Shape, shape) {
		l.fail(dv.pos, "grad's ds must be f32 broadcastable to %s (the shape of the mod's result), got %s", tir.ShapeString(shape), dv.describe())
	}
	ds = l.broadcastTo(ds, shape)
	if l.seqlenQ == nil || l.seqlenK == nil {
		l.fail(pos, "grad of %s needs seqlen_q and seqlen_k in scope (declare them as i32 kernel parameters)", m.Name())
	}
	args = append([]*tir.Value{ds}, args...)
	args = append(args, l.seqlenQ, l.seqlenK)
	g, env := l.gradFunc(m, types, withAux, pos)
	if len(env.aux) > 0 && l.env == nil && l.kernelEnv[m] == nil {
		l.fail(pos, "%s reads aux tensors (%s); grad can only take it as a kernel's score parameter", m.Name(), env.aux[0].key)
	}
	args = append(args, l.envArgs(m, env, pos)...)
	// One gradient buffer per float aux tensor, in parameter order, as
	// Differentiate takes them.
	if withAux {
		for _, a := range env.aux {
			if a.elem.IsFloat() {
				args = append(args, l.gradParam(l.resolveAux(m, a, pos), pos))
			}
		}
	}
	return val{v: l.b.Call(g.Name, args, g.Result...).Result(), pos: pos}
}

// gradParam is the kernel parameter holding aux tensor t's gradient,
// added on first use.
func (l *lowerer) gradParam(t *auxTensor, pos lexer.Position) *tir.Value {
	if l.kernelFn == nil {
		l.fail(pos, "gradients of aux tensor %s need a kernel to hold them", t.name)
	}
	name := t.name + ".grad"
	for _, p := range l.kernelFn.Params {
		if p.Name == name {
			return p
		}
	}
	p := &tir.Value{Type: tir.PtrTo(tir.F32), Name: name}
	l.kernelFn.Params = append(l.kernelFn.Params, p)
	return p
}

// gradFunc returns the derivative of m for these argument types, derived
// on first use: m is lowered afresh (never a checking stub, so checking a
// kernel reports what compiling it would) and differentiated.
func (l *lowerer) gradFunc(m *ModInst, types []tir.Type, withAux bool, pos lexer.Position) (*tir.Func, *modEnv) {
	var sig strings.Builder
	fmt.Fprintf(&sig, "grad aux=%v %s", withAux, m.String())
	for _, t := range types {
		sig.WriteString(" " + t.String())
	}
	if f, ok := l.funcs[sig.String()]; ok {
		return f, l.envs[f]
	}
	fl := l.p.newLowerer()
	fl.maxTile = l.maxTile
	var f *tir.Func
	if err := fl.catch(func() { f = fl.modFunc(m, types, pos) }); err != nil {
		panic(failure{err: err})
	}
	env := fl.envs[f]
	var mem []int
	if withAux {
		for i, p := range f.Params {
			if p.Type.Ptr && p.Type.Elem.IsFloat() {
				mem = append(mem, i)
			}
		}
	}
	name := "grad." + sanitize(m.String())
	if l.funcNames == nil {
		l.funcNames = map[string]bool{}
	}
	for i := 1; l.funcNames[name]; i++ {
		name = fmt.Sprintf("grad.%s.%d", sanitize(m.String()), i)
	}
	g, err := passes.Differentiate(fl.mod, f, passes.GradSpec{Name: name, WRT: 0, Memory: mem})
	if err != nil {
		var de *passes.DiffError
		if errors.As(err, &de) && de.Op.Pos.Line != 0 {
			at := lexer.Position{Filename: de.Op.Pos.File, Line: de.Op.Pos.Line, Column: de.Op.Pos.Col}
			l.fail(at, "grad of score %s (called at %s:%d:%d): cannot differentiate %s: %s", m, pos.Filename, pos.Line, pos.Column, de.Op.Kind, de.Why)
		}
		l.fail(pos, "grad of score %s: %v", m, err)
	}
	l.funcNames[name] = true
	l.funcs[sig.String()] = g
	if l.envs == nil {
		l.envs = map[*tir.Func]*modEnv{}
	}
	l.envs[g] = env
	l.mod.Funcs = append(l.mod.Funcs, g)
	return g, env
}
