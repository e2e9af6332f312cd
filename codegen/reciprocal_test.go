package codegen

import (
	"fmt"
	"strings"
	"testing"

	"github.com/fac-compiler/fac/tir"
)

// TestDivByConstantIsMul: an f32 division by a constant whose reciprocal
// is a normal f32 lowers to a multiplication by it (the target's division
// is approximate, and this is within 1.5 ulp); by zero, by a constant whose
// reciprocal is not normal, and by a register it stays a division.
func TestDivByConstantIsMul(t *testing.T) {
	for _, c := range []struct {
		divisor string
		mul     bool
	}{
		{"30.0", true}, {"0.125", true}, {"-3.0", true},
		{"0.0", false}, {"1.0e38", false},
	} {
		src := fmt.Sprintf(`kernel @k(%%p: ptr<f32>, %%d: f32) attributes {num_warps = 1} {
  %%0 = arange {start = 0, end = 32} : tensor<32xi32>
  %%1 = splat %%p : tensor<32xptr<f32>>
  %%2 = addptr %%1, %%0 : tensor<32xptr<f32>>
  %%3 = load %%2 : tensor<32xf32>
  %%4 = const {value = %s} : tensor<32xf32>
  %%5 = div %%3, %%4 : tensor<32xf32>
  %%6 = splat %%d : tensor<32xf32>
  %%7 = div %%5, %%6 : tensor<32xf32>
  store %%2, %%7
  return
}
`, c.divisor)
		m, err := tir.Parse("div.tir", src)
		if err != nil {
			t.Fatal(err)
		}
		res, err := Lower(m, "k", Options{Target: TargetConfig{Arch: "sm_90a"}})
		if err != nil {
			t.Fatal(err)
		}
		// The division by the register %d stays in every case.
		want := 1
		if !c.mul {
			want = 2
		}
		if got := strings.Count(res.LL, "= fdiv "); got != want {
			t.Errorf("divisor %s: %d fdiv, want %d:\n%s", c.divisor, got, want, res.LL)
		}
		if got := strings.Contains(res.LL, "= fmul "); got != c.mul {
			t.Errorf("divisor %s: fmul %v, want %v", c.divisor, got, c.mul)
		}
	}
}
