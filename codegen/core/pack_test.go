package core

import (
	"regexp"
	"strings"
	"testing"

	"github.com/llir/llvm/ir"
	"github.com/llir/llvm/ir/constant"
	"github.com/llir/llvm/ir/types"

	"github.com/fac-compiler/fac/tir"
)

// TestPackHalves checks the paired rounding: two roundings to bf16 become
// one cvt.rn.bf16x2.f32 (the first source the upper half), so do two
// loop-carried ones once the loop's phis are complete, the dead halves go,
// and values that only a store reads stay.
func TestPackHalves(t *testing.T) {
	l := &Emitter{mod: ir.NewModule()}
	x, y := ir.NewParam("x", types.Float), ir.NewParam("y", types.Float)
	p := ir.NewParam("p", types.NewPointer(types.I32))
	l.fn = l.mod.NewFunc("k", types.Void, x, y, p)
	entry, hdr, exit := l.fn.NewBlock("entry"), l.fn.NewBlock("hdr"), l.fn.NewBlock("exit")

	// Straight-line: both halves are roundings.
	l.b = entry
	entry.NewStore(l.PackHalves(l.fromF32(x, tir.BF16), l.fromF32(y, tir.BF16)), p)
	entry.NewBr(hdr)

	// Loop-carried: phis of (0, 0) on entry and of two roundings from the
	// latch, completed after the pack as lowerFor does.
	zero := constant.NewInt(types.I16, 0)
	plo, phi := hdr.NewPhi(ir.NewIncoming(zero, entry)), hdr.NewPhi(ir.NewIncoming(zero, entry))
	l.b = hdr
	hdr.NewStore(l.PackHalves(plo, phi), p)
	plo.Incs = append(plo.Incs, ir.NewIncoming(l.fromF32(x, tir.BF16), hdr))
	phi.Incs = append(phi.Incs, ir.NewIncoming(l.fromF32(y, tir.BF16), hdr))
	hdr.NewCondBr(constant.True, hdr, exit)
	exit.NewRet(nil)
	l.fusePhiPacks()

	text := l.mod.String()
	if n := strings.Count(text, "cvt.rn.bf16x2.f32 $0, $1, $2;"); n != 2 {
		t.Errorf("%d paired roundings, want 2 (straight and carried):\n%s", n, text)
	}
	if strings.Contains(text, "cvt.rn.bf16.f32") || strings.Contains(text, "zext") || strings.Contains(text, "phi i16") {
		t.Errorf("single roundings, extensions or 16-bit phis left:\n%s", text)
	}
	if !strings.Contains(text, `"=r,f,f"(float %y, float %x)`) {
		t.Errorf("the upper half must be the first source:\n%s", text)
	}
	stores := regexp.MustCompile(`store i32 (%\d+),`).FindAllStringSubmatch(text, -1)
	if len(stores) != 2 {
		t.Errorf("%d stores, want 2:\n%s", len(stores), text)
	}
	for _, m := range stores {
		if strings.Count(text, "\t"+m[1]+" = ") != 1 {
			t.Errorf("a store reads %s, which no instruction defines (removed as dead):\n%s", m[1], text)
		}
	}
}

// TestPairwise checks the tree fold: every input once, depth log2(n).
func TestPairwise(t *testing.T) {
	for n := 1; n <= 9; n++ {
		in := make([]string, n)
		for i := range in {
			in[i] = string(rune('a' + i))
		}
		depth := map[string]int{}
		got := pairwise(in, func(a, b string) string {
			s := "(" + a + b + ")"
			depth[s] = max(depth[a], depth[b]) + 1
			return s
		})
		if strings.Trim(strings.NewReplacer("(", "", ")", "").Replace(got), "") != strings.Join(in, "") {
			t.Errorf("n=%d: %s does not fold every input once in order", n, got)
		}
		want := 0
		for 1<<want < n {
			want++
		}
		if depth[got] != want {
			t.Errorf("n=%d: depth %d, want %d", n, depth[got], want)
		}
	}
}
