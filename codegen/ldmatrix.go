package codegen

import (
	"github.com/llir/llvm/ir/enum"
	"github.com/llir/llvm/ir/types"
	"github.com/llir/llvm/ir/value"

	"github.com/fac-compiler/fac/tir"
)

// ldmatrixConvert brings a 16-bit tensor into an mma operand layout
// through shared memory: the source layout writes the tile with rows
// padded by 8 elements (16 bytes, so the 8 row addresses of an ldmatrix
// fall in distinct banks), then ldmatrix.x4 reads four 8x8 sub-matrices per
// instruction, each thread receiving exactly its operand register pairs.
// The tile is stored with the source layout's fastest dim contiguous; when
// that is the reduction (K) dim the plain form is used, otherwise the
// .trans form (e.g. V as the B operand, or Q/K loaded transposed).
//
// It returns false when the layouts do not have the expected structure;
// the caller then uses the generic exchange.
func (l *lowerer) ldmatrixConvert(src []value.Value, lin *linear, to DotOperand, lout *linear, t tir.Type) ([]value.Value, bool) {
	if t.Ptr || (t.Elem != tir.BF16 && t.Elem != tir.F16) || t.Rank() != 2 {
		return nil, false
	}
	kdim, gdim := 1, 0
	if to.OpIdx == 1 {
		kdim, gdim = 0, 1
	}
	shape := t.Shape
	if shape[kdim]%16 != 0 || shape[gdim]%8 != 0 || (to.OpIdx == 0 && shape[gdim]%16 != 0) {
		return nil, false
	}
	// Expected fragment structure: register pairs along k, lanes 0-1 step
	// k by 2 and 4, lanes 2-4 step the other dim by 1, 2, 4.
	unit := func(d, v int) []int {
		u := make([]int, 2)
		u[d] = v
		return u
	}
	want := [][]int{unit(kdim, 2), unit(kdim, 4), unit(gdim, 1), unit(gdim, 2), unit(gdim, 4)}
	if !equalBases(lout.lane, want) || len(lout.reg) < 2 || !equalVec(lout.reg[0], unit(kdim, 1)) {
		return nil, false
	}
	nP := lout.numRegs() / 2
	if nP%2 != 0 {
		return nil, false
	}
	// Shared placement: the source's fastest dim contiguous, rows padded.
	cdim := 1
	if len(lin.reg) > 0 {
		for d, x := range lin.reg[0] {
			if x == 1 {
				cdim = d
			}
		}
	}
	st := make([]int, 2)
	st[cdim] = 1
	st[1-cdim] = shape[cdim] + 8
	l.useShared(shape[1-cdim] * st[1-cdim] * 2)
	l.conversions++
	trans := cdim != kdim
	rowDim := gdim // the dim the 8 row addresses of a sub-matrix step along
	if trans {
		rowDim = kdim
	}
	l.sharedWrite(src, lin, st, t)

	// Lane l supplies row l%8 of sub-matrix l/8 of each group of 4 packed
	// registers: the sub-matrix of packed register p starts at the warp's
	// base plus regOffset(2p); offsets within a group repeat across groups.
	noLanes := &linear{shape: lout.shape, reg: lout.reg, warp: lout.warp, lane: make([][]int, 5)}
	for i := range noLanes.lane {
		noLanes.lane[i] = []int{0, 0}
	}
	warpBase := l.flatBase(noLanes, st)
	laneAddr := func(nmat int) value.Value {
		sel := l.b.NewLShr(l.lane, ci32(3))
		var off value.Value = ci32(dotInts(lout.regOffset(0), st))
		for m := 1; m < nmat; m++ {
			c := l.b.NewICmp(enum.IPredEQ, l.b.NewAnd(sel, ci32(int64(nmat-1))), ci32(int64(m)))
			off = l.b.NewSelect(c, ci32(dotInts(lout.regOffset(2*m), st)), off)
		}
		row := l.b.NewMul(l.b.NewAnd(l.lane, ci32(7)), ci32(int64(st[rowDim])))
		return l.b.NewAdd(l.b.NewAdd(warpBase, off), row)
	}
	var addr4, addr2 value.Value
	out := make([]value.Value, lout.numRegs())
	i8p := sharedPtr(types.I8)
	for g := 0; g*4 < nP; g++ {
		n := min(4, nP-4*g)
		var a value.Value
		if n == 4 {
			if addr4 == nil {
				addr4 = laneAddr(4)
			}
			a = addr4
		} else {
			if addr2 == nil {
				addr2 = laneAddr(2)
			}
			a = addr2
		}
		p := l.b.NewBitCast(l.sharedAt(types.I16, 0, l.addOff(a, dotInts(lout.regOffset(8*g), st))), i8p)
		name := "llvm.nvvm.ldmatrix.sync.aligned.m8n8.x4"
		if n == 2 {
			name = "llvm.nvvm.ldmatrix.sync.aligned.m8n8.x2"
		}
		if trans {
			name += ".trans"
		}
		fields := make([]types.Type, n)
		for i := range fields {
			fields[i] = types.I32
		}
		r := l.call(name+".b16", types.NewStruct(fields...), p)
		for q := 0; q < n; q++ {
			w := l.b.NewExtractValue(r, uint64(q))
			k := 2 * (4*g + q)
			out[k] = l.b.NewTrunc(w, types.I16)
			out[k+1] = l.b.NewTrunc(l.b.NewLShr(w, ci32(16)), types.I16)
		}
	}
	return out, true
}
