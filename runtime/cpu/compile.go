package cpu

import (
	"fmt"
	"strings"
	"sync"

	"github.com/fac-compiler/fac/tir"
)

// fn is a function compiled for interpretation: every SSA value gets a slot
// index into a frame, and ops become insts with their shapes worked out.
type fn struct {
	f      *tir.Func
	groups int // consumer groups: the body runs once per group (group_id)
	params []int
	types  []tir.Type // by slot
	body   *block
	pool   sync.Pool // of *frame
}

type block struct {
	args []int
	code []inst
}

// inst is one compiled op. Fields are filled as the kind needs them.
type inst struct {
	op      *tir.Op
	k       tir.Kind
	a, r    []int     // operand and result slots
	n       int       // element count of the result (of operand 0 for store)
	e       tir.Elem  // result element type
	ae      tir.Elem  // element type of operand 0
	ptr     bool      // result holds pointers
	code    int       // program_id axis, cmp pred, reduce kind
	x, y, z int       // dot M, K, N; reduce outer, len, inner
	shape   []int     // gather shape (broadcast, trans)
	strides []int     // gather source strides
	cdata   []float64 // const and arange values, shared by every run
	regions []*block
	callee  *fn
}

// Predicates and reduce kinds, decoded once at compile time.
const (
	predEQ = iota
	predNE
	predLT
	predLE
	predGT
	predGE
)

var predCodes = map[string]int{"eq": predEQ, "ne": predNE, "lt": predLT, "le": predLE, "gt": predGT, "ge": predGE}

const (
	redSum = iota
	redMax
	redMin
)

var reduceCodes = map[string]int{"sum": redSum, "max": redMax, "min": redMin}

type compiler struct {
	m   *tir.Module
	fns map[*tir.Func]*fn
}

// compileEntry compiles the named function and everything it calls.
func compileEntry(m *tir.Module, name string) (x *fn, err error) {
	if m == nil {
		return nil, fmt.Errorf("cpu: nil module")
	}
	// Malformed IR (nil ops, values or funcs) must not crash the caller.
	defer func() {
		if r := recover(); r != nil {
			x, err = nil, fmt.Errorf("cpu: @%s: malformed IR: %v", name, r)
		}
	}()
	f := m.Func(name)
	if f == nil {
		return nil, fmt.Errorf("cpu: no function @%s in module", name)
	}
	c := &compiler{m: m, fns: map[*tir.Func]*fn{}}
	return c.fn(f)
}

func (c *compiler) fn(f *tir.Func) (*fn, error) {
	if x := c.fns[f]; x != nil {
		return x, nil // already compiled, or in progress (recursion)
	}
	x := &fn{f: f, groups: 1}
	if g, ok := f.Attr("consumer_groups").(int64); ok && g > 1 {
		x.groups = int(g)
	}
	c.fns[f] = x
	fc := &fnCompiler{c: c, x: x, ids: map[*tir.Value]int{}}
	for _, p := range f.Params {
		if p == nil {
			return nil, fc.errf(nil, "nil parameter")
		}
		x.params = append(x.params, fc.def(p))
	}
	if f.Body == nil {
		return nil, fc.errf(nil, "function has no body")
	}
	body, err := fc.block(f.Body)
	if err != nil {
		return nil, err
	}
	x.body = body
	return x, nil
}

type fnCompiler struct {
	c   *compiler
	x   *fn
	ids map[*tir.Value]int
}

func (fc *fnCompiler) def(v *tir.Value) int {
	id := len(fc.x.types)
	fc.ids[v] = id
	fc.x.types = append(fc.x.types, v.Type)
	return id
}

func (fc *fnCompiler) errf(op *tir.Op, format string, args ...any) error {
	return &Error{Func: fc.x.f.Name, Kernel: fc.x.f.Kernel, Op: op, Msg: fmt.Sprintf(format, args...)}
}

func (fc *fnCompiler) block(b *tir.Block) (*block, error) {
	out := &block{code: make([]inst, 0, len(b.Ops))}
	for _, v := range b.Args {
		out.args = append(out.args, fc.def(v))
	}
	for _, op := range b.Ops {
		in, err := fc.inst(op)
		if err != nil {
			return nil, err
		}
		out.code = append(out.code, in)
	}
	return out, nil
}

// arity gives the allowed operand counts and the result count (-1: any).
func arity(k tir.Kind) (args []int, results int) {
	switch {
	case k == tir.OpConst || k == tir.OpProgramID || k == tir.OpNumPrograms || k == tir.OpNumSMs || k == tir.OpGroupID || k == tir.OpArange:
		return []int{0}, 1
	case k == tir.OpPrefetch:
		return []int{1, 2}, 0
	case k == tir.OpLastArrival:
		return []int{2}, 1
	case k == tir.OpSplat || k == tir.OpBroadcast || k == tir.OpReshape || k == tir.OpTrans ||
		k.IsUnary() || k == tir.OpCast || k == tir.OpReduce:
		return []int{1}, 1
	case k.IsBinary() || k == tir.OpCmp || k == tir.OpAddPtr:
		return []int{2}, 1
	case k == tir.OpSelect || k == tir.OpDot:
		return []int{3}, 1
	case k == tir.OpLoad:
		return []int{1, 3}, 1
	case k.IsMemWrite():
		return []int{2, 3}, 0
	case k == tir.OpIf:
		return []int{1}, -1
	case k == tir.OpYield || k == tir.OpReturn:
		return nil, 0
	}
	return nil, -1 // for, call: checked below
}

func (fc *fnCompiler) inst(op *tir.Op) (inst, error) {
	in := inst{op: op, k: op.Kind}
	bad := func(format string, args ...any) (inst, error) { return inst{}, fc.errf(op, format, args...) }
	nargs, nres := arity(op.Kind)
	if nargs != nil && !containsInt(nargs, len(op.Args)) {
		return bad("%s takes %v operands, got %d", op.Kind, nargs, len(op.Args))
	}
	if nres >= 0 && len(op.Results) != nres {
		return bad("%s has %d results, want %d", op.Kind, len(op.Results), nres)
	}
	for _, a := range op.Args {
		id, ok := fc.ids[a]
		if !ok {
			return bad("operand not defined before use")
		}
		in.a = append(in.a, id)
	}
	// Regions first, so that values they define are numbered; results last,
	// since they are not visible inside the regions.
	for _, r := range op.Regions {
		b, err := fc.block(r)
		if err != nil {
			return inst{}, err
		}
		in.regions = append(in.regions, b)
	}
	for _, r := range op.Results {
		in.r = append(in.r, fc.def(r))
	}
	var at tir.Type // operand 0's type
	if len(op.Args) > 0 {
		at = op.Args[0].Type
		in.ae = at.Elem
	}
	var rt tir.Type // result 0's type
	if len(op.Results) > 0 {
		rt = op.Results[0].Type
		in.e, in.ptr, in.n = rt.Elem, rt.Ptr, rt.NumElems()
	}
	// sameN checks that operands i.. have the result's element count, which
	// elementwise loops rely on.
	sameN := func(from int) error {
		for _, a := range op.Args[from:] {
			if a.Type.NumElems() != in.n {
				return fc.errf(op, "%s operand type %s does not match result %s", op.Kind, a.Type, rt)
			}
		}
		return nil
	}
	k := op.Kind
	if (k == tir.OpSplat || k == tir.OpBroadcast || k == tir.OpReshape || k == tir.OpTrans || k == tir.OpSelect) &&
		op.Args[len(op.Args)-1].Type.Ptr != in.ptr {
		return bad("%s mixes pointers and values", k)
	}
	switch {
	case k == tir.OpConst:
		var v float64
		switch c := op.Attr("value").(type) {
		case int64:
			v = float64(c)
		case float64:
			v = c
		case bool:
			if c {
				v = 1
			}
		default:
			return bad("const has no int, float or bool value")
		}
		if in.ptr {
			return bad("const of pointer type")
		}
		v = fix(in.e, v)
		in.cdata = make([]float64, in.n)
		for i := range in.cdata {
			in.cdata[i] = v
		}
	case k == tir.OpArange:
		start, end := op.IntAttr("start"), op.IntAttr("end")
		if end-start != int64(in.n) {
			return bad("arange [%d, %d) does not fit %s", start, end, rt)
		}
		in.cdata = make([]float64, in.n)
		for i := range in.cdata {
			in.cdata[i] = fix(in.e, float64(start+int64(i)))
		}
	case k == tir.OpProgramID || k == tir.OpNumPrograms:
		in.code = int(op.IntAttr("axis"))
		if in.code < 0 || in.code > 2 {
			return bad("%s axis %d not in 0..2", k, in.code)
		}
	case k == tir.OpSplat:
		if !at.IsScalar() {
			return bad("splat of non-scalar %s", at)
		}
	case k == tir.OpReshape:
		if err := sameN(0); err != nil {
			return inst{}, err
		}
	case k == tir.OpBroadcast:
		if at.Rank() > rt.Rank() {
			return bad("broadcast from %s to lower rank %s", at, rt)
		}
		src := make([]int, rt.Rank()) // operand shape, left-padded with 1s
		for i := range src {
			src[i] = 1
		}
		copy(src[rt.Rank()-at.Rank():], at.Shape)
		in.shape = rt.Shape
		in.strides = make([]int, len(src))
		st := 1
		for d := len(src) - 1; d >= 0; d-- {
			if src[d] != rt.Shape[d] {
				if src[d] != 1 {
					return bad("cannot broadcast %s to %s", at, rt)
				}
			} else if src[d] != 1 {
				in.strides[d] = st
			}
			st *= src[d]
		}
	case k == tir.OpTrans:
		if at.Rank() != 2 || rt.Rank() != 2 || at.Shape[0] != rt.Shape[1] || at.Shape[1] != rt.Shape[0] {
			return bad("trans from %s to %s", at, rt)
		}
		// out[i][j] = in[j][i]
		in.shape = rt.Shape
		in.strides = []int{1, at.Shape[1]}
	case k.IsBinary() || k.IsUnary() || k == tir.OpCmp || k == tir.OpCast:
		if in.ptr || at.Ptr {
			return bad("%s on pointers", k)
		}
		if err := sameN(0); err != nil {
			return inst{}, err
		}
		if k == tir.OpCmp {
			p, ok := predCodes[op.IdentAttr("pred")]
			if !ok {
				return bad("cmp has bad pred %q", op.IdentAttr("pred"))
			}
			in.code = p
		}
	case k == tir.OpSelect:
		if op.Args[1].Type.Ptr != in.ptr || op.Args[0].Type.Ptr {
			return bad("select mixes pointers and values")
		}
		if err := sameN(0); err != nil {
			return inst{}, err
		}
	case k == tir.OpAddPtr:
		if !in.ptr || !at.Ptr || op.Args[1].Type.Ptr {
			return bad("addptr needs pointers and integer offsets")
		}
		if err := sameN(0); err != nil {
			return inst{}, err
		}
	case k == tir.OpLoad:
		if !at.Ptr || in.ptr {
			return bad("load needs pointer operand and value result")
		}
		if err := sameN(0); err != nil {
			return inst{}, err
		}
	case k.IsMemWrite():
		in.n = at.NumElems()
		if !at.Ptr || op.Args[1].Type.Ptr {
			return bad("%s needs pointers and values", k)
		}
		if k == tir.OpAtomicAdd && at.Elem != tir.F32 {
			return bad("atomic_add on %s, want f32", at)
		}
		for _, a := range op.Args[1:] {
			if a.Type.NumElems() != in.n {
				return bad("%s operand %s does not match pointers %s", k, a.Type, at)
			}
		}
	case k == tir.OpPrefetch:
		in.n = at.NumElems()
		if !at.Ptr {
			return bad("prefetch needs pointers")
		}
		if len(op.Args) == 2 && op.Args[1].Type.NumElems() != in.n {
			return bad("prefetch mask %s does not match pointers %s", op.Args[1].Type, at)
		}
	case k == tir.OpNumSMs || k == tir.OpGroupID:
	case k == tir.OpLastArrival:
		if !at.Equal(tir.PtrTo(tir.I32)) || !op.Args[1].Type.Equal(tir.Scalar(tir.I32)) || !rt.Equal(tir.Scalar(tir.I1)) {
			return bad("last_arrival takes a ptr<i32> counter and an i32 count to an i1")
		}
		if fc.x.groups > 1 {
			// The groups run in turn and would each take a ticket.
			return bad("last_arrival in a kernel of %d consumer groups: a program arrives once, not once per group", fc.x.groups)
		}
	case k == tir.OpDot:
		bt, ct := op.Args[1].Type, op.Args[2].Type
		if at.Rank() != 2 || bt.Rank() != 2 || ct.Rank() != 2 || rt.Rank() != 2 ||
			at.Shape[1] != bt.Shape[0] || ct.Shape[0] != at.Shape[0] || ct.Shape[1] != bt.Shape[1] ||
			!ct.Equal(rt) || at.Ptr || bt.Ptr || ct.Ptr {
			return bad("dot shapes %s x %s + %s -> %s", at, bt, ct, rt)
		}
		in.x, in.y, in.z = at.Shape[0], at.Shape[1], bt.Shape[1]
	case k == tir.OpReduce:
		axis := int(op.IntAttr("axis"))
		if axis < 0 || axis >= at.Rank() || at.Ptr || in.n*at.Shape[axis] != at.NumElems() {
			return bad("reduce axis %d of %s to %s", axis, at, rt)
		}
		kind, ok := reduceCodes[op.IdentAttr("kind")]
		if !ok {
			return bad("reduce has bad kind %q", op.IdentAttr("kind"))
		}
		in.code = kind
		in.x, in.y = 1, at.Shape[axis]
		for _, d := range at.Shape[:axis] {
			in.x *= d
		}
		in.z = in.n / in.x
	case k == tir.OpFor:
		if len(op.Args) < 3 || len(op.Regions) != 1 || len(op.Args)-3 != len(op.Results) ||
			len(in.regions[0].args) != 1+len(op.Results) {
			return bad("malformed for")
		}
	case k == tir.OpIf:
		if len(op.Regions) < 1 || len(op.Regions) > 2 || len(op.Regions) == 1 && len(op.Results) > 0 {
			return bad("malformed if")
		}
	case k == tir.OpCall:
		name := strings.TrimPrefix(op.IdentAttr("callee"), "@")
		f := fc.c.m.Func(name)
		if f == nil {
			return bad("call of unknown function @%s", name)
		}
		if len(f.Params) != len(op.Args) || len(f.Result) != len(op.Results) {
			return bad("call of @%s with %d operands and %d results, want %d and %d",
				name, len(op.Args), len(op.Results), len(f.Params), len(f.Result))
		}
		for i, p := range f.Params {
			if !p.Type.Equal(op.Args[i].Type) {
				return bad("call of @%s: operand %d is %s, want %s", name, i, op.Args[i].Type, p.Type)
			}
		}
		for i, t := range f.Result {
			if !t.Equal(op.Results[i].Type) {
				return bad("call of @%s: result %d is %s, want %s", name, i, op.Results[i].Type, t)
			}
		}
		callee, err := fc.c.fn(f)
		if err != nil {
			return inst{}, err
		}
		in.callee = callee
	case k == tir.OpYield || k == tir.OpReturn:
	default:
		return bad("unknown op %s", k)
	}
	return in, nil
}

func containsInt(xs []int, x int) bool {
	for _, y := range xs {
		if x == y {
			return true
		}
	}
	return false
}
