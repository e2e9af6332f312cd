package sm80

import (
	"github.com/fac-compiler/fac/codegen/core"
	"github.com/fac-compiler/fac/tir"
)

// SelectAsync is the phase that marks dot operand loads for cp.async
// staging (see async.go). Optional: without it every load goes through
// registers and the dots convert or stage their operands themselves.
var SelectAsync = core.Phase{
	Name: "select-async",
	Doc:  "mark 16-bit tiles loaded only to feed an mma dot in the same block for cp.async staging into shared memory",
	Run: func(l *core.Lowerer) error {
		findAsync(l, l.Func().Body)
		return nil
	},
}

// findAsync marks the loads to stage: the dot is an mma dot; the operand is
// load(ptr[, mask, other = 0]) or trans of it, each used once and all in
// the dot's block; the pointers are contiguous in aligned runs of 8 along
// the last dim, which has at least 8 elements (16-byte copies).
func findAsync(l *core.Lowerer, b *tir.Block) {
	uses := map[*tir.Value]int{}
	b.Walk(func(op *tir.Op) bool {
		for _, x := range op.Args {
			uses[x]++
		}
		return true
	})
	findAsyncIn(l, b, uses)
}

func findAsyncIn(l *core.Lowerer, b *tir.Block, uses map[*tir.Value]int) {
	in := map[*tir.Op]bool{}
	for _, op := range b.Ops {
		in[op] = true
	}
	for _, op := range b.Ops {
		for _, r := range op.Regions {
			findAsyncIn(l, r, uses)
		}
		if op.Kind != tir.OpDot {
			continue
		}
		if _, ok := mmaLayout(l, op); !ok {
			continue
		}
		for i := 0; i < 2; i++ {
			x := op.Args[i]
			y := x
			if d := x.Def; d != nil && d.Kind == tir.OpTrans && in[d] && uses[x] == 1 {
				y = d.Args[0]
			}
			ld := y.Def
			if ld == nil || ld.Kind != tir.OpLoad || !in[ld] || uses[y] != 1 || l.Plan().StagedLoad(ld) != nil || !Copyable(l, ld) {
				continue
			}
			l.Plan().Stage(&core.Staged{Load: ld, Dot: op, Operand: i, View: x, Layout: ChunkLayout(y.Type.Shape, l.NumWarps())})
		}
	}
}

// Copyable reports whether load ld can be staged by 16-byte copies: a
// rank-2 16-bit tile whose pointers are contiguous in aligned runs of 8
// along the last dim (a multiple of 8), masked rows reading zero.
func Copyable(l *core.Lowerer, ld *tir.Op) bool {
	t := ld.Result().Type
	last := t.Rank() - 1
	if t.Rank() != 2 || t.Elem.Bytes() != 2 || t.Shape[last]%8 != 0 || l.Contiguity(ld.Args[0])[last] < 8 {
		return false
	}
	return len(ld.Args) != 3 || core.IsZeroConst(ld.Args[2])
}

// ChunkLayout is the layout of a staged load: 8 contiguous 16-bit
// elements (one 16-byte copy) per thread and register group.
func ChunkLayout(shape []int, numWarps int) core.Blocked {
	b := core.DefaultBlocked(shape, numWarps)
	r := len(shape)
	if b.SizePerThread[r-1] == 8 {
		return b
	}
	// Rebuild with 8 per thread along the last dim.
	nb := core.Blocked{SizePerThread: make([]int, r), ThreadsPerWarp: make([]int, r), WarpsPerCTA: make([]int, r), Order: append([]int(nil), b.Order...)}
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
