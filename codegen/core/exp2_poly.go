package core

import (
	"github.com/llir/llvm/ir/types"
	"github.com/llir/llvm/ir/value"

	"github.com/fac-compiler/fac/tir"
)

// Exp2PolyMax is the most exp2_poly a kernel may ask for: the registers
// of each eight a thread holds of a 2-D exp2 (codegen.Lower checks).
const Exp2PolyMax = 8

// exp2PolyLanes is how many of each eight registers of op's result take
// exp2 from exp2Poly instead of the MUFU: the kernel's exp2_poly argument
// (a schedule argument, default 0), for exp2 of a 2-D f32 tile only (the
// softmax's probabilities; a row's rescale factor is one value a row and
// gains nothing).
func (em *Emitter) exp2PolyLanes(op *tir.Op) int {
	if op.Kind != tir.OpExp2 || op.Result().Type.Rank() != 2 || op.Result().Type.Elem != tir.F32 {
		return 0
	}
	n, _ := em.f.Attr("exp2_poly").(int64)
	return int(n)
}

// exp2PolyCoeffs are c1..c3 of 1 + c1·f + c2·f² + c3·f³, the minimax (in
// relative error) cubic for 2^f on [-1/2, 1/2] with its constant term
// held at 1: 1.01e-4 relative error at most, below half a unit in the
// last place of bf16 (3.9e-3) and of f16 (4.9e-4), the types P is
// rounded to before P·V.
var exp2PolyCoeffs = [3]float64{0.693282962, 0.242211372, 0.055008959}

// exp2Poly is 2^x from the FMA and integer pipes (FlashAttention-4's
// exponential emulation), for x at most 127: x is clamped below at −127,
// then j = round(x) comes from adding 1.5·2²³ (the sum's low mantissa bits
// are j), f = x − j in [−1/2, 1/2] goes through the cubic, and j is added
// to the result's exponent field. About eight instructions a value, each
// on a pipe that issues one warp instruction a cycle, against the MUFU's
// eight cycles a warp for ex2: a kernel whose softmax waits on the MUFU
// (D = 64, where the exponentials take as long as the GEMMs) moves part
// of them over. x = −inf (a masked score) gives exactly 0: the clamp
// makes it −127, whose f = 0 gives the cubic's 1.0 and the exponent field
// 127 − 127 = 0, so a row that kept nothing still sums to 0.
func (em *Emitter) exp2Poly(x value.Value) value.Value {
	b := em.b
	const magic = 12582912.0 // 1.5·2²³
	xc := em.Call("llvm.maximum.f32", types.Float, x, cf32(-127))
	t := b.NewFAdd(xc, cf32(magic))
	f := b.NewFSub(xc, b.NewFSub(t, cf32(magic)))
	p := value.Value(cf32(exp2PolyCoeffs[2]))
	for _, c := range []float64{exp2PolyCoeffs[1], exp2PolyCoeffs[0], 1} {
		p = em.Call("llvm.fma.f32", types.Float, p, f, cf32(c))
	}
	// bits(t) = bits(1.5·2²³) + j, and bits(1.5·2²³)·2²³ is 0 mod 2³²:
	// shifting t's bits left by 23 leaves j in the exponent field.
	j := b.NewShl(b.NewBitCast(t, types.I32), ConstI32(23))
	return b.NewBitCast(b.NewAdd(b.NewBitCast(p, types.I32), j), types.Float)
}
