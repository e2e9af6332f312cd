package sm90

import (
	"github.com/fac-compiler/fac/codegen/core"
	"github.com/fac-compiler/fac/codegen/sm80"
	"github.com/fac-compiler/fac/tir"
)

// StageResident is the phase that keeps loop-invariant operands of wgmma
// dots (the attention kernels' Q, the backward's K and V) in a swizzled shared-memory tile
// for the whole loop: the load is copied there once (cp.async, waited at
// once) and every iteration's dot reads it through a descriptor (SS form)
// instead of holding it in registers (RS form: 64 registers a thread for
// a 128×128 bf16 Q on 8 warps).
var StageResident = core.Phase{
	Name: "stage-resident",
	Doc:  "keep loop-invariant operands of wgmma dots in shared memory for the whole loop (SS form)",
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
// that only wgmma dots read (as A or B, directly or transposed), all of
// them inside loops nested in the load's block: the backward's K is A of
// S = K·Qᵀ and, transposed, of dQᵀ = Kᵀ·dS.
func (t *Target) findResident(l *core.Lowerer, b *tir.Block) {
	uses := useCounts(b)
	var visit func(blk *tir.Block)
	visit = func(blk *tir.Block) {
		for _, op := range blk.Ops {
			for _, r := range op.Regions {
				visit(r)
			}
			if op.Kind != tir.OpLoad || l.Plan().StagedLoad(op) != nil || !sm80.Copyable(l, op) {
				continue
			}
			inLoop := map[*tir.Op]bool{}
			us, ok := t.dotUses(l, op.Result(), uses, func(f func(*tir.Op)) {
				var walk func(r *tir.Block, loop bool)
				walk = func(r *tir.Block, loop bool) {
					for _, o := range r.Ops {
						inLoop[o] = loop
						f(o)
						for _, rr := range o.Regions {
							walk(rr, loop || o.Kind == tir.OpFor)
						}
					}
				}
				for _, o := range blk.Ops {
					for _, r := range o.Regions {
						walk(r, o.Kind == tir.OpFor)
					}
				}
			})
			if !ok {
				continue
			}
			for _, u := range us {
				ok = ok && inLoop[u.Dot]
			}
			if ok {
				l.Plan().Stage(&core.Staged{Load: op, Dot: us[0].Dot, Operand: us[0].Operand, View: us[0].View, Also: us[1:], Resident: true,
					Layout: sm80.ChunkLayout(op.Result().Type.Shape, l.NumWarps())})
			}
		}
	}
	visit(b)
}
