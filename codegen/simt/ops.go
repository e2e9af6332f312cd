package simt

import (
	"encoding/binary"
	"math"
	"math/bits"

	"github.com/llir/llvm/ir"
	"github.com/llir/llvm/ir/constant"
	"github.com/llir/llvm/ir/enum"
	"github.com/llir/llvm/ir/types"
	"github.com/llir/llvm/ir/value"

	"github.com/fac-compiler/fac/internal/half"
)

// Lane loops: for mm := m; mm != 0; mm &= mm - 1 { l := lane(mm) ... }.
func lane(mm uint32) int { return bits.TrailingZeros32(mm) & 31 }

func f32(x uint64) float32  { return math.Float32frombits(uint32(x)) }
func uf32(f float32) uint64 { return uint64(math.Float32bits(f)) }

func b2u(b bool) uint64 {
	if b {
		return 1
	}
	return 0
}

// inst compiles one instruction (not a phi).
func (c *compiler) inst(inst ir.Instruction) op {
	switch in := inst.(type) {
	case *ir.InstAdd:
		return c.intBin(in, in.X, in.Y, opAdd)
	case *ir.InstSub:
		return c.intBin(in, in.X, in.Y, opSub)
	case *ir.InstMul:
		return c.intBin(in, in.X, in.Y, opMul)
	case *ir.InstAnd:
		return c.intBin(in, in.X, in.Y, opAnd)
	case *ir.InstOr:
		return c.intBin(in, in.X, in.Y, opOr)
	case *ir.InstXor:
		return c.intBin(in, in.X, in.Y, opXor)
	case *ir.InstShl:
		return c.intBin(in, in.X, in.Y, opShl)
	case *ir.InstLShr:
		return c.intBin(in, in.X, in.Y, opLShr)
	case *ir.InstAShr:
		return c.intBin(in, in.X, in.Y, opAShr)
	case *ir.InstSDiv:
		return c.intBin(in, in.X, in.Y, opSDiv)
	case *ir.InstSRem:
		return c.intBin(in, in.X, in.Y, opSRem)
	case *ir.InstUDiv:
		return c.intBin(in, in.X, in.Y, opUDiv)
	case *ir.InstURem:
		return c.intBin(in, in.X, in.Y, opURem)
	case *ir.InstFAdd:
		return c.floatBin(in, in.X, in.Y, opFAdd)
	case *ir.InstFSub:
		return c.floatBin(in, in.X, in.Y, opFSub)
	case *ir.InstFMul:
		return c.floatBin(in, in.X, in.Y, opFMul)
	case *ir.InstFDiv:
		return c.floatBin(in, in.X, in.Y, opFDiv)
	case *ir.InstFRem:
		return c.floatBin(in, in.X, in.Y, opFRem)
	case *ir.InstFNeg:
		c.needF32(in.X.Type())
		return c.unary(in, in.X, func(x uint64) uint64 { return uf32(-f32(x)) })
	case *ir.InstICmp:
		return c.icmp(in)
	case *ir.InstFCmp:
		return c.fcmp(in)
	case *ir.InstSelect:
		return c.sel(in)
	case *ir.InstZExt:
		return c.copyOp(in, in.From)
	case *ir.InstSExt:
		from, to := bitsOf(elemType(in.From.Type(), 0)), bitsOf(elemType(in.To, 0))
		return c.unary(in, in.From, func(x uint64) uint64 { return maskBits(uint64(sext(x, from)), to) })
	case *ir.InstTrunc:
		return c.masked(in, in.From, bitsOf(elemType(in.To, 0)))
	case *ir.InstFPExt:
		if !isHalf(elemType(in.From.Type(), 0)) || !isF32(elemType(in.To, 0)) {
			fail("fpext %s to %s", in.From.Type(), in.To)
		}
		return c.unary(in, in.From, func(x uint64) uint64 { return uf32(half.F16ToF32(uint16(x))) })
	case *ir.InstFPTrunc:
		if !isF32(elemType(in.From.Type(), 0)) || !isHalf(elemType(in.To, 0)) {
			fail("fptrunc %s to %s", in.From.Type(), in.To)
		}
		return c.unary(in, in.From, func(x uint64) uint64 { return uint64(half.F32ToF16(f32(x))) })
	case *ir.InstSIToFP:
		from := bitsOf(elemType(in.From.Type(), 0))
		return c.unary(in, in.From, c.toFloat(in.To, func(x uint64) float32 { return float32(sext(x, from)) }))
	case *ir.InstUIToFP:
		return c.unary(in, in.From, c.toFloat(in.To, func(x uint64) float32 { return float32(x) }))
	case *ir.InstFPToSI:
		c.needF32(in.From.Type())
		to := bitsOf(elemType(in.To, 0))
		return c.unary(in, in.From, func(x uint64) uint64 { return maskBits(uint64(int64(f32(x))), to) })
	case *ir.InstFPToUI:
		c.needF32(in.From.Type())
		to := bitsOf(elemType(in.To, 0))
		return c.unary(in, in.From, func(x uint64) uint64 { return maskBits(uint64(f32(x)), to) })
	case *ir.InstBitCast:
		return c.bitcast(in, in.From, in.To)
	case *ir.InstPtrToInt:
		return c.masked(in, in.From, bitsOf(in.To))
	case *ir.InstIntToPtr:
		return c.copyOp(in, in.From)
	case *ir.InstAddrSpaceCast:
		return c.copyOp(in, in.From)
	case *ir.InstFreeze:
		return c.copyOp(in, in.X)
	case *ir.InstGetElementPtr:
		return c.gep(in)
	case *ir.InstLoad:
		return c.load(in)
	case *ir.InstStore:
		return c.store(in)
	case *ir.InstExtractValue:
		if len(in.Indices) != 1 {
			fail("extractvalue with %d indices", len(in.Indices))
		}
		d, s := c.slots[in], c.val(in.X)+32*int(in.Indices[0])
		return op{run: func(w *warp, m uint32) {
			r := w.regs
			for mm := m; mm != 0; mm &= mm - 1 {
				l := lane(mm)
				r[d+l] = r[s+l]
			}
		}}
	case *ir.InstInsertValue:
		if len(in.Indices) != 1 {
			fail("insertvalue with %d indices", len(in.Indices))
		}
		n := count(in.Type())
		d, x, e, k := c.slots[in], c.val(in.X), c.val(in.Elem), int(in.Indices[0])
		return op{run: func(w *warp, m uint32) {
			r := w.regs
			for mm := m; mm != 0; mm &= mm - 1 {
				l := lane(mm)
				for i := 0; i < n; i++ {
					r[d+32*i+l] = r[x+32*i+l]
				}
				r[d+32*k+l] = r[e+l]
			}
		}}
	case *ir.InstExtractElement:
		n := count(in.X.Type())
		d, x, ix := c.slots[in], c.val(in.X), c.val(in.Index)
		return op{run: func(w *warp, m uint32) {
			r := w.regs
			for mm := m; mm != 0; mm &= mm - 1 {
				l := lane(mm)
				i := int(r[ix+l])
				if i >= n {
					fail("extractelement index %d of a %d-element vector", i, n)
				}
				r[d+l] = r[x+32*i+l]
			}
		}}
	case *ir.InstInsertElement:
		n := count(in.Type())
		eb := bitsOf(elemType(in.Type(), 0))
		d, x, e, ix := c.slots[in], c.val(in.X), c.val(in.Elem), c.val(in.Index)
		return op{run: func(w *warp, m uint32) {
			r := w.regs
			for mm := m; mm != 0; mm &= mm - 1 {
				l := lane(mm)
				i := int(r[ix+l])
				if i >= n {
					fail("insertelement index %d of a %d-element vector", i, n)
				}
				for k := 0; k < n; k++ {
					r[d+32*k+l] = r[x+32*k+l]
				}
				r[d+32*i+l] = maskBits(r[e+l], eb)
			}
		}}
	case *ir.InstShuffleVector:
		return c.shuffle(in)
	case *ir.InstAlloca:
		return c.alloca(in)
	case *ir.InstCall:
		return c.call(in)
	}
	fail("unsupported instruction %T: %s", inst, inst.LLString())
	return op{}
}

func (c *compiler) needF32(t types.Type) {
	if !isF32(elemType(t, 0)) {
		fail("float arithmetic on %s (only float is simulated)", t)
	}
}

type binKind int

const (
	opAdd binKind = iota
	opSub
	opMul
	opAnd
	opOr
	opXor
	opShl
	opLShr
	opAShr
	opSDiv
	opSRem
	opUDiv
	opURem
	opFAdd
	opFSub
	opFMul
	opFDiv
	opFRem
)

// elems is the per-element slot offsets of a value of n elements.
func elems(base, n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = base + 32*i
	}
	return out
}

// perElem runs f, built for each element's slots, as one op.
func perElem(fs []laneFn) op {
	if len(fs) == 1 {
		return op{run: fs[0]}
	}
	return op{run: func(w *warp, m uint32) {
		for _, f := range fs {
			f(w, m)
		}
	}}
}

func (c *compiler) intBin(res value.Value, x, y value.Value, k binKind) op {
	n := count(res.Type())
	bw := bitsOf(elemType(res.Type(), 0))
	d, a, b := elems(c.slots[res], n), elems(c.val(x), n), elems(c.val(y), n)
	fs := make([]laneFn, n)
	for i := range fs {
		fs[i] = intBinLanes(k, d[i], a[i], b[i], bw)
	}
	return perElem(fs)
}

func intBinLanes(k binKind, d, a, b, bw int) laneFn {
	wm := uint64(math.MaxUint64)
	if bw < 64 {
		wm = 1<<bw - 1
	}
	switch k {
	case opAdd:
		return func(w *warp, m uint32) {
			r := w.regs
			for mm := m; mm != 0; mm &= mm - 1 {
				l := lane(mm)
				r[d+l] = (r[a+l] + r[b+l]) & wm
			}
		}
	case opSub:
		return func(w *warp, m uint32) {
			r := w.regs
			for mm := m; mm != 0; mm &= mm - 1 {
				l := lane(mm)
				r[d+l] = (r[a+l] - r[b+l]) & wm
			}
		}
	case opMul:
		return func(w *warp, m uint32) {
			r := w.regs
			for mm := m; mm != 0; mm &= mm - 1 {
				l := lane(mm)
				r[d+l] = (r[a+l] * r[b+l]) & wm
			}
		}
	case opAnd:
		return func(w *warp, m uint32) {
			r := w.regs
			for mm := m; mm != 0; mm &= mm - 1 {
				l := lane(mm)
				r[d+l] = r[a+l] & r[b+l]
			}
		}
	case opOr:
		return func(w *warp, m uint32) {
			r := w.regs
			for mm := m; mm != 0; mm &= mm - 1 {
				l := lane(mm)
				r[d+l] = r[a+l] | r[b+l]
			}
		}
	case opXor:
		return func(w *warp, m uint32) {
			r := w.regs
			for mm := m; mm != 0; mm &= mm - 1 {
				l := lane(mm)
				r[d+l] = r[a+l] ^ r[b+l]
			}
		}
	case opShl:
		return func(w *warp, m uint32) {
			r := w.regs
			for mm := m; mm != 0; mm &= mm - 1 {
				l := lane(mm)
				r[d+l] = (r[a+l] << r[b+l]) & wm
			}
		}
	case opLShr:
		return func(w *warp, m uint32) {
			r := w.regs
			for mm := m; mm != 0; mm &= mm - 1 {
				l := lane(mm)
				r[d+l] = r[a+l] >> r[b+l]
			}
		}
	}
	var f func(x, y uint64) uint64
	switch k {
	case opAShr:
		f = func(x, y uint64) uint64 { return uint64(sext(x, bw) >> y) }
	case opSDiv, opSRem:
		div := k == opSDiv
		f = func(x, y uint64) uint64 {
			p, q := sext(x, bw), sext(y, bw)
			if q == 0 {
				fail("division by zero")
			}
			if div {
				return uint64(p / q)
			}
			return uint64(p % q)
		}
	case opUDiv, opURem:
		div := k == opUDiv
		f = func(x, y uint64) uint64 {
			if y == 0 {
				fail("division by zero")
			}
			if div {
				return x / y
			}
			return x % y
		}
	default:
		fail("integer op %d", k)
	}
	return func(w *warp, m uint32) {
		r := w.regs
		for mm := m; mm != 0; mm &= mm - 1 {
			l := lane(mm)
			r[d+l] = f(r[a+l], r[b+l]) & wm
		}
	}
}

func (c *compiler) floatBin(res value.Value, x, y value.Value, k binKind) op {
	c.needF32(res.Type())
	n := count(res.Type())
	d, a, b := elems(c.slots[res], n), elems(c.val(x), n), elems(c.val(y), n)
	fs := make([]laneFn, n)
	for i := range fs {
		fs[i] = floatBinLanes(k, d[i], a[i], b[i])
	}
	return perElem(fs)
}

func floatBinLanes(k binKind, d, a, b int) laneFn {
	switch k {
	case opFAdd:
		return func(w *warp, m uint32) {
			r := w.regs
			for mm := m; mm != 0; mm &= mm - 1 {
				l := lane(mm)
				r[d+l] = uf32(f32(r[a+l]) + f32(r[b+l]))
			}
		}
	case opFSub:
		return func(w *warp, m uint32) {
			r := w.regs
			for mm := m; mm != 0; mm &= mm - 1 {
				l := lane(mm)
				r[d+l] = uf32(f32(r[a+l]) - f32(r[b+l]))
			}
		}
	case opFMul:
		return func(w *warp, m uint32) {
			r := w.regs
			for mm := m; mm != 0; mm &= mm - 1 {
				l := lane(mm)
				r[d+l] = uf32(f32(r[a+l]) * f32(r[b+l]))
			}
		}
	case opFDiv:
		return func(w *warp, m uint32) {
			r := w.regs
			for mm := m; mm != 0; mm &= mm - 1 {
				l := lane(mm)
				r[d+l] = uf32(f32(r[a+l]) / f32(r[b+l]))
			}
		}
	}
	return func(w *warp, m uint32) {
		r := w.regs
		for mm := m; mm != 0; mm &= mm - 1 {
			l := lane(mm)
			r[d+l] = uf32(float32(math.Mod(float64(f32(r[a+l])), float64(f32(r[b+l])))))
		}
	}
}

// unary applies f to each element of x.
func (c *compiler) unary(res value.Value, x value.Value, f func(uint64) uint64) op {
	n := count(res.Type())
	if count(x.Type()) != n {
		fail("%s: operand of %d elements for a result of %d", res.Ident(), count(x.Type()), n)
	}
	d, a := c.slots[res], c.val(x)
	return op{run: func(w *warp, m uint32) {
		r := w.regs
		for e := 0; e < n; e++ {
			de, ae := d+32*e, a+32*e
			for mm := m; mm != 0; mm &= mm - 1 {
				l := lane(mm)
				r[de+l] = f(r[ae+l])
			}
		}
	}}
}

func (c *compiler) toFloat(to types.Type, f func(uint64) float32) func(uint64) uint64 {
	switch {
	case isF32(elemType(to, 0)):
		return func(x uint64) uint64 { return uf32(f(x)) }
	case isHalf(elemType(to, 0)):
		return func(x uint64) uint64 { return uint64(half.F32ToF16(f(x))) }
	}
	fail("conversion to %s", to)
	return nil
}

// copyOp copies x's slots (casts that keep the bits).
func (c *compiler) copyOp(res value.Value, x value.Value) op {
	return c.masked(res, x, 64)
}

// masked copies x's slots keeping their low bits (zero extension and
// truncation).
func (c *compiler) masked(res value.Value, x value.Value, bits int) op {
	n := count(res.Type())
	if count(x.Type()) != n {
		fail("%s: operand of %d elements for a result of %d", res.Ident(), count(x.Type()), n)
	}
	wm := uint64(math.MaxUint64)
	if bits < 64 {
		wm = 1<<bits - 1
	}
	d, a := c.slots[res], c.val(x)
	return op{run: func(w *warp, m uint32) {
		r := w.regs
		for e := 0; e < n; e++ {
			de, ae := d+32*e, a+32*e
			for mm := m; mm != 0; mm &= mm - 1 {
				l := lane(mm)
				r[de+l] = r[ae+l] & wm
			}
		}
	}}
}

// bitcast reinterprets the bits of from as type to: element widths may
// differ between vectors and scalars (i32 to <2 x half> and back).
func (c *compiler) bitcast(res value.Value, from value.Value, to types.Type) op {
	nf, nt := count(from.Type()), count(to)
	if nf == nt {
		return c.copyOp(res, from)
	}
	bf, bt := bitsOf(elemType(from.Type(), 0)), bitsOf(elemType(to, 0))
	if nf*bf != nt*bt || nf*bf > 64 {
		fail("bitcast %s to %s", from.Type(), to)
	}
	d, a := c.slots[res], c.val(from)
	return op{run: func(w *warp, m uint32) {
		r := w.regs
		for mm := m; mm != 0; mm &= mm - 1 {
			l := lane(mm)
			var x uint64
			for e := 0; e < nf; e++ {
				x |= maskBits(r[a+32*e+l], bf) << (bf * e)
			}
			for e := 0; e < nt; e++ {
				r[d+32*e+l] = maskBits(x>>(bt*e), bt)
			}
		}
	}}
}

func (c *compiler) icmp(in *ir.InstICmp) op {
	n := count(in.Type())
	bw := bitsOf(elemType(in.X.Type(), 0))
	var f func(a, b uint64) bool
	switch in.Pred {
	case enum.IPredEQ:
		f = func(a, b uint64) bool { return a == b }
	case enum.IPredNE:
		f = func(a, b uint64) bool { return a != b }
	case enum.IPredSLT:
		f = func(a, b uint64) bool { return sext(a, bw) < sext(b, bw) }
	case enum.IPredSLE:
		f = func(a, b uint64) bool { return sext(a, bw) <= sext(b, bw) }
	case enum.IPredSGT:
		f = func(a, b uint64) bool { return sext(a, bw) > sext(b, bw) }
	case enum.IPredSGE:
		f = func(a, b uint64) bool { return sext(a, bw) >= sext(b, bw) }
	case enum.IPredULT:
		f = func(a, b uint64) bool { return a < b }
	case enum.IPredULE:
		f = func(a, b uint64) bool { return a <= b }
	case enum.IPredUGT:
		f = func(a, b uint64) bool { return a > b }
	case enum.IPredUGE:
		f = func(a, b uint64) bool { return a >= b }
	default:
		fail("icmp %s", in.Pred)
	}
	return c.cmp(in, in.X, in.Y, n, f)
}

func (c *compiler) cmp(res value.Value, x, y value.Value, n int, f func(a, b uint64) bool) op {
	d, a, b := c.slots[res], c.val(x), c.val(y)
	return op{run: func(w *warp, m uint32) {
		r := w.regs
		for e := 0; e < n; e++ {
			de, ae, be := d+32*e, a+32*e, b+32*e
			for mm := m; mm != 0; mm &= mm - 1 {
				l := lane(mm)
				r[de+l] = b2u(f(r[ae+l], r[be+l]))
			}
		}
	}}
}

func (c *compiler) fcmp(in *ir.InstFCmp) op {
	c.needF32(in.X.Type())
	n := count(in.Type())
	un := func(a, b float32) bool { return a != a || b != b }
	var f func(a, b float32) bool
	switch in.Pred {
	case enum.FPredFalse:
		f = func(a, b float32) bool { return false }
	case enum.FPredOEQ:
		f = func(a, b float32) bool { return a == b }
	case enum.FPredOGT:
		f = func(a, b float32) bool { return a > b }
	case enum.FPredOGE:
		f = func(a, b float32) bool { return a >= b }
	case enum.FPredOLT:
		f = func(a, b float32) bool { return a < b }
	case enum.FPredOLE:
		f = func(a, b float32) bool { return a <= b }
	case enum.FPredONE:
		f = func(a, b float32) bool { return a != b && !un(a, b) }
	case enum.FPredORD:
		f = func(a, b float32) bool { return !un(a, b) }
	case enum.FPredUEQ:
		f = func(a, b float32) bool { return a == b || un(a, b) }
	case enum.FPredUGT:
		f = func(a, b float32) bool { return a > b || un(a, b) }
	case enum.FPredUGE:
		f = func(a, b float32) bool { return a >= b || un(a, b) }
	case enum.FPredULT:
		f = func(a, b float32) bool { return a < b || un(a, b) }
	case enum.FPredULE:
		f = func(a, b float32) bool { return a <= b || un(a, b) }
	case enum.FPredUNE:
		f = func(a, b float32) bool { return a != b }
	case enum.FPredUNO:
		f = un
	case enum.FPredTrue:
		f = func(a, b float32) bool { return true }
	default:
		fail("fcmp %s", in.Pred)
	}
	return c.cmp(in, in.X, in.Y, n, func(a, b uint64) bool { return f(f32(a), f32(b)) })
}

func (c *compiler) sel(in *ir.InstSelect) op {
	n := count(in.Type())
	d, t, f, cond := c.slots[in], c.val(in.ValueTrue), c.val(in.ValueFalse), c.val(in.Cond)
	vecCond := count(in.Cond.Type()) > 1
	return op{run: func(w *warp, m uint32) {
		r := w.regs
		for e := 0; e < n; e++ {
			ce := cond
			if vecCond {
				ce += 32 * e
			}
			de, te, fe := d+32*e, t+32*e, f+32*e
			for mm := m; mm != 0; mm &= mm - 1 {
				l := lane(mm)
				if r[ce+l] != 0 {
					r[de+l] = r[te+l]
				} else {
					r[de+l] = r[fe+l]
				}
			}
		}
	}}
}

func (c *compiler) shuffle(in *ir.InstShuffleVector) op {
	mask, ok := in.Mask.(*constant.Vector)
	if !ok {
		if _, z := in.Mask.(*constant.ZeroInitializer); !z {
			fail("shufflevector with a mask %s", in.Mask.Ident())
		}
	}
	n, nx := count(in.Type()), count(in.X.Type())
	idx := make([]int, n)
	if mask != nil {
		for i, e := range mask.Elems {
			if k, ok := e.(*constant.Int); ok {
				idx[i] = int(k.X.Int64())
			} else {
				idx[i] = -1 // undef: any element
			}
		}
	}
	d, x, y := c.slots[in], c.val(in.X), c.val(in.Y)
	return op{run: func(w *warp, m uint32) {
		r := w.regs
		for mm := m; mm != 0; mm &= mm - 1 {
			l := lane(mm)
			for i, k := range idx {
				switch {
				case k < 0:
					r[d+32*i+l] = 0
				case k < nx:
					r[d+32*i+l] = r[x+32*k+l]
				default:
					r[d+32*i+l] = r[y+32*(k-nx)+l]
				}
			}
		}
	}}
}

func (c *compiler) gep(in *ir.InstGetElementPtr) op {
	// The first index steps over whole elements; later ones into arrays
	// and vectors.
	t := in.ElemType
	sizes := []int{sizeOf(t)}
	for range in.Indices[1:] {
		switch at := t.(type) {
		case *types.ArrayType:
			t = at.ElemType
		case *types.VectorType:
			t = at.ElemType
		default:
			fail("getelementptr into %s", t)
		}
		sizes = append(sizes, sizeOf(t))
	}
	d, src := c.slots[in], c.val(in.Src)
	idx := make([]int, len(in.Indices))
	ibits := make([]int, len(in.Indices))
	for i, x := range in.Indices {
		idx[i], ibits[i] = c.val(x), bitsOf(x.Type())
	}
	if len(idx) == 1 {
		i0, b0, s0 := idx[0], ibits[0], int64(sizes[0])
		return op{run: func(w *warp, m uint32) {
			r := w.regs
			for mm := m; mm != 0; mm &= mm - 1 {
				l := lane(mm)
				r[d+l] = uint64(int64(r[src+l]) + sext(r[i0+l], b0)*s0)
			}
		}}
	}
	return op{run: func(w *warp, m uint32) {
		r := w.regs
		for mm := m; mm != 0; mm &= mm - 1 {
			l := lane(mm)
			a := int64(r[src+l])
			for i, x := range idx {
				a += sext(r[x+l], ibits[i]) * int64(sizes[i])
			}
			r[d+l] = uint64(a)
		}
	}}
}

func (c *compiler) load(in *ir.InstLoad) op {
	sp := space(in.Src.Type())
	n := count(in.ElemType)
	ew := sizeOf(elemType(in.ElemType, 0))
	eb := bitsOf(elemType(in.ElemType, 0))
	d, src := c.slots[in], c.val(in.Src)
	return op{run: func(w *warp, m uint32) {
		r := w.regs
		for mm := m; mm != 0; mm &= mm - 1 {
			l := lane(mm)
			b := w.mem(sp, r[src+l], n*ew, l, false)
			for e := 0; e < n; e++ {
				r[d+32*e+l] = maskBits(readLE(b[e*ew:(e+1)*ew]), eb)
			}
		}
	}}
}

func (c *compiler) store(in *ir.InstStore) op {
	sp := space(in.Dst.Type())
	n := count(in.Src.Type())
	ew := sizeOf(elemType(in.Src.Type(), 0))
	dst, src := c.val(in.Dst), c.val(in.Src)
	return op{run: func(w *warp, m uint32) {
		r := w.regs
		for mm := m; mm != 0; mm &= mm - 1 {
			l := lane(mm)
			b := w.mem(sp, r[dst+l], n*ew, l, true)
			for e := 0; e < n; e++ {
				writeLE(b[e*ew:(e+1)*ew], r[src+32*e+l])
			}
		}
	}}
}

func readLE(b []byte) uint64 {
	switch len(b) {
	case 1:
		return uint64(b[0])
	case 2:
		return uint64(binary.LittleEndian.Uint16(b))
	case 4:
		return uint64(binary.LittleEndian.Uint32(b))
	case 8:
		return binary.LittleEndian.Uint64(b)
	}
	var buf [8]byte
	copy(buf[:], b)
	return binary.LittleEndian.Uint64(buf[:])
}

func writeLE(b []byte, x uint64) {
	switch len(b) {
	case 1:
		b[0] = byte(x)
	case 2:
		binary.LittleEndian.PutUint16(b, uint16(x))
	case 4:
		binary.LittleEndian.PutUint32(b, uint32(x))
	case 8:
		binary.LittleEndian.PutUint64(b, x)
	default:
		var buf [8]byte
		binary.LittleEndian.PutUint64(buf[:], x)
		copy(b, buf[:])
	}
}

// localBase tags the generic addresses of a lane's allocas.
const localBase = 1 << 48

func (c *compiler) alloca(in *ir.InstAlloca) op {
	size := sizeOf(in.ElemType)
	d := c.slots[in]
	nel := -1
	var nbits int
	if in.NElems != nil {
		nel, nbits = c.val(in.NElems), bitsOf(in.NElems.Type())
	}
	return op{run: func(w *warp, m uint32) {
		r := w.regs
		for mm := m; mm != 0; mm &= mm - 1 {
			l := lane(mm)
			n := size
			if nel >= 0 {
				n *= int(sext(r[nel+l], nbits))
			}
			if n < 0 || n > 1<<20 {
				fail("alloca of %d bytes", n)
			}
			loc := w.local[l]
			off := (len(loc) + 15) &^ 15
			w.local[l] = append(loc, make([]byte, off+n-len(loc))...)
			r[d+l] = localBase + uint64(off)
		}
	}}
}

// mem is n bytes at addr in address space sp for lane l, checked: the
// alignment of a power-of-two access, global accesses inside a buffer,
// generic ones inside the lane's allocas, shared ones inside SharedBytes
// and clear of copies in flight. A store to shared memory is marked as a
// generic-proxy write.
func (w *warp) mem(sp int, addr uint64, n, l int, write bool) []byte {
	if n > 1 && n&(n-1) == 0 && addr%uint64(n) != 0 {
		fail("misaligned %d-byte access at 0x%x", n, addr)
	}
	switch sp {
	case 1:
		return w.cta.m.globalRun(addr, n)
	case 0:
		loc := w.local[l]
		if addr >= localBase && addr+uint64(n) <= localBase+uint64(len(loc)) {
			return loc[addr-localBase : addr-localBase+uint64(n)]
		}
		fail("generic access of %d bytes at 0x%x outside the thread's allocas", n, addr)
	case 3:
		c := w.cta
		if addr+uint64(n) > uint64(len(c.shared)) {
			fail("shared access at %d+%d beyond SharedBytes=%d", addr, n, len(c.shared))
		}
		c.checkLanded("shared access", addr, n)
		if write {
			w.markShared(l, addr, n)
		}
		return c.shared[addr : addr+uint64(n)]
	}
	fail("access through address space %d", sp)
	return nil
}
