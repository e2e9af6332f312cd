package lang

import (
	"fmt"
	"math"
	"strings"

	"github.com/alecthomas/participle/v2/lexer"

	"github.com/fac-compiler/fac/tir"
)

// callMod lowers `m(b, h, q_idx, kv_idx)` (a score mod takes s first) to a
// call of the mod's function, specialized to the argument shapes. The
// callee's other inputs (batch, num_heads, aux tensors, run-time
// parameters) come from the caller: its own, passed on by name.
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
	f := l.modFunc(m, types, ca.Pos)
	args = append(args, l.envArgs(m, l.envs[f], ca.Pos)...)
	return val{v: l.b.Call(f.Name, args, f.Result...).Result(), pos: ca.Pos}
}

// modEnv is what a mod function reads besides its positions and the
// sequence lengths: the problem's batch and heads, aux tensors and
// run-time parameters, its own and those of the mods it calls. Those are
// passed through by name: in a mod and the mods it calls, one name is one
// tensor or one scalar.
type modEnv struct {
	mod          string     // the mod's name, for messages
	batch, heads *tir.Value // parameters; nil once lowered if unused
	aux          []*auxTensor
	scalars      []*scalarParam
}

// scalarParam is a run-time parameter: `offset: i32`.
type scalarParam struct {
	key  string // the mod's name for it
	name string // the kernel parameter's name ("mask.offset"), or key
	v    *tir.Value
	elem tir.Elem
	mod  string // the mod that declares it
}

func (s *scalarParam) param() ScalarParam { return ScalarParam{Name: s.key, Elem: s.elem, Mod: s.mod} }

func (e *modEnv) find(key string) (*auxTensor, *scalarParam) {
	for _, a := range e.aux {
		if a.key == key {
			return a, nil
		}
	}
	for _, s := range e.scalars {
		if s.key == key {
			return nil, s
		}
	}
	return nil, nil
}

func (e *modEnv) empty() bool {
	return e == nil || e.batch == nil && e.heads == nil && len(e.aux) == 0 && len(e.scalars) == 0
}

// inputs describes the env for callers outside the compiler.
func (e *modEnv) inputs() ModInputs {
	var in ModInputs
	if e == nil {
		return in
	}
	in.Batch, in.Heads = e.batch != nil, e.heads != nil
	for _, a := range e.aux {
		p := a.param()
		p.Name = a.key
		in.Aux = append(in.Aux, p)
	}
	for _, s := range e.scalars {
		in.Scalars = append(in.Scalars, s.param())
	}
	return in
}

// envArgs are the arguments for the inputs need of a function of mod m,
// found where the call is: in the calling mod (passing them through, and
// so adding them to its own inputs) or in the kernel (its parameters for
// its mod parameter m, and its batch and num_heads).
func (l *lowerer) envArgs(m *ModInst, need *modEnv, pos lexer.Position) []*tir.Value {
	if need == nil {
		return nil
	}
	var args []*tir.Value
	if need.batch != nil {
		args = append(args, l.sizeValue("batch", m, pos))
	}
	if need.heads != nil {
		args = append(args, l.sizeValue("num_heads", m, pos))
	}
	for _, a := range need.aux {
		t := l.resolveAux(m, a, pos)
		args = append(args, t.ptr, t.len)
	}
	for _, s := range need.scalars {
		args = append(args, l.resolveScalar(m, s, pos).v)
	}
	return args
}

// sizeValue is batch or num_heads where a call of m is lowered: the
// calling mod's parameter, or the kernel's (a parameter of that name,
// added when the kernel does not declare one).
func (l *lowerer) sizeValue(name string, m *ModInst, pos lexer.Position) *tir.Value {
	if l.env != nil {
		if name == "batch" {
			return l.env.batch
		}
		return l.env.heads
	}
	return l.kernelSize(name, m, pos)
}

// kernelSize returns the kernel's i32 parameter name (batch or num_heads),
// adding it to the kernel when it has none: launches bind it from the
// problem's shape.
func (l *lowerer) kernelSize(name string, m *ModInst, pos lexer.Position) *tir.Value {
	if v := l.kernelSizes[name]; v != nil {
		if !v.Type.Equal(tir.Scalar(tir.I32)) {
			l.fail(pos, "kernel parameter %s must be i32: the mods read it as the problem's %s", name, name)
		}
		return v
	}
	if l.kernelFn == nil {
		l.fail(pos, "calling %s %s needs %s in scope", m.Kind(), m.Name(), name)
	}
	v := &tir.Value{Type: tir.Scalar(tir.I32), Name: name}
	l.kernelFn.Params = append(l.kernelFn.Params, v)
	if l.kernelSizes == nil {
		l.kernelSizes = map[string]*tir.Value{}
	}
	l.kernelSizes[name] = v
	return v
}

// resolveAux finds the aux tensor a (of a function of m) where the call is.
func (l *lowerer) resolveAux(m *ModInst, a *auxTensor, pos lexer.Position) *auxTensor {
	if l.env != nil {
		t, s := l.env.find(a.key)
		switch {
		case s != nil:
			l.fail(pos, "%s reads aux tensor %s, but %s is a run-time parameter of %s; mods called together share inputs by name",
				a.mod, a.key, a.key, s.mod)
		case t != nil:
			if t.elem != a.elem || !sameDims(t.dims, a.dims) {
				l.fail(pos, "aux tensor %s is %s in %s but %s in %s; mods called together share aux tensors by name",
					a.key, t.param().Type(), t.mod, a.param().Type(), a.mod)
			}
			return t
		}
		t = &auxTensor{key: a.key, name: a.key, elem: a.elem, dims: a.dims, mod: a.mod,
			ptr: &tir.Value{Type: tir.PtrTo(a.elem), Name: a.key},
			len: &tir.Value{Type: tir.Scalar(tir.I32), Name: a.key + ".len"}}
		l.env.aux = append(l.env.aux, t)
		return t
	}
	env := l.kernelEnv[m]
	if env == nil {
		l.fail(pos, "%s reads aux tensors (%s); it can only be used as a kernel's mask or score parameter", m.Name(), a.key)
	}
	t, _ := env.find(a.key)
	if t == nil {
		l.fail(pos, "internal compiler error: kernel has no aux tensor %s for %s", a.key, m)
	}
	return t
}

// resolveScalar finds the run-time parameter s (of a function of m) where
// the call is.
func (l *lowerer) resolveScalar(m *ModInst, s *scalarParam, pos lexer.Position) *scalarParam {
	if l.env != nil {
		t, x := l.env.find(s.key)
		switch {
		case t != nil:
			l.fail(pos, "%s reads run-time parameter %s, but %s is an aux tensor of %s; mods called together share inputs by name",
				s.mod, s.key, s.key, t.mod)
		case x != nil:
			if x.elem != s.elem {
				l.fail(pos, "run-time parameter %s is %s in %s but %s in %s; mods called together share run-time parameters by name",
					s.key, elemLangName(x.elem), x.mod, elemLangName(s.elem), s.mod)
			}
			return x
		}
		x = &scalarParam{key: s.key, name: s.key, elem: s.elem, mod: s.mod, v: &tir.Value{Type: tir.Scalar(s.elem), Name: s.key}}
		l.env.scalars = append(l.env.scalars, x)
		return x
	}
	env := l.kernelEnv[m]
	if env == nil {
		l.fail(pos, "%s reads run-time parameter %s; it can only be used as a kernel's mask or score parameter", m.Name(), s.key)
	}
	_, x := env.find(s.key)
	if x == nil {
		l.fail(pos, "internal compiler error: kernel has no run-time parameter %s for %s", s.key, m)
	}
	return x
}

func sameDims(a, b []Dim) bool {
	if (a == nil) != (b == nil) || len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// modFunc returns the function for m specialized to the standard argument
// types, lowering it on first use. Its parameters are the standard ones,
// seqlen_q, seqlen_k, then its inputs (l.envs[f]): batch and num_heads if
// it reads them, a pointer and a length per aux tensor, a value per
// run-time parameter.
func (l *lowerer) modFunc(m *ModInst, types []tir.Type, pos lexer.Position) *tir.Func {
	var sig strings.Builder
	sig.WriteString(m.String())
	for _, t := range types {
		sig.WriteString(" " + t.String())
	}
	// Check for recursion before the cache: a mod being lowered is already
	// cached, and a call back into it must not find it there. Recursion is
	// a call of an instance being lowered: the same mod with the same
	// compile-time arguments, which would expand forever. Another instance
	// of the same mod is another mod: and_masks(causal, and_masks(document,
	// sliding_window(1024, 0))) calls the inner and_masks from the outer.
	inst := m.String()
	for i, n := range l.modStack {
		if n == inst {
			l.fail(pos, "%s calls itself%s; recursion is not allowed", m.Name(), cyclePath(l.modStack[i:], inst))
		}
	}
	if f, ok := l.funcs[sig.String()]; ok {
		l.childHeight = max(l.childHeight, l.heights[sig.String()])
		return f
	}
	if f := l.checkedStub(m, types, sig.String()); f != nil {
		return f
	}
	l.checkModDepth(m, pos)
	md := m.Decl
	nstd := len(types)
	if len(md.Params) < nstd {
		want := "(b, h, q_idx, kv_idx)"
		if md.Kind == "score" {
			want = "(score, b, h, q_idx, kv_idx)"
		}
		l.fail(md.Pos, "%s %s must take %s first, then aux tensors and run-time parameters", md.Kind, md.Name, want)
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
		l.b, l.scope, l.seqlenQ, l.seqlenK, l.kernelEnv, l.env = saved.b, saved.scope, saved.seqlenQ, saved.seqlenK, saved.kernelEnv, saved.env
		l.fnStack, l.fnBody = saved.fnStack, saved.fnBody
		l.modStack = l.modStack[:len(l.modStack)-1]
		l.modInsts = l.modInsts[:len(l.modInsts)-1]
		l.modDepth--
		// The height of the call tree below this mod, for the caller's.
		h := 1 + l.childHeight
		l.childHeight = max(saved.childHeight, h)
		if l.heights == nil {
			l.heights = map[string]int{}
		}
		l.heights[sig.String()] = h
	}()
	l.modStack = append(l.modStack, inst)
	l.modInsts = append(l.modInsts, m)
	l.modDepth++
	l.childHeight = 0
	l.scope = nil
	l.push()
	l.b = &tir.Builder{Block: f.Body}
	l.kernelEnv = nil
	// The mod's function is a body of its own: the functions expanded
	// around the call do not surround it.
	l.fnStack, l.fnBody = nil, nil
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
	env := &modEnv{mod: md.Name,
		batch: &tir.Value{Type: tir.Scalar(tir.I32), Name: "batch"},
		heads: &tir.Value{Type: tir.Scalar(tir.I32), Name: "num_heads"}}
	l.env = env
	for _, sz := range []struct {
		name string
		v    *tir.Value
	}{{"seqlen_q", l.seqlenQ}, {"seqlen_k", l.seqlenK}, {"batch", env.batch}, {"num_heads", env.heads}} {
		l.scope.vars[sz.name] = &binding{v: val{v: sz.v}, pos: md.Pos}
	}
	for _, prm := range md.Params[nstd:] {
		t := prm.Type
		switch {
		case t == nil:
			l.fail(prm.Pos, "extra parameter %s of %s needs a type: a run-time parameter (%s: i32) or an aux tensor (%s: tensor[i32])", prm.Name, md.Name, prm.Name, prm.Name)
		case t.Name == "tensor" && t.Elem != nil:
			e := l.elemType(t.Elem)
			a := &auxTensor{key: prm.Name, name: prm.Name, elem: e, mod: md.Name,
				ptr: &tir.Value{Type: tir.PtrTo(e), Name: prm.Name},
				len: &tir.Value{Type: tir.Scalar(tir.I32), Name: prm.Name + ".len"}}
			if t.Shape != nil {
				a.dims = l.auxDims(prm.Name, t.Shape)
			}
			l.define(prm.Name, val{aux: a, pos: prm.Pos}, false, prm.Pos)
			env.aux = append(env.aux, a)
		case t.Elem == nil && t.Shape == nil && t.Name != "tensor" && t.Name != "ptr":
			e := l.elemType(t)
			if e != tir.I32 && e != tir.F32 && e != tir.I1 {
				l.fail(t.Pos, "run-time parameter %s of %s must be i32, f32 or bool, got %s", prm.Name, md.Name, elemLangName(e))
			}
			s := &scalarParam{key: prm.Name, name: prm.Name, elem: e, mod: md.Name, v: &tir.Value{Type: tir.Scalar(e), Name: prm.Name}}
			l.define(prm.Name, val{v: s.v, pos: prm.Pos}, false, prm.Pos)
			env.scalars = append(env.scalars, s)
		default:
			l.fail(t.Pos, "extra parameter %s of %s must be a run-time parameter (%s: i32, f32 or bool) or an aux tensor (%s: tensor[i32])", prm.Name, md.Name, prm.Name, prm.Name)
		}
	}
	if md.Result != nil {
		want := "bool"
		if md.Kind == "score" {
			want = "f32"
		}
		if md.Result.Name != want || md.Result.Elem != nil || md.Result.Shape != nil {
			l.fail(md.Result.Pos, "a %s mod returns %s, not %s", md.Kind, want, md.Result.Name)
		}
	}

	stmts := md.Body.Stmts
	if len(stmts) == 0 || stmts[len(stmts)-1].Return == nil {
		l.fail(md.Body.Close(), "%s %s must end with a return statement", md.Kind, md.Name)
	}
	l.push()
	for _, s := range stmts[:len(stmts)-1] {
		l.stmtChecked(s, false)
	}
	ret := stmts[len(stmts)-1].Return
	l.b.Pos = irPos(ret.Pos)
	var out *tir.Value
	result := func() {
		if ret.Value == nil {
			l.fail(ret.Pos, "%s %s must return a value", md.Kind, md.Name)
		}
		if len(ret.More) > 0 {
			l.fail(ret.More[0].Pos, "%s %s must return one value, got %d", md.Kind, md.Name, 1+len(ret.More))
		}
		rv := l.expr(ret.Value)
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
	}
	if l.collecting() {
		l.tryStmt(nil, result)
		l.flushErrors()
	} else {
		result()
	}
	l.pop()
	out = l.broadcastTo(out, shape)
	l.b.Return(out)
	// The inputs become parameters: batch and num_heads only if read, so
	// that a kernel gets them only for mods that need them.
	if !usesValue(f.Body, env.batch) {
		env.batch = nil
	}
	if !usesValue(f.Body, env.heads) {
		env.heads = nil
	}
	f.Params = append(f.Params, l.seqlenQ, l.seqlenK)
	for _, v := range []*tir.Value{env.batch, env.heads} {
		if v != nil {
			f.Params = append(f.Params, v)
		}
	}
	for _, a := range env.aux {
		f.Params = append(f.Params, a.ptr, a.len)
	}
	for _, s := range env.scalars {
		f.Params = append(f.Params, s.v)
	}
	if l.envs == nil {
		l.envs = map[*tir.Func]*modEnv{}
	}
	l.envs[f] = env
	l.mod.Funcs = append(l.mod.Funcs, f)
	if l.check && env.empty() {
		l.p.markChecked(l.checkKey(sig.String()), 1+l.childHeight)
	}
	return f
}

// fullSignature gives a mod function lowered alone every size parameter,
// read or not, so that callers outside the compiler pass the same
// arguments to every mod (see ModInputs).
func (l *lowerer) fullSignature(f *tir.Func, nstd int) {
	env := l.envs[f]
	batch := &tir.Value{Type: tir.Scalar(tir.I32), Name: "batch"}
	heads := &tir.Value{Type: tir.Scalar(tir.I32), Name: "num_heads"}
	rest := f.Params[nstd+2:]
	if env != nil {
		if env.batch != nil {
			batch, rest = env.batch, rest[1:]
		}
		if env.heads != nil {
			heads, rest = env.heads, rest[1:]
		}
	}
	params := append(append([]*tir.Value{}, f.Params[:nstd+2]...), batch, heads)
	f.Params = append(params, rest...)
}

// usesValue reports whether any op in b (nested blocks included) reads v.
func usesValue(b *tir.Block, v *tir.Value) bool {
	found := false
	b.Walk(func(op *tir.Op) bool {
		for _, a := range op.Args {
			if a == v {
				found = true
			}
		}
		return !found
	})
	return found
}

// auxDims evaluates the declared shape of aux tensor name: each dimension
// an integer constant, or batch, num_heads, seqlen_q and seqlen_k combined
// with + and -, and * by constants.
func (l *lowerer) auxDims(name string, shape []*AddExpr) []Dim {
	out := make([]Dim, len(shape))
	for i, e := range shape {
		d := l.dimAdd(name, e)
		for _, c := range []int64{d.Const, d.Batch, d.Heads, d.SeqQ, d.SeqK} {
			if c < math.MinInt32 || c > math.MaxInt32 {
				l.fail(e.Pos, "dimension %d of aux tensor %s overflows i32", i, name)
			}
		}
		out[i] = d
	}
	return out
}

func (l *lowerer) dimFail(name string, pos lexer.Position, what string) {
	l.fail(pos, "dimension of aux tensor %s: %s; a dimension is an integer constant, or batch, num_heads, seqlen_q and seqlen_k combined with +, - and * by constants", name, what)
}

func (l *lowerer) dimAdd(name string, e *AddExpr) Dim {
	d := l.dimMul(name, e.Left)
	for _, op := range e.Rest {
		r := l.dimMul(name, op.Right)
		if op.Op == "-" {
			r = l.dimScale(name, r, -1, op.Pos)
		}
		var ok bool
		if d, ok = d.add(r); !ok {
			l.dimOverflow(name, op.Pos)
		}
	}
	return d
}

// dimScale is d.scale(c), failing at pos when a coefficient overflows.
func (l *lowerer) dimScale(name string, d Dim, c int64, pos lexer.Position) Dim {
	d, ok := d.scale(c)
	if !ok {
		l.dimOverflow(name, pos)
	}
	return d
}

func (l *lowerer) dimOverflow(name string, pos lexer.Position) {
	l.fail(pos, "dimension of aux tensor %s overflows: compile-time integers are exact, in 64 bits", name)
}

func (l *lowerer) dimMul(name string, e *MulExpr) Dim {
	d := l.dimUnary(name, e.Left)
	for _, op := range e.Rest {
		r := l.dimUnary(name, op.Right)
		switch {
		case op.Op != "*" && (!d.isConst() || !r.isConst()):
			l.dimFail(name, op.Pos, op.Op+" of a size")
		case op.Op == "/" || op.Op == "%":
			c := l.foldArith(map[string]tir.Kind{"/": tir.OpDiv, "%": tir.OpRem}[op.Op], IntConst(d.Const), IntConst(r.Const), op.Pos)
			d = Dim{Const: c.I}
		case d.isConst():
			d = l.dimScale(name, r, d.Const, op.Pos)
		case r.isConst():
			d = l.dimScale(name, d, r.Const, op.Pos)
		default:
			l.dimFail(name, op.Pos, "a product of sizes")
		}
	}
	return d
}

func (l *lowerer) dimUnary(name string, u *Unary) Dim {
	switch {
	case u.Op == "-":
		return l.dimScale(name, l.dimUnary(name, u.Operand), -1, u.Pos)
	case u.Op != "":
		l.dimFail(name, u.Pos, u.Op+" of a size")
	}
	p := u.Postfix
	if id := p.Primary.Ident; id != nil && len(p.Suffix) == 0 {
		switch *id {
		case "batch":
			return Dim{Batch: 1}
		case "num_heads":
			return Dim{Heads: 1}
		case "seqlen_q":
			return Dim{SeqQ: 1}
		case "seqlen_k":
			return Dim{SeqK: 1}
		}
	}
	if e := p.Primary.Paren; e != nil && len(p.Suffix) == 0 && len(e.Right) == 0 && len(e.Left.Right) == 0 && e.Left.Left.Op == "" {
		return l.dimAdd(name, e.Left.Left.Left)
	}
	v := l.postfix(p)
	if v.c == nil || v.c.Kind != CInt {
		l.dimFail(name, p.Pos, "got "+v.describe())
	}
	return Dim{Const: v.c.I}
}

func (d Dim) isConst() bool { return d.Batch == 0 && d.Heads == 0 && d.SeqQ == 0 && d.SeqK == 0 }

// add is d + o; ok is false when a coefficient overflows.
func (d Dim) add(o Dim) (Dim, bool) {
	return d.each(func(i int, x int64) (int64, bool) { return checkedInt("+", x, o.coef(i)) })
}

// scale is d * c; ok is false when a coefficient overflows.
func (d Dim) scale(c int64) (Dim, bool) {
	return d.each(func(_ int, x int64) (int64, bool) { return checkedInt("*", x, c) })
}

// coef is d's i-th coefficient: Const, Batch, Heads, SeqQ, SeqK.
func (d Dim) coef(i int) int64 { return [...]int64{d.Const, d.Batch, d.Heads, d.SeqQ, d.SeqK}[i] }

// each maps f over d's coefficients.
func (d Dim) each(f func(i int, x int64) (int64, bool)) (Dim, bool) {
	var c [5]int64
	for i := range c {
		var ok bool
		if c[i], ok = f(i, d.coef(i)); !ok {
			return Dim{}, false
		}
	}
	return Dim{c[0], c[1], c[2], c[3], c[4]}, true
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
