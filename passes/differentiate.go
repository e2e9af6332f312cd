package passes

import (
	"fmt"
	"math"

	"github.com/fac-compiler/fac/tir"
)

// GradSpec says what Differentiate derives from a function f returning one
// float value out.
type GradSpec struct {
	// Name is the derived function's name.
	Name string
	// WRT is the index of the float parameter x (not a pointer) whose
	// cotangent dout · ∂out/∂x the derived function returns; a score mod's
	// s is parameter 0.
	WRT int
	// Memory lists float pointer parameters (aux tensors) whose elements get
	// gradients too: the derived function takes one ptr<f32> per entry,
	// after f's parameters, and atomically adds dout · ∂out/∂p[i] at the
	// offsets f loaded from.
	Memory []int
}

// DiffError reports an op Differentiate cannot differentiate through; Op
// carries the source position.
type DiffError struct {
	Func string
	Op   *tir.Op
	Why  string
}

func (e *DiffError) Error() string {
	at := ""
	if e.Op.Pos.Line != 0 {
		at = e.Op.Pos.String() + ": "
	}
	return fmt.Sprintf("%scannot differentiate @%s through op %s: %s", at, e.Func, e.Op.Kind, e.Why)
}

// Differentiate derives the reverse-mode derivative (vector-Jacobian
// product) of f, a function of m that returns one float value out:
//
//	func @<Name>(%dout: <out's type>, <f's parameters>, <one ptr<f32> per Memory entry>) -> <x's type>
//
// returns dout · ∂out/∂x for x = f's parameter WRT, and adds dout ·
// ∂out/∂p[i] into the gradient buffer of each Memory parameter p at every
// offset i that f loads (with f's load masks, so out-of-range gathers add
// nothing). The body first recomputes f (calls inlined), then walks its ops
// backwards accumulating adjoints: the usual rules for + − × ÷, min, max,
// neg, abs, exp, exp2, log, log2, tanh, sqrt, select and float casts, sums
// over broadcast dimensions for splat and broadcast, the inverse shape op
// for reshape and trans, and a spread for reductions (a max or min passes
// its adjoint to every element equal to the result). Integer and boolean
// values carry no gradient (a comparison or a float→int cast stops it).
//
// The derivative is a function of tile IR, like the mod it comes from; the
// front end makes it when a kernel calls grad(...) and inlining then puts
// it in the kernel. Ops it cannot differentiate when they depend on x or
// the Memory parameters (for, if, dot, a store) are a *DiffError.
func Differentiate(m *tir.Module, f *tir.Func, spec GradSpec) (*tir.Func, error) {
	if len(f.Result) != 1 || f.Result[0].Ptr || !f.Result[0].Elem.IsFloat() {
		return nil, fmt.Errorf("differentiate @%s: want one float result, have %v", f.Name, f.Result)
	}
	if spec.WRT < 0 || spec.WRT >= len(f.Params) || f.Params[spec.WRT].Type.Ptr || !f.Params[spec.WRT].Type.Elem.IsFloat() {
		return nil, fmt.Errorf("differentiate @%s: parameter %d is not a float value", f.Name, spec.WRT)
	}
	g := &tir.Func{Name: spec.Name, Pos: f.Pos, Result: []tir.Type{f.Params[spec.WRT].Type}}
	g.SetAttr("role", tir.Ident("grad"))
	g.SetAttr("grad_of", tir.Ident("@"+f.Name))
	dout := &tir.Value{Type: f.Result[0], Name: "dout"}
	g.Params = append(g.Params, dout)
	vm := map[*tir.Value]*tir.Value{}
	for _, p := range f.Params {
		np := &tir.Value{Type: p.Type, Name: p.Name}
		vm[p] = np
		g.Params = append(g.Params, np)
	}
	d := &differ{f: f, active: map[*tir.Value]bool{}, adj: map[*tir.Value]*tir.Value{},
		mem: map[*tir.Value]*tir.Value{}, gradPtr: map[*tir.Value]*tir.Value{}}
	for _, i := range spec.Memory {
		if i < 0 || i >= len(f.Params) || !f.Params[i].Type.Ptr || !f.Params[i].Type.Elem.IsFloat() || !f.Params[i].Type.IsScalar() {
			return nil, fmt.Errorf("differentiate @%s: parameter %d is not a pointer to floats", f.Name, i)
		}
		gp := &tir.Value{Type: tir.PtrTo(tir.F32), Name: f.Params[i].Name + ".grad"}
		g.Params = append(g.Params, gp)
		d.mem[vm[f.Params[i]]] = gp
		d.gradPtr[vm[f.Params[i]]] = gp
	}

	body := cloneBlock(f.Body, vm)
	if err := inlineAll(m, body); err != nil {
		return nil, fmt.Errorf("differentiate @%s: %w", f.Name, err)
	}
	n := len(body.Ops)
	if n == 0 || body.Ops[n-1].Kind != tir.OpReturn || len(body.Ops[n-1].Args) != 1 {
		return nil, fmt.Errorf("differentiate @%s: body does not end in a return of one value", f.Name)
	}
	out := body.Ops[n-1].Args[0]
	fwd := body.Ops[:n-1]
	body.Ops = fwd
	g.Body = body
	d.b = &tir.Builder{Block: body}

	x := vm[f.Params[spec.WRT]]
	d.active[x] = true
	for _, op := range fwd {
		if err := d.mark(op); err != nil {
			return nil, err
		}
	}
	if d.active[out] {
		d.adj[out] = dout
	}
	for i := len(fwd) - 1; i >= 0; i-- {
		op := fwd[i]
		if err := d.back(op); err != nil {
			return nil, err
		}
	}
	dx := d.adj[x]
	if dx == nil {
		dx = d.b.Const(x.Type, 0.0)
	}
	d.b.Return(dx)
	return g, nil
}

// inlineAll inlines every call in b, callees' calls included.
func inlineAll(m *tir.Module, b *tir.Block) error {
	for hasCalls(b) {
		if err := inlineBlock(m, b, map[*tir.Value]*tir.Value{}); err != nil {
			return err
		}
	}
	return nil
}

func hasCalls(b *tir.Block) bool {
	return b.Any(func(op *tir.Op) bool { return op.Kind == tir.OpCall })
}

type differ struct {
	f      *tir.Func
	b      *tir.Builder
	active map[*tir.Value]bool       // depends on x or on a Memory load, and is a float value
	adj    map[*tir.Value]*tir.Value // adjoints accumulated so far
	// mem maps pointer values derived from a Memory parameter to that
	// parameter's gradient pointer; gradPtr caches the rebuilt pointers.
	mem     map[*tir.Value]*tir.Value
	gradPtr map[*tir.Value]*tir.Value
}

func (d *differ) fail(op *tir.Op, format string, args ...any) error {
	return &DiffError{Func: d.f.Name, Op: op, Why: fmt.Sprintf(format, args...)}
}

// mark records which results of op are active and which pointers derive
// from Memory parameters, refusing what cannot be differentiated.
func (d *differ) mark(op *tir.Op) error {
	anyActive := false
	for _, a := range op.Args {
		anyActive = anyActive || d.active[a]
	}
	floatRes := len(op.Results) == 1 && !op.Result().Type.Ptr && op.Result().Type.Elem.IsFloat()
	k := op.Kind
	switch {
	case len(op.Regions) > 0:
		if anyActive || d.usesActive(op) {
			return d.fail(op, "a %s whose values depend on what is differentiated is not differentiable (use select)", k)
		}
	case len(op.Results) == 1 && op.Result().Type.Ptr:
		// Pointer arithmetic on a Memory parameter keeps its root; mixing
		// it with other pointers (a select) would leave no gradient buffer.
		var root *tir.Value
		plain := false
		for _, a := range op.Args {
			switch r := d.mem[a]; {
			case !a.Type.Ptr:
			case r == nil:
				plain = true
			case root != nil && r != root:
				plain = true
			default:
				root = r
			}
		}
		if root != nil && plain {
			return d.fail(op, "pointers into an aux tensor mix with other pointers")
		}
		if root != nil {
			d.mem[op.Result()] = root
		}
	case k == tir.OpLoad:
		if d.mem[op.Args[0]] != nil && floatRes {
			d.active[op.Result()] = true
		}
	case k.IsMemWrite():
		if anyActive {
			return d.fail(op, "writing memory is not differentiable")
		}
	case k == tir.OpLastArrival:
		return d.fail(op, "last_arrival is not differentiable")
	case k == tir.OpDot:
		if anyActive {
			return d.fail(op, "dot is not differentiable in a mod")
		}
	case k == tir.OpCast:
		// float → float carries the gradient; to an integer it stops.
		d.active[op.Result()] = anyActive && floatRes && op.Args[0].Type.Elem.IsFloat()
	case k == tir.OpCmp, k == tir.OpConst, k == tir.OpArange, k == tir.OpProgramID, k == tir.OpNumPrograms, k == tir.OpNumSMs, k == tir.OpGroupID:
	case k.IsBinary(), k.IsUnary(), k == tir.OpSelect, k == tir.OpSplat, k == tir.OpBroadcast,
		k == tir.OpReshape, k == tir.OpTrans, k == tir.OpReduce:
		if anyActive && floatRes {
			if k == tir.OpRem {
				return d.fail(op, "rem is not differentiable")
			}
			d.active[op.Result()] = true
		}
	default:
		if anyActive {
			return d.fail(op, "no derivative rule")
		}
	}
	return nil
}

// usesActive reports whether op's regions use an active value or load
// through a Memory pointer.
func (d *differ) usesActive(op *tir.Op) bool {
	found := false
	for _, r := range op.Regions {
		r.Walk(func(in *tir.Op) bool {
			for _, a := range in.Args {
				found = found || d.active[a] || (in.Kind == tir.OpLoad && d.mem[a] != nil)
			}
			return !found
		})
	}
	return found
}

// accum adds c to v's adjoint.
func (d *differ) accum(v, c *tir.Value) {
	if !d.active[v] {
		return
	}
	if a := d.adj[v]; a != nil {
		d.adj[v] = d.b.Binary(tir.OpAdd, a, c)
		return
	}
	d.adj[v] = c
}

func (d *differ) konst(t tir.Type, x float64) *tir.Value { return d.b.Const(t, x) }

// back propagates op's result adjoint to its operands.
func (d *differ) back(op *tir.Op) error {
	if len(op.Results) != 1 {
		return nil
	}
	y := op.Result()
	g := d.adj[y]
	if g == nil || !d.active[y] {
		return nil
	}
	b := d.b
	t := y.Type
	args := op.Args
	switch k := op.Kind; k {
	case tir.OpAdd:
		d.accum(args[0], g)
		d.accum(args[1], g)
	case tir.OpSub:
		d.accum(args[0], g)
		if d.active[args[1]] {
			d.accum(args[1], b.Unary(tir.OpNeg, g))
		}
	case tir.OpMul:
		if d.active[args[0]] {
			d.accum(args[0], b.Binary(tir.OpMul, g, args[1]))
		}
		if d.active[args[1]] {
			d.accum(args[1], b.Binary(tir.OpMul, g, args[0]))
		}
	case tir.OpDiv:
		// x/y: ∂/∂x = 1/y, ∂/∂y = −(x/y)/y.
		if d.active[args[0]] {
			d.accum(args[0], b.Binary(tir.OpDiv, g, args[1]))
		}
		if d.active[args[1]] {
			d.accum(args[1], b.Unary(tir.OpNeg, b.Binary(tir.OpDiv, b.Binary(tir.OpMul, g, y), args[1])))
		}
	case tir.OpMin, tir.OpMax:
		// Ties go to the first operand.
		pred := "le"
		if k == tir.OpMax {
			pred = "ge"
		}
		first := b.Cmp(pred, args[0], args[1])
		zero := d.konst(t, 0)
		if d.active[args[0]] {
			d.accum(args[0], b.Select(first, g, zero))
		}
		if d.active[args[1]] {
			d.accum(args[1], b.Select(first, zero, g))
		}
	case tir.OpNeg:
		d.accum(args[0], b.Unary(tir.OpNeg, g))
	case tir.OpAbs:
		neg := b.Cmp("lt", args[0], d.konst(t, 0))
		d.accum(args[0], b.Select(neg, b.Unary(tir.OpNeg, g), g))
	case tir.OpExp:
		d.accum(args[0], b.Binary(tir.OpMul, g, y))
	case tir.OpExp2:
		d.accum(args[0], b.Binary(tir.OpMul, b.Binary(tir.OpMul, g, y), d.konst(t, math.Ln2)))
	case tir.OpLog:
		d.accum(args[0], b.Binary(tir.OpDiv, g, args[0]))
	case tir.OpLog2:
		d.accum(args[0], b.Binary(tir.OpDiv, g, b.Binary(tir.OpMul, args[0], d.konst(t, math.Ln2))))
	case tir.OpTanh:
		// 1 − tanh²
		one := d.konst(t, 1)
		d.accum(args[0], b.Binary(tir.OpMul, g, b.Binary(tir.OpSub, one, b.Binary(tir.OpMul, y, y))))
	case tir.OpSqrt:
		d.accum(args[0], b.Binary(tir.OpDiv, b.Binary(tir.OpMul, g, d.konst(t, 0.5)), y))
	case tir.OpSelect:
		zero := d.konst(t, 0)
		if d.active[args[1]] {
			d.accum(args[1], b.Select(args[0], g, zero))
		}
		if d.active[args[2]] {
			d.accum(args[2], b.Select(args[0], zero, g))
		}
	case tir.OpCast:
		d.accum(args[0], b.Cast(g, args[0].Type.Elem))
	case tir.OpSplat, tir.OpBroadcast:
		d.accum(args[0], d.unbroadcast(g, args[0].Type))
	case tir.OpReshape:
		d.accum(args[0], b.Reshape(g, args[0].Type.Shape))
	case tir.OpTrans:
		d.accum(args[0], b.Trans(g))
	case tir.OpReduce:
		xt := args[0].Type
		axis := int(op.IntAttr("axis"))
		spread := func(v *tir.Value) *tir.Value {
			if v.Type.IsScalar() {
				return b.Splat(v, xt.Shape)
			}
			keep := append([]int(nil), xt.Shape...)
			keep[axis] = 1
			return b.Broadcast(b.Reshape(v, keep), xt.Shape)
		}
		gx := spread(g)
		if kind := op.IdentAttr("kind"); kind != "sum" {
			// max/min: the elements equal to the result get the adjoint.
			hit := b.Cmp("eq", args[0], spread(y))
			gx = b.Select(hit, gx, d.konst(xt, 0))
		}
		d.accum(args[0], gx)
	case tir.OpLoad:
		// A gather from a Memory parameter: scatter the adjoint into its
		// gradient, where the load read memory.
		p := d.pointer(args[0])
		v := b.Cast(g, tir.F32)
		var mask *tir.Value
		if len(args) == 3 {
			mask = args[1]
		}
		b.AtomicAdd(p, v, mask)
	default:
		return d.fail(op, "no derivative rule")
	}
	return nil
}

// unbroadcast sums g (of a splat's or broadcast's result type) down to
// type t: over every dimension t has as 1 (or lacks, for a scalar).
func (d *differ) unbroadcast(g *tir.Value, t tir.Type) *tir.Value {
	b := d.b
	if t.IsScalar() {
		for !g.Type.IsScalar() {
			g = b.Reduce("sum", g, 0)
		}
		return g
	}
	for axis := t.Rank() - 1; axis >= 0; axis-- {
		if t.Shape[axis] == 1 && g.Type.Shape[axis] != 1 {
			g = b.Reduce("sum", g, axis)
			g = b.Reshape(g, insertOne(g.Type.Shape, axis))
		}
	}
	return g
}

func insertOne(shape []int, axis int) []int {
	out := append([]int(nil), shape[:axis]...)
	out = append(out, 1)
	return append(out, shape[axis:]...)
}

// pointer rebuilds the pointer computation of v, a pointer derived from a
// Memory parameter, on that parameter's gradient pointer (ptr<f32>).
func (d *differ) pointer(v *tir.Value) *tir.Value {
	if p, ok := d.gradPtr[v]; ok {
		return p
	}
	op := v.Def
	args := make([]*tir.Value, len(op.Args))
	for i, a := range op.Args {
		if a.Type.Ptr && d.mem[a] != nil {
			args[i] = d.pointer(a)
		} else {
			args[i] = a
		}
	}
	t := v.Type
	t.Elem = tir.F32
	nop := tir.NewOp(op.Kind, args, t)
	nop.Attrs = append([]tir.Attr(nil), op.Attrs...)
	nop.Pos = op.Pos
	p := d.b.Emit(nop).Result()
	d.gradPtr[v] = p
	return p
}
