package core

import (
	"github.com/llir/llvm/ir"
	"github.com/llir/llvm/ir/enum"
	"github.com/llir/llvm/ir/value"
)

// RemoveDead is the phase that deletes the emitted instructions without
// side effects whose results nothing reads. Lowering computes a pointer per
// register before it knows which ones a vectorized or affine access keeps
// (about 900 dead addresses in flash_fwd at D = 256), and llc's
// straight-line strength reduction runs before its own dead-code removal:
// on those addresses it took most of llc's time (0.55 of 0.64 s there).
var RemoveDead = Phase{
	Name: "remove-dead",
	Doc:  "delete LLVM instructions without side effects whose results nothing reads (dead per-register addresses), before llc sees them",
	Run: func(l *Lowerer) error {
		if l.Emitter == nil {
			Fail("internal error: remove-dead runs after lower-llvm")
		}
		l.Emitter.removeDead()
		return nil
	},
}

// removeDead deletes em.fn's removable instructions whose results nothing
// reads, and then those that only they read, and so on.
func (em *Emitter) removeDead() {
	uses := map[value.Value]int{}
	count := func(u value.User, self value.Value, d int) {
		for _, op := range u.Operands() {
			if *op != nil && *op != self {
				uses[*op] += d
			}
		}
	}
	for _, b := range em.fn.Blocks {
		for _, inst := range b.Insts {
			v, _ := inst.(value.Value) // nil for a store: it has no result
			count(inst, v, 1)
		}
		if b.Term != nil {
			count(b.Term, nil, 1)
		}
	}
	dead := map[ir.Instruction]bool{}
	var work []ir.Instruction
	consider := func(inst ir.Instruction) {
		if v, ok := inst.(value.Value); ok && !dead[inst] && uses[v] == 0 && removable(inst) {
			dead[inst] = true
			work = append(work, inst)
		}
	}
	for _, b := range em.fn.Blocks {
		for _, inst := range b.Insts {
			consider(inst)
		}
	}
	for len(work) > 0 {
		inst := work[len(work)-1]
		work = work[:len(work)-1]
		count(inst, inst.(value.Value), -1)
		for _, op := range inst.Operands() {
			if d, ok := (*op).(ir.Instruction); ok {
				consider(d)
			}
		}
	}
	if len(dead) == 0 {
		return
	}
	for _, b := range em.fn.Blocks {
		keep := b.Insts[:0]
		for _, inst := range b.Insts {
			if !dead[inst] {
				keep = append(keep, inst)
			}
		}
		b.Insts = keep
	}
	// Unnamed values are numbered in order when the module prints; a
	// print before this phase (--print-ir-after) numbered them already.
	type numbered interface {
		IsUnnamed() bool
		SetID(id int64)
	}
	renumber := func(v any) {
		if n, ok := v.(numbered); ok && n.IsUnnamed() {
			n.SetID(0)
		}
	}
	for _, p := range em.fn.Params {
		renumber(p)
	}
	for _, b := range em.fn.Blocks {
		renumber(b)
		for _, inst := range b.Insts {
			renumber(inst)
		}
	}
}

// removable: instructions whose only effect is their result. Loads stay
// (a volatile or ordered one is an effect), and so do calls, except inline
// asm marked readnone: llc keeps an unused inline asm, readnone or not.
func removable(inst ir.Instruction) bool {
	switch c := inst.(type) {
	case *ir.InstPhi, *ir.InstSelect, *ir.InstICmp, *ir.InstFCmp, *ir.InstGetElementPtr, *ir.InstFreeze,
		*ir.InstExtractValue, *ir.InstInsertValue, *ir.InstExtractElement, *ir.InstInsertElement, *ir.InstShuffleVector,
		*ir.InstAdd, *ir.InstSub, *ir.InstMul, *ir.InstUDiv, *ir.InstSDiv, *ir.InstURem, *ir.InstSRem,
		*ir.InstShl, *ir.InstLShr, *ir.InstAShr, *ir.InstAnd, *ir.InstOr, *ir.InstXor,
		*ir.InstFNeg, *ir.InstFAdd, *ir.InstFSub, *ir.InstFMul, *ir.InstFDiv, *ir.InstFRem,
		*ir.InstTrunc, *ir.InstZExt, *ir.InstSExt, *ir.InstFPTrunc, *ir.InstFPExt, *ir.InstFPToUI, *ir.InstFPToSI,
		*ir.InstUIToFP, *ir.InstSIToFP, *ir.InstPtrToInt, *ir.InstIntToPtr, *ir.InstBitCast, *ir.InstAddrSpaceCast:
		return true
	case *ir.InstCall:
		if _, ok := c.Callee.(*ir.InlineAsm); ok {
			for _, a := range c.FuncAttrs {
				if a == enum.FuncAttrReadNone {
					return true
				}
			}
		}
	}
	return false
}
