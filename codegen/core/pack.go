package core

import (
	"github.com/llir/llvm/ir"
	"github.com/llir/llvm/ir/constant"
	"github.com/llir/llvm/ir/types"
	"github.com/llir/llvm/ir/value"
)

// PackHalves packs two 16-bit registers into one i32, lo in bits 0–15. When
// both are roundings of f32 values to the same 16-bit float (fromF32), the
// two roundings become one cvt.rn.{bf16,f16}x2.f32: one instruction where
// two conversions, two zero-extends, a shift and an or would be. P·V packs
// 32 such pairs per thread per kv block. When both are phis (P carried into
// the next iteration by overlap-softmax), the fusion waits until the loop's
// phis are complete (fusePhiPacks).
func (em *Emitter) PackHalves(lo, hi value.Value) value.Value {
	if a, b, ty := roundedPair(lo, hi); a != nil {
		return em.pure(types.I32, cvtX2(ty), "=r,f,f", b, a)
	}
	b := em.b
	or := b.NewOr(b.NewZExt(lo, types.I32), b.NewShl(b.NewZExt(hi, types.I32), ConstI32(16)))
	pl, okl := lo.(*ir.InstPhi)
	ph, okh := hi.(*ir.InstPhi)
	if okl && okh {
		em.packs = append(em.packs, phiPack{or, pl, ph})
	}
	return or
}

// cvtX2 is the asm of a paired rounding; it puts its first source in the
// upper half.
func cvtX2(ty string) string { return "cvt.rn." + ty + "x2.f32 $0, $1, $2;" }

// roundedF32 returns x and "bf16" or "f16" when v is fromF32(x) for that type.
func roundedF32(v value.Value) (value.Value, string) {
	switch c := v.(type) {
	case *ir.InstCall:
		if ia, ok := c.Callee.(*ir.InlineAsm); ok && ia.Asm == "cvt.rn.bf16.f32 $0, $1;" && len(c.Args) == 1 {
			return c.Args[0], "bf16"
		}
	case *ir.InstBitCast:
		if t, ok := c.From.(*ir.InstFPTrunc); ok && t.To.Equal(types.Half) && t.From.Type().Equal(types.Float) {
			return t.From, "f16"
		}
	}
	return nil, ""
}

// roundedPair returns the f32 sources of lo and hi when both are roundings
// to the same type.
func roundedPair(lo, hi value.Value) (a, b value.Value, ty string) {
	a, ty = roundedF32(lo)
	b, ty2 := roundedF32(hi)
	if a == nil || b == nil || ty != ty2 {
		return nil, nil, ""
	}
	return a, b, ty
}

// phiPack is a pack of two phis, rewritten by fusePhiPacks.
type phiPack struct {
	or     *ir.InstOr
	lo, hi *ir.InstPhi
}

// fusePhiPacks gives each pack of two phis whose every incoming pair is
// either two constants or two roundings (a loop-carried P) one i32 phi of
// packed values: the roundings become one cvt.rn.*x2.f32 at the end of the
// incoming block, and the pack reads the new phi. The old phis and roundings
// die when nothing else reads them.
func (em *Emitter) fusePhiPacks() {
	fused := map[[2]*ir.InstPhi]*ir.InstPhi{}
	for _, p := range em.packs {
		np, ok := fused[[2]*ir.InstPhi{p.lo, p.hi}]
		if !ok {
			np = em.fusePhiPair(p.lo, p.hi)
			fused[[2]*ir.InstPhi{p.lo, p.hi}] = np
		}
		if np != nil {
			p.or.X, p.or.Y = np, ConstI32(0)
		}
	}
	for _, np := range fused {
		if np != nil {
			em.removeDead()
			break
		}
	}
	em.packs = nil
}

func (em *Emitter) fusePhiPair(lo, hi *ir.InstPhi) *ir.InstPhi {
	if len(lo.Incs) != len(hi.Incs) {
		return nil
	}
	home := em.blockOf(lo)
	if home == nil || home != em.blockOf(hi) {
		return nil
	}
	// Check every incoming pair before changing anything.
	type cvt struct {
		pred *ir.Block
		a, b value.Value
		ty   string
	}
	incs := make([]*ir.Incoming, len(lo.Incs))
	cvts := map[int]cvt{}
	for i, in := range lo.Incs {
		pred, ok := in.Pred.(*ir.Block)
		if !ok || hi.Incs[i].Pred != in.Pred {
			return nil
		}
		cl, okl := in.X.(*constant.Int)
		ch, okh := hi.Incs[i].X.(*constant.Int)
		if okl && okh {
			w := cl.X.Int64()&0xffff | (ch.X.Int64()&0xffff)<<16
			incs[i] = ir.NewIncoming(constant.NewInt(types.I32, w), pred)
			continue
		}
		a, b, ty := roundedPair(in.X, hi.Incs[i].X)
		if a == nil {
			return nil
		}
		cvts[i] = cvt{pred, a, b, ty}
	}
	for i, c := range cvts {
		x := newPureAsm(types.I32, cvtX2(c.ty), "=r,f,f", c.b, c.a)
		c.pred.Insts = append(c.pred.Insts, x)
		incs[i] = ir.NewIncoming(x, c.pred)
	}
	np := ir.NewPhi(incs...)
	np.Typ = types.I32
	home.Insts = append([]ir.Instruction{np}, home.Insts...)
	return np
}

// blockOf returns the block of the function holding inst.
func (em *Emitter) blockOf(inst ir.Instruction) *ir.Block {
	for _, b := range em.fn.Blocks {
		for _, x := range b.Insts {
			if x == inst {
				return b
			}
		}
	}
	return nil
}
