package codegen

import (
	"context"
	"fmt"
	"maps"
	"math/rand"
	"slices"
	"strings"
	"testing"

	"github.com/fac-compiler/fac/runtime/cpu"
	"github.com/fac-compiler/fac/tir"
)

// nExtentDot is a 64x128x128 dot whose B (N contiguous: MN-major on
// wgmma) is read to column n (n_extent = n), and a zero accumulator.
func nExtentDot(n int) string {
	return fmt.Sprintf(`kernel @pv(%%a: ptr<bf16>, %%b: ptr<bf16>, %%c: ptr<f32>) attributes {num_warps = 4} {
  %%0 = arange {start = 0, end = 64} : tensor<64xi32>
  %%1 = arange {start = 0, end = 128} : tensor<128xi32>
  %%2 = reshape %%0 : tensor<64x1xi32>
  %%3 = const {value = 128} : tensor<64x1xi32>
  %%4 = mul %%2, %%3 : tensor<64x1xi32>
  %%5 = broadcast %%4 : tensor<64x128xi32>
  %%6 = reshape %%1 : tensor<1x128xi32>
  %%7 = broadcast %%6 : tensor<64x128xi32>
  %%8 = add %%5, %%7 : tensor<64x128xi32>
  %%9 = splat %%a : tensor<64x128xptr<bf16>>
  %%10 = addptr %%9, %%8 : tensor<64x128xptr<bf16>>
  %%11 = load %%10 : tensor<64x128xbf16>
  %%12 = reshape %%1 : tensor<128x1xi32>
  %%13 = const {value = 128} : tensor<128x1xi32>
  %%14 = mul %%12, %%13 : tensor<128x1xi32>
  %%15 = broadcast %%14 : tensor<128x128xi32>
  %%16 = broadcast %%6 : tensor<128x128xi32>
  %%17 = add %%15, %%16 : tensor<128x128xi32>
  %%18 = splat %%b : tensor<128x128xptr<bf16>>
  %%19 = addptr %%18, %%17 : tensor<128x128xptr<bf16>>
  %%20 = load %%19 : tensor<128x128xbf16>
  %%21 = const {value = 0.0} : tensor<64x128xf32>
  %%22 = dot %%11, %%20, %%21 {n_extent = %d} : tensor<64x128xf32>
  %%23 = splat %%c : tensor<64x128xptr<f32>>
  %%24 = addptr %%23, %%8 : tensor<64x128xptr<f32>>
  store %%24, %%22
  return
}
`, n)
}

// wgmmaWidths lists the N of every wgmma in ll, in order.
func wgmmaWidths(ll string) []string {
	var out []string
	for _, m := range wgmmaNRE.FindAllStringSubmatch(ll, -1) {
		out = append(out, m[1])
	}
	return out
}

// TestNExtentInstructions checks that the tensor cores stop at a dot's
// n_extent: mma.sync issues the n8 tiles up to it, wgmma one m64nN
// instruction per k-step of width n_extent where the MN-major B tile's
// swizzle panel divides it (96: 64-byte swizzle, 80: 32-byte), full width
// where no panel of 16 columns or more does (40).
func TestNExtentInstructions(t *testing.T) {
	for _, c := range []struct {
		n     int
		wgmma string // N of each of the 8 k-steps' instruction
		tiles int    // mma.sync n8 tiles per k-step (4 warps along M)
	}{
		{96, "96", 12},
		{80, "80", 10},
		{128, "128", 16},
		{40, "128", 5},
	} {
		t.Run(fmt.Sprint(c.n), func(t *testing.T) {
			m, err := tir.Parse("pv.tir", nExtentDot(c.n))
			if err != nil {
				t.Fatal(err)
			}
			if err := tir.Verify(m); err != nil {
				t.Fatal(err)
			}
			res, err := Lower(m, "pv", Options{Target: wgmmaTarget})
			if err != nil {
				t.Fatal(err)
			}
			if got, want := wgmmaWidths(res.LL), slices.Repeat([]string{c.wgmma}, 8); !slices.Equal(got, want) {
				t.Errorf("wgmma widths %v, want %v", got, want)
			}
			res, err = Lower(m, "pv", Options{Target: testTarget("sm_80")})
			if err != nil {
				t.Fatal(err)
			}
			if got := strings.Count(res.LL, "call { float, float, float, float } @llvm.nvvm.mma.m16n8k16"); got != 8*c.tiles {
				t.Errorf("%d mma.sync, want %d (8 k-steps of %d n8 tiles)", got, 8*c.tiles, c.tiles)
			}
		})
	}
}

// TestNExtentFlash checks the padded kernels' GEMMs with n_extent on
// wgmma: the forward's P·V m64n96 at D = 96 and m64n80 at 80 (Q·Kᵀ stays
// m64n128 over 128 keys), m64n192 at 192; the backward's dV and dK m64n96
// at 96; every tile still copied by TMA, the N-major B tiles' boxes as
// wide as their narrowed swizzle.
func TestNExtentFlash(t *testing.T) {
	for _, c := range []struct {
		kernel   string
		warps    int
		want     []string       // the widths issued, sorted as strings
		swizzles map[string]int // the tensor maps'
	}{
		{"frontend_flash_128x128_ws_d96", 8, []string{"128", "96"}, map[string]int{"q": 128, "k": 128, "v": 64}},
		{"frontend_flash_128x128_ws_d80", 8, []string{"128", "80"}, map[string]int{"q": 128, "k": 128, "v": 32}},
		{"frontend_flash_d192", 4, []string{"192", "64"}, map[string]int{"q": 128, "k": 128, "v": 128}},
		{"frontend_bwd_64x128_frag_ws_d96", 8, []string{"64", "96"}, map[string]int{"q": 64, "k": 128, "v": 128, "dout": 64}},
	} {
		t.Run(c.kernel, func(t *testing.T) {
			m, name := loadKernel(t, c.kernel)
			res, err := Lower(m, name, Options{Target: wgmmaTarget, NumWarps: c.warps})
			if err != nil {
				t.Fatal(err)
			}
			got := slices.Compact(slices.Sorted(slices.Values(wgmmaWidths(res.LL))))
			if !slices.Equal(got, c.want) {
				t.Errorf("wgmma widths %v, want %v", got, c.want)
			}
			ptx, _, err := CompilePTX(context.Background(), m, name, Options{Target: wgmmaTarget, NumWarps: c.warps}, findLLCs(t)[0])
			if err != nil {
				t.Fatal(err)
			}
			if got := slices.Compact(slices.Sorted(slices.Values(wgmmaWidths(string(ptx))))); !slices.Equal(got, c.want) {
				t.Errorf("PTX wgmma widths %v, want %v", got, c.want)
			}
			for _, n := range res.Notes {
				if strings.Contains(n, "cp.async") {
					t.Errorf("note %q: want every tile on TMA", n)
				}
			}
			sw := map[string]int{}
			for _, p := range res.Params {
				if p.Kind == ParamTensorMap && p.TMA.Tensor != "dq_accum" {
					sw[p.TMA.Tensor] = p.TMA.Swizzle
					if p.TMA.Box[0]*2 != p.TMA.Swizzle {
						t.Errorf("tensor map of %s: box %v with a %d-byte swizzle", p.TMA.Tensor, p.TMA.Box, p.TMA.Swizzle)
					}
				}
			}
			if !maps.Equal(sw, c.swizzles) {
				t.Errorf("tensor map swizzles %v, want %v", sw, c.swizzles)
			}
		})
	}
}

// nExtentSimCases run the padded attention kernels whose dots carry
// n_extent, and dot_nextent.tir's kernels: b's columns past the extent
// are zero, as pad-dims' masked loads leave them, so the CPU's full
// product and the targets' skipped columns (the accumulator's) agree.
func nExtentSimCases() []simCase {
	bZero := func(rng *rand.Rand, e tir.Elem, n int) *cpu.Buffer {
		b := randBuf(rng, "b", e, 128*128, 1)
		for i := range b.Vals {
			if i%128 >= n {
				b.Vals[i] = 0
			}
		}
		return b
	}
	c := func(fn string, args func(rng *rand.Rand) []any) simCase {
		return simCase{kernel: "dot_nextent", fn: fn, grid: [3]int{1, 1, 1}, rtol: 1e-4, atol: 1e-4, args: args}
	}
	return []simCase{
		// n_extent in the padded kernels: P·V stops at column 80, 96 or
		// 192 (mma.sync's n8 tiles, wgmma's m64n80 on a 32-byte and m64n96
		// on a 64-byte swizzled V, still copied by TMA; m64n192 on a
		// 128-byte one), and the tuned sm_90a backward at D = 96 (dV's and
		// dK's m64n96 on Q's and dO's 64-byte TMA tiles, beside a producer
		// warpgroup). Here at the end, the other cases keep their seeds.
		withWarps(frontend("frontend_flash_128x128_ws_d80", "", tir.BF16, 80, 1, 2, 2, 200, 390, false), 8),
		frontend("frontend_flash_d96", "", tir.BF16, 96, 1, 2, 1, 150, 200, false),
		frontend("frontend_flash_d192", "", tir.BF16, 192, 1, 2, 2, 150, 200, false),
		bwdCaseFrag("frontend_bwd_64x128_frag_ws_d96", 128, 8, 96, 1, 3, 3, 157, 200),
		c("pv96", func(rng *rand.Rand) []any {
			return []any{randBuf(rng, "a", tir.BF16, 64*128, 1), bZero(rng, tir.BF16, 96), cpu.NewBuffer("o", tir.F32, 64*128)}
		}),
		c("pv80_acc", func(rng *rand.Rand) []any {
			return []any{randBuf(rng, "a", tir.BF16, 64*128, 1), bZero(rng, tir.BF16, 80), cpu.NewBuffer("o", tir.F32, 64*128),
				randBuf(rng, "c", tir.F32, 64*128, 1)}
		}),
		c("pv96_reg", func(rng *rand.Rand) []any {
			return []any{randBuf(rng, "a", tir.BF16, 64*128, 1), bZero(rng, tir.F32, 96), cpu.NewBuffer("o", tir.F32, 64*128)}
		}),
	}
}
