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
func (a *assigner) axis(v *tir.Value) axisInfo {
	if ai, ok := a.axes[v]; ok {
		return ai
	}
	ai := a.computeAxis(v)
	a.axes[v] = ai
	return ai
}

func (a *assigner) computeAxis(v *tir.Value) axisInfo {
	shape := v.Type.Shape
	r := len(shape)
	triv := axisInfo{ones(r), ones(r)}
	op := v.Def
	if op == nil || r == 0 {
		return triv
	}
	full := append([]int(nil), shape...)
	switch k := op.Kind; {
	case k == tir.OpConst || k == tir.OpSplat:
		return axisInfo{ones(r), full}
	case k == tir.OpArange:
		return axisInfo{full, ones(r)}
	case k == tir.OpBroadcast:
		x := a.axis(op.Args[0])
		in := op.Args[0].Type.Shape
		out := axisInfo{append([]int(nil), x.contig...), append([]int(nil), x.constancy...)}
		for d := range shape {
			if in[d] == 1 && shape[d] != 1 {
				out.contig[d], out.constancy[d] = 1, shape[d]
			}
		}
		return out
	case k == tir.OpReshape:
		x := a.axis(op.Args[0])
		in := op.Args[0].Type.Shape
		if d, ok := expandDim(in, shape); ok {
			return axisInfo{insertDim(x.contig, d, 1), insertDim(x.constancy, d, 1)}
		}
		if d, ok := expandDim(shape, in); ok {
			return axisInfo{removeDim(x.contig, d), removeDim(x.constancy, d)}
		}
		return triv
	case k == tir.OpTrans:
		x := a.axis(op.Args[0])
		return axisInfo{[]int{x.contig[1], x.contig[0]}, []int{x.constancy[1], x.constancy[0]}}
	case k == tir.OpAdd || k == tir.OpAddPtr || k == tir.OpSub:
		if k != tir.OpAddPtr && v.Type.Elem.IsFloat() {
			break
		}
		x, y := a.axis(op.Args[0]), a.axis(op.Args[1])
		out := axisInfo{make([]int, r), make([]int, r)}
		for d := range shape {
			c := min(x.contig[d], y.constancy[d])
			if k != tir.OpSub {
				c = max(c, min(y.contig[d], x.constancy[d]))
			}
			out.contig[d] = c
			out.constancy[d] = min(x.constancy[d], y.constancy[d])
		}
		return out
	case k.IsElementwise():
		// Any other elementwise op keeps constant blocks constant.
		out := axisInfo{ones(r), full}
		for _, x := range op.Args {
			if x.Type.IsScalar() {
				continue
			}
			ax := a.axis(x)
			for d := range shape {
				out.constancy[d] = min(out.constancy[d], ax.constancy[d])
			}
		}
		return out
	}
	return triv
}
