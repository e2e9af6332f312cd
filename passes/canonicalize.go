package passes

import (
	"github.com/fac-compiler/fac/tir"
)

// canonicalize folds elementwise ops on constants, applies algebraic
// identities that hold for every input (NaN and -0.0 included), and replaces
// an if on a constant condition by its taken region, to a fixpoint. Folding
// computes exactly what runtime/cpu computes (see fold.go); where targets
// may differ (integer division by zero, NaN or out-of-range float to int)
// it leaves the op alone. Ops made unused are left for dce.
func canonicalize(m *tir.Module) error {
	for _, f := range m.Funcs {
		for {
			c := &canon{sub: map[*tir.Value]*tir.Value{}}
			c.block(f.Body)
			if !c.changed {
				break
			}
		}
	}
	return nil
}

type canon struct {
	sub     map[*tir.Value]*tir.Value // replaced value → replacement
	changed bool
}

func (c *canon) block(b *tir.Block) {
	var out []*tir.Op
	c.ops(b.Ops, &out)
	b.Ops = out
}

// ops appends the canonical form of ops to out. Operands are rewritten
// through c.sub first: definitions come before uses in this walk.
func (c *canon) ops(ops []*tir.Op, out *[]*tir.Op) {
	for _, op := range ops {
		substitute(op, c.sub)
		if op.Kind == tir.OpIf {
			if cond, ok := constOf(op.Args[0]); ok && op.Args[0].Type.IsScalar() {
				// Splice the taken region in place of the if; its yield
				// gives the if's results.
				r := op.Regions[1]
				if cond.(bool) {
					r = op.Regions[0]
				}
				y := r.Ops[len(r.Ops)-1]
				c.ops(r.Ops[:len(r.Ops)-1], out)
				substitute(y, c.sub)
				for i, res := range op.Results {
					c.sub[res] = y.Args[i]
				}
				c.changed = true
				continue
			}
		}
		for _, r := range op.Regions {
			c.block(r)
		}
		if v := simplify(op); v != nil {
			c.sub[op.Result()] = v
			c.changed = true
			continue
		}
		if val, ok := fold(op); ok {
			op.Kind, op.Args = tir.OpConst, nil
			op.Attrs = []tir.Attr{{Key: "value", Val: val}}
			c.changed = true
		}
		*out = append(*out, op)
	}
}

// simplify returns an existing value equal to op's result for every input,
// or nil.
func simplify(op *tir.Op) *tir.Value {
	if len(op.Results) != 1 || op.Kind == tir.OpConst {
		return nil
	}
	t := op.Result().Type
	x, y := argOr(op, 0), argOr(op, 1)
	switch op.Kind {
	case tir.OpSplat, tir.OpBroadcast, tir.OpReshape, tir.OpCast:
		if x.Type.Equal(t) {
			return x
		}
	case tir.OpTrans, tir.OpNot, tir.OpNeg: // involutions, exact (neg flips the sign bit)
		if x.Def != nil && x.Def.Kind == op.Kind {
			return x.Def.Args[0]
		}
	case tir.OpAdd:
		// x+0 is not x for x = -0.0, but x+(-0.0) is x for every float.
		if isConst(y, 0, true) {
			return x
		}
		if isConst(x, 0, true) {
			return y
		}
	case tir.OpSub:
		if isConst(y, 0, false) { // x - (+0.0) is x for every float
			return x
		}
	case tir.OpMul:
		if isConst(y, 1, false) {
			return x
		}
		if isConst(x, 1, false) {
			return y
		}
	case tir.OpDiv:
		if isConst(y, 1, false) {
			return x
		}
	case tir.OpMin, tir.OpMax:
		if x == y {
			return x
		}
	case tir.OpAnd:
		if x == y || isConst(y, -1, false) {
			return x
		}
		if isConst(x, -1, false) {
			return y
		}
	case tir.OpOr:
		if x == y || isConst(y, 0, false) {
			return x
		}
		if isConst(x, 0, false) {
			return y
		}
	case tir.OpXor:
		if isConst(y, 0, false) {
			return x
		}
		if isConst(x, 0, false) {
			return y
		}
	case tir.OpSelect:
		if c, ok := constOf(x); ok {
			if c.(bool) {
				return y
			}
			return op.Args[2]
		}
		if y == op.Args[2] {
			return y
		}
		// select(c, x, select(c, x, z)) is the inner select (x the same
		// value, or equal constants: cse has not merged them yet).
		if z := op.Args[2]; z.Def != nil && z.Def.Kind == tir.OpSelect && z.Def.Args[0] == x && sameValue(z.Def.Args[1], y) {
			return z
		}
	}
	return nil
}

// sameValue reports whether a and b are the same value, or constants of one
// type whose lanes hold the same bits (+0.0 and -0.0 differ).
func sameValue(a, b *tir.Value) bool {
	if a == b {
		return true
	}
	ca, ok1 := constOf(a)
	cb, ok2 := constOf(b)
	if !ok1 || !ok2 || !a.Type.Equal(b.Type) {
		return false
	}
	if fa, ok := ca.(float64); ok {
		fb := cb.(float64)
		return fa == fb && isNegZero(fa) == isNegZero(fb) || fa != fa && fb != fb
	}
	return ca == cb
}

func argOr(op *tir.Op, i int) *tir.Value {
	if i < len(op.Args) {
		return op.Args[i]
	}
	return nil
}

// isConst reports whether v is a constant equal to n in every lane. For
// floats, negZero asks for -0.0 rather than +0.0 when n is 0; for i1, 0 is
// false and -1 (all ones, as for integers) is true.
func isConst(v *tir.Value, n int64, negZero bool) bool {
	c, ok := constOf(v)
	if !ok {
		return false
	}
	switch c := c.(type) {
	case bool:
		return (n == -1 && c) || (n == 0 && !c)
	case int64:
		return c == n
	case float64:
		return c == float64(n) && (n != 0 || isNegZero(c) == negZero)
	}
	return false
}
