package lang

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"

	"github.com/alecthomas/participle/v2/lexer"

	"github.com/fac-compiler/fac/tir"
)

// Instance selects a kernel and its compile-time arguments. Missing
// arguments take the kernel's defaults.
type Instance struct {
	Kernel string
	Args   map[string]Const // by compile-time parameter name; mods as CMod consts
}

// Lower instantiates a kernel and lowers it, with the mods it calls, to a
// tile-IR module. Errors point into the user's source.
func (p *Program) Lower(inst Instance) (*tir.Module, error) {
	kd, ok := p.kernels[inst.Kernel]
	if !ok {
		return nil, fmt.Errorf("no kernel named %q (have: %s)", inst.Kernel, strings.Join(p.Kernels(), ", "))
	}
	l := p.newLowerer()
	if err := l.catch(func() { l.kernel(kd, inst.Args) }); err != nil {
		return nil, err
	}
	return l.mod, nil
}

// LowerMod lowers a mod alone as a function of scalars (b, h, q_idx, kv_idx
// [, s first for scores], seqlen_q, seqlen_k, batch, num_heads, then its
// inputs as ModInputs describes). The reference device evaluates it element
// by element.
func (p *Program) LowerMod(m *ModInst) (*tir.Module, error) {
	return p.lowerMod(m, false)
}

func (p *Program) lowerMod(m *ModInst, check bool) (*tir.Module, error) {
	l := p.newLowerer()
	l.check = check
	l.collect, l.collectDepth = check, 1
	err := l.catch(func() {
		n := 4
		if m.Kind() == "score" {
			n = 5
		}
		types := make([]tir.Type, n)
		for i := range types {
			types[i] = tir.Scalar(tir.I32)
		}
		if m.Kind() == "score" {
			types[0] = tir.Scalar(tir.F32)
		}
		f := l.modFunc(m, types, m.Decl.Pos)
		l.fullSignature(f, n)
		f.Name = m.Kind()
	})
	if err != nil {
		return nil, err
	}
	return l.mod, nil
}

// modInputs finds what mod m reads besides its positions by lowering it
// alone, once per instance.
func (p *Program) modInputs(m *ModInst) (ModInputs, error) {
	if m.Args == nil && len(m.Decl.CParams) > 0 {
		return m.declaredInputs(), nil // not instantiated: nothing to lower
	}
	key := m.String()
	p.constMu.Lock()
	in, ok := p.inputs[key]
	p.constMu.Unlock()
	if ok {
		return in, nil
	}
	l := p.newLowerer()
	err := l.catch(func() {
		types := []tir.Type{tir.Scalar(tir.I32), tir.Scalar(tir.I32), tir.Scalar(tir.I32), tir.Scalar(tir.I32)}
		if m.Kind() == "score" {
			types = append([]tir.Type{tir.Scalar(tir.F32)}, types...)
		}
		in = l.envs[l.modFunc(m, types, m.Decl.Pos)].inputs()
	})
	if err != nil {
		return ModInputs{}, err
	}
	p.constMu.Lock()
	if p.inputs == nil {
		p.inputs = map[string]ModInputs{}
	}
	p.inputs[key] = in
	p.constMu.Unlock()
	return in, nil
}

// LowerModTile lowers a mod as a function over one tile of positions:
// q_idx is tensor<bq x 1 x i32>, kv_idx tensor<1 x bk x i32> (a score mod's
// s is tensor<bq x bk x f32>), b and h scalars, then seqlen_q, seqlen_k,
// batch, num_heads and the inputs, as for LowerMod; the result is bq × bk.
// Block-mask builders evaluate it tile by tile.
func (p *Program) LowerModTile(m *ModInst, bq, bk int) (*tir.Module, error) {
	l := p.newLowerer()
	// The block-mask builders run this on the CPU, not in a CTA: a tile as
	// large as the one asked for is fine.
	l.maxTile = max(l.maxTile, bq*bk)
	err := l.catch(func() {
		types := []tir.Type{tir.Scalar(tir.I32), tir.Scalar(tir.I32), tir.Tensor(tir.I32, bq, 1), tir.Tensor(tir.I32, 1, bk)}
		if m.Kind() == "score" {
			types = append([]tir.Type{tir.Tensor(tir.F32, bq, bk)}, types...)
		}
		f := l.modFunc(m, types, m.Decl.Pos)
		l.fullSignature(f, len(types))
		f.Name = m.Kind()
	})
	if err != nil {
		return nil, err
	}
	return l.mod, nil
}

// EvalConst evaluates a compile-time expression, such as a value given on a
// command line: `64`, `bf16`, `sliding_window(256, 0)`. Mods come back with
// their default compile-time arguments bound.
func (p *Program) EvalConst(e *Expr) (out Const, err error) {
	defer func() { err = withExprSource(err, e) }()
	l := p.newLowerer()
	err = l.catch(func() {
		l.push()
		v := l.expr(e)
		if v.c == nil {
			l.fail(e.Pos, "%s is not a compile-time constant", v.describe())
		}
		out = *v.c
		if out.Kind == CMod {
			out.Mod = l.bound(out.Mod, e.Pos)
		}
	})
	return out, err
}

// ResolveMod evaluates e to a mod of the given kind ("mask" or "score").
func (p *Program) ResolveMod(e *Expr, kind string) (m *ModInst, err error) {
	defer func() { err = withExprSource(err, e) }()
	// Name the common mistakes plainly: an unknown name, and arguments
	// given to a mod that takes no compile-time parameters.
	if pf := e.bare(); pf != nil && pf.Primary.Ident != nil && len(pf.Suffix) <= 1 {
		name := *pf.Primary.Ident
		md, isMod := p.mods[name]
		_, isConst := p.consts[name]
		switch {
		case !isMod && !isConst:
			if s := Suggest(name, p.Mods(kind)); s != "" {
				return nil, &UnknownModError{Name: name, Kind: kind, Err: p.errorf(e.Pos, "unknown %s mod %s; did you mean %s?", kind, name, s)}
			}
			return nil, &UnknownModError{Name: name, Kind: kind, Err: p.errorf(e.Pos, "unknown %s mod %s (%s mods: %s)", kind, name, kind, strings.Join(p.Mods(kind), ", "))}
		case isMod && md.Kind == kind && len(md.CParams) == 0 && len(pf.Suffix) == 1 && pf.Suffix[0].Call != nil:
			return nil, p.errorf(pf.Suffix[0].Pos, "%s mod %s takes no compile-time arguments; write just %s", kind, name, name)
		}
	}
	c, err := p.EvalConst(e)
	if err != nil {
		return nil, err
	}
	if c.Kind != CMod || c.Mod.Kind() != kind {
		have := p.Mods(kind)
		return nil, p.errorf(e.Pos, "%s is not a %s mod (%s mods: %s)", c.String(), kind, kind, strings.Join(have, ", "))
	}
	return c.Mod, nil
}

// ModNames lists a kernel's compile-time parameters of kind mask or score.
func (p *Program) KernelParams(kernel string) ([]*CParam, bool) {
	kd, ok := p.kernels[kernel]
	if !ok {
		return nil, false
	}
	return kd.CParams, true
}

type lowerer struct {
	p     *Program
	mod   *tir.Module
	b     *tir.Builder
	scope *scope
	// per-function context
	seqlenQ, seqlenK *tir.Value
	env              *modEnv               // the inputs of the mod being lowered; nil in a kernel
	envs             map[*tir.Func]*modEnv // the inputs of each mod (and grad) function made
	kernelEnv        map[*ModInst]*modEnv  // the kernel's parameters for its mod parameters' inputs
	kernelSizes      map[string]*tir.Value // the kernel's batch and num_heads parameters
	kernelFn         *tir.Func
	funcs            map[string]*tir.Func
	funcNames        map[string]bool // names of the mod functions made so far
	heights          map[string]int  // by mod signature: the longest chain of mod calls from it, itself included
	childHeight      int             // the largest height among the mods called so far by the one being lowered
	constHeight      int             // the same for the constants used by the one being evaluated
	check            bool            // only checking (CheckDecl): mods already checked may be stubbed
	modStack         []string        // the mods (as instances: sliding_window(256, 0)) and constants ("const N") being lowered, outermost first
	modInsts         []*ModInst      // the mods of modStack, outermost first
	modDepth         int             // how many of modStack are mods
	constBusy        map[string]int  // constants being evaluated: index in modStack
	maxTile          int             // the most elements a tile may have (see checkTile)
	fnStack          []string        // the functions being expanded (callFn), outermost first
	fnCalls          int             // function calls expanded so far (see MaxFnCalls)
	fnBody           *FnDecl         // the function whose body is being expanded; nil in a kernel's or mod's own
	// collect: checking goes on after an error in a statement of the body
	// at mod depth collectDepth (the declaration being checked), and errs
	// holds the errors so far (see tryStmt).
	collect      bool
	collectDepth int
	errs         []error
}

func (p *Program) newLowerer() *lowerer {
	// Until a kernel or mod body is being lowered, run-time ops (such as
	// program_id in a compile-time argument) go to a scratch block and are
	// refused by the caller, which wanted a constant.
	return &lowerer{p: p, mod: &tir.Module{}, funcs: map[string]*tir.Func{}, b: scratchBuilder(), maxTile: MaxTileElements}
}

func scratchBuilder() *tir.Builder { return &tir.Builder{Block: &tir.Block{}} }

// failure carries a positioned error out of deep recursion.
type failure struct {
	err  error
	stop bool // the check ends here: no statement recovers from it (see tryStmt)
}

func (l *lowerer) fail(pos lexer.Position, format string, args ...any) {
	panic(failure{err: l.p.errorf(pos, format, args...)})
}

func (l *lowerer) catch(fn func()) (err error) {
	defer func() {
		if r := recover(); r != nil {
			f, ok := r.(failure)
			if !ok {
				panic(r)
			}
			err = f.err
		}
	}()
	fn()
	return nil
}

func irPos(p lexer.Position) tir.Pos { return tir.Pos{File: p.Filename, Line: p.Line, Col: p.Column} }

// scope maps names to bindings; blocks nest scopes.
type scope struct {
	parent *scope
	vars   map[string]*binding
}

type binding struct {
	v       val
	mutable bool
	pos     lexer.Position
}

func (l *lowerer) push() { l.scope = &scope{parent: l.scope, vars: map[string]*binding{}} }

// pop is nil-safe: it also runs, deferred, while a failure unwinds past
// code that had swapped the scope chain out (instantiate, globalConst).
func (l *lowerer) pop() {
	if l.scope != nil {
		l.scope = l.scope.parent
	}
}

func (l *lowerer) lookup(name string) *binding {
	b := l.rawLookup(name)
	if b != nil && b.v.poisoned {
		panic(failure{err: errPoisoned}) // see tryStmt
	}
	return b
}

func (l *lowerer) define(name string, v val, mutable bool, pos lexer.Position) {
	if builtinNames[name] {
		l.fail(pos, "%s is a built-in name and cannot be redefined", name)
	}
	if prev := l.lookup(name); prev != nil {
		l.fail(pos, "%s is already defined at line %d (names cannot be shadowed)", name, prev.pos.Line)
	}
	l.scope.vars[name] = &binding{v: v, mutable: mutable, pos: pos}
}

// cparamKind maps a compile-time parameter's declared kind to a ConstKind.
func (l *lowerer) cparamKind(cp *CParam) ConstKind {
	switch cp.Kind {
	case "i32", "int":
		return CInt
	case "f32", "float":
		return CFloat
	case "bool":
		return CBool
	case "type":
		return CType
	case "mask", "score":
		return CMod
	}
	l.fail(cp.Pos, "unknown compile-time parameter kind %q (want i32, f32, bool, type, mask or score)", cp.Kind)
	return 0
}

// bindCParams binds compile-time parameters from args (by name) or defaults
// into the current scope, checking kinds.
func (l *lowerer) bindCParams(owner string, cps []*CParam, args map[string]Const, pos lexer.Position) []Const {
	known := map[string]bool{}
	out := make([]Const, len(cps))
	for i, cp := range cps {
		known[cp.Name] = true
		kind := l.cparamKind(cp)
		c, ok := args[cp.Name]
		at := cp.Pos // a wrong kind of value is reported at the parameter, or at its default
		if !ok {
			if cp.Default == nil {
				l.fail(pos, "%s needs a value for compile-time parameter %s (%s)", owner, cp.Name, cp.Kind)
			}
			v := l.addExpr(cp.Default)
			if v.c == nil {
				l.fail(cp.Default.Pos, "default of %s must be a compile-time constant", cp.Name)
			}
			c, at = *v.c, cp.Default.Pos
		}
		c = l.coerceConst(c, kind, cp, owner, at)
		out[i] = c
		l.define(cp.Name, constVal(c, cp.Pos), false, cp.Pos)
	}
	var extra []string
	for n := range args {
		if !known[n] {
			extra = append(extra, n)
		}
	}
	if len(extra) > 0 {
		sort.Strings(extra)
		l.fail(pos, "%s has no compile-time parameter %s", owner, strings.Join(extra, ", "))
	}
	return out
}

func (l *lowerer) coerceConst(c Const, kind ConstKind, cp *CParam, owner string, pos lexer.Position) Const {
	switch {
	case kind == CInt && c.Kind == CInt && (c.I > math.MaxInt32 || c.I < math.MinInt32):
		// Say so at the argument, not where the parameter first meets
		// an i32 in the body (which may be in another file).
		l.fail(pos, "%s parameter %s is %s, got %d, which overflows i32", owner, cp.Name, cp.Kind, c.I)
	case c.Kind == kind && kind != CMod:
		return c
	case kind == CFloat && c.Kind == CInt:
		return FloatConst(float64(c.I))
	case kind == CMod && c.Kind == CMod:
		if c.Mod.Kind() != cp.Kind {
			l.fail(pos, "%s parameter %s needs a %s mod, got %s mod %s", owner, cp.Name, cp.Kind, c.Mod.Kind(), c.Mod.Name())
		}
		return c
	}
	l.fail(pos, "%s parameter %s is %s, got %s", owner, cp.Name, cp.Kind, constVal(c, pos).describe())
	return c
}

// kernel lowers a kernel declaration to a tir kernel function.
func (l *lowerer) kernel(kd *KernelDecl, args map[string]Const) {
	l.push()
	defer l.pop()
	consts := l.bindCParams("kernel "+kd.Name, kd.CParams, args, kd.Pos)
	f := &tir.Func{Name: kd.Name, Kernel: true, Body: &tir.Block{}, Pos: irPos(kd.Pos)}
	l.kernelFn = f
	l.kernelEnv = map[*ModInst]*modEnv{}
	l.b = &tir.Builder{Block: f.Body}
	l.seqlenQ, l.seqlenK = nil, nil // set below by parameters, or by let (letSeqlen)
	for _, prm := range kd.Params {
		if prm.Type == nil {
			l.fail(prm.Pos, "kernel parameter %s needs a type", prm.Name)
		}
		t := l.typeRef(prm.Type)
		v := &tir.Value{Type: t, Name: prm.Name}
		f.Params = append(f.Params, v)
		l.define(prm.Name, val{v: v, pos: prm.Pos}, false, prm.Pos)
	}
	if b := l.lookup("seqlen_q"); b != nil && b.v.v != nil {
		l.seqlenQ = b.v.v
	}
	if b := l.lookup("seqlen_k"); b != nil && b.v.v != nil {
		l.seqlenK = b.v.v
	}
	l.kernelSizes = map[string]*tir.Value{}
	for _, n := range []string{"batch", "num_heads"} {
		if b := l.lookup(n); b != nil && b.v.v != nil {
			l.kernelSizes[n] = b.v.v
		}
	}
	// Mods taken as compile-time parameters bring their inputs in as extra
	// kernel parameters, named after the parameter: per aux tensor a
	// pointer and a length, per run-time parameter a value; batch and
	// num_heads come last, when a mod reads them and the kernel does not
	// declare them.
	var sizes []string
	for i, cp := range kd.CParams {
		c := consts[i]
		if c.Kind != CMod {
			if c.Kind == CInt || c.Kind == CBool {
				f.SetAttr(cp.Name, constAttr(c))
			}
			continue
		}
		in, err := l.p.modInputs(c.Mod)
		if err != nil {
			panic(failure{err: err})
		}
		env := &modEnv{mod: c.Mod.Name()}
		for _, a := range in.Aux {
			ptr := &tir.Value{Type: tir.PtrTo(a.Elem), Name: cp.Name + "." + a.Name}
			n := &tir.Value{Type: tir.Scalar(tir.I32), Name: cp.Name + "." + a.Name + ".len"}
			f.Params = append(f.Params, ptr, n)
			env.aux = append(env.aux, &auxTensor{key: a.Name, name: cp.Name + "." + a.Name, ptr: ptr, len: n, elem: a.Elem, dims: a.Dims, mod: a.Mod})
		}
		for _, s := range in.Scalars {
			v := &tir.Value{Type: tir.Scalar(s.Elem), Name: cp.Name + "." + s.Name}
			f.Params = append(f.Params, v)
			env.scalars = append(env.scalars, &scalarParam{key: s.Name, name: v.Name, v: v, elem: s.Elem, mod: s.Mod})
		}
		if in.Batch {
			sizes = append(sizes, "batch")
		}
		if in.Heads {
			sizes = append(sizes, "num_heads")
		}
		l.kernelEnv[c.Mod] = env
		f.SetAttr(cp.Name, tir.Ident(strings.NewReplacer("(", "_", ")", "", ", ", "_", ".", "p", "-", "m").Replace(c.Mod.String())))
	}
	for _, n := range []string{"batch", "num_heads"} {
		if slices.Contains(sizes, n) {
			l.kernelSize(n, nil, kd.Pos)
		}
	}
	if f.Attr("num_warps") == nil {
		f.SetAttr("num_warps", int64(4))
	}
	l.mod.Funcs = append(l.mod.Funcs, f)
	l.block(kd.Body, true)
	l.flushErrors()
	l.b.Return()
}

func constAttr(c Const) any {
	switch c.Kind {
	case CInt:
		return c.I
	case CBool:
		return c.B
	case CFloat:
		return c.F
	}
	return tir.Ident(c.String())
}

// typeRef resolves a written type in the current scope.
func (l *lowerer) typeRef(t *TypeRef) tir.Type {
	switch t.Name {
	case "ptr":
		if t.Elem == nil {
			l.fail(t.Pos, "ptr needs an element type: ptr[f32]")
		}
		e := l.elemType(t.Elem)
		return tir.PtrTo(e)
	case "tensor":
		l.fail(t.Pos, "tensor[...] is only for aux tensor parameters of mods")
	}
	if t.Shape != nil {
		l.fail(t.Pos, "only aux tensors have a shape: tensor[%s]%s", t.Name, "[...]")
	}
	if t.Elem != nil {
		l.fail(t.Pos, "%s takes no element type", t.Name)
	}
	return tir.Scalar(l.elemType(t))
}

func (l *lowerer) elemType(t *TypeRef) tir.Elem {
	if t.Shape != nil {
		l.fail(t.Pos, "expected an element type, got %s[...]", t.Name)
	}
	if t.Elem != nil {
		l.fail(t.Pos, "expected an element type, got %s[...]", t.Name)
	}
	if e, ok := elemByLangName(t.Name); ok {
		return e
	}
	if b := l.lookup(t.Name); b != nil && b.v.c != nil && b.v.c.Kind == CType {
		return b.v.c.T
	}
	l.fail(t.Pos, "unknown type %s (want f32, f16, bf16, i32, bool, or a type parameter)", t.Name)
	return 0
}

func elemByLangName(s string) (tir.Elem, bool) {
	switch s {
	case "bool":
		return tir.I1, true
	case "i1":
		return 0, false
	}
	return tir.ElemByName(s)
}
