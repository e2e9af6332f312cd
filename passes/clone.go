package passes

import (
	"strings"

	"github.com/fac-compiler/fac/tir"
)

// cloneBlock deep-copies b. vm maps old values to new ones: it must already
// map whatever b uses from outside (parameters, call arguments); values it
// does not map are shared with the original (values from enclosing blocks
// when cloning a region in place). The clone's own values are added to vm.
func cloneBlock(b *tir.Block, vm map[*tir.Value]*tir.Value) *tir.Block {
	nb := &tir.Block{Args: cloneValues(b.Args, nil, vm)}
	for _, op := range b.Ops {
		nb.Ops = append(nb.Ops, cloneOp(op, vm))
	}
	return nb
}

func cloneOp(op *tir.Op, vm map[*tir.Value]*tir.Value) *tir.Op {
	n := &tir.Op{Kind: op.Kind, Attrs: append([]tir.Attr(nil), op.Attrs...), Pos: op.Pos}
	n.Args = make([]*tir.Value, len(op.Args))
	for i, a := range op.Args {
		n.Args[i] = mapValue(a, vm)
	}
	// Results before regions: no region can use them, but the numbering of a
	// printed clone then matches the original.
	n.Results = cloneValues(op.Results, n, vm)
	for _, r := range op.Regions {
		n.Regions = append(n.Regions, cloneBlock(r, vm))
	}
	return n
}

func cloneValues(vs []*tir.Value, def *tir.Op, vm map[*tir.Value]*tir.Value) []*tir.Value {
	out := make([]*tir.Value, len(vs))
	for i, v := range vs {
		out[i] = &tir.Value{Type: v.Type, Def: def, Name: v.Name}
		vm[v] = out[i]
	}
	return out
}

func mapValue(v *tir.Value, vm map[*tir.Value]*tir.Value) *tir.Value {
	if n, ok := vm[v]; ok {
		return n
	}
	return v
}

// cloneFunc deep-copies f under a new name.
func cloneFunc(f *tir.Func, name string) *tir.Func {
	vm := map[*tir.Value]*tir.Value{}
	return &tir.Func{
		Name:   name,
		Kernel: f.Kernel,
		Params: cloneValues(f.Params, nil, vm),
		Result: append([]tir.Type(nil), f.Result...),
		Attrs:  append([]tir.Attr(nil), f.Attrs...),
		Body:   cloneBlock(f.Body, vm),
		Pos:    f.Pos,
	}
}

// calleeName is the function a call op calls (its callee attribute without '@').
func calleeName(op *tir.Op) string { return strings.TrimPrefix(op.IdentAttr("callee"), "@") }

// substitute rewrites op's operands through sub, following chains.
func substitute(op *tir.Op, sub map[*tir.Value]*tir.Value) {
	for i, a := range op.Args {
		for {
			n, ok := sub[a]
			if !ok {
				break
			}
			a = n
		}
		op.Args[i] = a
	}
}
