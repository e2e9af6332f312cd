package compiler

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/fac-compiler/fac/artifact"
	"github.com/fac-compiler/fac/artifact/cache"
	"github.com/fac-compiler/fac/codegen"
	"github.com/fac-compiler/fac/codegen/llc"
	"github.com/fac-compiler/fac/tir"
)

// TestStdlibPTX compiles flash_fwd with every stdlib mask and score to PTX
// with llc and checks the PTX: an entry, tensor-core mma, no calls to
// undefined functions (a misspelled intrinsic).
func TestStdlibPTX(t *testing.T) {
	tool, err := llc.Find()
	if err != nil {
		t.Skipf("no llc: %v", err)
	}
	type cfg struct{ mask, score, dtype, dim string }
	var cfgs []cfg
	for _, m := range []string{"none", "causal", "causal_bottom_right", "sliding_window(128, 0)", "prefix_lm(64)", "document", "chunked(32)"} {
		cfgs = append(cfgs, cfg{m, "identity", "bf16", "64"})
	}
	for _, s := range []string{"softcap(30.0)", "alibi"} {
		cfgs = append(cfgs, cfg{"causal", s, "f16", "128"})
	}
	var wg sync.WaitGroup
	sem := make(chan struct{}, 2)
	for _, c := range cfgs {
		wg.Add(1)
		sem <- struct{}{}
		go func(c cfg) {
			defer func() { <-sem; wg.Done() }()
			req := Request{Kernel: "flash_fwd", Mask: c.mask, Score: c.score, Consts: map[string]string{"DTYPE": c.dtype, "HEAD_DIM": c.dim}}
			a, err := Build(context.Background(), req, "sm_90a", tool, nil)
			if err != nil {
				t.Errorf("%v: %v", c, err)
				return
			}
			// sm_90a's 16-bit dots run on wgmma by default (wgmma=off: mma.sync).
			for _, want := range []string{".entry " + a.Entry, "wgmma.mma_async.sync.aligned"} {
				if !strings.Contains(a.PTX, want) {
					t.Errorf("%v: PTX lacks %q", c, want)
				}
			}
			if err := llc.CheckPTX([]byte(a.PTX)); err != nil {
				t.Errorf("%v: %v", c, err)
			}
			if a.Threads <= 0 || len(a.Params) == 0 {
				t.Errorf("%v: bad launch metadata: %d threads, %d params", c, a.Threads, len(a.Params))
			}
		}(c)
	}
	wg.Wait()
}

// TestCacheCorruptRebuild damages a cache entry by hand: the next compile
// reports it and rebuilds; two compiles at once of the same kernel both
// succeed with the same PTX.
func TestCacheCorruptRebuild(t *testing.T) {
	tool, err := llc.Find()
	if err != nil {
		t.Skipf("no llc: %v", err)
	}
	c, err := cache.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	req := Request{Kernel: "flash_fwd", Mask: "causal", Consts: map[string]string{"DTYPE": "bf16", "HEAD_DIM": "64"}}
	res, err := Compile(req)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	var tm Timings
	var wg sync.WaitGroup
	arts := make([]*artifact.Artifact, 2)
	for i := range arts {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			a, err := Cached(ctx, c, res, "sm_90a", tool, nil)
			if err != nil {
				t.Error(err)
			}
			arts[i] = a
		}(i)
	}
	wg.Wait()
	if t.Failed() || arts[0].PTX != arts[1].PTX {
		t.Fatal("concurrent compiles disagree")
	}
	entries, _ := filepath.Glob(filepath.Join(c.Dir(), "*.facc"))
	if len(entries) != 1 {
		t.Fatalf("want one cache entry, have %v", entries)
	}
	b, _ := os.ReadFile(entries[0])
	b[len(b)/2] ^= 0xff
	if err := os.WriteFile(entries[0], b, 0o644); err != nil {
		t.Fatal(err)
	}
	a, err := Cached(ctx, c, res, "sm_90a", tool, &tm)
	if err != nil {
		t.Fatal(err)
	}
	if tm.Cache != cache.Corrupt || a.PTX != arts[0].PTX {
		t.Fatalf("after corruption: status %v, same PTX %v", tm.Cache, a.PTX == arts[0].PTX)
	}
	tm = Timings{}
	if _, err := Cached(ctx, c, res, "sm_90a", tool, &tm); err != nil || tm.Cache != cache.Hit {
		t.Fatalf("after rebuild: %v %v", tm.Cache, err)
	}
}

// TestIdentity checks the canonical identity: defaults written or left out
// give one kernel; a different mod, argument, dtype or source gives another.
func TestIdentity(t *testing.T) {
	key := func(req Request) string {
		t.Helper()
		res, err := Compile(req)
		if err != nil {
			t.Fatal(err)
		}
		return Identity(res, "sm_90a", nil).Key()
	}
	base := Request{Kernel: "flash_fwd", Mask: "causal"}
	k0 := key(base)
	same := []Request{
		{Kernel: "flash_fwd", Mask: "causal", Consts: map[string]string{"BLOCK_M": "64", "DTYPE": "f32"}},
		{Kernel: "flash_fwd", Mask: "causal", Score: "identity"},
		// An unrelated file changes nothing the kernel means.
		{Kernel: "flash_fwd", Mask: "causal", Sources: map[string]string{"u.fa": "mask mine(b, h, q_idx, kv_idx) { return true }"}},
	}
	for _, r := range same {
		if key(r) != k0 {
			t.Errorf("%+v: identity differs from the defaults'", r)
		}
	}
	differ := []Request{
		{Kernel: "flash_fwd", Mask: "none"},
		{Kernel: "flash_fwd", Mask: "sliding_window(8, 0)"},
		{Kernel: "flash_fwd", Mask: "causal", Consts: map[string]string{"DTYPE": "bf16"}},
		{Kernel: "flash_fwd", Mask: "causal", Consts: map[string]string{"BLOCK_M": "32"}},
		{Kernel: "flash_fwd", Mask: "mine", Sources: map[string]string{"u.fa": "mask mine(b, h, q_idx, kv_idx) { return true }"}},
		// The same mod name with another body is another kernel.
		{Kernel: "flash_fwd", Mask: "mine", Sources: map[string]string{"u.fa": "mask mine(b, h, q_idx, kv_idx) { return q_idx > 3 }"}},
	}
	seen := map[string]int{k0: -1}
	for i, r := range differ {
		k := key(r)
		if j, dup := seen[k]; dup {
			t.Errorf("requests %d and %d share an identity", i, j)
		}
		seen[k] = i
	}
	res, _ := Compile(base)
	id := Identity(res, "sm_90a", nil)
	if id.Mods["mask"] != "causal" || id.DType != "f32" || id.Consts["HEAD_DIM"] != "64" {
		t.Errorf("identity %+v", id)
	}
	other := id
	other.Fac, other.LLC = "another build", "llc 99"
	if other.PortableKey() != id.PortableKey() || other.Key() == id.Key() {
		t.Error("build fields must change Key but not PortableKey")
	}
}

// TestArtifactParams: codegen's tensor maps follow the tile-IR parameters;
// any other parameter codegen adds is an internal error.
func TestArtifactParams(t *testing.T) {
	tile := []artifact.Param{{Name: "k", Kind: artifact.KindPtr, Elem: "bf16"}, {Name: "n", Kind: artifact.KindI32, Elem: "i32"}}
	tma := &artifact.TMA{Tensor: "k", Dims: []artifact.TMADim{{Extent: 64}, {Stride: "n"}}, Box: []int{64, 64}, Swizzle: 128}
	cg := []codegen.Param{{Name: "k", Type: tir.PtrTo(tir.BF16), Kind: codegen.ParamU64}, {Name: "n", Type: tir.Scalar(tir.I32), Kind: codegen.ParamI32},
		{Name: "k.tmap", Type: tir.PtrTo(tir.BF16), Kind: codegen.ParamTensorMap, TMA: tma}}
	got, err := artifactParams(tile, cg)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 || got[2] != (artifact.Param{Name: "k.tmap", Kind: artifact.KindTensorMap, Elem: "bf16", TMA: tma}) {
		t.Errorf("params %+v", got)
	}
	cg[2].Kind = codegen.ParamI32
	if _, err := artifactParams(tile, cg); err == nil {
		t.Error("codegen's extra i32 parameter was accepted")
	}
}
