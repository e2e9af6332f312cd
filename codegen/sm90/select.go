package sm90

import (
	"github.com/fac-compiler/fac/codegen/core"
	"github.com/fac-compiler/fac/codegen/sm80"
	"github.com/fac-compiler/fac/tir"
)

// SelectAsync is sm80's select-async, plus, for wgmma, loads that several
// wgmma dots of their block read (the backward's Q and dO, each an operand
// of two GEMMs): one staged tile that every such dot reads through its own
// view (directly or transposed), instead of a trip through registers.
var SelectAsync = core.Phase{
	Name: sm80.SelectAsync.Name,
	Doc:  sm80.SelectAsync.Doc + "; on wgmma also tiles several dots read",
	Run: func(l *core.Lowerer) error {
		if err := sm80.SelectAsync.Run(l); err != nil {
			return err
		}
		if t, ok := l.Target().(*Target); ok && t.WGMMA {
			t.findShared(l, l.Func().Body, useCounts(l.Func().Body))
		}
		return nil
	},
}

// useCounts counts the uses of every value in b and its regions.
func useCounts(b *tir.Block) map[*tir.Value]int {
	uses := map[*tir.Value]int{}
	b.Walk(func(op *tir.Op) bool {
		for _, x := range op.Args {
			uses[x]++
		}
		return true
	})
	return uses
}

// dotUses lists, in program order, the uses of v by wgmma dots that the
// ops visited report, through a trans used only by the dot; ok is false
// when v has another use. visit walks the ops that may hold the uses.
func (t *Target) dotUses(l *core.Lowerer, v *tir.Value, uses map[*tir.Value]int, visit func(func(*tir.Op))) ([]core.StagedUse, bool) {
	var out []core.StagedUse
	n := 0
	visit(func(op *tir.Op) {
		if op.Kind != tir.OpDot {
			return
		}
		if _, ok := t.wgmmaLayout(l, op); !ok {
			return
		}
		for i := 0; i < 2; i++ {
			x := op.Args[i]
			src := x
			if d := x.Def; d != nil && d.Kind == tir.OpTrans && uses[x] == 1 {
				src = d.Args[0]
			}
			if src == v {
				out = append(out, core.StagedUse{Dot: op, Operand: i, View: x})
				n++
			}
		}
	})
	return out, n == uses[v] && n > 0
}

// findShared stages the loads of b (and of its nested blocks) that two or
// more wgmma dots of the same block read and nothing else does.
func (t *Target) findShared(l *core.Lowerer, b *tir.Block, uses map[*tir.Value]int) {
	for _, op := range b.Ops {
		for _, r := range op.Regions {
			t.findShared(l, r, uses)
		}
		if op.Kind != tir.OpLoad || uses[op.Result()] < 2 || l.Plan().StagedLoad(op) != nil || !sm80.Copyable(l, op) {
			continue
		}
		us, ok := t.dotUses(l, op.Result(), uses, func(f func(*tir.Op)) {
			for _, o := range b.Ops {
				f(o)
			}
		})
		if !ok || len(us) < 2 {
			continue
		}
		l.Plan().Stage(&core.Staged{Load: op, Dot: us[0].Dot, Operand: us[0].Operand, View: us[0].View, Also: us[1:],
			Layout: sm80.ChunkLayout(op.Result().Type.Shape, l.NumWarps())})
	}
}
