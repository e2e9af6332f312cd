package tir

import (
	"errors"
	"fmt"
	"strings"
)

// Verify checks the invariants the op docs in ops.go promise, so that passes,
// the interpreter and codegen may rely on them without checking again:
// function names are unique, every function passes VerifyFunc.
func Verify(m *Module) error {
	seen := map[string]bool{}
	for i, f := range m.Funcs {
		if f == nil {
			return fmt.Errorf("verify: function %d is nil", i)
		}
		if seen[f.Name] {
			return fmt.Errorf("%sverify: func @%s: duplicate function name", posPrefix(f.Pos), f.Name)
		}
		seen[f.Name] = true
	}
	for _, f := range m.Funcs {
		if err := VerifyFunc(m, f); err != nil {
			return err
		}
	}
	return nil
}

// VerifyFunc checks one function of m: names that print and parse back,
// terminators, SSA dominance, and each op's operand and result types. m is
// used to check calls; when nil, calls are checked against nothing.
//
// Errors name the op by its 1-based pre-order number in the function (the
// n-th op line of the printed function) and start with op.Pos when set.
func VerifyFunc(m *Module, f *Func) error {
	if f == nil {
		return fmt.Errorf("verify: nil function")
	}
	v := &verifier{m: m, f: f, defined: map[*Value]bool{}, visible: map[*Value]bool{}}
	if err := v.header(); err != nil {
		return fmt.Errorf("%sverify: func @%s: %v", posPrefix(f.Pos), f.Name, err)
	}
	for _, p := range f.Params {
		v.defined[p], v.visible[p] = true, true
	}
	return v.block(f.Body, OpReturn, nil, 0)
}

func posPrefix(p Pos) string {
	if p.Line == 0 && p.File == "" {
		return ""
	}
	return p.String() + ": "
}

type verifier struct {
	m       *Module
	f       *Func
	n       int             // ops numbered so far, pre-order
	defined map[*Value]bool // defined anywhere so far
	visible map[*Value]bool // defined and in scope here
}

func (v *verifier) header() error {
	f := v.f
	if !isIdent(f.Name) {
		return fmt.Errorf("bad function name %q", f.Name)
	}
	if f.Kernel && len(f.Result) > 0 {
		return fmt.Errorf("kernel has result types (kernels return nothing)")
	}
	if f.Body == nil {
		return fmt.Errorf("no body")
	}
	if len(f.Body.Args) > 0 {
		return fmt.Errorf("function body has block arguments")
	}
	names := map[string]bool{}
	for i, p := range f.Params {
		switch {
		case p == nil:
			return fmt.Errorf("parameter %d is nil", i)
		case !isIdent(p.Name):
			// Numbers are what the printer gives unnamed values.
			return fmt.Errorf("parameter %d: bad name %q", i, p.Name)
		case names[p.Name]:
			return fmt.Errorf("duplicate parameter %%%s", p.Name)
		}
		names[p.Name] = true
	}
	return checkAttrs(f.Attrs)
}

// checkAttrs rejects attributes that would not print and parse back as they are.
func checkAttrs(as []Attr) error {
	keys := map[string]bool{}
	for _, a := range as {
		if !isIdent(a.Key) || keys[a.Key] {
			return fmt.Errorf("bad or duplicate attribute name %q", a.Key)
		}
		keys[a.Key] = true
		switch x := a.Val.(type) {
		case int64, float64, bool:
		case Ident:
			s := strings.TrimPrefix(string(x), "@")
			if !isIdent(s) || s == string(x) && (s == "true" || s == "false" || s == "inf" || s == "nan") {
				return fmt.Errorf("attribute %s: bad identifier %q", a.Key, x)
			}
		default:
			return fmt.Errorf("attribute %s: unsupported value type %T", a.Key, a.Val)
		}
	}
	return nil
}

// block checks b, whose terminator must be term; parent (number pn) is the
// op owning the region, nil for the function body.
func (v *verifier) block(b *Block, term Kind, parent *Op, pn int) error {
	where := func() string {
		if parent == nil {
			return fmt.Sprintf("%sverify: func @%s: body", posPrefix(v.f.Pos), v.f.Name)
		}
		return v.prefix(parent, pn) + "region"
	}
	if b == nil {
		return fmt.Errorf("%s is nil", where())
	}
	var added []*Value
	defer func() {
		for _, x := range added {
			delete(v.visible, x)
		}
	}()
	def := func(x *Value) error {
		if x == nil {
			return fmt.Errorf("nil value")
		}
		if v.defined[x] {
			return fmt.Errorf("value defined twice")
		}
		v.defined[x], v.visible[x] = true, true
		added = append(added, x)
		return nil
	}
	for i, a := range b.Args {
		if err := def(a); err != nil {
			return fmt.Errorf("%s argument %d: %v", where(), i, err)
		}
	}
	for i, op := range b.Ops {
		if op == nil {
			return fmt.Errorf("%s: op %d is nil", where(), v.n+1)
		}
		v.n++
		n := v.n
		errf := func(format string, args ...any) error {
			return errors.New(v.prefix(op, n) + fmt.Sprintf(format, args...))
		}
		if op.Kind.IsTerminator() {
			if op.Kind != term {
				return errf("%s is not allowed here (this block ends with %s)", op.Kind, term)
			}
			if i != len(b.Ops)-1 {
				return errf("%s must be the last op of its block", op.Kind)
			}
		}
		for j, a := range op.Args {
			switch {
			case a == nil:
				return errf("operand %d is nil", j)
			case v.visible[a]:
			case v.defined[a]:
				return errf("operand %d is used outside the region that defines it", j)
			default:
				return errf("operand %d is used before its definition", j)
			}
		}
		if err := v.op(op, n); err != nil {
			return err
		}
		for j, r := range op.Results {
			if r != nil && r.Def != op {
				return errf("result %d does not point back to its op", j)
			}
			if err := def(r); err != nil {
				return errf("result %d: %v", j, err)
			}
		}
	}
	if len(b.Ops) == 0 || b.Ops[len(b.Ops)-1].Kind != term {
		return fmt.Errorf("%s does not end with %s", where(), term)
	}
	return nil
}

func (v *verifier) prefix(op *Op, n int) string {
	return fmt.Sprintf("%sverify: func @%s: op %d (%s): ", posPrefix(op.Pos), v.f.Name, n, op.Kind)
}

// op checks one op's operands, results, attributes and regions.
func (v *verifier) op(op *Op, n int) error {
	errf := func(format string, args ...any) error {
		return errors.New(v.prefix(op, n) + fmt.Sprintf(format, args...))
	}
	k := op.Kind
	if k == OpInvalid || k >= numKinds {
		return errf("invalid op kind")
	}
	if err := checkAttrs(op.Attrs); err != nil {
		return errf("%v", err)
	}
	nregions := 0
	switch k {
	case OpFor:
		nregions = 1
	case OpIf:
		nregions = 2
	}
	if len(op.Regions) != nregions {
		return errf("has %d regions, want %d", len(op.Regions), nregions)
	}
	// Arity: operand counts (min, max; -1 = any) and result count.
	nargs, maxArgs, nres := 0, 0, 1
	switch {
	case k.IsBinary(), k == OpCmp, k == OpAddPtr:
		nargs, maxArgs = 2, 2
	case k.IsUnary(), k == OpSplat, k == OpBroadcast, k == OpReshape, k == OpTrans, k == OpCast, k == OpReduce:
		nargs, maxArgs = 1, 1
	case k == OpSelect, k == OpDot:
		nargs, maxArgs = 3, 3
	case k == OpLoad:
		nargs, maxArgs = 1, 3
	case k.IsMemWrite():
		nargs, maxArgs, nres = 2, 3, 0
	case k == OpPrefetch:
		nargs, maxArgs, nres = 1, 2, 0
	case k == OpLastArrival:
		nargs, maxArgs = 2, 2
	case k == OpFor:
		nargs, maxArgs, nres = 3, -1, len(op.Args)-3
	case k == OpIf:
		nargs, maxArgs, nres = 1, 1, len(op.Results)
	case k == OpYield, k == OpReturn:
		nargs, maxArgs, nres = 0, -1, 0
	case k == OpCall:
		nargs, maxArgs, nres = 0, -1, len(op.Results)
	}
	if len(op.Args) < nargs || maxArgs >= 0 && len(op.Args) > maxArgs || k == OpLoad && len(op.Args) == 2 {
		return errf("has %d operands", len(op.Args))
	}
	if len(op.Results) != nres {
		return errf("has %d results, want %d", len(op.Results), nres)
	}
	for i, r := range op.Results {
		if r == nil {
			return errf("result %d is nil", i)
		}
		if err := checkType(r.Type); err != nil {
			return errf("result %d: %v", i, err)
		}
	}
	for i, a := range op.Args {
		if err := checkType(a.Type); err != nil {
			return errf("operand %d: %v", i, err)
		}
	}
	var a, b, res Type
	if len(op.Args) > 0 {
		a = op.Args[0].Type
	}
	if len(op.Args) > 1 {
		b = op.Args[1].Type
	}
	if len(op.Results) > 0 {
		res = op.Results[0].Type
	}
	sameRes := func(t Type) error {
		if !res.Equal(t) {
			return errf("result type %s, want %s", res, t)
		}
		return nil
	}

	switch {
	case k == OpConst:
		val := op.Attr("value")
		var ok bool
		switch val.(type) {
		case float64:
			ok = res.Elem.IsFloat()
		case int64:
			ok = res.Elem.IsInt() || res.Elem == I1
		case bool:
			ok = res.Elem == I1
		}
		if val == nil {
			return errf("missing value attribute")
		}
		if !ok || res.Ptr {
			return errf("value %s does not fit %s", FormatAttr(val), res)
		}
	case k == OpProgramID:
		if ax, ok := op.Attr("axis").(int64); !ok || ax < 0 || ax > 2 {
			return errf("axis must be 0, 1 or 2")
		}
		return sameRes(Scalar(I32))
	case k == OpNumPrograms:
		if ax, ok := op.Attr("axis").(int64); !ok || ax < 0 || ax > 2 {
			return errf("axis must be 0, 1 or 2")
		}
		return sameRes(Scalar(I32))
	case k == OpNumSMs, k == OpGroupID:
		return sameRes(Scalar(I32))
	case k == OpArange:
		start, ok1 := op.Attr("start").(int64)
		end, ok2 := op.Attr("end").(int64)
		if !ok1 || !ok2 || end <= start {
			return errf("needs int attributes start < end")
		}
		if res.Ptr || res.Elem != I32 || res.Rank() != 1 || int64(res.Shape[0]) != end-start {
			return errf("result type %s, want tensor<%dxi32>", res, end-start)
		}
	case k == OpSplat:
		if !a.IsScalar() {
			return errf("operand %s is not a scalar", a)
		}
		return sameRes(a.WithShape(res.Shape))
	case k == OpBroadcast:
		if a.Rank() != res.Rank() {
			return errf("cannot broadcast %s to %s: ranks differ", a, res)
		}
		for i, d := range a.Shape {
			if d != res.Shape[i] && d != 1 {
				return errf("cannot broadcast %s to %s", a, res)
			}
		}
		return sameRes(a.WithShape(res.Shape))
	case k == OpReshape:
		if a.NumElems() != res.NumElems() {
			return errf("cannot reshape %s to %s: element counts differ", a, res)
		}
		return sameRes(a.WithShape(res.Shape))
	case k == OpTrans:
		if a.Rank() != 2 {
			return errf("operand %s is not 2-D", a)
		}
		return sameRes(a.WithShape([]int{a.Shape[1], a.Shape[0]}))
	case k.IsBinary():
		if !a.Equal(b) {
			return errf("operand types differ: %s vs %s", a, b)
		}
		logic := k == OpAnd || k == OpOr || k == OpXor
		switch {
		case a.Ptr:
			return errf("operands are pointers (use addptr)")
		case logic && a.Elem.IsFloat():
			return errf("operands are float, want i1 or integer")
		case !logic && a.Elem == I1:
			return errf("arithmetic on i1")
		}
		return sameRes(a)
	case k.IsUnary():
		switch {
		case a.Ptr:
			return errf("operand is a pointer")
		case k >= OpExp && !a.Elem.IsFloat():
			return errf("operand %s is not float", a)
		case k == OpNot && a.Elem.IsFloat():
			return errf("operand %s is float, want i1 or integer", a)
		case (k == OpNeg || k == OpAbs) && a.Elem == I1:
			return errf("operand is i1")
		}
		return sameRes(a)
	case k == OpCmp:
		if !a.Equal(b) {
			return errf("operand types differ: %s vs %s", a, b)
		}
		switch p, _ := op.Attr("pred").(Ident); p {
		case "eq", "ne", "lt", "le", "gt", "ge":
		default:
			return errf("bad pred %q", p)
		}
		return sameRes(Tensor(I1, a.Shape...))
	case k == OpSelect:
		c := op.Args[2].Type
		if !b.Equal(c) {
			return errf("operand types differ: %s vs %s", b, c)
		}
		if !a.Equal(Tensor(I1, b.Shape...)) {
			return errf("condition %s, want %s", a, Tensor(I1, b.Shape...))
		}
		return sameRes(b)
	case k == OpCast:
		if a.Ptr || res.Ptr {
			return errf("cannot cast pointers")
		}
		return sameRes(res.WithShape(a.Shape))
	case k == OpAddPtr:
		if !a.Ptr {
			return errf("operand 0 %s is not a pointer", a)
		}
		if b.Ptr || !b.Elem.IsInt() || !shapeEq(a.Shape, b.Shape) {
			return errf("offset %s, want integers shaped %s", b, ShapeString(a.Shape))
		}
		return sameRes(a)
	case k == OpLoad:
		if !a.Ptr {
			return errf("operand 0 %s is not a pointer", a)
		}
		want := Tensor(a.Elem, a.Shape...)
		if len(op.Args) == 3 {
			if m := op.Args[1].Type; !m.Equal(Tensor(I1, a.Shape...)) {
				return errf("mask %s, want %s", m, Tensor(I1, a.Shape...))
			}
			if o := op.Args[2].Type; !o.Equal(want) {
				return errf("other %s, want %s", o, want)
			}
		}
		return sameRes(want)
	case k.IsMemWrite():
		if !a.Ptr {
			return errf("operand 0 %s is not a pointer", a)
		}
		if k == OpAtomicAdd && a.Elem != F32 {
			return errf("atomic_add on %s, want f32", a)
		}
		if want := Tensor(a.Elem, a.Shape...); !b.Equal(want) {
			return errf("value %s, want %s", b, want)
		}
		if len(op.Args) == 3 {
			if m := op.Args[2].Type; !m.Equal(Tensor(I1, a.Shape...)) {
				return errf("mask %s, want %s", m, Tensor(I1, a.Shape...))
			}
		}
	case k == OpPrefetch:
		if !a.Ptr {
			return errf("operand 0 %s is not a pointer", a)
		}
		if len(op.Args) == 2 {
			if m := op.Args[1].Type; !m.Equal(Tensor(I1, a.Shape...)) {
				return errf("mask %s, want %s", m, Tensor(I1, a.Shape...))
			}
		}
	case k == OpLastArrival:
		if !a.Equal(PtrTo(I32)) {
			return errf("counter %s, want ptr<i32>", a)
		}
		if !b.Equal(Scalar(I32)) {
			return errf("count %s, want i32", b)
		}
		return sameRes(Scalar(I1))
	case k == OpDot:
		c := op.Args[2].Type
		if a.Rank() != 2 || b.Rank() != 2 || c.Rank() != 2 ||
			a.Shape[1] != b.Shape[0] || a.Shape[0] != c.Shape[0] || b.Shape[1] != c.Shape[1] {
			return errf("shapes %s x %s + %s do not match [M,K] x [K,N] + [M,N]",
				ShapeString(a.Shape), ShapeString(b.Shape), ShapeString(c.Shape))
		}
		if a.Ptr || b.Ptr || c.Ptr || a.Elem != b.Elem || !a.Elem.IsFloat() || !c.Elem.IsFloat() {
			return errf("types %s, %s, %s: want a and b of one float type, c float", a, b, c)
		}
		if x := op.Attr("k_extent"); x != nil {
			if n, ok := x.(int64); !ok || n < 1 || n > int64(a.Shape[1]) {
				return errf("k_extent %v: want 1 to K = %d", x, a.Shape[1])
			}
		}
		if x := op.Attr("n_extent"); x != nil {
			if n, ok := x.(int64); !ok || n < 1 || n > int64(b.Shape[1]) {
				return errf("n_extent %v: want 1 to N = %d", x, b.Shape[1])
			}
		}
		return sameRes(c)
	case k == OpReduce:
		switch kind, _ := op.Attr("kind").(Ident); kind {
		case "max", "min", "sum":
		default:
			return errf("bad kind %q", kind)
		}
		ax, ok := op.Attr("axis").(int64)
		if !ok || ax < 0 || ax >= int64(a.Rank()) {
			return errf("axis out of range for %s", a)
		}
		if a.Ptr {
			return errf("operand is a pointer")
		}
		shape := append(append([]int(nil), a.Shape[:ax]...), a.Shape[ax+1:]...)
		return sameRes(a.WithShape(shape))
	case k == OpFor:
		for i := range 3 {
			if t := op.Args[i].Type; !t.Equal(Scalar(I32)) {
				return errf("bound %d is %s, want i32", i, t)
			}
		}
		want := make([]Type, 0, len(op.Args)-3)
		for i, x := range op.Args[3:] {
			if !op.Results[i].Type.Equal(x.Type) {
				return errf("result %d is %s, but its init is %s", i, op.Results[i].Type, x.Type)
			}
			want = append(want, x.Type)
		}
		body := op.Regions[0]
		if body != nil {
			if len(body.Args) != len(want)+1 {
				return errf("region has %d arguments, want %d", len(body.Args), len(want)+1)
			}
			for i, x := range body.Args {
				w := Scalar(I32)
				if i > 0 {
					w = want[i-1]
				}
				if x == nil || !x.Type.Equal(w) {
					return errf("region argument %d, want %s", i, w)
				}
			}
		}
		return v.regions(op, n, want)
	case k == OpIf:
		if !a.Equal(Scalar(I1)) {
			return errf("condition %s, want i1", a)
		}
		want := make([]Type, len(op.Results))
		for i, r := range op.Results {
			want[i] = r.Type
		}
		for i, r := range op.Regions {
			if r != nil && len(r.Args) > 0 {
				return errf("region %d has arguments", i)
			}
		}
		return v.regions(op, n, want)
	case k == OpCall:
		name, _ := op.Attr("callee").(Ident)
		if !strings.HasPrefix(string(name), "@") {
			return errf("callee %q is not a @symbol", name)
		}
		if v.m == nil {
			return nil
		}
		var callee *Func
		for _, g := range v.m.Funcs {
			if g != nil && g.Name == string(name[1:]) {
				callee = g
				break
			}
		}
		if callee == nil {
			return errf("call to missing function %s", name)
		}
		if callee.Kernel {
			return errf("call to kernel %s", name)
		}
		var params []Type
		for _, p := range callee.Params {
			if p != nil {
				params = append(params, p.Type)
			}
		}
		if err := matchTypes("argument", op.Args, params); err != nil {
			return errf("%s: %v", name, err)
		}
		if err := matchTypes("result", op.Results, callee.Result); err != nil {
			return errf("%s: %v", name, err)
		}
	case k == OpReturn:
		if err := matchTypes("value", op.Args, v.f.Result); err != nil {
			return errf("%v", err)
		}
	}
	return nil
}

// regions checks the regions of a for or if, each ending in a yield of want.
func (v *verifier) regions(op *Op, n int, want []Type) error {
	for i, r := range op.Regions {
		if err := v.block(r, OpYield, op, n); err != nil {
			return err
		}
		y := r.Ops[len(r.Ops)-1]
		if err := matchTypes("yielded value", y.Args, want); err != nil {
			return fmt.Errorf("%sregion %d: %v", v.prefix(op, n), i, err)
		}
	}
	return nil
}

func matchTypes(what string, vals []*Value, want []Type) error {
	if len(vals) != len(want) {
		return fmt.Errorf("%d %ss, want %d", len(vals), what, len(want))
	}
	for i, x := range vals {
		if !x.Type.Equal(want[i]) {
			return fmt.Errorf("%s %d is %s, want %s", what, i, x.Type, want[i])
		}
	}
	return nil
}

// checkType rejects types that do not print and parse back.
func checkType(t Type) error {
	if t.Elem == Invalid || int(t.Elem) >= len(elemNames) {
		return fmt.Errorf("invalid element type")
	}
	for _, d := range t.Shape {
		if d <= 0 {
			return fmt.Errorf("bad shape %s", ShapeString(t.Shape))
		}
	}
	return nil
}

func shapeEq(a, b []int) bool { return Type{Shape: a}.Equal(Type{Shape: b}) }
