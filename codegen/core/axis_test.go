package core

import (
	"slices"
	"testing"

	"github.com/fac-compiler/fac/tir"
)

// TestAffine checks the affine analysis on the backward's dQ addresses
// (dq + (row + offs_m[None, :]) · 128 + offs_d[:, None]) and on values it
// must refuse (a run-time stride, a load).
func TestAffine(t *testing.T) {
	const src = `kernel @k(%dq: ptr<f32>, %row: i32, %stride: i32) attributes {num_warps = 4} {
  %0 = arange {start = 0, end = 64} : tensor<64xi32>
  %1 = splat %row : tensor<64xi32>
  %2 = add %1, %0 : tensor<64xi32>
  %3 = reshape %2 : tensor<1x64xi32>
  %4 = const {value = 128} : tensor<1x64xi32>
  %5 = mul %3, %4 : tensor<1x64xi32>
  %6 = splat %dq : tensor<1x64xptr<f32>>
  %7 = addptr %6, %5 : tensor<1x64xptr<f32>>
  %8 = arange {start = 0, end = 128} : tensor<128xi32>
  %9 = reshape %8 : tensor<128x1xi32>
  %10 = broadcast %7 : tensor<128x64xptr<f32>>
  %11 = broadcast %9 : tensor<128x64xi32>
  %12 = addptr %10, %11 : tensor<128x64xptr<f32>>
  %13 = splat %stride : tensor<1x64xi32>
  %14 = mul %3, %13 : tensor<1x64xi32>
  %15 = addptr %6, %14 : tensor<1x64xptr<f32>>
  %16 = load %15 : tensor<1x64xf32>
  %17 = trans %11 : tensor<64x128xi32>
  %18 = sub %17, %17 : tensor<64x128xi32>
  return
}`
	m, err := tir.Parse("affine.tir", src)
	if err != nil {
		t.Fatal(err)
	}
	var vals []*tir.Value
	for _, op := range m.Funcs[0].Body.Ops {
		if len(op.Results) > 0 {
			vals = append(vals, op.Result())
		}
	}
	a := NewLowerer(m.Funcs[0], "sm_80", nil, 4)
	for _, c := range []struct {
		v    int
		want []int64 // nil: not affine
	}{
		{2, []int64{1}}, {5, []int64{0, 128}}, {12, []int64{1, 128}}, {14, nil}, {15, nil}, {16, nil},
		{17, []int64{0, 1}}, {18, []int64{0, 0}},
	} {
		got, ok := a.affine(vals[c.v])
		if ok != (c.want != nil) || !slices.Equal(got, c.want) {
			t.Errorf("%%%d: affine %v %v, want %v", c.v, got, ok, c.want)
		}
	}
}
