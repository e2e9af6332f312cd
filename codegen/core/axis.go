package core

import "github.com/fac-compiler/fac/tir"

// axisInfo is a small version of Triton's AxisInfo: per dimension, the
// tensor splits into aligned blocks of contig[d] elements along d whose
// values increase by exactly 1 (contiguity), and into aligned blocks of
// constancy[d] equal elements. Both are powers of two, at least 1. The
// lowering uses them to prove that a thread's consecutive pointers are
// consecutive addresses and its masks equal, so loads and stores can be
// vectorized; alignment is checked at run time.
type axisInfo struct {
	contig, constancy []int
}

func ones(n int) []int {
	o := make([]int, n)
	for i := range o {
		o[i] = 1
	}
	return o
}

// axis computes v's axisInfo (memoized). Values that are not tensors of
// integers, pointers or i1 get the trivial info.
func (k *kernel) axis(v *tir.Value) axisInfo {
	if ai, ok := k.axes[v]; ok {
		return ai
	}
	ai := k.computeAxis(v)
	k.axes[v] = ai
	return ai
}

func (k *kernel) computeAxis(v *tir.Value) axisInfo {
	shape := v.Type.Shape
	r := len(shape)
	triv := axisInfo{ones(r), ones(r)}
	op := v.Def
	if op == nil || r == 0 {
		return triv
	}
	full := append([]int(nil), shape...)
	switch kind := op.Kind; {
	case kind == tir.OpConst || kind == tir.OpSplat:
		return axisInfo{ones(r), full}
	case kind == tir.OpArange:
		return axisInfo{full, ones(r)}
	case kind == tir.OpBroadcast:
		x := k.axis(op.Args[0])
		in := op.Args[0].Type.Shape
		out := axisInfo{append([]int(nil), x.contig...), append([]int(nil), x.constancy...)}
		for d := range shape {
			if in[d] == 1 && shape[d] != 1 {
				out.contig[d], out.constancy[d] = 1, shape[d]
			}
		}
		return out
	case kind == tir.OpReshape:
		x := k.axis(op.Args[0])
		in := op.Args[0].Type.Shape
		if d, ok := expandDim(in, shape); ok {
			return axisInfo{insertDim(x.contig, d, 1), insertDim(x.constancy, d, 1)}
		}
		if d, ok := expandDim(shape, in); ok {
			return axisInfo{removeDim(x.contig, d), removeDim(x.constancy, d)}
		}
		return triv
	case kind == tir.OpTrans:
		x := k.axis(op.Args[0])
		return axisInfo{[]int{x.contig[1], x.contig[0]}, []int{x.constancy[1], x.constancy[0]}}
	case kind == tir.OpAdd || kind == tir.OpAddPtr || kind == tir.OpSub:
		if kind != tir.OpAddPtr && v.Type.Elem.IsFloat() {
			break
		}
		x, y := k.axis(op.Args[0]), k.axis(op.Args[1])
		out := axisInfo{make([]int, r), make([]int, r)}
		for d := range shape {
			c := min(x.contig[d], y.constancy[d])
			if kind != tir.OpSub {
				c = max(c, min(y.contig[d], x.constancy[d]))
			}
			out.contig[d] = c
			out.constancy[d] = min(x.constancy[d], y.constancy[d])
		}
		return out
	case kind.IsElementwise():
		// Any other elementwise op keeps constant blocks constant.
		out := axisInfo{ones(r), full}
		for _, x := range op.Args {
			if x.Type.IsScalar() {
				continue
			}
			ax := k.axis(x)
			for d := range shape {
				out.constancy[d] = min(out.constancy[d], ax.constancy[d])
			}
		}
		return out
	}
	return triv
}

// affine reports whether integer (or pointer) tensor v is affine in its
// coordinates with constant strides: v(c) − v(c′) = Σ_d strides[d]·(c_d − c′_d)
// for any two elements, as integers (pointers count elements). The
// lowering then addresses a thread's registers as its first register's
// address plus constant offsets (immediates in PTX) instead of one 64-bit
// address per register. Exact when no element's value overflows, which a
// valid address's offset does not.
func (k *kernel) affine(v *tir.Value) ([]int64, bool) {
	if s, ok := k.affines[v]; ok {
		return s, s != nil
	}
	s := k.computeAffine(v)
	k.affines[v] = s
	return s, s != nil
}

func (k *kernel) computeAffine(v *tir.Value) []int64 {
	r := v.Type.Rank()
	op := v.Def
	if op == nil || r == 0 || v.Type.Elem.IsFloat() && !v.Type.Ptr {
		return nil
	}
	zero := make([]int64, r)
	switch kind := op.Kind; kind {
	case tir.OpConst, tir.OpSplat:
		return zero
	case tir.OpArange:
		return []int64{1}
	case tir.OpBroadcast:
		x, ok := k.affine(op.Args[0])
		if !ok {
			return nil
		}
		out := append([]int64(nil), x...)
		in := op.Args[0].Type.Shape
		for d := range out {
			if in[d] == 1 {
				out[d] = 0
			}
		}
		return out
	case tir.OpReshape:
		x, ok := k.affine(op.Args[0])
		if !ok {
			return nil
		}
		in := op.Args[0].Type.Shape
		if d, ok := expandDim(in, v.Type.Shape); ok {
			return append(append(append([]int64(nil), x[:d]...), 0), x[d:]...)
		}
		return nil
	case tir.OpTrans:
		x, ok := k.affine(op.Args[0])
		if !ok || r != 2 {
			return nil
		}
		return []int64{x[1], x[0]}
	case tir.OpAdd, tir.OpSub, tir.OpAddPtr:
		x, okx := k.operandAffine(op.Args[0], r)
		y, oky := k.operandAffine(op.Args[1], r)
		if !okx || !oky {
			return nil
		}
		out := make([]int64, r)
		for d := range out {
			if kind == tir.OpSub {
				out[d] = x[d] - y[d]
			} else {
				out[d] = x[d] + y[d]
			}
		}
		return out
	case tir.OpCast:
		if op.Args[0].Type.Elem.IsFloat() || v.Type.Ptr {
			return nil
		}
		x, ok := k.affine(op.Args[0])
		if !ok {
			return nil
		}
		return x
	case tir.OpMul:
		for i := 0; i < 2; i++ {
			c, isC := constInt(op.Args[1-i])
			x, ok := k.operandAffine(op.Args[i], r)
			if isC && ok {
				out := make([]int64, r)
				for d := range out {
					out[d] = x[d] * c
				}
				return out
			}
		}
	}
	return nil
}

// operandAffine is affine for an elementwise operand of a rank-r result:
// a scalar is constant over the tile.
func (k *kernel) operandAffine(x *tir.Value, r int) ([]int64, bool) {
	if x.Type.IsScalar() {
		return make([]int64, r), true
	}
	return k.affine(x)
}

// constInt is x's value when it is an integer constant (or a splat of
// one).
func constInt(x *tir.Value) (int64, bool) {
	for x.Def != nil && x.Def.Kind == tir.OpSplat {
		x = x.Def.Args[0]
	}
	if x.Def == nil || x.Def.Kind != tir.OpConst {
		return 0, false
	}
	c, ok := x.Def.Attr("value").(int64)
	return c, ok
}

// Constancy is, per dim, the length of the aligned runs along which v's
// values are equal (valid before assignment too).
func (k *kernel) Constancy(v *tir.Value) []int { return k.axis(v).constancy }

// Affine is, when v (a tensor of pointers or integers) is affine in its
// coordinates with constant strides, those strides in elements.
func (k *kernel) Affine(v *tir.Value) ([]int64, bool) { return k.affine(v) }

// Contiguity is, per dim, the length of the aligned runs along which v's
// values increase by one (valid before assignment too).
func (k *kernel) Contiguity(v *tir.Value) []int { return k.axis(v).contig }
