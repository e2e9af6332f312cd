package attention_test

import (
	"testing"

	"github.com/fac-compiler/fac/compiler"
	"github.com/fac-compiler/fac/runtime/cpu"
	"github.com/fac-compiler/fac/stdlib/attention"
	"github.com/fac-compiler/fac/tir"
)

// TestBlockClassifyOddBlocks: block_classify on blocks that are no power
// of two (192 × 128, evaluated on 256 × 128 tiles with the rest masked off,
// as ClassifyConsts asks) classifies a causal mask as a direct count does,
// at lengths that end mid-block.
func TestBlockClassifyOddBlocks(t *testing.T) {
	const bq, bk, sq, sk = 192, 128, 500, 450
	res, err := compiler.Compile(compiler.Request{Kernel: attention.BlockClassify.Kernel, Mask: "causal", Consts: attention.ClassifyConsts(bq, bk)})
	if err != nil {
		t.Fatal(err)
	}
	if a := res.Attrs(); a["TILE_Q"] != 256 || a["TILE_K"] != 128 {
		t.Fatalf("tiles %d×%d, want 256×128", a["TILE_Q"], a["TILE_K"])
	}
	nq, nk := (sq+bq-1)/bq, (sk+bk-1)/bk
	classes := cpu.NewBuffer("classes", tir.I32, nq*nk)
	if err := cpu.Launch(res.Module, res.Kernel, [3]int{nq, 1, 1}, classes, 1, nq, nk, sq, sk); err != nil {
		t.Fatal(err)
	}
	got := classes.I32()
	for qb := 0; qb < nq; qb++ {
		for kb := 0; kb < nk; kb++ {
			kept, all := 0, 0
			for q := qb * bq; q < min(sq, (qb+1)*bq); q++ {
				for k := kb * bk; k < min(sk, (kb+1)*bk); k++ {
					all++
					if k <= q {
						kept++
					}
				}
			}
			want := int32(1)
			switch kept {
			case 0:
				want = 0
			case all:
				want = 2
			}
			if got[qb*nk+kb] != want {
				t.Errorf("block (%d, %d): class %d, want %d", qb, kb, got[qb*nk+kb], want)
			}
		}
	}
}
