package codegen

import (
	"context"
	"fmt"
	"math/rand"
	"regexp"
	"strings"
	"testing"

	"github.com/fac-compiler/fac/codegen/core"
	"github.com/fac-compiler/fac/runtime/cpu"
	"github.com/fac-compiler/fac/tir"
)

// nsplitKernel is one of dot_nsplit.tir's kernels (dot_nsplit.fa): a
// single dot of m rows on warps warps, which wgmma splits along N, and the
// widths of the instructions (N per warpgroup) its dots issue.
type nsplitKernel struct {
	name   string
	rs     bool // P = X·Yᵀ as the A of P·V, else SS
	m, n   int
	e      tir.Elem
	warps  int
	widths []int
}

// nsplitKernels are dot_nsplit.tir's kernels: 64 rows on 8 warps (two
// warpgroups along N), SS and RS, N = 64, 128, 256, bf16 and f16; and 128
// rows on 16 warps (two warpgroups along M, two along N).
func nsplitKernels() []nsplitKernel {
	var ks []nsplitKernel
	for _, rs := range []bool{false, true} {
		form := map[bool]string{false: "ss", true: "rs"}[rs]
		for _, n := range []int{64, 128, 256} {
			for _, e := range []tir.Elem{tir.BF16, tir.F16} {
				k := nsplitKernel{name: fmt.Sprintf("nsplit_%s_n%d_%s", form, n, e), rs: rs, m: 64, n: n, e: e, warps: 8, widths: []int{n / 2}}
				if rs && n != 64 {
					k.widths = append(k.widths, 32) // P = X·Yᵀ, 64 × 64
				}
				ks = append(ks, k)
			}
		}
		k := nsplitKernel{name: "nsplit_" + form + "_m128_w16", rs: rs, m: 128, n: 128, e: tir.BF16, warps: 16, widths: []int{64}}
		if rs {
			k.widths = append(k.widths, 32) // P = X·Yᵀ, 128 × 64
		}
		ks = append(ks, k)
	}
	return ks
}

// nsplitSimCases run dot_nsplit.tir's kernels: SS, both operands loaded
// (B N-major, and transposed K-major), and RS, P = X·Yᵀ rounded to 16 bits
// as the A of P·V; and flash_bwd at HEAD_DIM 256 on 64 × 64 tiles and 8
// warps, whose S, dP, dV and dK split N on wgmma (its defaults: no tuned
// set at that head dim), and flash_bwd_dq there (S, dP and dQ split).
func nsplitSimCases() []simCase {
	var cs []simCase
	for _, k := range nsplitKernels() {
		c := simCase{kernel: "dot_nsplit", fn: k.name, numWarps: k.warps, grid: [3]int{1, 1, 1}, rtol: 1e-4, atol: 1e-4}
		m, n, e := k.m, k.n, k.e
		if !k.rs {
			c.args = func(rng *rand.Rand) []any {
				return []any{randBuf(rng, "a", e, m*32, 1), randBuf(rng, "b", e, 32*n, 1), randBuf(rng, "bt", e, n*32, 1),
					cpu.NewBuffer("c", tir.F32, m*n), cpu.NewBuffer("ct", tir.F32, m*n)}
			}
		} else {
			// P rounds to 16 bits: a product summed in another order may
			// round to the next value, one ulp of P (2^-9 for bf16 at
			// most 1/2) times a V of at most 1.
			c.rtol, c.atol = 1e-2, 4e-3
			c.args = func(rng *rand.Rand) []any {
				return []any{randBuf(rng, "x", e, m*64, 1), randBuf(rng, "y", e, 64*64, 1), randBuf(rng, "v", e, 64*n, 1),
					cpu.NewBuffer("o", tir.F32, m*n)}
			}
		}
		cs = append(cs, c)
	}
	// flash_bwd at D = 256: TMA tiles, alone and beside a producer
	// warpgroup, and cp.async tiles; and flash_bwd_dq's 64-query tiles.
	bwd := bwdCaseRows("frontend_bwd_64x64_d256", 64, 8, 256, 1, 2, 2, 130, 150)
	dq := bwdDQCase("frontend_bwd_dq_64x64_d256", 256, 1, 4, 2, 157, 300)
	dq.grid[0] = (157 + 63) / 64
	return append(cs, bwd, withAttrs(bwd, "warp_specialize", true), withTarget(bwd, "tma=off"), dq)
}

// wgmmaNRE matches a wgmma instruction's N.
var wgmmaNRE = regexp.MustCompile(`wgmma\.mma_async\.sync\.aligned\.m64n(\d+)k16`)

// TestNSplitPTX lowers dot_nsplit.tir's kernels for sm_90a with wgmma and
// checks the PTX: every dot on wgmma with N split over two warpgroups
// (m64n(N/2)k16 only), no mma.sync; the demand analysis announced every
// conversion (P into the A fragment copied across the warpgroups).
func TestNSplitPTX(t *testing.T) {
	tool := findLLCs(t)[0]
	m, _ := loadKernels(t, "dot_nsplit")
	before := core.LateConversions()
	defer func() {
		if n := core.LateConversions() - before; n != 0 {
			t.Errorf("%d conversions were not announced by the demand pass", n)
		}
	}()
	for _, k := range nsplitKernels() {
		t.Run(k.name, func(t *testing.T) {
			ptx, _, err := CompilePTX(context.Background(), m, k.name, Options{Target: wgmmaTarget}, tool)
			if err != nil {
				t.Fatal(err)
			}
			s := string(ptx)
			if strings.Contains(s, "mma.sync") {
				t.Error("mma.sync in PTX")
			}
			got := map[int]bool{}
			for _, x := range wgmmaNRE.FindAllStringSubmatch(s, -1) {
				var n int
				fmt.Sscan(x[1], &n)
				got[n] = true
			}
			for _, n := range k.widths {
				if !got[n] {
					t.Errorf("no wgmma m64n%dk16 (have %v)", n, got)
				}
				delete(got, n)
			}
			if len(got) > 0 {
				t.Errorf("wgmma of other widths: %v", got)
			}
		})
	}
}

// TestBwdD256WGMMA lowers flash_bwd at HEAD_DIM 256 on 64 × 64 tiles and 8
// warps for sm_90a: every GEMM on wgmma (S, dP: m64n32, two warpgroups
// along N; dQᵀ: m64n64, 256 rows; dV, dK: m64n128), none on mma.sync, in
// the shared memory a CTA may have.
func TestBwdD256WGMMA(t *testing.T) {
	tool := findLLCs(t)[0]
	m, k := loadKernel(t, "frontend_bwd_64x64_d256")
	before := core.LateConversions()
	ptx, res, err := CompilePTX(context.Background(), m, k, Options{Target: wgmmaTarget}, tool)
	if err != nil {
		t.Fatal(err)
	}
	if n := core.LateConversions() - before; n != 0 {
		t.Errorf("%d conversions were not announced by the demand pass", n)
	}
	s := string(ptx)
	if strings.Contains(s, "mma.sync") {
		t.Error("mma.sync in PTX")
	}
	count := map[string]int{}
	for _, x := range wgmmaNRE.FindAllStringSubmatch(s, -1) {
		count[x[1]]++
	}
	// k steps: S and dP 256/16 each; dQᵀ 64/16 in two M blocks; dV and dK 64/16.
	want := map[string]int{"32": 2 * 16, "64": 2 * 4, "128": 2 * 4}
	if fmt.Sprint(count) != fmt.Sprint(want) {
		t.Errorf("wgmma instructions by N: %v, want %v", count, want)
	}
	if res.SharedBytes > 227<<10 {
		t.Errorf("%d bytes of shared memory, over the 227 KB a CTA may have", res.SharedBytes)
	}
	t.Logf("shared memory %d bytes, %d conversions", res.SharedBytes, res.Conversions)
}
