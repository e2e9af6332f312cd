package core

import (
	"math"

	"github.com/llir/llvm/ir/constant"
	"github.com/llir/llvm/ir/types"
	"github.com/llir/llvm/ir/value"

	"github.com/fac-compiler/fac/tir"
)

// indexCmp lowers cmp(x, j) or cmp(j, x), where j is a tile's index along
// one dimension (an arange, reshaped and broadcast) and x cannot be so
// small that x minus an index overflows, as a comparison of x - base with
// the register's compile-time offset: j = start + base + off(r), with base
// the thread's coordinate (computed once per kernel) and off(r) a constant.
// Per element that is one compare against an immediate, where comparing
// with j itself would first materialize j in a register per column. The
// mask-range pass writes masks in this form.
// It returns nil when op is not such a comparison.
func (em *Emitter) indexCmp(op *tir.Op, lout *Linear, arg func(int) []value.Value) []value.Value {
	if op.Kind != tir.OpCmp || op.Args[0].Type.Elem != tir.I32 || op.Args[0].Type.Ptr {
		return nil
	}
	for side := range 2 {
		d, start, n, ok := indexDim(op.Args[side])
		if !ok {
			continue
		}
		lo, _ := valueRange(op.Args[1-side])
		if lo-int64(n) < math.MinInt32 {
			continue // x - base could wrap
		}
		xs := arg(1 - side)
		base := em.baseCoords(lout)[d]
		sub := map[value.Value]value.Value{}
		ts := make([]value.Value, len(xs))
		for r, x := range xs {
			t, ok := sub[x]
			if !ok {
				t = em.b.NewSub(x, base)
				sub[x] = t
			}
			ts[r] = t
		}
		if out := em.bitCmp(op, lout, d, start, side, ts); out != nil {
			return out
		}
		out := make([]value.Value, len(xs))
		pred := op.IdentAttr("pred")
		for r, t := range ts {
			c := constant.NewInt(types.I32, start+int64(lout.RegOffset(r)[d]))
			if side == 1 {
				out[r] = em.cmp(pred, tir.Scalar(tir.I32), t, c)
			} else {
				out[r] = em.cmp(pred, tir.Scalar(tir.I32), c, t)
			}
		}
		return out
	}
	return nil
}

// indexDim reports whether v is an arange along one dimension d of v's
// shape (reshaped to rank 2 with the other dimension 1, then broadcast),
// with its start and length.
func indexDim(v *tir.Value) (d int, start int64, n int, ok bool) {
	if v.Def != nil && v.Def.Kind == tir.OpBroadcast {
		v = v.Def.Args[0]
	}
	d = 0
	if v.Def != nil && v.Def.Kind == tir.OpReshape {
		s := v.Type.Shape
		switch {
		case len(s) == 2 && s[0] == 1:
			d = 1
		case len(s) == 2 && s[1] == 1:
		default:
			return 0, 0, 0, false
		}
		v = v.Def.Args[0]
	}
	a := v.Def
	if a == nil || a.Kind != tir.OpArange {
		return 0, 0, 0, false
	}
	start = a.IntAttr("start")
	return d, start, int(a.IntAttr("end") - start), true
}

// valueRange bounds an i32 value through constants, aranges, min, max and
// shape ops; anything else is the whole of i32.
func valueRange(v *tir.Value) (lo, hi int64) {
	d := v.Def
	if d == nil {
		return math.MinInt32, math.MaxInt32
	}
	switch d.Kind {
	case tir.OpConst:
		if c, ok := d.Attr("value").(int64); ok {
			return c, c
		}
	case tir.OpArange:
		return d.IntAttr("start"), d.IntAttr("end") - 1
	case tir.OpSplat, tir.OpBroadcast, tir.OpReshape:
		return valueRange(d.Args[0])
	case tir.OpMin, tir.OpMax:
		alo, ahi := valueRange(d.Args[0])
		blo, bhi := valueRange(d.Args[1])
		if d.Kind == tir.OpMin {
			return min(alo, blo), min(ahi, bhi)
		}
		return max(alo, blo), max(ahi, bhi)
	}
	return math.MinInt32, math.MaxInt32
}
