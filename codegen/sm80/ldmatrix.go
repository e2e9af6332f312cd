package sm80

import (
	"fmt"

	"github.com/llir/llvm/ir/enum"
	"github.com/llir/llvm/ir/types"
	"github.com/llir/llvm/ir/value"

	"github.com/fac-compiler/fac/codegen/core"
	"github.com/fac-compiler/fac/tir"
)

// fragPlan describes how a 16-bit tensor in layout lin reaches the mma
// operand layout lout through shared memory and ldmatrix: the tile is
// stored with lin's fastest dim contiguous and rows padded by 8 elements
// (16 bytes, so the 8 row addresses of an ldmatrix fall in distinct banks);
// ldmatrix reads 8x8 sub-matrices, each thread receiving exactly its
// operand register pairs. When the contiguous dim is the reduction (K) dim
// the plain form is used, otherwise the .trans form (e.g. V as the B
// operand).
type fragPlan struct {
	lout   *core.Linear
	st     []int // element strides of the shared tile
	trans  bool
	rowDim int // the dim the 8 row addresses of a sub-matrix step along
	bytes  int // shared memory the tile needs
}

// planFrag returns the plan, or false when the layouts do not have the
// expected structure (the caller then uses the generic exchange).
func planFrag(lin *core.Linear, to core.DotOperand, lout *core.Linear, t tir.Type) (*fragPlan, bool) {
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
	// Fragment structure: register pairs along k, lanes 0-1 step k by 2
	// and 4, lanes 2-4 step the other dim by 1, 2, 4.
	unit := func(d, v int) []int {
		u := make([]int, 2)
		u[d] = v
		return u
	}
	want := [][]int{unit(kdim, 2), unit(kdim, 4), unit(gdim, 1), unit(gdim, 2), unit(gdim, 4)}
	if !core.EqualBases(lout.LaneBases(), want) || len(lout.RegBases()) < 2 || !core.EqualVec(lout.RegBases()[0], unit(kdim, 1)) {
		return nil, false
	}
	if (lout.NumRegs()/2)%2 != 0 {
		return nil, false
	}
	cdim := 1
	if reg := lin.RegBases(); len(reg) > 0 {
		for d, x := range reg[0] {
			if x == 1 {
				cdim = d
			}
		}
	}
	p := &fragPlan{lout: lout, st: make([]int, 2), trans: cdim != kdim, rowDim: gdim}
	p.st[cdim] = 1
	p.st[1-cdim] = shape[cdim] + 8
	if p.trans {
		p.rowDim = kdim
	}
	p.bytes = shape[1-cdim] * p.st[1-cdim] * 2
	return p, true
}

// fragLoader issues ldmatrix for one planned tile at byte byteOff from
// the start of shared memory.
type fragLoader struct {
	l       *core.Lowerer
	p       *fragPlan
	byteOff int
	st      *core.Staged // the staged tile read, or nil (a scratch tile)
	lanes   map[string]value.Value
}

func newFragLoader(l *core.Lowerer, p *fragPlan, byteOff int) *fragLoader {
	return &fragLoader{l: l, p: p, byteOff: byteOff, lanes: map[string]value.Value{}}
}

// laneAddr is the element address lane l supplies for a group of packed
// registers with the given offsets from the group's first: row l%8 of
// sub-matrix l/8, relative to the group's first sub-matrix.
func (f *fragLoader) laneAddr(deltas []int) value.Value {
	key := fmt.Sprint(deltas)
	if v, ok := f.lanes[key]; ok {
		return v
	}
	l, p := f.l, f.p
	lanes := make([][]int, 5)
	for i := range lanes {
		lanes[i] = []int{0, 0}
	}
	noLanes := core.NewLinear(p.lout.Shape(), p.lout.RegBases(), lanes, p.lout.WarpBases())
	e := l.Entry()
	warpBase := l.FlatBase(noLanes, p.st)
	sel := e.NewAnd(e.NewLShr(l.LaneID(), core.ConstI32(3)), core.ConstI32(int64(len(deltas)-1)))
	var off value.Value = core.ConstI32(core.DotInts(p.lout.RegOffset(2*deltas[0]), p.st))
	for m := 1; m < len(deltas); m++ {
		c := e.NewICmp(enum.IPredEQ, sel, core.ConstI32(int64(m)))
		off = e.NewSelect(c, core.ConstI32(core.DotInts(p.lout.RegOffset(2*deltas[m]), p.st)), off)
	}
	row := e.NewMul(e.NewAnd(l.LaneID(), core.ConstI32(7)), core.ConstI32(int64(p.st[p.rowDim])))
	v := e.NewAdd(e.NewAdd(warpBase, off), row)
	f.lanes[key] = v
	return v
}

// load reads packed registers first+deltas[m] (2 or 4 of them; the deltas'
// bits must not overlap first's) and returns their 2*len(deltas) 16-bit
// registers, in order.
func (f *fragLoader) load(first int, deltas []int) []value.Value {
	l, p := f.l, f.p
	n := len(deltas)
	a := l.AddOff(f.laneAddr(deltas), core.DotInts(p.lout.RegOffset(2*first), p.st))
	var at value.Value
	if f.st != nil {
		at = l.StagedAddr(types.I16, f.st, a)
	} else {
		at = l.SharedAbs(types.I16, f.byteOff, a)
	}
	ptr := l.Block().NewBitCast(at, core.SharedPtr(types.I8))
	name := fmt.Sprintf("llvm.nvvm.ldmatrix.sync.aligned.m8n8.x%d", n)
	if p.trans {
		name += ".trans"
	}
	fields := make([]types.Type, n)
	for i := range fields {
		fields[i] = types.I32
	}
	r := l.Call(name+".b16", types.NewStruct(fields...), ptr)
	out := make([]value.Value, 0, 2*n)
	for q := 0; q < n; q++ {
		w := l.Block().NewExtractValue(r, uint64(q))
		out = append(out, l.Block().NewTrunc(w, types.I16), l.Block().NewTrunc(l.Block().NewLShr(w, core.ConstI32(16)), types.I16))
	}
	return out
}

// ldmatrixConvert converts a whole tensor to an mma operand layout (used
// when the operand is converted once, e.g. a loop-invariant Q).
func ldmatrixConvert(l *core.Lowerer, src []value.Value, lin *core.Linear, to core.DotOperand, lout *core.Linear, t tir.Type) ([]value.Value, bool) {
	p, ok := planFrag(lin, to, lout, t)
	if !ok {
		return nil, false
	}
	l.UseShared(p.bytes)
	l.CountConversion()
	l.SharedWrite(src, lin, p.st, t, 0)
	f := newFragLoader(l, p, l.Scratch())
	nP := lout.NumRegs() / 2
	out := make([]value.Value, 0, lout.NumRegs())
	for g := 0; g*4 < nP; g++ {
		if nP-4*g >= 4 {
			out = append(out, f.load(4*g, []int{0, 1, 2, 3})...)
		} else {
			out = append(out, f.load(4*g, []int{0, 1})...)
		}
	}
	return out, true
}
