package core

import (
	"strings"
	"testing"

	"github.com/llir/llvm/ir"
	"github.com/llir/llvm/ir/constant"
	"github.com/llir/llvm/ir/types"
)

// TestRemoveDead checks that a chain of dead pure instructions goes, that
// what a store or the terminator reads stays with its operands, and that
// the function still numbers and prints after a print before removal.
func TestRemoveDead(t *testing.T) {
	em := &Emitter{mod: ir.NewModule()}
	x := ir.NewParam("", types.I32)
	p := ir.NewParam("", types.NewPointer(types.I32))
	em.fn = em.mod.NewFunc("k", types.Void, x, p)
	b := em.fn.NewBlock("")
	// Dead: a per-register address nothing reads.
	ext := b.NewSExt(x, types.I64)
	off := b.NewMul(ext, constant.NewInt(types.I64, 4))
	base := b.NewPtrToInt(p, types.I64)
	b.NewIntToPtr(b.NewAdd(base, off), types.NewPointer(types.I32))
	// Live: stored.
	y := b.NewAdd(x, constant.NewInt(types.I32, 7))
	b.NewStore(y, p)
	b.NewRet(nil)
	_ = em.mod.String() // numbers the values, as --print-ir-after does
	em.removeDead()
	text := em.mod.String()
	for _, gone := range []string{"sext", "mul", "ptrtoint", "inttoptr"} {
		if strings.Contains(text, gone) {
			t.Errorf("dead %s left:\n%s", gone, text)
		}
	}
	if !strings.Contains(text, "add i32 %0, 7") || !strings.Contains(text, "store i32 %3, i32* %1") {
		t.Errorf("the stored add must stay, numbered afresh:\n%s", text)
	}
}
