package passes

import (
	"fmt"
	"slices"
	"strings"

	"github.com/fac-compiler/fac/tir"
)

// cse replaces a pure op by an earlier identical one (same kind, operands,
// attributes and result types) whose block encloses it: a value from an
// outer block can stand in for one in a nested region, never the reverse.
// Loads are not pure (a store may come between two of them); program_id is,
// since it is fixed for the whole program.
func cse(m *tir.Module) error {
	for _, f := range m.Funcs {
		c := &cser{ids: map[*tir.Value]int{}, avail: map[string]*tir.Value{}, sub: map[*tir.Value]*tir.Value{}}
		for _, p := range f.Params {
			c.id(p)
		}
		c.block(f.Body)
	}
	return nil
}

type cser struct {
	ids   map[*tir.Value]int        // value numbering for keys
	avail map[string]*tir.Value     // key → value available in the current scope
	sub   map[*tir.Value]*tir.Value // eliminated value → its stand-in
}

func (c *cser) id(v *tir.Value) int {
	if n, ok := c.ids[v]; ok {
		return n
	}
	c.ids[v] = len(c.ids)
	return c.ids[v]
}

// block eliminates in b; on return, b's own entries leave the scope.
func (c *cser) block(b *tir.Block) {
	var added []string
	for _, a := range b.Args {
		c.id(a)
	}
	ops := b.Ops[:0]
	for _, op := range b.Ops {
		substitute(op, c.sub)
		for _, r := range op.Regions {
			c.block(r)
		}
		if pure(op) {
			k := c.key(op)
			if v, ok := c.avail[k]; ok {
				c.sub[op.Result()] = v
				continue
			}
			c.avail[k] = op.Result()
			added = append(added, k)
		}
		for _, r := range op.Results {
			c.id(r)
		}
		ops = append(ops, op)
	}
	b.Ops = ops
	// Keys are only added when absent, so deleting them restores the
	// enclosing scope exactly.
	for _, k := range added {
		delete(c.avail, k)
	}
}

// pure reports ops whose single result depends only on operands and attrs.
func pure(op *tir.Op) bool {
	return len(op.Results) == 1 && len(op.Regions) == 0 && op.Kind != tir.OpLoad && !op.Kind.HasSideEffects()
}

func (c *cser) key(op *tir.Op) string {
	ids := make([]int, len(op.Args))
	for i, a := range op.Args {
		ids[i] = c.id(a)
	}
	switch op.Kind {
	case tir.OpAdd, tir.OpMul, tir.OpAnd, tir.OpOr, tir.OpXor:
		// Commutative, floats included. Not min/max: which zero or NaN
		// they return may depend on the operand order.
		slices.Sort(ids)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s %v %s", op.Kind, ids, op.Result().Type)
	for _, a := range op.Attrs {
		// The Go type tells 1 (int64) from 1.0 (float64); FormatAttr
		// tells -0.0 from 0.0.
		fmt.Fprintf(&b, " %s=%T:%s", a.Key, a.Val, tir.FormatAttr(a.Val))
	}
	return b.String()
}
