package core

import (
	"fmt"
	"strings"

	"github.com/llir/llvm/ir"
	"github.com/llir/llvm/ir/constant"
	"github.com/llir/llvm/ir/enum"
	"github.com/llir/llvm/ir/types"
	"github.com/llir/llvm/ir/value"

	"github.com/fac-compiler/fac/tir"
)

// ---- global memory ----

func (em *Emitter) lowerLoad(op *tir.Op, lay Layout, ws []Layout) []value.Value {
	t := op.Result().Type
	e := t.Elem
	if em.loadVia != nil {
		return em.loadVia(ws[0])
	}
	ptrs := em.Get(op.Args[0], ws[0])
	var mask, other []value.Value
	if len(op.Args) == 3 {
		mask, other = em.Get(op.Args[1], ws[1]), em.Get(op.Args[2], ws[2])
	}
	scalar := func() []value.Value {
		out := make([]value.Value, len(ptrs))
		for r, p := range ptrs {
			if mask == nil {
				out[r] = em.fromMem(em.b.NewLoad(memType(e), p), e)
			} else {
				out[r] = em.MaskedLoad(p, mask[r], other[r], e)
			}
		}
		return out
	}
	v, check := em.memVec(op, lay, t)
	if v == 1 {
		return scalar()
	}
	var uniform []value.Value
	if check {
		uniform = mask
	}
	return em.AlignedOr(ptrs, uniform, v, e, func() []value.Value {
		out := make([]value.Value, 0, len(ptrs))
		for g := 0; g < len(ptrs); g += v {
			if mask == nil {
				vt := types.NewVector(uint64(v), memType(e))
				p := em.b.NewBitCast(ptrs[g], PtrTo(vt, 1))
				ld := em.b.NewLoad(vt, p)
				ld.Align = ir.Align(v * e.Bytes())
				for i := 0; i < v; i++ {
					out = append(out, em.b.NewExtractElement(ld, ConstI32(int64(i))))
				}
			} else {
				out = append(out, em.maskedLoadVec(ptrs[g], mask[g], other[g:g+v], e)...)
			}
		}
		return out
	}, scalar)
}

// memVec is how many consecutive registers of a load, store or atomic_add (op, in
// layout lay, tensor type t) can move as one vector access, provided the
// first address of each group is aligned: the registers must step by one
// along the last dim (layout) and the pointers be contiguous there
// (axisInfo), at most 16 bytes. maskCheck reports that the mask is not
// provably constant over a group, so the caller must check that at run
// time too (a tail mask such as offs < n).
func (em *Emitter) memVec(op *tir.Op, lay Layout, t tir.Type) (v int, maskCheck bool) {
	if t.IsScalar() || t.Elem == tir.I1 {
		return 1, false
	}
	x := em.Lin(lay, t.Shape)
	last := t.Rank() - 1
	v = 1
	for i, b := range x.reg {
		if v*2*t.Elem.Bytes() > 16 || !onlyDim(b, last) || b[last] != 1<<i {
			break
		}
		v *= 2
	}
	if v == 1 {
		return 1, false
	}
	v = min(v, em.axis(op.Args[0]).contig[last])
	mi := -1
	switch {
	case op.Kind == tir.OpLoad && len(op.Args) == 3:
		mi = 1
	case (op.Kind == tir.OpStore || op.Kind == tir.OpAtomicAdd) && len(op.Args) == 3:
		mi = 2
	}
	return v, mi >= 0 && em.axis(op.Args[mi]).constancy[last] < v
}

// AlignedOr branches once on whether the first pointer of every group of
// v is aligned to v elements (and, with uniform, every group's mask
// values are equal): then fast runs, else slow; both return the same
// registers, merged by phis (a result of nil: nothing to merge).
func (em *Emitter) AlignedOr(ptrs, uniform []value.Value, v int, e tir.Elem, fast, slow func() []value.Value) []value.Value {
	var bad value.Value
	for g := 0; g < len(ptrs); g += v {
		lo := em.b.NewAnd(em.b.NewPtrToInt(ptrs[g], types.I64), ci64(int64(v*e.Bytes()-1)))
		if bad == nil {
			bad = lo
		} else {
			bad = em.b.NewOr(bad, lo)
		}
	}
	var ok value.Value = em.b.NewICmp(enum.IPredEQ, bad, ci64(0))
	if uniform != nil {
		var diff value.Value
		for g := 0; g < len(uniform); g += v {
			for i := 1; i < v; i++ {
				d := em.b.NewXor(uniform[g], uniform[g+i])
				if diff == nil {
					diff = d
				} else {
					diff = em.b.NewOr(diff, d)
				}
			}
		}
		ok = em.b.NewAnd(ok, em.b.NewXor(diff, constant.NewBool(true)))
	}
	fb, sb, merge := em.newBlock("vec"), em.newBlock("novec"), em.newBlock("vec.end")
	em.b.NewCondBr(ok, fb, sb)
	em.branchDepth++ // code on one path only (see Barrier)
	em.b = fb
	fr := fast()
	fe := em.b
	fe.NewBr(merge)
	em.b = sb
	sr := slow()
	em.branchDepth--
	se := em.b
	se.NewBr(merge)
	em.b = merge
	if fr == nil {
		return nil
	}
	out := make([]value.Value, len(fr))
	for i := range fr {
		out[i] = merge.NewPhi(ir.NewIncoming(fr[i], fe), ir.NewIncoming(sr[i], se))
	}
	return out
}

// PtrTo is a pointer to t in address space space.
func PtrTo(t types.Type, space int) *types.PointerType {
	p := types.NewPointer(t)
	p.AddrSpace = types.AddrSpace(space)
	return p
}

// maskedLoadVec is a predicated vector ld.global of len(others) elements
// sharing one mask.
func (em *Emitter) maskedLoadVec(p, m value.Value, others []value.Value, e tir.Elem) []value.Value {
	sfx, c, rt := ptxBits(e)
	v := len(others)
	var b strings.Builder
	fmt.Fprintf(&b, "{\n\t.reg .pred p;\n\tsetp.ne.b32 p, $%d, 0;\n\t", v+1)
	outs := make([]string, v)
	for i := range outs {
		outs[i] = fmt.Sprintf("$%d", i)
		fmt.Fprintf(&b, "mov.%s $%d, $%d;\n\t", sfx, i, v+2+i)
	}
	fmt.Fprintf(&b, "@p ld.global.v%d.%s {%s}, [$%d];\n\t}", v, sfx, strings.Join(outs, ", "), v)
	cons := strings.Repeat("="+c+",", v) + "l,r" + strings.Repeat(","+c, v)
	fields := make([]types.Type, v)
	args := []value.Value{p, em.b.NewZExt(m, types.I32)}
	for i := range fields {
		fields[i] = rt
		args = append(args, em.toBits(others[i], e))
	}
	r := em.asm(types.NewStruct(fields...), b.String(), cons, false, args...)
	out := make([]value.Value, v)
	for i := range out {
		out[i] = em.fromBits(em.b.NewExtractValue(r, uint64(i)), e)
	}
	return out
}

func (em *Emitter) fromMem(v value.Value, e tir.Elem) value.Value {
	if e == tir.I1 {
		return em.b.NewICmp(enum.IPredNE, v, constant.NewInt(types.I8, 0))
	}
	return v
}

// ptxBits gives the PTX width suffix, inline-asm constraint and the
// integer register type used to move an element through asm.
func ptxBits(e tir.Elem) (suffix, constraint string, rt *types.IntType) {
	switch e {
	case tir.I1:
		return "u8", "h", types.I16
	case tir.F16, tir.BF16:
		return "b16", "h", types.I16
	case tir.I32, tir.F32:
		return "b32", "r", types.I32
	case tir.I64:
		return "b64", "l", types.I64
	}
	Fail("no PTX width for %s", e)
	return "", "", nil
}

// toBits/fromBits move a register to and from the integer type of ptxBits.
// pairWords packs 16-bit registers two to an i32, the first in the low
// half (the element at the lower address).
func (em *Emitter) pairWords(h []value.Value) []value.Value {
	out := make([]value.Value, len(h)/2)
	for i := range out {
		lo := em.b.NewZExt(h[2*i], types.I32)
		hi := em.b.NewShl(em.b.NewZExt(h[2*i+1], types.I32), ConstI32(16))
		out[i] = em.b.NewOr(lo, hi)
	}
	return out
}

func (em *Emitter) toBits(v value.Value, e tir.Elem) value.Value {
	switch e {
	case tir.I1:
		return em.b.NewZExt(v, types.I16)
	case tir.F32:
		return em.b.NewBitCast(v, types.I32)
	}
	return v
}

func (em *Emitter) fromBits(v value.Value, e tir.Elem) value.Value {
	switch e {
	case tir.I1:
		return em.b.NewICmp(enum.IPredNE, v, constant.NewInt(types.I16, 0))
	case tir.F32:
		return em.b.NewBitCast(v, types.Float)
	}
	return v
}

// MaskedLoad is a predicated ld.global: a masked-off lane never touches
// memory and yields other.
func (em *Emitter) MaskedLoad(p, m, other value.Value, e tir.Elem) value.Value {
	sfx, c, rt := ptxBits(e)
	mov := sfx
	if e == tir.I1 {
		mov = "b16"
	}
	text := fmt.Sprintf("{\n\t.reg .pred p;\n\tsetp.ne.b32 p, $2, 0;\n\tmov.%s $0, $3;\n\t@p ld.global.%s $0, [$1];\n\t}", mov, sfx)
	v := em.asm(rt, text, fmt.Sprintf("=%s,l,r,%s", c, c), false, p, em.b.NewZExt(m, types.I32), em.toBits(other, e))
	return em.fromBits(v, e)
}

// guardCopies makes the threads holding copies of x's elements (zero lane
// or warp bases) skip a write, leaving it to the one whose copy bits are
// zero. It returns the block to branch to after the write, or nil when
// every thread holds distinct elements.
func (em *Emitter) guardCopies(x *Linear, name string) *ir.Block {
	cond := em.copyOwner(x)
	if cond == nil {
		return nil
	}
	then := em.newBlock(name)
	cont := em.newBlock(name + ".end")
	em.b.NewCondBr(cond, then, cont)
	em.b = then
	return cont
}

// CopyOwner is the i1 that holds in the thread that owns its elements
// among the copies layout x replicates over lanes or warps, or nil when x
// has no copies.
func (em *Emitter) CopyOwner(x *Linear) value.Value { return em.copyOwner(x) }

// copyOwner is the i1 that holds in the thread that owns its elements
// among the copies layout x replicates over lanes or warps, or nil when x
// has no copies.
func (em *Emitter) copyOwner(x *Linear) value.Value {
	zl, zw := x.zeroLaneMask(), x.zeroWarpMask()
	if zl == 0 && zw == 0 {
		return nil
	}
	var cond value.Value
	if zl != 0 {
		cond = em.b.NewICmp(enum.IPredEQ, em.b.NewAnd(em.lane, ConstI32(int64(zl))), ConstI32(0))
	}
	if zw != 0 {
		c := em.b.NewICmp(enum.IPredEQ, em.b.NewAnd(em.warp, ConstI32(int64(zw))), ConstI32(0))
		if cond == nil {
			cond = c
		} else {
			cond = em.b.NewAnd(cond, c)
		}
	}
	return cond
}

func (em *Emitter) lowerStore(op *tir.Op) {
	lay := em.lay.storeLayout(op)
	ws := em.lay.operandWants(op, lay)
	pt := op.Args[0].Type
	e := pt.Elem
	if em.tensorStore(op) {
		// From shared memory in bulk (the target's), when it can take
		// the value's layout; counted with the stores through shared
		// memory, which a kernel short of it goes without (codegen.Lower).
		vals := em.Get(op.Args[1], ws[1])
		if em.target.(TensorStoreTarget).LowerTensorStore(em.l, op, vals, lay) {
			em.coalesced++
			return
		}
	}
	ptrs := em.Get(op.Args[0], ws[0])
	vals := em.Get(op.Args[1], ws[1])
	var mask []value.Value
	if len(op.Args) == 3 {
		mask = em.Get(op.Args[2], ws[2])
	}
	cont := em.guardCopies(em.Lin(lay, pt.Shape), "store")
	scalar := func() []value.Value {
		for r, p := range ptrs {
			if mask == nil {
				v := vals[r]
				if e == tir.I1 {
					v = em.b.NewZExt(v, types.I8)
				}
				em.b.NewStore(v, p)
				continue
			}
			sfx, c, _ := ptxBits(e)
			text := fmt.Sprintf("{\n\t.reg .pred p;\n\tsetp.ne.b32 p, $2, 0;\n\t@p st.global.%s [$0], $1;\n\t}", sfx)
			em.asm(types.Void, text, fmt.Sprintf("l,%s,r,~{memory}", c), true, p, em.toBits(vals[r], e), em.b.NewZExt(mask[r], types.I32))
		}
		return nil
	}
	if v, check := em.memVec(op, lay, pt); v == 1 {
		scalar()
	} else {
		var uniform []value.Value
		if check {
			uniform = mask
		}
		em.AlignedOr(ptrs, uniform, v, e, func() []value.Value {
			for g := 0; g < len(ptrs); g += v {
				if mask == nil {
					vt := types.NewVector(uint64(v), memType(e))
					var vec value.Value = constant.NewUndef(vt)
					for i := 0; i < v; i++ {
						vec = em.b.NewInsertElement(vec, vals[g+i], ConstI32(int64(i)))
					}
					st := em.b.NewStore(vec, em.b.NewBitCast(ptrs[g], PtrTo(vt, 1)))
					st.Align = ir.Align(v * e.Bytes())
					continue
				}
				sfx, c, _ := ptxBits(e)
				bits := make([]value.Value, v)
				for i := range bits {
					bits[i] = em.toBits(vals[g+i], e)
				}
				if v == 8 && e.Bytes() == 2 {
					// No .v8.b16: the pairs go as four 32-bit words.
					bits = em.pairWords(bits)
					sfx, c = "b32", "r"
				}
				ins := make([]string, len(bits))
				args := []value.Value{ptrs[g], em.b.NewZExt(mask[g], types.I32)}
				for i := range ins {
					ins[i] = fmt.Sprintf("$%d", i+2)
					args = append(args, bits[i])
				}
				text := fmt.Sprintf("{\n\t.reg .pred p;\n\tsetp.ne.b32 p, $1, 0;\n\t@p st.global.v%d.%s [$0], {%s};\n\t}", len(ins), sfx, strings.Join(ins, ", "))
				em.asm(types.Void, text, "l,r"+strings.Repeat(","+c, len(ins))+",~{memory}", true, args...)
			}
			return nil
		}, scalar)
	}
	if cont != nil {
		em.b.NewBr(cont)
		em.b = cont
	}
}

// lowerPrefetch asks L2 for the lines under a prefetch's pointers: one
// prefetch.global.L2 a run of registers contiguous along the last dim (a
// warp's 32 coalesce into lines), where the mask holds for the run's first;
// threads holding copies skip it. A hint: a run's first element masked off
// skips the run.
func (em *Emitter) lowerPrefetch(op *tir.Op) {
	lay := em.lay.storeLayout(op)
	ws := em.lay.operandWants(op, lay)
	pt := op.Args[0].Type
	ptrs := em.Get(op.Args[0], ws[0])
	var mask []value.Value
	if len(op.Args) == 2 {
		mask = em.Get(op.Args[1], ws[1])
	}
	var cont *ir.Block
	if !pt.IsScalar() {
		cont = em.guardCopies(em.Lin(lay, pt.Shape), "prefetch")
	}
	v, _ := em.memVec(op, lay, pt)
	for g := 0; g < len(ptrs); g += v {
		if mask == nil {
			em.asm(types.Void, "prefetch.global.L2 [$0];", "l", true, ptrs[g])
			continue
		}
		em.asm(types.Void, "{\n\t.reg .pred p;\n\tsetp.ne.b32 p, $1, 0;\n\t@p prefetch.global.L2 [$0];\n\t}", "l,r", true,
			ptrs[g], em.b.NewZExt(mask[g], types.I32))
	}
	if cont != nil {
		em.b.NewBr(cont)
		em.b = cont
	}
}

// ---- layout changes ----

func rowMajorStrides(shape []int) []int {
	st := make([]int, len(shape))
	n := 1
	for d := len(shape) - 1; d >= 0; d-- {
		st[d] = n
		n *= shape[d]
	}
	return st
}

// remap re-indexes registers when lout's element at every (register, lane,
// warp) is, through the coordinate map f (out coordinate -> in coordinate),
// an element the same thread holds in lin: no data moves.
func remap(src []value.Value, lin, lout *Linear, f func([]int) []int) ([]value.Value, bool) {
	for i := range lout.lane {
		if !EqualVec(f(lout.lane[i]), lin.lane[i]) {
			return nil, false
		}
	}
	if len(lout.warp) != len(lin.warp) {
		return nil, false
	}
	for i := range lout.warp {
		if !EqualVec(f(lout.warp[i]), lin.warp[i]) {
			return nil, false
		}
	}
	idx := lin.regIndex()
	out := make([]value.Value, lout.NumRegs())
	for r := range out {
		j, ok := idx[fmt.Sprint(f(lout.RegOffset(r)))]
		if !ok {
			return nil, false
		}
		out[r] = src[j]
	}
	return out, true
}

// Identity is the coordinate map of a conversion that keeps coordinates.
func Identity(c []int) []int { return c }

// Remappable reports whether remap would succeed.
func Remappable(lin, lout *Linear, f func([]int) []int) bool {
	_, ok := remap(make([]value.Value, lin.NumRegs()), lin, lout, f)
	return ok
}

// convert changes a value's layout: by register re-indexing when the two
// layouts put the same elements in the same threads, else through shared
// memory.
func (em *Emitter) convert(src []value.Value, from, to Layout, t tir.Type) []value.Value {
	lin, lout := em.Lin(from, t.Shape), em.Lin(to, t.Shape)
	if out, ok := remap(src, lin, lout, Identity); ok {
		return out
	}
	if out, ok := em.target.ConvertOperand(em.l, src, lin, to, lout, t); ok {
		return out
	}
	st := rowMajorStrides(t.Shape)
	if _, ok := to.(StoreVec); ok && len(st) == 2 {
		// Into a store's 16-byte vectors (coalesceStore): rows of 128
		// bytes or more padded by 16, so that the source fragments' writes,
		// a few elements of each of 8 rows, fall in different banks.
		em.coalesced++
		if sz := typeBytes(em.sharedRepr(t)); t.Shape[1]*sz >= 128 {
			st[0] += 16 / sz
		}
		return em.exchange(src, lin, st, lout, st, t)
	}
	em.conversions++
	return em.exchange(src, lin, st, lout, st, t)
}

// shapeOp lowers broadcast, reshape and trans from layout inLay to outLay.
func (em *Emitter) shapeOp(op *tir.Op, inLay, outLay Layout) []value.Value {
	x := op.Args[0]
	in, out := x.Type.Shape, op.Result().Type.Shape
	src := em.Get(x, inLay)
	lin, lout := em.Lin(inLay, in), em.Lin(outLay, out)
	inSt := rowMajorStrides(in)
	var f func([]int) []int
	outSt := rowMajorStrides(out)
	switch op.Kind {
	case tir.OpBroadcast:
		if len(in) != len(out) {
			Fail("%s: broadcast from %v to %v changes rank", op.Pos, in, out)
		}
		outSt = make([]int, len(out))
		for d := range out {
			if in[d] == out[d] {
				outSt[d] = inSt[d]
			}
		}
		f = func(c []int) []int {
			o := make([]int, len(c))
			for d := range c {
				if in[d] == out[d] {
					o[d] = c[d]
				}
			}
			return o
		}
	case tir.OpReshape:
		if d, ok := expandDim(in, out); ok {
			f = func(c []int) []int { return removeDim(c, d) }
		} else if d, ok := expandDim(out, in); ok {
			f = func(c []int) []int { return insertDim(c, d, 0) }
		}
	case tir.OpTrans:
		if len(in) != 2 {
			Fail("%s: trans of rank %d", op.Pos, len(in))
		}
		outSt = []int{inSt[1], inSt[0]}
		f = func(c []int) []int { return []int{c[1], c[0]} }
	}
	if f != nil {
		if regs, ok := remap(src, lin, lout, f); ok {
			return regs
		}
	}
	em.conversions++
	return em.exchange(src, lin, inSt, lout, outSt, x.Type)
}

// sharedRepr is how an element is kept in shared memory.
func (em *Emitter) sharedRepr(t tir.Type) types.Type {
	if t.Ptr {
		return types.I64
	}
	return memType(t.Elem)
}

func (em *Emitter) toShared(v value.Value, t tir.Type) value.Value {
	switch {
	case t.Ptr:
		return em.b.NewPtrToInt(v, types.I64)
	case t.Elem == tir.I1:
		return em.b.NewZExt(v, types.I8)
	}
	return v
}

func (em *Emitter) fromShared(v value.Value, t tir.Type) value.Value {
	switch {
	case t.Ptr:
		return em.b.NewIntToPtr(v, ptrType(t.Elem))
	case t.Elem == tir.I1:
		return em.b.NewICmp(enum.IPredNE, v, constant.NewInt(types.I8, 0))
	}
	return v
}

// AddOff is base + off (i32), folding off == 0.
func (em *Emitter) AddOff(base value.Value, off int64) value.Value {
	if off == 0 {
		return base
	}
	return em.b.NewAdd(base, ConstI32(off))
}

// exchange moves a tensor between layouts through shared memory: every
// thread writes its registers of lin at address sum(coord*inSt), a barrier,
// then every thread reads its registers of lout at sum(coord*outSt)
// (outSt encodes broadcast, transposition and reshape). A barrier before
// the writes protects readers of the previous use of the scratch area.
//
// Accesses are vectorized (up to 16 bytes) where a thread's consecutive
// registers are consecutive and aligned in shared memory; there is no
// swizzling yet, so some layout pairs have bank conflicts.
func (em *Emitter) exchange(src []value.Value, lin *Linear, inSt []int, lout *Linear, outSt []int, t tir.Type) []value.Value {
	n := 1
	for d, s := range lin.shape {
		n += (s - 1) * inSt[d]
	}
	em.UseShared(n * typeBytes(em.sharedRepr(t)))
	em.SharedWrite(src, lin, inSt, t, 0)
	return em.sharedRead(lout, outSt, t)
}

// vecWidth is how many consecutive registers of x, starting at any
// multiple of the width, sit at consecutive, width-aligned element
// addresses under strides st (at most maxVec).
func vecWidth(x *Linear, st []int, maxVec int) int {
	v := 1
	for i, b := range x.reg {
		if v >= maxVec || int(DotInts(b, st)) != 1<<i {
			break
		}
		v *= 2
	}
	if v == 1 {
		return 1
	}
	// Alignment: every other basis must move the address by a multiple of v.
	for _, bs := range [][][]int{x.reg[log2(v):], x.lane, x.warp} {
		for _, b := range bs {
			if int(DotInts(b, st))%v != 0 {
				return 1
			}
		}
	}
	return v
}

// SharedWrite stores x's registers at element address sum(coord*st) of
// the scratch area (from byte byteOff), between two barriers (before:
// earlier readers are done; after: the data is visible).
func (em *Emitter) SharedWrite(src []value.Value, x *Linear, st []int, t tir.Type, byteOff int) {
	em.Barrier()
	em.SharedStore(src, x, st, t, byteOff)
	em.Barrier()
}

// SharedStore is SharedWrite without the barriers.
func (em *Emitter) SharedStore(src []value.Value, x *Linear, st []int, t tir.Type, byteOff int) {
	mt := em.sharedRepr(t)
	sz := typeBytes(mt)
	v := vecWidth(x, st, max(1, 16/sz))
	base := em.FlatBase(x, st)
	for r := 0; r < len(src); r += v {
		idx := em.AddOff(base, DotInts(x.RegOffset(r), st))
		if v == 1 {
			em.b.NewStore(em.toShared(src[r], t), em.sharedAt(mt, byteOff, idx))
			continue
		}
		vt := types.NewVector(uint64(v), mt)
		var vec value.Value = constant.NewUndef(vt)
		for i := 0; i < v; i++ {
			vec = em.b.NewInsertElement(vec, em.toShared(src[r+i], t), ConstI32(int64(i)))
		}
		p := em.b.NewBitCast(em.sharedAt(mt, byteOff, idx), SharedPtr(vt))
		em.b.NewStore(vec, p).Align = ir.Align(v * sz)
	}
}

// sharedRead loads x's registers from element address sum(coord*st).
func (em *Emitter) sharedRead(x *Linear, st []int, t tir.Type) []value.Value {
	mt := em.sharedRepr(t)
	sz := typeBytes(mt)
	v := vecWidth(x, st, max(1, 16/sz))
	base := em.FlatBase(x, st)
	out := make([]value.Value, x.NumRegs())
	for r := 0; r < len(out); r += v {
		idx := em.AddOff(base, DotInts(x.RegOffset(r), st))
		if v == 1 {
			out[r] = em.fromShared(em.b.NewLoad(mt, em.sharedAt(mt, 0, idx)), t)
			continue
		}
		vt := types.NewVector(uint64(v), mt)
		p := em.b.NewBitCast(em.sharedAt(mt, 0, idx), SharedPtr(vt))
		ld := em.b.NewLoad(vt, p)
		ld.Align = ir.Align(v * sz)
		for i := 0; i < v; i++ {
			out[r+i] = em.fromShared(em.b.NewExtractElement(ld, ConstI32(int64(i))), t)
		}
	}
	return out
}
