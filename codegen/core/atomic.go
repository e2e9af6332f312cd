package core

import (
	"fmt"
	"strings"

	"github.com/llir/llvm/ir/types"
	"github.com/llir/llvm/ir/value"

	"github.com/fac-compiler/fac/tir"
)

// lowerAtomicAdd lowers atomic_add to one red.global.add.f32 per register,
// or per vector of consecutive registers where the target has vector
// reductions (relaxed, gpu scope; no value comes back; a masked lane's add
// is predicated off, which ptxas turns into a branch around each red, so
// an unmasked atomic_add emits no predicate at all: the backward's dQ adds
// are straight-line code only without a mask), at
// addresses that are one register plus constant offsets when the pointers
// allow (affinePtrs). As for stores, the threads holding copies of an
// element leave the add to one of them: here a copy would add twice.
func (em *Emitter) lowerAtomicAdd(op *tir.Op) {
	lay := em.lay.storeLayout(op)
	ws := em.lay.operandWants(op, lay)
	ptrs := em.Get(op.Args[0], ws[0])
	vals := em.Get(op.Args[1], ws[1])
	var mask []value.Value
	if len(op.Args) == 3 {
		mask = em.Get(op.Args[2], ws[2])
	}
	if e := op.Args[1].Type.Elem; e != tir.F32 {
		Fail("internal error: %s: atomic_add of %s (the verifier admits f32 only)", op.Pos, e)
	}
	if t, ok := em.target.(ScheduleTarget); ok && t.AtomicAdd(em.l, op, ws, ptrs, vals, mask) {
		return // from shared memory in bulk (the target's deferred reductions)
	}
	plin := em.Lin(ws[0], op.Args[0].Type.Shape)
	ptrs = em.affinePtrs(op.Args[0], plin, ptrs)
	cont := em.guardCopies(em.Lin(lay, op.Args[0].Type.Shape), "atomic")
	// red adds vals (1, 2 or 4 consecutive registers) at p, predicated on
	// mask register r only when there is a mask.
	red := func(p value.Value, vals []value.Value, r int) {
		vec, regs := ".f32", "$1"
		if n := len(vals); n > 1 {
			vec, regs = fmt.Sprintf(".v%d.f32", n), "{"+regList(1, n)+"}"
		}
		cons := "l" + strings.Repeat(",f", len(vals))
		args := append([]value.Value{p}, vals...)
		if mask == nil {
			em.asm(types.Void, fmt.Sprintf("red.relaxed.gpu.global.add%s [$0], %s;", vec, regs), cons+",~{memory}", true, args...)
			return
		}
		text := fmt.Sprintf("{\n\t.reg .pred p;\n\tsetp.ne.b32 p, $%d, 0;\n\t@p red.relaxed.gpu.global.add%s [$0], %s;\n\t}", len(vals)+1, vec, regs)
		em.asm(types.Void, text, cons+",r,~{memory}", true, append(args, em.b.NewZExt(mask[r], types.I32))...)
	}
	scalar := func() []value.Value {
		for r, p := range ptrs {
			red(p, vals[r:r+1], r)
		}
		return nil
	}
	// sm_90's vector reductions (red.global.add.v2/v4.f32) move a thread's
	// consecutive registers at consecutive addresses in one instruction:
	// half the LSU instructions for an mma accumulator (pairs of columns)
	// added into a row-major tile. Alignment is checked at run time, as
	// for loads and stores.
	if v, maskCheck := em.memVec(op, ws[0], op.Args[0].Type); v > 1 && vectorReduce(em.target) {
		var uniform []value.Value
		if maskCheck {
			uniform = mask
		}
		check := ptrs
		if em.offsetsAligned(op.Args[0], plin, v) {
			check = ptrs[:1] // the others are the first plus multiples of the vector
		}
		em.AlignedOr(check, uniform, v, tir.F32, func() []value.Value {
			for g := 0; g < len(ptrs); g += v {
				red(ptrs[g], vals[g:g+v], g)
			}
			return nil
		}, scalar)
	} else {
		scalar()
	}
	if cont != nil {
		em.b.NewBr(cont)
		em.b = cont
	}
}

// affinePtrs rewrites ptrs, the registers of pointer tensor p in layout
// lin, as ptrs[0] plus constant offsets when p is affine in its
// coordinates with constant strides (kernel.affine) and the layout's
// register bits never overlap its lane and warp bits in a dimension (so a
// register's coordinates are the thread's first register's plus
// RegOffset): LLVM folds the offsets into the accesses' immediates, and a
// thread keeps one 64-bit address live instead of one per register (the
// backward's 32 dQ adds: 64 registers).
func (em *Emitter) affinePtrs(p *tir.Value, lin *Linear, ptrs []value.Value) []value.Value {
	offs, ok := em.affineOffsets(p, lin)
	if !ok || len(ptrs) < 2 {
		return ptrs
	}
	elem := memType(p.Type.Elem)
	out := make([]value.Value, len(ptrs))
	out[0] = ptrs[0]
	for r := 1; r < len(ptrs); r++ {
		out[r] = em.ptrAdd(elem, ptrs[0], ConstI64(offs[r]))
	}
	return out
}

// affineOffsets gives, per register of pointer tensor p in layout lin, its
// element offset from the thread's first register, when p is affine with
// constant strides and lin's register bits are apart from its lane and
// warp bits (the conditions of affinePtrs).
func (em *Emitter) affineOffsets(p *tir.Value, lin *Linear) ([]int64, bool) {
	strides, ok := em.affine(p)
	if !ok || len(strides) != len(lin.Shape()) || !regBitsApart(lin) {
		return nil, false
	}
	offs := make([]int64, lin.NumRegs())
	for r := range offs {
		for d, c := range lin.RegOffset(r) {
			offs[r] += strides[d] * int64(c)
		}
	}
	return offs, true
}

// offsetsAligned reports that p's registers in layout lin are its first
// register's address plus multiples of v elements (affineOffsets), so
// that only the first needs an alignment check for vectors of v.
func (em *Emitter) offsetsAligned(p *tir.Value, lin *Linear, v int) bool {
	offs, ok := em.affineOffsets(p, lin)
	if !ok {
		return false
	}
	for r := 0; r < len(offs); r += v {
		if offs[r]%int64(v) != 0 {
			return false
		}
	}
	return true
}

// RegBitsApart reports that lin's register bits never overlap its lane
// and warp bits in a dimension, so a register's coordinates are the
// thread's first register's plus RegOffset.
func RegBitsApart(lin *Linear) bool { return regBitsApart(lin) }

func regBitsApart(lin *Linear) bool {
	for d := range lin.Shape() {
		regBits, others := 0, 0
		for _, b := range lin.RegBases() {
			regBits |= b[d]
		}
		for _, bs := range [][][]int{lin.LaneBases(), lin.WarpBases()} {
			for _, b := range bs {
				others |= b[d]
			}
		}
		if regBits&others != 0 {
			return false
		}
	}
	return true
}

// regList is "$first, $first+1, …" for n operands of an inline asm text.
func regList(first, n int) string {
	parts := make([]string, n)
	for i := range parts {
		parts[i] = fmt.Sprintf("$%d", first+i)
	}
	return strings.Join(parts, ", ")
}

// VectorReduceTarget is implemented by targets with vector reductions to
// global memory (sm_90: red.global.add.v2/v4.f32).
type VectorReduceTarget interface {
	VectorReduce() bool
}

func vectorReduce(t Target) bool {
	vt, ok := t.(VectorReduceTarget)
	return ok && vt.VectorReduce()
}
