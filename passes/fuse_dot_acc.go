package passes

import "github.com/fac-compiler/fac/tir"

// fuseDotAcc folds the add of a dot with a zero accumulator into the dot:
//
//	%d = dot %a, %b, %zero : tensor<MxNxf32>
//	%s = add %x, %d : tensor<MxNxf32>
//
// becomes %s = dot %a, %b, %x when %d has no other use and %x is available
// where the dot is. The tensor cores then accumulate onto x directly (as
// Triton's dot-add combine does): attention's P·V stops needing a second
// accumulator tile in registers and an add per element every iteration.
// x joins the sum first instead of last, so the rounding differs: that is
// why this is a pass of its own (disable it with --disable-pass) and not a
// canonicalization of exact identities.
func fuseDotAcc(m *tir.Module) error {
	for _, f := range m.Funcs {
		fuseDotAccFunc(f)
	}
	return nil
}

// site is where an op or a region argument sits: its block, the index of
// the op in it (-1 for an argument), and the block's enclosing site.
type site struct {
	b      *tir.Block
	i      int
	parent *site // the op that holds b, nil for the body
}

func fuseDotAccFunc(f *tir.Func) {
	uses := map[*tir.Value]int{}
	at := map[*tir.Value]*site{} // values defined inside the body (results, region args)
	ops := map[*tir.Op]*site{}
	var index func(b *tir.Block, parent *site)
	index = func(b *tir.Block, parent *site) {
		for _, a := range b.Args {
			at[a] = &site{b, -1, parent}
		}
		for i, op := range b.Ops {
			s := &site{b, i, parent}
			ops[op] = s
			for _, r := range op.Results {
				at[r] = s
			}
			for _, a := range op.Args {
				uses[a]++
			}
			for _, r := range op.Regions {
				index(r, s)
			}
		}
	}
	index(f.Body, nil)

	// available reports whether x is defined before the op at s: in s's
	// block before it, or in an enclosing block before the op holding it.
	available := func(x *tir.Value, s *site) bool {
		d, ok := at[x]
		if !ok {
			return true // a kernel parameter
		}
		for c := s; c != nil; c = c.parent {
			if d.b == c.b {
				return d.i < c.i
			}
		}
		return false
	}

	replace := map[*tir.Value]*tir.Value{}
	dead := map[*tir.Op]bool{}
	f.Body.Walk(func(op *tir.Op) bool {
		if op.Kind != tir.OpAdd || !op.Results[0].Type.Elem.IsFloat() {
			return true
		}
		for k := 0; k < 2; k++ {
			d, x := op.Args[k], op.Args[1-k]
			dot := d.Def
			if dot == nil || dot.Kind != tir.OpDot || uses[d] != 1 || dead[dot] ||
				!zeroConst(dot.Args[2]) || x.Type.String() != d.Type.String() || !available(x, ops[dot]) {
				continue
			}
			dot.Args[2] = x
			replace[op.Results[0]] = d
			dead[op] = true
			uses[d]++ // the add's users now read it
			return true
		}
		return true
	})
	if len(dead) == 0 {
		return
	}
	var rewrite func(b *tir.Block)
	rewrite = func(b *tir.Block) {
		kept := b.Ops[:0]
		for _, op := range b.Ops {
			if dead[op] {
				continue
			}
			for i, a := range op.Args {
				if r, ok := replace[a]; ok {
					op.Args[i] = r
				}
			}
			for _, r := range op.Regions {
				rewrite(r)
			}
			kept = append(kept, op)
		}
		b.Ops = kept
	}
	rewrite(f.Body)
}

// zeroConst reports whether v is a constant +0.0 (a splat for tensors).
func zeroConst(v *tir.Value) bool {
	if v.Def == nil || v.Def.Kind != tir.OpConst {
		return false
	}
	c, ok := v.Def.Attr("value").(float64)
	return ok && c == 0 && 1/c > 0
}
