package codegen

import (
	"context"
	"fmt"
	"math/rand"
	"strings"
	"testing"

	"github.com/fac-compiler/fac/artifact"
	"github.com/fac-compiler/fac/codegen/llc"
	"github.com/fac-compiler/fac/runtime/cpu"
	"github.com/fac-compiler/fac/tir"
)

// tmaStoreAsm is the form of sm90's TMA store of O (4-d: columns, rows,
// then the head and batch coordinates).
const tmaStoreAsm = "cp.async.bulk.tensor.4d.global.shared::cta.bulk_group"

// tunedFwd is the forward in sm_90a's tuned set at D = 128 (128×128 tiles
// on two consumer warpgroups and a producer, overlap, lazy rescaling, the
// scale folded, three K/V buffers): the front end's snapshot with
// num_stages = 3.
func tunedFwd(sq, sk int) simCase {
	return withAttrs(withWarps(frontend("frontend_flash_128x128_ws_lazy_fold", "", tir.BF16, 128, 1, 2, 2, sq, sk, false), 8), "num_stages", int64(3))
}

// TestSimTMAStore runs flash_fwd forms on sm_90a with tma-store=on on
// the simulator and compares O and LSE with the interpreter. Sequence
// lengths are not multiples of 128: the last q tile's rows past seqlen_q
// are left out by the tensor map's bound (their staged rows hold zeros
// and garbage-free values the kernel must not write: O is allocated to
// exactly B·H·seqlen_q rows, so a row past the bound would land in the
// next head's O or outside the buffer). The persistent kernels store
// several tiles through one staging area: each tile's store must have
// read it before the next tile's epilogue (or, without a producer, Q's
// copy) writes it.
func TestSimTMAStore(t *testing.T) {
	cases := []struct {
		name string
		c    simCase
		tma  bool // the kernel stores O by TMA (else it falls back)
	}{
		{"tuned", tunedFwd(300, 650), true},
		{"tuned_full", withAttrs(withWarps(frontend("frontend_flash_128x128_ws_lazy_fold", "flash_fwd.full", tir.BF16, 128, 1, 1, 1, 200, 130, false), 8), "num_stages", int64(3)), true},
		{"ws_pingpong", withWarps(frontend("frontend_flash_128x128_ws_pingpong", "", tir.BF16, 128, 1, 2, 2, 300, 390, false), 8), true},
		{"no_producer", withWarps(frontend("frontend_flash_128x128_overlap", "", tir.BF16, 128, 1, 2, 2, 300, 390, false), 8), true},
		{"persistent", persistent(withWarps(frontend("frontend_flash_128x128_ws_persistent", "", tir.BF16, 128, 1, 2, 2, 300, 390, false), 8), 2), true},
		{"persistent_no_producer", withAttrs(persistent(withWarps(frontend("frontend_flash_128x128_ws_persistent", "", tir.BF16, 128, 1, 2, 2, 300, 390, false), 8), 2), "warp_specialize", false), true},
		// At three buffers a persistent kernel has no shared memory left
		// for a staging area after its tiles: it stores from registers.
		{"persistent_stages3", withAttrs(persistent(withWarps(frontend("frontend_flash_128x128_ws_persistent", "", tir.BF16, 128, 1, 2, 2, 300, 390, false), 8), 2), "num_stages", int64(3)), false},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if testing.Short() && i > 0 {
				t.Skip("short")
			}
			c := tc.c
			m, name := loadKernel(t, c.kernel)
			if c.fn != "" {
				name = c.fn
			}
			for k, v := range c.attrs {
				m.Func(name).SetAttr(k, v)
			}
			rng := rand.New(rand.NewSource(int64(i + 100)))
			want := c.args(rng)
			got := cloneArgs(want)
			if err := cpu.Launch(m, name, c.grid, want...); err != nil {
				t.Fatalf("cpu: %v", err)
			}
			res, err := Lower(m, name, Options{Target: withOpts(t, wgmmaTarget, "tma-store=on"), NumWarps: c.numWarps})
			if err != nil {
				t.Fatal(err)
			}
			if n := strings.Count(res.LL, tmaStoreAsm); tc.tma != (n > 0) {
				t.Fatalf("%d TMA stores (want some: %v); notes: %q", n, tc.tma, res.Notes)
			}
			if tc.tma && !strings.Contains(res.LL, `cp.async.bulk.wait_group.read 0;`) {
				t.Fatal("no cp.async.bulk.wait_group.read")
			}
			t.Logf("%d bytes of shared memory, %d TMA store instructions", res.SharedBytes, strings.Count(res.LL, tmaStoreAsm))
			if err := simulate(res.LL, res, c.grid, got, c.misalign); err != nil {
				t.Fatalf("simulate: %v", err)
			}
			compareBuffers(t, want, got, c.rtol, c.atol)
		})
	}
}

// TestTMAStoreParams checks the store's tensor map: O's, described as the
// loads' are (the row stride and seqlen_q as its bound, then the outer
// coordinates' strides), in a variant of its own; none without
// tma-store=on.
func TestTMAStoreParams(t *testing.T) {
	on := withOpts(t, wgmmaTarget, "tma-store=on")
	if v := on.Variant(); v != "wgmma-tmastore" {
		t.Errorf("variant %q with tma-store=on", v)
	}
	m, name := loadKernel(t, "frontend_flash_128x128_ws")
	res, err := Lower(m, name, Options{Target: on})
	if err != nil {
		t.Fatal(err)
	}
	var o *artifact.TMA
	for _, p := range res.Params {
		if p.Kind == ParamTensorMap && p.TMA.Tensor == "o" {
			o = p.TMA
		}
	}
	want := fmt.Sprint(&artifact.TMA{Tensor: "o", Swizzle: 128, Box: []int{64, 128, 1, 1},
		Dims: []artifact.TMADim{{Extent: 128}, {Stride: "stride_os", Bound: "seqlen_q"}, {Stride: "stride_ob"}, {Stride: "stride_oh"}}})
	if fmt.Sprint(o) != want {
		t.Errorf("O's tensor map %v, want %v", o, want)
	}
	if v := wgmmaTarget.Variant(); v != "wgmma" {
		t.Errorf("variant %q without tma-store=on", v)
	}
	res, err = Lower(m, name, Options{Target: wgmmaTarget})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range res.Params {
		if p.Kind == ParamTensorMap && p.TMA.Tensor == "o" {
			t.Errorf("a tensor map of O without tma-store=on")
		}
	}
	if strings.Contains(res.LL, "bulk_group") || strings.Contains(res.LL, "wait_group.read") {
		t.Error("bulk stores without tma-store=on")
	}
}

// TestTMAStorePTX checks the tuned forward's PTX with tma-store=on: O
// leaves by two TMA stores (one per 64-column panel) in one bulk group,
// whose reads the kernel waits for before it exits, with no 16-byte
// global stores left (only LSE's scalar ones); without it, the coalesced
// exchange's st.global.v4 are there and no bulk store.
func TestTMAStorePTX(t *testing.T) {
	tool, err := llc.Find()
	if err != nil {
		t.Skipf("no llc: %v", err)
	}
	m, name := loadKernel(t, "frontend_flash_128x128_ws_lazy_fold")
	m.Func(name).SetAttr("num_stages", int64(3))
	for _, on := range []bool{true, false} {
		t.Run(fmt.Sprint(on), func(t *testing.T) {
			target := wgmmaTarget
			if on {
				target = withOpts(t, target, "tma-store=on")
			}
			ptxb, _, err := CompilePTX(context.Background(), m, name, Options{Target: target}, tool)
			if err != nil {
				t.Fatal(err)
			}
			ptx := string(ptxb)
			stores := strings.Count(ptx, tmaStoreAsm)
			commit := strings.Count(ptx, "cp.async.bulk.commit_group;")
			wait := strings.Count(ptx, "cp.async.bulk.wait_group.read 0;")
			v4 := strings.Count(ptx, "st.global.v4")
			fence := strings.Count(ptx, "fence.proxy.async.shared::cta;")
			t.Logf("%d TMA stores, %d commits, %d waits, %d st.global.v4, %d fence.proxy.async", stores, commit, wait, v4, fence)
			if on && (stores != 2 || commit != 1 || wait != 1 || v4 != 0 || fence == 0) {
				t.Errorf("want 2 TMA stores, 1 commit, 1 wait_group.read, a fence.proxy.async and no st.global.v4")
			}
			if !on && (stores != 0 || commit != 0 || wait != 0 || v4 == 0) {
				t.Errorf("want no TMA store and the coalesced st.global.v4")
			}
		})
	}
}
