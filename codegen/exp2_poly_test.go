package codegen

import (
	"math"
	"math/rand"
	"strings"
	"testing"

	"github.com/fac-compiler/fac/runtime/cpu"
	"github.com/fac-compiler/fac/tir"
)

// TestSimExp2Poly runs exp2 of a 2-D tile with exp2_poly lanes on the
// simulator: the cubic's values are within 1.02e-4 of 2^x relative, −inf
// (a masked score) gives exactly 0 (a row that kept nothing must sum to 0),
// and the count of MUFU exponentials left follows the argument.
func TestSimExp2Poly(t *testing.T) {
	for _, n := range []int64{3, 8} {
		m, name := loadKernel(t, "exp2_poly")
		m.Func(name).SetAttr("exp2_poly", n)
		res, err := Lower(m, name, Options{Target: testTarget("sm_90a")})
		if err != nil {
			t.Fatal(err)
		}
		// 64×32 on 4 warps: 16 values a thread, (8 − n)/8 of them on the MUFU.
		if got, want := strings.Count(res.LL, "call float @llvm.nvvm.ex2.approx.ftz.f("), 16*(8-int(n))/8; got != want {
			t.Errorf("exp2_poly = %d: %d ex2 calls, want %d", n, got, want)
		}
		rng := rand.New(rand.NewSource(n))
		x := cpu.NewBuffer("x", tir.F32, 64*32)
		for i := range x.Vals {
			switch i % 7 {
			case 0:
				x.Vals[i] = math.Inf(-1)
			case 1:
				x.Vals[i] = float64(float32(-126 * rng.Float64())) // down to the normal range's end
			default:
				x.Vals[i] = float64(float32(8 - 24*rng.Float64())) // the softmax's range (lazy rescaling: up to 8)
			}
		}
		out := cpu.NewBuffer("out", tir.F32, 64*32)
		if err := simulate(res.LL, res, [3]int{1, 1, 1}, []any{x, out}, false); err != nil {
			t.Fatalf("simulate: %v", err)
		}
		worst := 0.0
		for i, v := range x.Vals {
			got, want := out.Vals[i], math.Exp2(v)
			if want == 0 {
				if got != 0 {
					t.Fatalf("exp2_poly = %d: exp2(-inf) = %g, want 0", n, got)
				}
				continue
			}
			worst = max(worst, math.Abs(got-want)/want)
		}
		t.Logf("exp2_poly = %d: worst relative error %.3g", n, worst)
		if worst > 1.02e-4 {
			t.Errorf("exp2_poly = %d: relative error %.3g, want at most 1.02e-4", n, worst)
		}
	}
}
