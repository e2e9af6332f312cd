package lang

import (
	"fmt"
	"strings"

	"github.com/alecthomas/participle/v2/lexer"

	"github.com/fac-compiler/fac/tir"
)

// callMod lowers `m(b, h, q_idx, kv_idx)` (a score mod takes s first) to a
// call of the mod's function, specialized to the argument shapes.
func (l *lowerer) callMod(m *ModInst, ca *CallArgs) val {
	std := []string{"b", "h", "q_idx", "kv_idx"}
	if m.Kind() == "score" {
		std = append([]string{"score"}, std...)
	}
	if len(ca.Args) != len(std) {
		l.fail(ca.Pos, "%s %s takes %d arguments (%s), got %d", m.Kind(), m.Name(), len(std), strings.Join(std, ", "), len(ca.Args))
	}
	var args []*tir.Value
	var types []tir.Type
	var shape []int
	for i, a := range ca.Args {
		if a.Name != "" {
			l.fail(a.Pos, "mod arguments are positional")
		}
		e := tir.I32
		if m.Kind() == "score" && i == 0 {
			e = tir.F32
		}
		v := l.expr(a.Value)
		x := l.materialize(v, e)
		if x.Type.Ptr || x.Type.Elem != e {
			l.fail(a.Pos, "argument %s of %s must be %s, got %s", std[i], m.Name(), e, v.describe())
		}
		s, ok := tir.BroadcastShapes(shape, x.Type.Shape)
		if !ok {
			l.fail(a.Pos, "shape mismatch in call of %s: %s and %s do not broadcast", m.Name(), tir.ShapeString(shape), tir.ShapeString(x.Type.Shape))
		}
		shape = s
		l.checkTile(shape, a.Pos, "call of "+m.Name())
		args = append(args, x)
		types = append(types, x.Type)
	}
	if l.seqlenQ == nil || l.seqlenK == nil {
		l.fail(ca.Pos, "calling %s %s needs seqlen_q and seqlen_k in scope (declare them as i32 kernel parameters)", m.Kind(), m.Name())
	}
	args = append(args, l.seqlenQ, l.seqlenK)
	if auxs := m.AuxParams(); len(auxs) > 0 {
		have := l.auxFor(m)
		if have == nil {
			l.fail(ca.Pos, "%s reads aux tensors (%s); it can only be used as a kernel's mask or score parameter", m.Name(), auxs[0].Name)
		}
		for _, a := range auxs {
			t := have[a.Name]
			args = append(args, t.ptr, t.len)
		}
	}
	f := l.modFunc(m, types, ca.Pos)
	return val{v: l.b.Call(f.Name, args, f.Result...).Result(), pos: ca.Pos}
}

// auxFor finds the aux tensors bound to a mod instance, if it is one of the
// kernel's mod parameters (or the mod being lowered alone).
func (l *lowerer) auxFor(m *ModInst) map[string]*auxTensor {
	if a, ok := l.kernelAux[m]; ok {
		return a
	}
	return nil
}

// modFunc returns the function for m specialized to the standard argument
// types, lowering it on first use.
func (l *lowerer) modFunc(m *ModInst, types []tir.Type, pos lexer.Position) *tir.Func {
	var sig strings.Builder
	sig.WriteString(m.String())
	for _, t := range types {
		sig.WriteString(" " + t.String())
	}
	// Check for recursion before the cache: a mod being lowered is already
	// cached, and a call back into it must not find it there.
	for i, n := range l.modStack {
		if n == m.Name() {
			l.fail(pos, "%s calls itself%s; recursion is not allowed", m.Name(), cyclePath(l.modStack[i:], m.Name()))
		}
	}
	if f, ok := l.funcs[sig.String()]; ok {
		l.childHeight = max(l.childHeight, l.heights[sig.String()])
		return f
	}
	if f := l.checkedStub(m, types, sig.String()); f != nil {
		return f
	}
	l.checkModDepth(m.Name(), pos)
	md := m.Decl
	nstd := len(types)
	if len(md.Params) < nstd {
		want := "(b, h, q_idx, kv_idx)"
		if md.Kind == "score" {
			want = "(score, b, h, q_idx, kv_idx)"
		}
		l.fail(md.Pos, "%s %s must take %s first, then aux tensors", md.Kind, md.Name, want)
	}
	var shape []int
	for _, t := range types {
		shape, _ = tir.BroadcastShapes(shape, t.Shape)
	}
	res := tir.Bool(shape)
	if md.Kind == "score" {
		res = tir.Tensor(tir.F32, shape...)
	}

	f := &tir.Func{Name: l.funcName(m), Result: []tir.Type{res}, Body: &tir.Block{}, Pos: irPos(md.Pos)}
	f.SetAttr("role", tir.Ident(md.Kind))
	l.funcs[sig.String()] = f

	// Save the caller's context; a mod sees only globals and its own names.
	saved := *l
	defer func() {
		l.b, l.scope, l.seqlenQ, l.seqlenK, l.kernelAux = saved.b, saved.scope, saved.seqlenQ, saved.seqlenK, saved.kernelAux
		l.modStack = l.modStack[:len(l.modStack)-1]
		l.modDepth--
		// The height of the call tree below this mod, for the caller's.
		h := 1 + l.childHeight
		l.childHeight = max(saved.childHeight, h)
		if l.heights == nil {
			l.heights = map[string]int{}
		}
		l.heights[sig.String()] = h
	}()
	l.modStack = append(l.modStack, m.Name())
	l.modDepth++
	l.childHeight = 0
	l.scope = nil
	l.push()
	l.b = &tir.Builder{Block: f.Body}
	l.kernelAux = map[*ModInst]map[string]*auxTensor{}
	for i, cp := range md.CParams {
		l.define(cp.Name, constVal(m.Args[i], cp.Pos), false, cp.Pos)
	}
	for i, prm := range md.Params[:nstd] {
		want := tir.I32
		if md.Kind == "score" && i == 0 {
			want = tir.F32
		}
		if prm.Type != nil {
			if got := l.typeRef(prm.Type); !got.Equal(tir.Scalar(want)) {
				l.fail(prm.Type.Pos, "parameter %s of %s %s must be %s, got %s", prm.Name, md.Kind, md.Name, want, typeName(got))
			}
		}
		v := &tir.Value{Type: types[i], Name: prm.Name}
		f.Params = append(f.Params, v)
		l.define(prm.Name, val{v: v, pos: prm.Pos}, false, prm.Pos)
	}
	l.seqlenQ = &tir.Value{Type: tir.Scalar(tir.I32), Name: "seqlen_q"}
	l.seqlenK = &tir.Value{Type: tir.Scalar(tir.I32), Name: "seqlen_k"}
	f.Params = append(f.Params, l.seqlenQ, l.seqlenK)
	l.scope.vars["seqlen_q"] = &binding{v: val{v: l.seqlenQ}, pos: md.Pos}
	l.scope.vars["seqlen_k"] = &binding{v: val{v: l.seqlenK}, pos: md.Pos}
	aux := map[string]*auxTensor{}
	for _, prm := range md.Params[nstd:] {
		t := prm.Type
		if t == nil || t.Name != "tensor" || t.Elem == nil {
			l.fail(prm.Pos, "extra parameter %s of %s must be an aux tensor, e.g. %s: tensor[i32]", prm.Name, md.Name, prm.Name)
		}
		e := l.elemType(t.Elem)
		a := &auxTensor{name: prm.Name, elem: e,
			ptr: &tir.Value{Type: tir.PtrTo(e), Name: prm.Name},
			len: &tir.Value{Type: tir.Scalar(tir.I32), Name: prm.Name + ".len"}}
		f.Params = append(f.Params, a.ptr, a.len)
		aux[prm.Name] = a
		l.define(prm.Name, val{aux: a, pos: prm.Pos}, false, prm.Pos)
	}
	l.kernelAux[m] = aux
	if md.Result != nil {
		want := "bool"
		if md.Kind == "score" {
			want = "f32"
		}
		if md.Result.Name != want || md.Result.Elem != nil {
			l.fail(md.Result.Pos, "a %s mod returns %s, not %s", md.Kind, want, md.Result.Name)
		}
	}

	stmts := md.Body.Stmts
	if len(stmts) == 0 || stmts[len(stmts)-1].Return == nil {
		l.fail(md.Body.Close(), "%s %s must end with a return statement", md.Kind, md.Name)
	}
	l.push()
	for _, s := range stmts[:len(stmts)-1] {
		l.stmt(s, false)
	}
	ret := stmts[len(stmts)-1].Return
	l.b.Pos = irPos(ret.Pos)
	if ret.Value == nil {
		l.fail(ret.Pos, "%s %s must return a value", md.Kind, md.Name)
	}
	rv := l.expr(ret.Value)
	var out *tir.Value
	if md.Kind == "mask" {
		if (rv.c != nil && rv.c.Kind != CBool) || (rv.v != nil && (rv.v.Type.Elem != tir.I1 || rv.v.Type.Ptr)) || rv.aux != nil {
			l.fail(ret.Value.Pos, "mask %s must return bool, but returns %s", md.Name, rv.describe())
		}
		out = l.materialize(rv, tir.I1)
	} else {
		if (rv.c != nil && rv.c.Kind != CInt && rv.c.Kind != CFloat) || (rv.v != nil && (rv.v.Type.Elem != tir.F32 || rv.v.Type.Ptr)) || rv.aux != nil {
			l.fail(ret.Value.Pos, "score %s must return f32, but returns %s (convert with f32(x))", md.Name, rv.describe())
		}
		out = l.materialize(rv, tir.F32)
	}
	l.pop()
	out = l.broadcastTo(out, shape)
	l.b.Return(out)
	l.mod.Funcs = append(l.mod.Funcs, f)
	if l.check && len(md.Params) == nstd {
		l.p.markChecked(l.checkKey(sig.String()), 1+l.childHeight)
	}
	return f
}

// funcName picks an unused function name for m. It keeps a set rather than
// asking l.mod.Func, which scans every function: a kernel may call many mods.
func (l *lowerer) funcName(m *ModInst) string {
	name := m.Kind() + "." + sanitize(m.String())
	if l.funcNames == nil {
		l.funcNames = map[string]bool{}
	}
	for i := 1; l.funcNames[name]; i++ {
		name = fmt.Sprintf("%s.%s.%d", m.Kind(), sanitize(m.String()), i)
	}
	l.funcNames[name] = true
	return name
}

// checkKey identifies what checking a mod function found: its signature,
// under the tile limit it was checked with.
func (l *lowerer) checkKey(sig string) string { return fmt.Sprintf("%s max%d", sig, l.maxTile) }

// checkedStub returns, when only checking, a stand-in for a mod function
// an earlier CheckDecl of the program lowered without error, with the same
// argument types and tile limit, and whose calls would not nest too deep
// here: it would pass again, the same way. Checking each declaration of a
// file anew would otherwise take time quadratic in the number of mods (and
// cubic for mods that call many mods). Mods with aux tensors are always
// lowered.
func (l *lowerer) checkedStub(m *ModInst, types []tir.Type, sig string) *tir.Func {
	md := m.Decl
	if !l.check || len(md.Params) != len(types) {
		return nil
	}
	h, ok := l.p.checkedHeight(l.checkKey(sig))
	if !ok || l.modDepth+h > MaxRefDepth {
		return nil
	}
	var shape []int
	for _, t := range types {
		shape, _ = tir.BroadcastShapes(shape, t.Shape)
	}
	res, zero := tir.Bool(shape), any(false)
	if md.Kind == "score" {
		res, zero = tir.Tensor(tir.F32, shape...), any(0.0)
	}
	f := &tir.Func{Name: l.funcName(m), Result: []tir.Type{res}, Body: &tir.Block{}, Pos: irPos(md.Pos)}
	f.SetAttr("role", tir.Ident(md.Kind))
	for i, t := range types {
		f.Params = append(f.Params, &tir.Value{Type: t, Name: md.Params[i].Name})
	}
	f.Params = append(f.Params, &tir.Value{Type: tir.Scalar(tir.I32), Name: "seqlen_q"}, &tir.Value{Type: tir.Scalar(tir.I32), Name: "seqlen_k"})
	b := &tir.Builder{Block: f.Body}
	b.Return(b.Const(res, zero))
	l.funcs[sig] = f
	if l.heights == nil {
		l.heights = map[string]int{}
	}
	l.heights[sig] = h
	l.childHeight = max(l.childHeight, h)
	l.mod.Funcs = append(l.mod.Funcs, f)
	return f
}

// cyclePath prints a chain of mods or constants being lowered, closed by
// the name that repeats: ` (a -> b -> a)`; empty for direct self-reference.
func cyclePath(stack []string, again string) string {
	if len(stack) < 2 {
		return ""
	}
	parts := make([]string, 0, len(stack)+1)
	for _, n := range stack {
		parts = append(parts, strings.TrimPrefix(n, "const "))
	}
	return " (" + strings.Join(append(parts, again), " -> ") + ")"
}

// sanitizer is built once: building a Replacer costs more than using it.
var sanitizer = strings.NewReplacer("(", "_", ")", "", ", ", "_", " ", "", "-", "m", ".", "p", "+", "")

func sanitize(s string) string {
	return strings.TrimRight(sanitizer.Replace(s), "_")
}
