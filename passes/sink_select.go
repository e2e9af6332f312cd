package passes

import (
	"slices"

	"github.com/fac-compiler/fac/tir"
)

// sinkSelect moves a select whose condition is a mask tile an if computed
// into the if's branches:
//
//	%m = if %c : tensor<MxNxi1> { ...; yield %a } else { ...; yield %b }
//	%s = select %m, %x, %y : tensor<MxNxf32>
//
// becomes
//
//	%s = if %c : tensor<MxNxf32> {
//	  ...; %s1 = select %a, %x, %y : tensor<MxNxf32>; yield %s1
//	} else {
//	  ...; %s2 = select %b, %x, %y : tensor<MxNxf32>; yield %s2
//	}
//
// when %m has no other use and %x and %y are available before the if (a
// constant defined after it moves up first). The values are the same; what
// changes is what the join carries: a GPU keeps an i1 tile joined after a
// branch in one register per element, next to the scores it then selects
// from, while the selected scores are live anyway. Attention's
// `var keep = …; if is_partial { keep = keep && mask(…) }; select(keep, s, -inf)`
// is that shape (it cost 8–60 bytes of spills and up to 16% of a masked
// forward's time).
func sinkSelect(m *tir.Module) error {
	for _, f := range m.Funcs {
		for sinkSelectOnce(f) {
		}
	}
	return nil
}

// sinkSelectOnce rewrites the first sinkable select of f and reports
// whether it did (the caller repeats until none is left, so nested ifs
// sink from the inside out; each rewrite removes a select, so it ends).
func sinkSelectOnce(f *tir.Func) bool {
	uses := map[*tir.Value]int{}
	f.Body.Walk(func(op *tir.Op) bool {
		for _, a := range op.Args {
			uses[a]++
		}
		return true
	})
	var try func(b *tir.Block) bool
	try = func(b *tir.Block) bool {
		for i, op := range b.Ops {
			for _, r := range op.Regions {
				if try(r) {
					return true
				}
			}
			if op.Kind == tir.OpIf && sinkInto(b, i, uses) {
				return true
			}
		}
		return false
	}
	return try(f.Body)
}

// sinkInto sinks into the if at b.Ops[i] the select of one of its i1
// results, if one qualifies.
func sinkInto(b *tir.Block, i int, uses map[*tir.Value]int) bool {
	ifOp := b.Ops[i]
	before := map[*tir.Value]bool{}
	for _, op := range b.Ops[:i] {
		for _, r := range op.Results {
			before[r] = true
		}
	}
	inBlock := map[*tir.Value]bool{}
	for _, op := range b.Ops {
		for _, r := range op.Results {
			inBlock[r] = true
		}
	}
	// available: defined before the if in b, or outside b (an enclosing
	// block's value or a parameter, which dominates the whole of b).
	available := func(v *tir.Value) bool { return before[v] || !inBlock[v] }
	for k, r := range ifOp.Results {
		if r.Type.Elem != tir.I1 || r.Type.IsScalar() || uses[r] != 1 {
			continue
		}
		j := slices.IndexFunc(b.Ops[i+1:], func(op *tir.Op) bool { return op.Kind == tir.OpSelect && op.Args[0] == r })
		if j < 0 {
			continue
		}
		sel := b.Ops[i+1+j]
		var hoist []*tir.Op // constants defined after the if, moved before it
		ok := true
		for _, v := range sel.Args[1:] {
			switch {
			case available(v):
			case v.Def != nil && v.Def.Kind == tir.OpConst && slices.Contains(b.Ops[i+1:i+1+j], v.Def):
				hoist = append(hoist, v.Def)
			default:
				ok = false
			}
		}
		if !ok {
			continue
		}
		for _, br := range ifOp.Regions {
			y := br.Ops[len(br.Ops)-1]
			s := tir.NewOp(tir.OpSelect, []*tir.Value{y.Args[k], sel.Args[1], sel.Args[2]}, sel.Results[0].Type)
			s.Pos = sel.Pos
			br.Ops = slices.Insert(br.Ops, len(br.Ops)-1, s)
			y.Args[k] = s.Results[0]
		}
		r.Type = sel.Results[0].Type
		ops := slices.DeleteFunc(slices.Clone(b.Ops), func(op *tir.Op) bool { return op == sel || slices.Contains(hoist, op) })
		at := slices.Index(ops, ifOp)
		b.Ops = slices.Insert(ops, at, hoist...)
		b.ReplaceAllUses(sel.Results[0], r)
		return true
	}
	return false
}
