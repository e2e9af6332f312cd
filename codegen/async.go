package codegen

import (
	"github.com/llir/llvm/ir/types"
	"github.com/llir/llvm/ir/value"

	"github.com/fac-compiler/fac/tir"
)

// Asynchronous operand staging (sm_80+ cp.async).
//
// A 16-bit tile that is loaded only to feed an mma dot in the same block
// (directly, or through one trans: K^T) never visits registers: the load
// is lowered to cp.async.cg 16-byte copies straight into the dot's padded
// shared-memory tile (zero-filling masked rows with the src-size operand),
// committed as one group; the dot waits for that group (letting later
// groups, e.g. V's, stay in flight), synchronizes the CTA and reads
// fragments with ldmatrix. The copies of a tile overlap everything between
// the load and its dot (for attention: V's load overlaps QK^T and the
// softmax). Misaligned global addresses take a fallback that loads into
// registers and stores to the same tile.

// asyncTile describes one staged load.
type asyncTile struct {
	load    *tir.Op
	dot     *tir.Op
	operand int        // 0: A, 1: B
	view    *tir.Value // the dot operand (the load's result or its trans)
	byteOff int        // absolute offset of the tile in shared memory
	plan    *fragPlan
	seq     int // commit sequence number, set when the load is lowered
	regions int // regions lowered before the commit (see waitFor)
}

// findAsync marks the loads to stage: the dot is an mma dot; the operand is
// load(ptr[, mask, other = 0]) or trans of it, each used once and all in
// the dot's block; the pointers are contiguous in aligned runs of 8 along
// the last dim, which has at least 8 elements (16-byte copies).
func (a *assigner) findAsync(b *tir.Block) {
	uses := map[*tir.Value]int{}
	a.countUses(b, uses)
	a.findAsyncIn(b, uses)
}

func (a *assigner) countUses(b *tir.Block, uses map[*tir.Value]int) {
	b.Walk(func(op *tir.Op) bool {
		for _, x := range op.Args {
			uses[x]++
		}
		return true
	})
}

func (a *assigner) findAsyncIn(b *tir.Block, uses map[*tir.Value]int) {
	in := map[*tir.Op]bool{}
	for _, op := range b.Ops {
		in[op] = true
	}
	for _, op := range b.Ops {
		for _, r := range op.Regions {
			a.findAsyncIn(r, uses)
		}
		if op.Kind != tir.OpDot {
			continue
		}
		if _, ok := a.mmaDot(op); !ok {
			continue
		}
		for i := 0; i < 2; i++ {
			x := op.Args[i]
			y := x
			if d := x.Def; d != nil && d.Kind == tir.OpTrans && in[d] && uses[x] == 1 {
				y = d.Args[0]
			}
			ld := y.Def
			if ld == nil || ld.Kind != tir.OpLoad || !in[ld] || uses[y] != 1 || a.async[ld] != nil {
				continue
			}
			t := y.Type
			last := t.Rank() - 1
			if t.Rank() != 2 || t.Shape[last]%8 != 0 || a.axis(ld.Args[0]).contig[last] < 8 {
				continue
			}
			if len(ld.Args) == 3 && !isZeroConst(ld.Args[2]) {
				continue
			}
			a.async[ld] = &asyncTile{load: ld, dot: op, operand: i, view: x}
		}
	}
}

func isZeroConst(v *tir.Value) bool {
	if v.Def == nil || v.Def.Kind != tir.OpConst {
		return false
	}
	switch c := v.Def.Attr("value").(type) {
	case float64:
		return c == 0 && !signbit(c)
	case int64:
		return c == 0
	case bool:
		return !c
	}
	return false
}

func signbit(f float64) bool { return 1/f < 0 }

// chunkLayout is the layout of a staged load: 8 contiguous 16-bit
// elements (one 16-byte copy) per thread and register group.
func chunkLayout(shape []int, numWarps int) Blocked {
	b := defaultBlocked(shape, numWarps)
	r := len(shape)
	if b.SizePerThread[r-1] == 8 {
		return b
	}
	// Rebuild with 8 per thread along the last dim.
	nb := Blocked{make([]int, r), make([]int, r), make([]int, r), append([]int(nil), b.Order...)}
	for i := range nb.SizePerThread {
		nb.SizePerThread[i], nb.ThreadsPerWarp[i], nb.WarpsPerCTA[i] = 1, 1, 1
	}
	nb.SizePerThread[r-1] = 8
	lanes := 32
	for d := r - 1; d >= 0 && lanes > 1; d-- {
		t := min(lanes, max(shape[d]/nb.SizePerThread[d], 1))
		nb.ThreadsPerWarp[d] = t
		lanes /= t
	}
	nb.ThreadsPerWarp[0] *= lanes
	warps := numWarps
	for d := 0; d < r && warps > 1; d++ {
		w := min(warps, max(shape[d]/(nb.SizePerThread[d]*nb.ThreadsPerWarp[d]), 1))
		nb.WarpsPerCTA[d] = w
		warps /= w
	}
	nb.WarpsPerCTA[0] *= warps
	return nb
}

// planAsync lays out the staged tiles at the start of shared memory (the
// scratch area follows) and returns their total size.
func (l *lowerer) planAsync() int {
	off := 0
	for _, op := range l.asyncOrder {
		at := l.a.async[op]
		m, _ := l.a.mmaDot(at.dot)
		to := DotOperand{OpIdx: at.operand, Parent: m}
		vin := l.a.get(at.view)
		p, ok := planFrag(l.lin(vin.lay, at.view.Type.Shape), to, l.lin(to, at.view.Type.Shape), at.view.Type)
		if !ok {
			fail("internal error: staged operand has no ldmatrix plan")
		}
		at.plan = p
		at.byteOff = off
		off = (off + p.bytes + 127) &^ 127
	}
	return off
}

// lowerAsyncLoad issues the copies of a staged load.
func (l *lowerer) lowerAsyncLoad(op *tir.Op, at *asyncTile) {
	lay := l.a.get(op.Result()).lay
	ws := l.a.operandWants(op, lay)
	t := op.Result().Type
	e := t.Elem
	ptrs := l.get(op.Args[0], ws[0])
	var mask []value.Value
	if len(op.Args) == 3 {
		mask = l.get(op.Args[1], ws[1])
	}
	x := l.lin(lay, t.Shape)
	// Strides of the tile in the load's own coordinates: the view may be
	// the transpose.
	st := at.plan.st
	if at.view != op.Result() {
		st = []int{st[1], st[0]}
	}
	// Readers of the previous contents (last iteration's dot, or the
	// scratch area overlapping the tiles) must be done.
	if l.smemDirty {
		l.barrier()
	}
	base := l.flatBase(x, st)
	const v = 8
	if len(x.reg) < 3 || !equalBases(x.reg[:3], [][]int{{0, 1}, {0, 2}, {0, 4}}) {
		fail("internal error: staged load layout %s has no 8-element chunks", lay)
	}
	l.alignedOr(ptrs, nil, v, e, func() []value.Value {
		i8s, i8g := sharedPtr(types.I8), ptrTo(types.I8, 1)
		for g := 0; g < len(ptrs); g += v {
			idx := l.addOff(base, dotInts(x.regOffset(g), st))
			dst := l.b.NewBitCast(l.sharedAbs(types.I16, at.byteOff, idx), i8s)
			src := l.b.NewBitCast(ptrs[g], i8g)
			var n value.Value = ci32(16)
			if mask != nil {
				n = l.b.NewSelect(mask[g], ci32(16), ci32(0))
			}
			l.b.NewCall(l.decl("llvm.nvvm.cp.async.cg.shared.global.16.s", types.Void, i8s, i8g, types.I32), dst, src, n)
		}
		return nil
	}, func() []value.Value {
		zero := constant16(0)
		for r, p := range ptrs {
			var val value.Value
			if mask == nil {
				val = l.b.NewLoad(types.I16, p)
			} else {
				val = l.maskedLoad(p, mask[r], zero, e)
			}
			idx := l.addOff(base, dotInts(x.regOffset(r), st))
			l.b.NewStore(val, l.sharedAbs(types.I16, at.byteOff, idx))
		}
		return nil
	})
	l.b.NewCall(l.decl("llvm.nvvm.cp.async.commit.group", types.Void))
	// Only writes since the barrier: a following staged load need not sync.
	l.smemDirty = false
	at.seq = l.asyncCommits
	at.regions = l.regionsLowered
	l.asyncCommits++
	l.inFlight++
}

// waitFor waits until the staged tile's copies are complete (later groups
// may stay in flight when no region was lowered in between, so the count
// is static) and makes them visible to the CTA.
func (l *lowerer) waitFor(at *asyncTile) {
	n := l.asyncCommits - at.seq - 1
	if l.regionsLowered != at.regions || n < 0 {
		n = 0
	}
	l.b.NewCall(l.decl("llvm.nvvm.cp.async.wait.group", types.Void, types.I32), ci32(int64(n)))
}
