package passes

import (
	"math"
	"slices"

	"github.com/fac-compiler/fac/tir"
)

// padDims computes a kernel's tiles whose dimensions are not powers of two
// (a head dim of 80, 96 or 192) in the next power of two, which the GPU
// back end's layouts need. The extra lanes ("pad lanes") are never seen:
//
//	%0 = arange {start = 0, end = 96} : tensor<96xi32>
//	%1 = load %p, %m, %o : tensor<64x96xbf16>
//
// becomes
//
//	%0 = arange {start = 0, end = 128} : tensor<128xi32>
//	%v = ... arange 0..128 < 96, reshaped and broadcast : tensor<64x128xi1>
//	%1 = load %p, %m ∧ %v, %o : tensor<64x128xbf16>
//
// Loads read nothing in pad lanes (they take `other`, 0 where the load
// had none), stores and atomic adds write nothing there, and the two ops
// that combine lanes along a padded dimension see identities there: a
// reduction over it reads its identity (0, −inf, +inf) and a dot whose
// contracted dimension is padded reads zeros, through a select unless the
// operand's pad lanes are known to be zero already (a masked load's, and
// what casts, transposes, sums and products of such values, or products
// with finite constants, keep; attention's
// Q·Kᵀ and dO·Vᵀ need none); such a dot says where the real K ends
// (k_extent), so that the tensor cores skip the k-steps past it. A dot
// whose b has its N dim padded says where the real N ends (n_extent): its
// result's columns past it are pad lanes, which a target may leave as the
// accumulator has them. Every other op computes on pad lanes whatever it
// computes, unseen.
//
// A kernel the rewrite cannot keep exact (a reshape that moves a padded
// dimension's elements, a tensor parameter, a call) is left as it was: the
// CPU device runs any shape, and codegen then says which shape it lacks.
func padDims(m *tir.Module) error {
	for _, f := range m.Funcs {
		if f.Kernel && needsPadding(f) && paddable(f) {
			(&padder{orig: map[*tir.Value][]int{}, zero: map[*tir.Value]bool{}}).block(f.Body)
		}
	}
	return nil
}

func padShape(s []int) []int {
	out := slices.Clone(s)
	for i, d := range out {
		out[i] = tir.PaddedDim(d)
	}
	return out
}

func isPadded(s []int) bool {
	for _, d := range s {
		if tir.PaddedDim(d) != d {
			return true
		}
	}
	return false
}

// needsPadding reports whether some value of f has a dimension that is not
// a power of two.
func needsPadding(f *tir.Func) bool {
	return f.Body.Any(func(op *tir.Op) bool {
		for _, r := range op.Results {
			if isPadded(r.Type.Shape) {
				return true
			}
		}
		for _, r := range op.Regions {
			for _, a := range r.Args {
				if isPadded(a.Type.Shape) {
					return true
				}
			}
		}
		return false
	})
}

// paddable reports whether padDims keeps f exact: no tensor parameters, no
// calls, and reshapes that only add or drop dimensions of size 1.
func paddable(f *tir.Func) bool {
	for _, p := range f.Params {
		if !p.Type.IsScalar() {
			return false
		}
	}
	return !f.Body.Any(func(op *tir.Op) bool {
		switch op.Kind {
		case tir.OpCall:
			return true
		case tir.OpReshape:
			return !slices.Equal(nonUnit(op.Args[0].Type.Shape), nonUnit(op.Result().Type.Shape))
		}
		return false
	})
}

func nonUnit(s []int) []int {
	var out []int
	for _, d := range s {
		if d != 1 {
			out = append(out, d)
		}
	}
	return out
}

// padder rewrites one kernel. orig holds the shape each padded value had;
// zero, whether a value's pad lanes are known to hold 0.
type padder struct {
	orig map[*tir.Value][]int
	zero map[*tir.Value]bool
}

// pad gives v its padded type, remembering the shape it had.
func (p *padder) pad(v *tir.Value) {
	if isPadded(v.Type.Shape) {
		p.orig[v] = v.Type.Shape
		v.Type = v.Type.WithShape(padShape(v.Type.Shape))
	}
}

// isZero reports whether v's pad lanes hold 0 (true when it has none).
func (p *padder) isZero(v *tir.Value) bool {
	if _, ok := p.orig[v]; !ok {
		return true
	}
	return p.zero[v]
}

func (p *padder) block(b *tir.Block) {
	for i := 0; i < len(b.Ops); i++ {
		op := b.Ops[i]
		var pre tir.Block
		p.op(op, &tir.Builder{Block: &pre, Pos: op.Pos})
		if len(pre.Ops) > 0 {
			b.Ops = slices.Insert(b.Ops, i, pre.Ops...)
			i += len(pre.Ops)
		}
	}
}

// op pads op's results (and its regions'), rewriting it as the top of the
// file says; ops it needs go to pre, before op.
func (p *padder) op(op *tir.Op, pre *tir.Builder) {
	switch op.Kind {
	case tir.OpLoad:
		p.pad(op.Result())
		if v := p.valid(op.Args[0], pre); v != nil {
			if len(op.Args) == 1 {
				z := pre.Const(op.Result().Type, zeroOf(op.Result().Type))
				op.Args = append(op.Args, v, z)
			} else {
				op.Args[1] = pre.Binary(tir.OpAnd, op.Args[1], v)
			}
		}
		// Pad lanes read other's.
		p.zero[op.Result()] = len(op.Args) == 3 && p.isZero(op.Args[2])
		return
	case tir.OpStore, tir.OpAtomicAdd, tir.OpPrefetch:
		n := 2
		if op.Kind == tir.OpPrefetch {
			n = 1
		}
		if v := p.valid(op.Args[0], pre); v != nil {
			if len(op.Args) == n {
				op.Args = append(op.Args, v)
			} else {
				op.Args[n] = pre.Binary(tir.OpAnd, op.Args[n], v)
			}
		}
		return
	case tir.OpArange:
		start, end := op.IntAttr("start"), op.IntAttr("end")
		if n := int(end - start); tir.PaddedDim(n) != n {
			op.SetAttr("end", start+int64(tir.PaddedDim(n)))
		}
	case tir.OpReduce:
		x, axis := op.Args[0], int(op.IntAttr("axis"))
		if o, ok := p.orig[x]; ok && o[axis] != x.Type.Shape[axis] {
			kind := string(op.Attr("kind").(tir.Ident))
			if kind != "sum" || !p.isZero(x) {
				op.Args[0] = p.identityInPad(x, axis, kind, pre)
			}
		}
	case tir.OpDot:
		a, b := op.Args[0], op.Args[1]
		if o, ok := p.orig[a]; ok && o[1] != a.Type.Shape[1] {
			if !p.isZero(a) {
				op.Args[0] = p.identityInPad(a, 1, "sum", pre)
			}
			if !p.isZero(b) {
				op.Args[1] = p.identityInPad(b, 0, "sum", pre)
			}
			// Both are zero past the real K: the tensor cores may stop there.
			op.SetAttr("k_extent", int64(o[1]))
		}
		// The result's columns past b's real N are pad lanes: a target may
		// leave them as c has them instead of computing them.
		if o, ok := p.orig[op.Args[1]]; ok && o[1] != op.Args[1].Type.Shape[1] {
			op.SetAttr("n_extent", int64(o[1]))
		}
	case tir.OpFor:
		body := op.Regions[0]
		for j, a := range body.Args[1:] { // the induction variable is a scalar
			a.Type = op.Args[3+j].Type
			if o, ok := p.orig[op.Args[3+j]]; ok {
				p.orig[a] = o
			}
		}
		p.block(body)
	case tir.OpIf:
		for _, r := range op.Regions {
			p.block(r)
		}
	}
	for _, r := range op.Results {
		p.pad(r)
	}
	if len(op.Results) == 1 {
		p.zero[op.Result()] = p.keepsZero(op)
	}
}

// keepsZero reports whether op's (single) result has zeros in its pad lanes
// given what is known of its operands.
func (p *padder) keepsZero(op *tir.Op) bool {
	all := func(vs ...*tir.Value) bool {
		for _, v := range vs {
			if !p.isZero(v) {
				return false
			}
		}
		return true
	}
	switch op.Kind {
	case tir.OpConst:
		return isConstZero(op.Result())
	case tir.OpCast, tir.OpTrans, tir.OpReshape, tir.OpNeg, tir.OpAbs:
		return all(op.Args[0])
	case tir.OpAdd, tir.OpSub:
		return all(op.Args...)
	case tir.OpMul:
		// 0 times a finite constant is 0 (times inf or NaN it is not).
		x, y := op.Args[0], op.Args[1]
		return all(x, y) || p.isZero(x) && finiteConst(y) || p.isZero(y) && finiteConst(x)
	case tir.OpSelect:
		return all(op.Args[1], op.Args[2])
	case tir.OpDot:
		// With n_extent a target may compute the pad columns (a·b + c) or
		// leave them as c's: both are zero when a's, b's and c's pad lanes
		// are (pad rows of a·b + c are zero rows times b plus zero).
		return all(op.Args...)
	case tir.OpReduce:
		return all(op.Args[0])
	case tir.OpBroadcast:
		// Copies of a real lane land in the pad lanes of a dimension the
		// broadcast expands.
		src, o := op.Args[0], p.orig[op.Result()]
		for i, d := range src.Type.Shape {
			if d == 1 && o != nil && o[i] != op.Result().Type.Shape[i] {
				return false
			}
		}
		return all(src)
	case tir.OpSplat:
		return isConstZero(op.Args[0])
	}
	return false
}

// valid is the mask of x's real lanes (x's shape, i1), or nil when x has
// no pad lanes.
func (p *padder) valid(x *tir.Value, pre *tir.Builder) *tir.Value {
	o, ok := p.orig[x]
	if !ok {
		return nil
	}
	s := x.Type.Shape
	var v *tir.Value
	for i := range s {
		if o[i] == s[i] {
			continue
		}
		c := pre.Cmp("lt", pre.Arange(0, s[i]), pre.Const(tir.Tensor(tir.I32, s[i]), int64(o[i])))
		if len(s) > 1 {
			one := make([]int, len(s))
			for j := range one {
				one[j] = 1
			}
			one[i] = s[i]
			c = pre.Broadcast(pre.Reshape(c, one), s)
		}
		if v == nil {
			v = c
		} else {
			v = pre.Binary(tir.OpAnd, v, c)
		}
	}
	return v
}

// identityInPad is x with the identity of a kind reduction in the pad
// lanes of dimension axis.
func (p *padder) identityInPad(x *tir.Value, axis int, kind string, pre *tir.Builder) *tir.Value {
	o := p.orig[x]
	s := x.Type.Shape
	one := make([]int, len(s))
	for j := range one {
		one[j] = 1
	}
	one[axis] = s[axis]
	c := pre.Cmp("lt", pre.Arange(0, s[axis]), pre.Const(tir.Tensor(tir.I32, s[axis]), int64(o[axis])))
	if len(s) > 1 {
		c = pre.Broadcast(pre.Reshape(c, one), s)
	}
	id := pre.Const(x.Type, identityOf(kind, x.Type.Elem))
	y := pre.Select(c, x, id)
	p.orig[y] = o
	p.zero[y] = kind == "sum" && p.isZeroExcept(x, axis)
	return y
}

// isZeroExcept: x's pad lanes are zero (it is only the padded lanes along
// axis that identityInPad zeroes; others keep x's).
func (p *padder) isZeroExcept(x *tir.Value, axis int) bool {
	o := p.orig[x]
	for i, d := range o {
		if i != axis && d != x.Type.Shape[i] && !p.isZero(x) {
			return false
		}
	}
	return true
}

// identityOf is a kind reduction's identity for elements e.
func identityOf(kind string, e tir.Elem) any {
	switch kind {
	case "max":
		if e.IsFloat() {
			return math.Inf(-1)
		}
		return int64(math.MinInt32)
	case "min":
		if e.IsFloat() {
			return math.Inf(1)
		}
		return int64(math.MaxInt32)
	}
	return zeroOf(tir.Scalar(e))
}

// finiteConst reports whether v is a finite constant.
func finiteConst(v *tir.Value) bool {
	switch c, ok := constOf(v); c := c.(type) {
	case float64:
		return ok && !math.IsInf(c, 0) && !math.IsNaN(c)
	case int64, bool:
		return ok
	}
	return false
}

// isConstZero reports whether v is a constant 0 (or false).
func isConstZero(v *tir.Value) bool {
	switch c, _ := constOf(v); c := c.(type) {
	case int64:
		return c == 0
	case float64:
		return c == 0
	case bool:
		return !c
	}
	return false
}
