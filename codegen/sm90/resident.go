package sm90

import (
	"github.com/fac-compiler/fac/codegen/core"
	"github.com/fac-compiler/fac/codegen/sm80"
	"github.com/fac-compiler/fac/tir"
)

// StageResident is the phase that keeps a loop-invariant A operand of
// wgmma dots (the attention kernels' Q) in a swizzled shared-memory tile
// for the whole loop: the load is copied there once (cp.async, waited at
// once) and every iteration's dot reads it through a descriptor (SS form)
// instead of holding it in registers (RS form: 64 registers a thread for
// a 128×128 bf16 Q on 8 warps).
var StageResident = core.Phase{
	Name: "stage-resident",
	Doc:  "keep loop-invariant A operands of wgmma dots in shared memory for the whole loop (SS form)",
	Run: func(l *core.Lowerer) error {
		t, ok := l.Target().(*Target)
		if !ok || !t.WGMMA {
			return nil
		}
		t.findResident(l, l.Func().Body)
		return nil
	},
}

// findResident marks loads of block b, and of the blocks nested in it,
// whose one use is operand A (not transposed) of a wgmma dot inside a
// loop nested in the load's block.
func (t *Target) findResident(l *core.Lowerer, b *tir.Block) {
	uses := map[*tir.Value]int{}
	b.Walk(func(op *tir.Op) bool {
		for _, x := range op.Args {
			uses[x]++
		}
		return true
	})
	var visit func(blk *tir.Block, loads map[*tir.Value]bool, inLoop bool)
	visit = func(blk *tir.Block, outer map[*tir.Value]bool, inLoop bool) {
		for _, op := range blk.Ops {
			if op.Kind == tir.OpDot && inLoop {
				x := op.Args[0]
				if outer[x] && uses[x] == 1 && l.StagedLoad(x.Def) == nil && sm80.Copyable(l, x.Def) {
					if _, ok := t.wgmmaLayout(l, op); ok {
						l.Stage(&core.Staged{Load: x.Def, Dot: op, Operand: 0, View: x, Resident: true,
							Layout: sm80.ChunkLayout(x.Type.Shape, l.NumWarps())})
					}
				}
			}
			for _, r := range op.Regions {
				// Loads of this block (and of blocks around it) are outer to
				// the region; a for makes what it holds a loop.
				inner := map[*tir.Value]bool{}
				for v := range outer {
					inner[v] = true
				}
				for _, o := range blk.Ops {
					if o.Kind == tir.OpLoad {
						inner[o.Result()] = true
					}
				}
				visit(r, inner, inLoop || op.Kind == tir.OpFor)
			}
		}
	}
	visit(b, map[*tir.Value]bool{}, false)
}
