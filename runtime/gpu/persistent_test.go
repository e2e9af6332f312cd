package gpu_test

import (
	"context"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/fac-compiler/fac/artifact"
	"github.com/fac-compiler/fac/artifact/bundle"
	"github.com/fac-compiler/fac/codegen/llc"
	"github.com/fac-compiler/fac/compiler"
	"github.com/fac-compiler/fac/internal/version"
	"github.com/fac-compiler/fac/launch"
	"github.com/fac-compiler/fac/stdlib/attention"
	"github.com/fac-compiler/fac/tir"
)

// denseMask is a block mask of b×h×1 q blocks, each listing numK kv
// blocks, for binding (its values are not read here).
type denseMask struct{ numK int }

func (m denseMask) Lists(bool) (counts, indices, fullCounts, fullIndices []int32) {
	return make([]int32, 1), make([]int32, m.numK), make([]int32, 1), make([]int32, m.numK)
}
func (m denseMask) Dims() (b, h, numQ, numK int) { return 1, 1, 1, m.numK }
func (m denseMask) RowLens() (kv, q int)         { return m.numK, 1 }

// TestPersistentBundle: a persistent flash_fwd built ahead of time keeps
// its grid parameters through a bundle (after the tile function's, before
// the tensor maps codegen adds), and a call bound to the bundled artifact
// is persistent, with the arguments of one bound to the tile function and
// given the tensor maps (as the runtime launches a CPU-bound call).
func TestPersistentBundle(t *testing.T) {
	tool, err := llc.Find()
	if err != nil {
		t.Skipf("no llc: %v", err)
	}
	res, err := compiler.Compile(compiler.Request{Kernel: "flash_fwd", Mask: "causal",
		Consts: map[string]string{"persistent": "true", "DTYPE": "bf16", "HEAD_DIM": "64"}})
	if err != nil {
		t.Fatal(err)
	}
	tile := res.Params()
	n := len(tile)
	for i, name := range tir.GridParams {
		if p := tile[n-5+i]; p.Name != name || p.Kind != artifact.KindI32 {
			t.Fatalf("tile parameter %d is %+v, want i32 %s", n-5+i, p, name)
		}
	}
	if p := tile[n-1]; p.Name != tir.GridOrder || p.Kind != artifact.KindPtr || p.Elem != "i32" {
		t.Fatalf("last tile parameter is %+v, want ptr<i32> %s", p, tir.GridOrder)
	}
	b := &bundle.Bundle{Format: bundle.Format, FacVersion: version.Version}
	for _, arch := range []string{"sm_80", "sm_90a"} {
		a, err := compiler.BuildArtifact(context.Background(), res, arch, tool, nil)
		if err != nil {
			t.Fatalf("%s: %v", arch, err)
		}
		b.Add(*a)
	}
	path := filepath.Join(t.TempDir(), "persistent.facb")
	if err := bundle.Write(path, b); err != nil {
		t.Fatal(err)
	}
	got, err := bundle.Read(path)
	if err != nil {
		t.Fatal(err)
	}
	sh := launch.Shape{Batch: 2, Heads: 4, KVHeads: 2, SeqQ: 127, SeqK: 257, Dim: 64}
	for i, arch := range []string{"sm_80", "sm_90a"} {
		a := got.Find(compiler.Identity(res, arch, tool))
		if a == nil {
			t.Fatalf("%s: not found in the bundle", arch)
		}
		if !reflect.DeepEqual(a.Params, b.Kernels[i].Params) || !reflect.DeepEqual(a.Params[:n], tile) {
			t.Fatalf("%s: bundled parameters %+v, want the tile function's %+v then tensor maps", arch, a.Params, tile)
		}
		for _, p := range a.Params[n:] {
			if p.Kind != artifact.KindTensorMap {
				t.Errorf("%s: parameter %s (%s) after the grid parameters", arch, p.Name, p.Kind)
			}
		}
		req := launch.Request{Problem: launch.Problem{Shape: sh, Attrs: a.Attrs}, BlockMask: denseMask{numK: 3}}
		call, err := attention.FlashFwd.Bind(a.Params, req)
		if err != nil {
			t.Fatalf("%s: %v", arch, err)
		}
		if !call.Persistent() || call.Tiles != [3]int{2, 8, 1} || call.Grid != [3]int{16, 1, 1} {
			t.Errorf("%s: persistent %v, tiles %v, grid %v", arch, call.Persistent(), call.Tiles, call.Grid)
		}
		cpuCall, err := attention.FlashFwd.Bind(tile, req)
		if err != nil {
			t.Fatal(err)
		}
		ext, err := cpuCall.WithTensorMaps(a.Params)
		if err != nil {
			t.Fatalf("%s: %v", arch, err)
		}
		if !reflect.DeepEqual(ext.Args, call.Args) || ext.Grid != call.Grid {
			t.Errorf("%s: a call bound to the tile function launches with other arguments", arch)
		}
	}
}
