package core

import (
	"github.com/llir/llvm/ir"
	"github.com/llir/llvm/ir/constant"
	"github.com/llir/llvm/ir/enum"
	"github.com/llir/llvm/ir/types"
	"github.com/llir/llvm/ir/value"

	"github.com/fac-compiler/fac/tir"
)

// unitScale lowers x * f, with f one factor per row broadcast along the
// columns of a 2-D f32 tile (the softmax's rescale of O), in a kernel
// whose lazy_rescale argument is true: a warp whose factors are all
// exactly 1.0 skips the products. x · 1.0 is x bit for bit, so the result
// is the same either way; lazy rescaling (flash_fwd.fa) makes a factor of
// 1 the common case, and the products are one FP32 instruction per
// element of O a block (64 a thread at D = 128 on 8 warps), on the pipe
// the forward's softmax is bound by. The test is a few compares of the
// distinct factors a thread holds and a vote, so the branch is
// warp-uniform; the products join x's registers in phis. It returns nil
// where it does not apply (then the mul is lowered element by element).
func (em *Emitter) unitScale(op *tir.Op, arg func(int) []value.Value) []value.Value {
	if on, _ := em.f.Attr("lazy_rescale").(bool); !on || op.Kind != tir.OpMul {
		return nil
	}
	rt := op.Result().Type
	if rt.Elem != tir.F32 || len(rt.Shape) != 2 || rt.Shape[1] == 1 {
		return nil
	}
	fi := -1
	for i, a := range op.Args {
		if isExp2Column(a) {
			fi = i
		}
	}
	if fi < 0 {
		return nil
	}
	xs, fs := arg(1-fi), arg(fi)
	var distinct []value.Value
	seen := map[value.Value]bool{}
	for _, f := range fs {
		if !seen[f] {
			seen[f] = true
			distinct = append(distinct, f)
		}
	}
	// Worth a branch only where a thread holds a row's factor many times
	// (a wgmma or mma accumulator: 2 or 4 rows, 16 or more columns).
	if len(distinct)*8 > len(fs) {
		return nil
	}
	var notOne value.Value
	for _, f := range distinct {
		c := em.b.NewFCmp(enum.FPredUNE, f, constant.NewFloat(types.Float, 1))
		if notOne == nil {
			notOne = c
		} else {
			notOne = em.b.NewOr(notOne, c)
		}
	}
	vote := em.Call("llvm.nvvm.vote.any.sync", types.I1, ConstI32(-1), notOne)
	pre := em.b
	scale, join := em.newBlock("rescale"), em.newBlock("rescale.end")
	pre.NewCondBr(vote, scale, join)
	em.b = scale
	prods := make([]value.Value, len(xs))
	for r := range xs {
		prods[r] = em.b.NewFMul(xs[r], fs[r])
	}
	em.b.NewBr(join)
	out := make([]value.Value, len(xs))
	for r := range xs {
		out[r] = join.NewPhi(ir.NewIncoming(prods[r], scale), ir.NewIncoming(xs[r], pre))
	}
	em.b = join
	return out
}

// isExp2Column reports whether v is a column of exp2 results broadcast
// along the rows' columns (broadcast(reshape(exp2(…)))): the rescale
// factor of an online softmax, exp2(m_old − m_new), which is 1 where the
// max stayed. Other per-row factors (the epilogue's 1 / l) rarely are.
func isExp2Column(v *tir.Value) bool {
	d := v.Def
	if d == nil || d.Kind != tir.OpBroadcast || d.Args[0].Type.Shape[1] != 1 {
		return false
	}
	for d = d.Args[0].Def; d != nil && d.Kind == tir.OpReshape; d = d.Args[0].Def {
	}
	return d != nil && d.Kind == tir.OpExp2
}
