package sm80

import (
	"github.com/llir/llvm/ir/types"
	"github.com/llir/llvm/ir/value"

	"github.com/fac-compiler/fac/codegen/core"
	"github.com/fac-compiler/fac/tir"
)

// mmaLayout reports whether dot op lowers to mma.sync m16n8k16 (16-bit
// operands, f32 accumulator, tile-multiple shapes), and its accumulator
// layout.
func mmaLayout(l *core.Lowerer, op *tir.Op) (core.MMA, bool) {
	x, y, c := op.Args[0].Type, op.Args[1].Type, op.Args[2].Type
	if x.Rank() != 2 || y.Rank() != 2 || c.Rank() != 2 {
		return core.MMA{}, false
	}
	M, K, N := x.Shape[0], x.Shape[1], y.Shape[1]
	ok := (x.Elem == tir.BF16 || x.Elem == tir.F16) && y.Elem == x.Elem && c.Elem == tir.F32 &&
		M%16 == 0 && N%8 == 0 && K%16 == 0
	if !ok {
		return core.MMA{}, false
	}
	return core.MMA{WarpsPerCTA: core.MMAWarps(M, N, l.NumWarps())}, true
}

// fuseOperand reports whether operand i (0: A, 1: B) of an mma dot is
// staged through shared memory by the dot itself, with ldmatrix issued just
// before the mmas that use each fragment (few operand registers live, as
// in FlashAttention-2), instead of converted whole at its definition: a
// 16-bit anchored value defined in the dot's own block (so not a
// loop-invariant like Q, which stays in registers) whose layout cannot be
// re-indexed into the operand layout.
func fuseOperand(l *core.Lowerer, op *tir.Op, m core.MMA, i int) bool {
	x := op.Args[i]
	lay, flex := l.Layouts().LayoutOf(x)
	if flex || l.Layouts().DefiningBlock(x) != l.Layouts().DefiningBlock(op.Result()) {
		return false
	}
	to := core.DotOperand{OpIdx: i, Parent: m}
	lin, lout := lay.Linear(x.Type.Shape, l.NumWarps()), to.Linear(x.Type.Shape, l.NumWarps())
	if core.Remappable(lin, lout, core.Identity) {
		return false
	}
	_, ok := planFrag(lin, to, lout, x.Type)
	return ok
}

// operandLayout is the layout an mma dot wants operand i in: its own
// layout when the dot stages it (fuseOperand), else the mma operand layout.
func operandLayout(l *core.Lowerer, op *tir.Op, i int) core.Layout {
	m, _ := mmaLayout(l, op)
	if fuseOperand(l, op, m, i) {
		lay, _ := l.Layouts().LayoutOf(op.Args[i])
		return lay
	}
	return core.DotOperand{OpIdx: i, Parent: m}
}

// mmaDot lowers a 16-bit dot with f32 accumulation to mma.sync m16n8k16:
// A in DotOperand{0}, B in DotOperand{1}, C in MMA (see their register
// orders). Loop order: k tiles outermost, so consecutive mmas are
// independent.
func mmaDot(l *core.Lowerer, op *tir.Op, m core.MMA, ws []core.Layout) []value.Value {
	at, bt := op.Args[0].Type, op.Args[1].Type
	M, K, N := at.Shape[0], at.Shape[1], bt.Shape[1]
	wm, wn := m.WarpsPerCTA[0], m.WarpsPerCTA[1]
	nM, nN, nK := max(1, M/(16*wm)), max(1, N/(8*wn)), K/16
	// Tile j holds columns 8(j·wn + warp) ..: those wholly past n_extent
	// keep the accumulator's registers.
	nLive := core.NTiles(op, nN, 8*wn)
	c := l.Get(op.Args[2], ws[2])
	if len(c) != 4*nM*nN {
		core.Fail("internal error: mma accumulator has %d registers for %dx%d %s", len(c), M, N, m)
	}
	f16 := at.Elem == tir.F16
	half2 := types.NewVector(2, types.Half)
	pack := func(lo, hi value.Value) value.Value {
		w := l.PackHalves(lo, hi)
		if f16 {
			return l.Block().NewBitCast(w, half2)
		}
		return w
	}
	packAll := func(regs []value.Value) []value.Value {
		out := make([]value.Value, len(regs)/2)
		for i := range out {
			out[i] = pack(regs[2*i], regs[2*i+1])
		}
		return out
	}

	// Operands: in registers already (converted at their definition), or
	// staged here (fuseOperand) and read fragment by fragment.
	var loaders [2]*fragLoader
	var srcs [2][]value.Value
	var lins [2]*core.Linear
	var plans [2]*fragPlan
	var tiles []*core.Staged
	off := 0
	for i := 0; i < 2; i++ {
		x := op.Args[i]
		if _, ok := ws[i].(core.DotOperand); ok {
			continue
		}
		if at := l.StagedTile(x); at != nil {
			loaders[i] = newFragLoader(l, at.Plan.(*fragPlan), at.ByteOff)
			loaders[i].st = at
			tiles = append(tiles, at)
			continue
		}
		to := core.DotOperand{OpIdx: i, Parent: m}
		lins[i] = l.Lin(ws[i], x.Type.Shape)
		p, ok := planFrag(lins[i], to, l.Lin(to, x.Type.Shape), x.Type)
		if !ok {
			core.Fail("internal error: fused mma operand %d has no ldmatrix plan", i)
		}
		plans[i] = p
		srcs[i] = l.Get(x, ws[i])
		loaders[i] = newFragLoader(l, p, l.Scratch()+off)
		off = (off + p.bytes + 127) &^ 127
		l.CountConversion()
	}
	if off > 0 {
		l.UseShared(off)
		l.Barrier()
		for i := 0; i < 2; i++ {
			if plans[i] != nil {
				l.SharedStore(srcs[i], lins[i], plans[i].st, op.Args[i].Type, loaders[i].byteOff-l.Scratch())
			}
		}
	}
	if l.AwaitStaged(op, tiles) || off > 0 {
		l.Barrier()
	}
	var ap, bp []value.Value // packed registers, nil when fused
	if loaders[0] == nil {
		a := l.Get(op.Args[0], ws[0])
		if len(a) != 8*nK*nM {
			core.Fail("internal error: mma A operand has %d registers", len(a))
		}
		ap = packAll(a)
	}
	if loaders[1] == nil {
		b := l.Get(op.Args[1], ws[1])
		if len(b) != 4*nK*nN {
			core.Fail("internal error: mma B operand has %d registers", len(b))
		}
		bp = packAll(b)
	}
	aFrag := map[[2]int][]value.Value{}
	aTile := func(kk, i int) []value.Value { // a0..a3 of tile (i, kk)
		first := 4 * (i*nK + kk)
		if ap != nil {
			return ap[first : first+4]
		}
		key := [2]int{kk, i}
		if f, ok := aFrag[key]; ok {
			return f
		}
		f := packAll(loaders[0].load(first, []int{0, 1, 2, 3}))
		aFrag[key] = f
		return f
	}
	bFrag := map[[2]int][]value.Value{}
	bTile := func(kk, j int) []value.Value { // b0, b1 of tile (kk, j)
		first := 2 * (j*nK + kk)
		if bp != nil {
			return bp[first : first+2]
		}
		key := [2]int{kk, j}
		if f, ok := bFrag[key]; ok {
			return f
		}
		if j%2 == 0 && j+1 < nLive {
			// One x4 for tiles j and j+1 (packed registers first+{0,1}
			// and first+2nK+{0,1}).
			f := packAll(loaders[1].load(first, []int{0, 1, 2 * nK, 2*nK + 1}))
			bFrag[key], bFrag[[2]int{kk, j + 1}] = f[:2], f[2:]
			return f[:2]
		}
		f := packAll(loaders[1].load(first, []int{0, 1}))
		bFrag[key] = f
		return f
	}

	acc := append([]value.Value(nil), c...)
	name := "llvm.nvvm.mma.m16n8k16.row.col.bf16"
	if f16 {
		name = "llvm.nvvm.mma.m16n8k16.row.col.f32.f32"
	}
	ret := types.NewStruct(types.Float, types.Float, types.Float, types.Float)
	for kk := 0; kk < core.KSteps(op); kk++ {
		for i := 0; i < nM; i++ {
			for j := 0; j < nLive; j++ {
				a, b := aTile(kk, i), bTile(kk, j)
				cb := 4 * (i*nN + j)
				args := []value.Value{a[0], a[1], a[2], a[3], b[0], b[1], acc[cb], acc[cb+1], acc[cb+2], acc[cb+3]}
				r := l.Call(name, ret, args...)
				for q := 0; q < 4; q++ {
					acc[cb+q] = l.Block().NewExtractValue(r, uint64(q))
				}
			}
		}
	}
	return acc
}
