package passes

import (
	"slices"

	"github.com/fac-compiler/fac/tir"
)

// foldScale moves the softmax scale of kernels whose compile-time argument
// fold_scale is true from every score into the multiplies the scores meet
// anyway (FlashAttention-3's softmax_scale_log2): attention scales each
// score, then multiplies it by log2(e) inside exp2's fused multiply-add and
// the row max by log2(e); with the scale in those two constants the
// scores need no multiply of their own, one FP32 instruction per score the
// forward's softmax issues less.
//
//	%s = mul %x, %sc                          // %sc = splat %scale
//	... select(c, %s, -inf), reduce max ..., mul %u, %LOG2E ...
//
// becomes
//
//	%pos = cmp %scale, 0.0 {pred = gt}        // at the top of the kernel
//	%sc1 = select %pos, %scale, 1.0
//	%k = mul %sc1, 1.4426950408889634
//	%s = if %pos { yield %x } else { %m = mul %x, %sc; yield %m }
//	... select(c, %s, -inf), reduce max ..., mul %u, splat(%k) ...
//
// The max commutes with a positive scale only (and -inf times a negative
// one is +inf), so where the scores meet a max reduction or a select of
// -inf, a scale <= 0 (or NaN) keeps the scores' multiply and a factor of
// 1: the old computation, bit for bit. Where they meet neither (the
// backward's P = exp2(s·log2e − lse)), the multiply simply goes and the
// factor is the scale itself, whatever its sign. Folded, x·scale·log2(e)
// rounds once instead of twice, so results differ in the last bits: that
// is why the kernel asks for it by argument (the stdlib forward and
// backward kernels declare fold_scale) and why this pass is the table's
// one besides fuse-dot-acc that may change a result's rounding.
//
// It applies to a mul of a 2-D float tile by a splat of a float parameter
// whose every use, followed through selects of -inf and the results of
// ifs all of whose arms yield such values, is a max reduction whose uses
// are multiplies by a constant, or a multiply by a constant. Anything else
// (a score mod reading the scaled score, a sum, a store) leaves it alone.
func foldScale(m *tir.Module) error {
	for _, f := range m.Funcs {
		if on, _ := f.Attr("fold_scale").(bool); on {
			foldScaleFunc(f)
		}
	}
	return nil
}

// use is one operand slot: op.Args[i].
type use struct {
	op *tir.Op
	i  int
}

// scaleFold is one scale to move: the mul, the scale parameter, and the
// constant operands of the multiplies that take it instead.
type scaleFold struct {
	mul     *tir.Op
	scale   *tir.Value
	targets []use
	// signed: the scaled scores meet a max reduction or a select of -inf,
	// which commute with a positive scale only.
	signed bool
}

// fnIndex is what the fold needs to know of a function: each value's uses,
// the op holding each region's terminator, and the block holding each op.
type fnIndex struct {
	uses   map[*tir.Value][]use
	holder map[*tir.Op]*tir.Op    // a region's yield -> the op whose region it ends
	block  map[*tir.Op]*tir.Block // an op -> its block
}

func indexFunc(f *tir.Func) *fnIndex {
	ix := &fnIndex{uses: map[*tir.Value][]use{}, holder: map[*tir.Op]*tir.Op{}, block: map[*tir.Op]*tir.Block{}}
	var walk func(b *tir.Block)
	walk = func(b *tir.Block) {
		for _, op := range b.Ops {
			ix.block[op] = b
			for i, a := range op.Args {
				ix.uses[a] = append(ix.uses[a], use{op, i})
			}
			for _, r := range op.Regions {
				if n := len(r.Ops); n > 0 {
					ix.holder[r.Ops[n-1]] = op
				}
				walk(r)
			}
		}
	}
	walk(f.Body)
	return ix
}

func foldScaleFunc(f *tir.Func) {
	ix := indexFunc(f)
	var folds []*scaleFold
	f.Body.Walk(func(op *tir.Op) bool {
		if sf := scaleFoldAt(f, op, ix); sf != nil {
			folds = append(folds, sf)
		}
		return true
	})
	if len(folds) == 0 {
		return
	}
	tops := map[*tir.Value]*scaleTop{}
	var top []*tir.Op
	for _, sf := range folds {
		if tops[sf.scale] == nil {
			tops[sf.scale] = &scaleTop{f: f, scale: sf.scale, times: map[timesKey]*tir.Value{}, scalarT: tir.Scalar(sf.scale.Type.Elem)}
		}
	}
	for _, sf := range folds {
		sf.moveMul(f, ix, tops[sf.scale], &top)
	}
	retarget(folds, ix, tops, &top)
	f.Body.Ops = append(top, f.Body.Ops...)
}

// scaleFoldAt is the fold of op, or nil when op is not a foldable scale.
func scaleFoldAt(f *tir.Func, op *tir.Op, ix *fnIndex) *scaleFold {
	if op.Kind != tir.OpMul || len(op.Results) != 1 {
		return nil
	}
	s := op.Result()
	if len(s.Type.Shape) != 2 || !s.Type.Elem.IsFloat() {
		return nil
	}
	var scale *tir.Value
	for _, a := range op.Args {
		if d := a.Def; d != nil && d.Kind == tir.OpSplat && d.Args[0].Type.Elem == s.Type.Elem && slices.Contains(f.Params, d.Args[0]) {
			scale = d.Args[0]
		}
	}
	if scale == nil {
		return nil
	}
	sf := &scaleFold{mul: op, scale: scale}
	scaled := map[*tir.Value]bool{s: true} // the scores times the scale, under selects and ifs
	var joins []*tir.Value                 // if results taken as scaled: every arm must yield scaled values
	work := []*tir.Value{s}
	for len(work) > 0 {
		v := work[len(work)-1]
		work = work[:len(work)-1]
		for _, u := range ix.uses[v] {
			var next *tir.Value
			switch o := u.op; {
			case o.Kind == tir.OpSelect && u.i == 1 && o.SelectsNegInf():
				next = o.Result()
				sf.signed = true
			case o.Kind == tir.OpYield:
				p := ix.holder[o]
				if p == nil || p.Kind != tir.OpIf {
					return nil // carried by a loop
				}
				next = p.Results[u.i]
				joins = append(joins, next)
			case o.Kind == tir.OpReduce && o.IdentAttr("kind") == "max":
				sf.signed = true
				for _, w := range ix.uses[o.Result()] {
					if !constFactor(w) {
						return nil
					}
					sf.targets = append(sf.targets, use{w.op, 1 - w.i})
				}
			case constFactor(u):
				sf.targets = append(sf.targets, use{o, 1 - u.i})
			default:
				return nil
			}
			if next != nil && !scaled[next] {
				scaled[next] = true
				work = append(work, next)
			}
		}
	}
	for _, r := range joins {
		k := slices.Index(r.Def.Results, r)
		for _, arm := range r.Def.Regions {
			if !scaled[arm.Ops[len(arm.Ops)-1].Args[k]] {
				return nil
			}
		}
	}
	if len(sf.targets) == 0 {
		return nil
	}
	return sf
}

// constFactor reports whether u is a float multiply whose other operand is
// a float constant.
func constFactor(u use) bool {
	o := u.op
	if o.Kind != tir.OpMul || !o.Result().Type.Elem.IsFloat() {
		return false
	}
	_, ok := floatConst(o.Args[1-u.i])
	return ok
}

// floatConst is v's value when v is a float constant (a splat for tensors).
func floatConst(v *tir.Value) (float64, bool) {
	if v.Def == nil || v.Def.Kind != tir.OpConst {
		return 0, false
	}
	c, ok := v.Def.Attr("value").(float64)
	return c, ok
}

// scaleTop is what a kernel computes once per folded scale, at its top:
// whether the scale is positive and the factor signed folds take (the
// scale, or 1 where it is not positive), and the factors times each
// constant.
type scaleTop struct {
	f           *tir.Func
	scale       *tir.Value
	pos, factor *tir.Value // made on a signed fold's first use
	times       map[timesKey]*tir.Value
	scalarT     tir.Type
}

type timesKey struct {
	c      float64
	signed bool
}

// signedFactor is select(scale > 0, scale, 1), and makes pos.
func (st *scaleTop) signedFactor(top *[]*tir.Op) *tir.Value {
	if st.factor == nil {
		pos := tir.NewOp(tir.OpCmp, []*tir.Value{st.scale, st.constant(0, top)}, tir.Scalar(tir.I1))
		pos.Attrs = []tir.Attr{{Key: "pred", Val: tir.Ident("gt")}}
		*top = append(*top, pos)
		st.pos = pos.Result()
		factor := tir.NewOp(tir.OpSelect, []*tir.Value{st.pos, st.scale, st.constant(1, top)}, st.scalarT)
		*top = append(*top, factor)
		st.factor = factor.Result()
	}
	return st.factor
}

// constant is a scalar constant of the kernel's top level: an existing one
// where there is one (cse would merge a copy), moved up among the ops put
// at the top so that it comes before their uses.
func (st *scaleTop) constant(v float64, top *[]*tir.Op) *tir.Value {
	c := tir.NewOp(tir.OpConst, nil, st.scalarT)
	c.Attrs = []tir.Attr{{Key: "value", Val: v}}
	if same := sameConst(*top, c); same != nil {
		return same
	}
	if same := sameConst(st.f.Body.Ops, c); same != nil {
		c = same.Def
		st.f.Body.Ops = slices.DeleteFunc(st.f.Body.Ops, func(o *tir.Op) bool { return o == c })
	}
	*top = append(*top, c)
	return c.Result()
}

// scaledBy is the factor of a fold (signed or not) times c.
func (st *scaleTop) scaledBy(c float64, signed bool, top *[]*tir.Op) *tir.Value {
	k := timesKey{c, signed}
	if st.times[k] == nil {
		f := st.scale
		if signed {
			f = st.signedFactor(top)
		}
		m := tir.NewOp(tir.OpMul, []*tir.Value{f, st.constant(c, top)}, st.scalarT)
		*top = append(*top, m)
		st.times[k] = m.Result()
	}
	return st.times[k]
}

// moveMul puts the scores' multiply into the else arm of an if on the
// scale's sign, or, for a fold that is not signed, drops it.
func (sf *scaleFold) moveMul(f *tir.Func, ix *fnIndex, st *scaleTop, top *[]*tir.Op) {
	x := sf.mul.Args[0]
	if d := x.Def; d != nil && d.Kind == tir.OpSplat && d.Args[0] == sf.scale {
		x = sf.mul.Args[1]
	}
	s := sf.mul.Result()
	b := ix.block[sf.mul]
	if !sf.signed {
		b.Ops = slices.DeleteFunc(b.Ops, func(o *tir.Op) bool { return o == sf.mul })
		f.Body.ReplaceAllUses(s, x)
		return
	}
	st.signedFactor(top)
	moved := tir.NewOp(tir.OpMul, sf.mul.Args, s.Type)
	moved.Pos = sf.mul.Pos
	cond := tir.NewOp(tir.OpIf, []*tir.Value{st.pos}, s.Type)
	cond.Pos = sf.mul.Pos
	cond.Regions = []*tir.Block{
		{Ops: []*tir.Op{tir.NewOp(tir.OpYield, []*tir.Value{x})}},
		{Ops: []*tir.Op{moved, tir.NewOp(tir.OpYield, []*tir.Value{moved.Result()})}},
	}
	b.Ops[slices.Index(b.Ops, sf.mul)] = cond
	ix.block[cond] = b
	f.Body.ReplaceAllUses(s, cond.Result())
}

// retarget replaces each constant factor of the folds by the scale times
// it: a scalar directly, a tile by a splat, one per block, type and value
// (for all folds: cse would merge copies), made before the first multiply
// that takes it.
func retarget(folds []*scaleFold, ix *fnIndex, tops map[*tir.Value]*scaleTop, top *[]*tir.Op) {
	type group struct {
		b     *tir.Block
		k     *tir.Value
		t     tir.Type
		slots []use
	}
	var groups []*group
	for _, sf := range folds {
		for _, t := range sf.targets {
			c := t.op.Args[t.i]
			v, _ := floatConst(c)
			k := tops[sf.scale].scaledBy(v, sf.signed, top)
			if len(c.Type.Shape) == 0 {
				t.op.Args[t.i] = k
				continue
			}
			b := ix.block[t.op]
			i := slices.IndexFunc(groups, func(g *group) bool { return g.b == b && g.k == k && g.t.String() == c.Type.String() })
			if i < 0 {
				groups = append(groups, &group{b: b, k: k, t: c.Type})
				i = len(groups) - 1
			}
			groups[i].slots = append(groups[i].slots, t)
		}
	}
	for _, g := range groups {
		first := len(g.b.Ops)
		for _, t := range g.slots {
			first = min(first, slices.Index(g.b.Ops, t.op))
		}
		sp := tir.NewOp(tir.OpSplat, []*tir.Value{g.k}, g.t)
		sp.Pos = g.b.Ops[first].Pos
		g.b.Ops = slices.Insert(g.b.Ops, first, sp)
		ix.block[sp] = g.b
		for _, t := range g.slots {
			t.op.Args[t.i] = sp.Result()
		}
	}
}
