package core

import (
	"slices"
	"testing"

	"github.com/fac-compiler/fac/tir"
)

// TestConstTile evaluates index tiles built from aranges and constants
// (broadcasts, transposes, division and remainder) and refuses one that
// depends on a parameter.
func TestConstTile(t *testing.T) {
	const src = `kernel @k(%n: i32) attributes {num_warps = 4} {
  %0 = arange {start = 0, end = 4} : tensor<4xi32>
  %1 = reshape %0 : tensor<4x1xi32>
  %2 = arange {start = 2, end = 4} : tensor<2xi32>
  %3 = reshape %2 : tensor<1x2xi32>
  %4 = const {value = 10} : tensor<4x1xi32>
  %5 = mul %1, %4 : tensor<4x1xi32>
  %6 = broadcast %5 : tensor<4x2xi32>
  %7 = broadcast %3 : tensor<4x2xi32>
  %8 = add %6, %7 : tensor<4x2xi32>
  %9 = trans %8 : tensor<2x4xi32>
  %10 = const {value = 3} : tensor<2x4xi32>
  %11 = rem %9, %10 : tensor<2x4xi32>
  %12 = splat %n : tensor<2x4xi32>
  %13 = add %11, %12 : tensor<2x4xi32>
  return
}`
	m, err := tir.Parse("const.tir", src)
	if err != nil {
		t.Fatal(err)
	}
	vals := map[int]*tir.Value{}
	for i, op := range m.Funcs[0].Body.Ops {
		if len(op.Results) > 0 {
			vals[i] = op.Result()
		}
	}
	if got, ok := ConstTile(vals[8]); !ok || !slices.Equal(got, []int64{2, 3, 12, 13, 22, 23, 32, 33}) {
		t.Errorf("%%8 = %v (%v)", got, ok)
	}
	if got, ok := ConstTile(vals[11]); !ok || !slices.Equal(got, []int64{2, 0, 1, 2, 0, 1, 2, 0}) {
		t.Errorf("%%11 = %v (%v)", got, ok)
	}
	if got, ok := ConstTile(vals[13]); ok {
		t.Errorf("%%13 depends on %%n, got %v", got)
	}
}
