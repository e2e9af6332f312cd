package core

import (
	"fmt"
	"math"
	"math/bits"

	"github.com/llir/llvm/ir"
	"github.com/llir/llvm/ir/constant"
	"github.com/llir/llvm/ir/enum"
	"github.com/llir/llvm/ir/types"
	"github.com/llir/llvm/ir/value"

	"github.com/fac-compiler/fac/internal/half"
	"github.com/fac-compiler/fac/tir"
)

// Register and memory representation of elements:
//
//	tile IR   register   global/shared memory
//	i1        i1         i8 (0/1)
//	i32, i64  i32, i64   same
//	f32       float      float
//	f16, bf16 i16 bits   i16 bits (arithmetic converts to float and rounds back)
//	ptr<T>    T' addrspace(1)*, T' the memory type of T
func regType(t tir.Type) types.Type {
	if t.Ptr {
		return ptrType(t.Elem)
	}
	switch t.Elem {
	case tir.I1:
		return types.I1
	case tir.I32:
		return types.I32
	case tir.I64:
		return types.I64
	case tir.F16, tir.BF16:
		return types.I16
	case tir.F32:
		return types.Float
	}
	Fail("no register type for %s", t)
	return nil
}

// memType is the in-memory type of an element.
func memType(e tir.Elem) types.Type {
	if e == tir.I1 {
		return types.I8
	}
	return regType(tir.Scalar(e))
}

func ptrType(e tir.Elem) *types.PointerType {
	p := types.NewPointer(memType(e))
	p.AddrSpace = 1
	return p
}

// SharedPtr is a pointer to t in shared memory (address space 3).
func SharedPtr(t types.Type) *types.PointerType {
	p := types.NewPointer(t)
	p.AddrSpace = 3
	return p
}

// cf32 is a float constant, printed exactly (hex) so inf and nan work.
func cf32(x float64) *constant.Float {
	f := float64(float32(x))
	c, err := constant.NewFloatFromString(types.Float, fmt.Sprintf("0x%016X", math.Float64bits(f)))
	if err != nil {
		panic(err)
	}
	return c
}

// constant gives the register constant of type t's element for an
// attribute value (int64, float64 or bool).
func (em *Emitter) constant(t tir.Type, v any) value.Value {
	var f float64
	var i int64
	switch v := v.(type) {
	case int64:
		f, i = float64(v), v
	case float64:
		f, i = v, int64(v)
	case bool:
		if v {
			f, i = 1, 1
		}
	default:
		Fail("const: bad value %v", v)
	}
	if t.Ptr {
		Fail("const of pointer type %s", t)
	}
	switch t.Elem {
	case tir.I1:
		return constant.NewBool(i != 0 || f != 0)
	case tir.I32:
		return ConstI32(int64(int32(i)))
	case tir.I64:
		return ci64(i)
	case tir.F32:
		return cf32(f)
	case tir.BF16:
		r := half.RoundBF16(f)
		return constant.NewInt(types.I16, int64(int16(math.Float32bits(float32(r))>>16)))
	case tir.F16:
		r := half.RoundF16(f)
		return constant.NewInt(types.I16, int64(int16(half.F32ToF16(float32(r)))))
	}
	Fail("const of type %s", t)
	return nil
}

// Decl returns the declaration of an external function (an intrinsic).
func (em *Emitter) Decl(name string, ret types.Type, params ...types.Type) *ir.Func {
	if f, ok := em.decls[name]; ok {
		return f
	}
	ps := make([]*ir.Param, len(params))
	for i, t := range params {
		ps[i] = ir.NewParam("", t)
	}
	f := em.mod.NewFunc(name, ret, ps...)
	em.decls[name] = f
	return f
}

// Call calls intrinsic name (declared from the argument types) in the
// current block.
func (em *Emitter) Call(name string, ret types.Type, args ...value.Value) value.Value {
	pts := make([]types.Type, len(args))
	for i, a := range args {
		pts[i] = a.Type()
	}
	return em.b.NewCall(em.Decl(name, ret, pts...), args...)
}

// asm emits an inline-asm call. sideEffect marks asm that writes memory
// or must not move (stores); pure=true marks it readnone (arithmetic).
func (em *Emitter) asm(ret types.Type, text, constraints string, sideEffect bool, args ...value.Value) value.Value {
	c := newAsm(ret, text, constraints, sideEffect, args...)
	em.b.Insts = append(em.b.Insts, c)
	return c
}

// pure emits an inline-asm call that computes its result from its operands
// alone (readnone), so LLVM drops it when the result is unused and may
// hoist or merge it.
func (em *Emitter) pure(ret types.Type, text, constraints string, args ...value.Value) value.Value {
	c := newPureAsm(ret, text, constraints, args...)
	em.b.Insts = append(em.b.Insts, c)
	return c
}

func newPureAsm(ret types.Type, text, constraints string, args ...value.Value) *ir.InstCall {
	c := newAsm(ret, text, constraints, false, args...)
	c.FuncAttrs = append(c.FuncAttrs, enum.FuncAttrReadNone)
	return c
}

// newAsm returns an inline-asm call, not yet in a block.
func newAsm(ret types.Type, text, constraints string, sideEffect bool, args ...value.Value) *ir.InstCall {
	pts := make([]types.Type, len(args))
	for i, a := range args {
		pts[i] = a.Type()
	}
	ia := ir.NewInlineAsm(types.NewPointer(types.NewFunc(ret, pts...)), text, constraints)
	ia.SideEffect = sideEffect
	c := ir.NewCall(ia, args...)
	if !sideEffect {
		c.FuncAttrs = append(c.FuncAttrs, enum.FuncAttrNoUnwind)
	}
	return c
}

// Asm emits an inline-asm call in the current block (see asm). Targets use
// it for instructions LLVM has no intrinsic for in every supported llc
// (wgmma, fence.proxy.async).
func (em *Emitter) Asm(ret types.Type, text, constraints string, sideEffect bool, args ...value.Value) value.Value {
	return em.asm(ret, text, constraints, sideEffect, args...)
}

// Const is the register constant of type t's element for an attribute
// value (int64, float64 or bool).
func (em *Emitter) Const(t tir.Type, v any) value.Value { return em.constant(t, v) }

// AtEntry runs emit with the entry block as the current block: code that
// every thread runs once, before anything else (the block has no
// terminator until the kernel is lowered).
func (em *Emitter) AtEntry(emit func()) {
	b := em.b
	em.b = em.entry
	emit()
	em.b = b
}

// Barrier is bar.sync 0 for the whole CTA (or the program's own barrier,
// ProgramTarget.Barrier: a producer's consumers), after a wait for every
// pending asynchronous dot (waits.go) and for the reads of bulk copies
// issued since the last one. A ScheduleTarget then runs what waits for
// the barrier (AfterBarrier: a pipelined loop's prefetch, which may
// overwrite what every thread is now done reading).
func (em *Emitter) Barrier() {
	em.awaitForBarrier()
	if em.bulkPending {
		// The bulk reductions must have read their rows before anyone
		// writes shared memory past this barrier (a no-op in threads
		// that issued none).
		em.asm(types.Void, "cp.async.bulk.wait_group.read 0;", "~{memory}", true)
		em.bulkPending = false
	}
	if pt, ok := em.target.(ProgramTarget); !ok || !pt.Barrier(em.l) {
		em.b.NewCall(em.Decl("llvm.nvvm.barrier0", types.Void))
	}
	em.smemDirty = false
	em.barriers++
	if t, ok := em.target.(ScheduleTarget); ok {
		t.AfterBarrier(em.l)
	}
}

// toF32 widens a float register (f32, or f16/bf16 bits) to float.
func (em *Emitter) toF32(v value.Value, e tir.Elem) value.Value {
	switch e {
	case tir.F32:
		return v
	case tir.BF16:
		w := em.b.NewShl(em.b.NewZExt(v, types.I32), ConstI32(16))
		return em.b.NewBitCast(w, types.Float)
	case tir.F16:
		return em.b.NewFPExt(em.b.NewBitCast(v, types.Half), types.Float)
	}
	Fail("toF32 of %s", e)
	return nil
}

// fromF32 rounds a float to e (to nearest even) and returns its register.
func (em *Emitter) fromF32(v value.Value, e tir.Elem) value.Value {
	switch e {
	case tir.F32:
		return v
	case tir.F16:
		return em.b.NewBitCast(em.b.NewFPTrunc(v, types.Half), types.I16)
	case tir.BF16:
		return em.pure(types.I16, "cvt.rn.bf16.f32 $0, $1;", "=h,f", v)
	}
	Fail("fromF32 to %s", e)
	return nil
}

// ---- run-time thread coordinates ----

// baseCoords returns, per dimension, the i32 coordinate that this thread's
// register 0 holds in layout x (lane and warp contributions); emitted once
// in the entry block.
func (em *Emitter) baseCoords(x *Linear) []value.Value {
	key := x.key()
	if v, ok := em.bases[key]; ok {
		return v
	}
	e := em.entry
	out := make([]value.Value, x.rank())
	for d := range out {
		var acc value.Value
		add := func(term value.Value) {
			if acc == nil {
				acc = term
			} else {
				acc = e.NewOr(acc, term)
			}
		}
		for _, src := range []struct {
			bases [][]int
			id    value.Value
		}{{x.lane, em.lane}, {x.warp, em.warp}} {
			// Merge runs of id bits i..i+n mapping to coordinate bits k..k+n.
			for i := 0; i < len(src.bases); {
				c := src.bases[i][d]
				if c == 0 || !onlyDim(src.bases[i], d) {
					i++
					continue
				}
				k := log2(c)
				n := 1
				for i+n < len(src.bases) && src.bases[i+n][d] == 1<<(k+n) && onlyDim(src.bases[i+n], d) {
					n++
				}
				var t value.Value = src.id
				if i > 0 {
					t = e.NewLShr(t, ConstI32(int64(i)))
				}
				t = e.NewAnd(t, ConstI32(int64(1<<n-1)))
				if k > 0 {
					t = e.NewShl(t, ConstI32(int64(k)))
				}
				add(t)
				i += n
			}
		}
		if acc == nil {
			acc = ConstI32(0)
		}
		out[d] = acc
	}
	em.bases[key] = out
	return out
}

// BaseCoords is, per dimension, the i32 coordinate this thread's register
// 0 holds in layout x (entry block); register r holds BaseCoords +
// x.RegOffset(r).
func (em *Emitter) BaseCoords(x *Linear) []value.Value { return em.baseCoords(x) }

func onlyDim(b []int, d int) bool {
	for i, x := range b {
		if i != d && x != 0 {
			return false
		}
	}
	return true
}

// FlatBase is sum_d base_d * strides[d] (entry block).
func (em *Emitter) FlatBase(x *Linear, strides []int) value.Value {
	key := x.key() + fmt.Sprint(strides)
	if v, ok := em.flats[key]; ok {
		return v
	}
	bs := em.baseCoords(x)
	var acc value.Value = ConstI32(0)
	for d, b := range bs {
		if strides[d] == 0 {
			continue
		}
		var t value.Value = b
		if strides[d] != 1 {
			t = em.entry.NewMul(b, ConstI32(int64(strides[d])))
		}
		if c, ok := acc.(*constant.Int); ok && c.X.Sign() == 0 {
			acc = t
		} else {
			acc = em.entry.NewAdd(acc, t)
		}
	}
	em.flats[key] = acc
	return acc
}

// DotInts is the dot product of two coordinate vectors.
func DotInts(a, b []int) int64 {
	s := 0
	for i := range a {
		s += a[i] * b[i]
	}
	return int64(s)
}

// sharedBase is @smem as a pointer to t (entry block).
func (em *Emitter) sharedBase(t types.Type) value.Value {
	if em.smem == nil {
		em.smem = em.mod.NewGlobal("smem", types.NewArray(0, types.I8))
		em.smem.Linkage = enum.LinkageExternal
		em.smem.AddrSpace = 3
		em.smem.Align = 1024
		em.smem.Typ = SharedPtr(em.smem.ContentType)
	}
	key := t.String()
	if v, ok := em.smemPtr[key]; ok {
		return v
	}
	v := em.entry.NewBitCast(em.smem, SharedPtr(t))
	em.smemPtr[key] = v
	return v
}

// Scratch is where the scratch area of conversions, reductions and dot
// staging starts: after the staged (cp.async) tiles while any is in flight,
// else at 0, overlapping them (every scratch use and every staged load
// begins with a barrier, so the two never meet).
//
// Where the target says the tiles are never free (SharedTarget.
// ScratchPinned: a producer that runs ahead into the next iteration of a
// loop around the pipelined one, consumer groups), the scratch area always
// follows them.
func (em *Emitter) Scratch() int {
	if em.inFlight > 0 {
		return em.plan.scratchBase
	}
	if t, ok := em.target.(SharedTarget); ok && t.ScratchPinned(em.l) {
		return em.plan.scratchBase
	}
	return 0
}

// SharedClean reports that no thread has read shared memory through the
// generic proxy since the last CTA barrier on any path to here (writes of
// staged copies aside), so the scratch area may be written without one.
// Reads by asynchronous dots (wgmma descriptors) are the target's to track
// (Barriers).
func (em *Emitter) SharedClean() bool { return !em.smemDirty }

// Barriers counts the CTA barriers emitted so far: a target that records
// the count at an asynchronous read of shared memory knows whether a
// barrier has followed it.
func (em *Emitter) Barriers() int { return em.barriers }

// SetSharedDirty records whether shared memory may have been accessed
// since the last barrier (SharedClean is its negation).
func (em *Emitter) SetSharedDirty(dirty bool) { em.smemDirty = dirty }

// PinScratch records that a staging area that lives across a loop's
// iterations starts at from in the scratch area (0: none): later scratch
// uses must stay below it (UseShared fails otherwise).
func (em *Emitter) PinScratch(from int) { em.stagingFrom = from }

// UseShared records that the scratch area needs bytes.
func (em *Emitter) UseShared(bytes int) {
	if em.stagingFrom > 0 && bytes > em.stagingFrom {
		Fail("internal error: a scratch use of %d bytes after the bulk reduction's staging at %d in its loop", bytes, em.stagingFrom)
	}
	if em.Scratch()+bytes > em.smemBytes {
		em.smemBytes = em.Scratch() + bytes
	}
}

// sharedAt is the address of element idx (i32) of a t array at byte
// offset byteOff of the scratch area.
func (em *Emitter) sharedAt(t types.Type, byteOff int, idx value.Value) value.Value {
	return em.SharedAbs(t, em.Scratch()+byteOff, idx)
}

// SharedAbs is sharedAt from the start of shared memory, for a generic
// access (it counts as one: SharedClean).
func (em *Emitter) SharedAbs(t types.Type, byteOff int, idx value.Value) value.Value {
	em.smemDirty = true
	return em.SharedAddress(t, byteOff, idx)
}

// SharedAddress is SharedAbs for an address no generic access uses (a
// wgmma descriptor's base: the target tracks those reads).
func (em *Emitter) SharedAddress(t types.Type, byteOff int, idx value.Value) value.Value {
	base := em.sharedBase(t)
	sz := typeBytes(t)
	if byteOff != 0 {
		if byteOff%sz != 0 {
			Fail("internal error: misaligned shared offset")
		}
		idx = em.b.NewAdd(idx, ConstI32(int64(byteOff/sz)))
	}
	if t, ok := em.target.(SharedTarget); ok {
		if shift := t.SharedShift(em.l, byteOff); shift != nil {
			// A consumer group's own copy; the shift is a multiple of
			// 1024, so of sz.
			idx = em.b.NewAdd(idx, em.b.NewLShr(shift, ConstI32(int64(bits.TrailingZeros(uint(sz))))))
		}
	}
	// A getelementptr, not integer arithmetic: llc then addresses a
	// thread's registers as one base plus immediates, and its straight-line
	// strength reduction, which spent most of a D = 192 backward's llc time
	// on the integer form, has far less to do (1.1 → 0.48 s).
	return em.b.NewGetElementPtr(t, base, idx)
}

// ptrAdd is the address of element idx (i32, sign-extended as a GEP's, or
// i64) of a t array at base, computed as integers (ptrtoint, mul, add,
// inttoptr) rather than as a GEP: llc's straight-line strength reduction
// spent 0.84 of 0.98 s on the GEP chains of the unrolled sm_90a flash_fwd,
// and 0.28 s on the same addresses as integers, while NVPTX selects the
// same loads, stores and address arithmetic (PTX 1% shorter).
func (em *Emitter) ptrAdd(t types.Type, base, idx value.Value) value.Value {
	b := em.b
	sz := int64(typeBytes(t))
	if c, ok := idx.(*constant.Int); ok {
		// A constant offset stays one constant: llc's strength reduction
		// otherwise takes each sext and mul of it as a candidate.
		if c.X.Int64()*sz == 0 {
			return base
		}
		idx = ci64(c.X.Int64() * sz)
	} else {
		if it, ok := idx.Type().(*types.IntType); ok && it.BitSize < 64 {
			idx = b.NewSExt(idx, types.I64)
		}
		if sz != 1 {
			idx = b.NewMul(idx, ci64(sz))
		}
	}
	return b.NewIntToPtr(b.NewAdd(b.NewPtrToInt(base, types.I64), idx), base.Type())
}

// ConstI16 is an i16 constant (the register of a 16-bit float).
func ConstI16(x int64) value.Value { return constant.NewInt(types.I16, x) }

func typeBytes(t types.Type) int {
	switch t := t.(type) {
	case *types.IntType:
		return int(t.BitSize+7) / 8
	case *types.FloatType:
		switch t.Kind {
		case types.FloatKindHalf:
			return 2
		case types.FloatKindFloat:
			return 4
		case types.FloatKindDouble:
			return 8
		}
	case *types.PointerType:
		return 8
	}
	Fail("internal error: size of %s", t)
	return 0
}

// SetSharedBytes sets the dynamic shared memory the kernel needs (a
// target's program that lays out more of it at the end: consumer groups).
func (em *Emitter) SetSharedBytes(n int) { em.smemBytes = n }
