package flash

import (
	"context"
	"strings"
	"testing"

	"github.com/fac-compiler/fac/blockmask"
)

// TestBlockMaskProvenance: a block mask built by Forward records its mask
// and shape, and a kernel with another mask refuses it. Before, a block
// mask made for "none" (every block full) ran a causal kernel, which then
// skipped the mask everywhere and returned plain attention.
func TestBlockMaskProvenance(t *testing.T) {
	compile := func(mask string, srcs map[string]string) *Forward {
		t.Helper()
		f, err := CompileForward(Options{Mask: mask, Sources: srcs}, 16)
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	build := func(f *Forward, sh Shape) Inputs {
		t.Helper()
		bm, _, err := f.BuildBlockMask(sh, nil)
		if err != nil {
			t.Fatal(err)
		}
		n := sh.Batch * sh.Heads * sh.SeqQ * sh.Dim
		return Inputs{Q: make([]float32, n), K: make([]float32, n), V: make([]float32, n), BlockMask: bm}
	}
	sh := Shape{Batch: 1, Heads: 2, SeqQ: 100, SeqK: 100, Dim: 16}
	none, causal := compile("none", nil), compile("causal", nil)
	in := build(none, sh)
	if bm := in.BlockMask; bm.Mask != "none" || bm.BuiltB != 1 || bm.BuiltH != 2 {
		t.Fatalf("provenance: mask %q, built for %d×%d", bm.Mask, bm.BuiltB, bm.BuiltH)
	}
	if _, _, err := causal.RunCPU(in, sh); err == nil || !strings.Contains(err.Error(), "block mask was built for mask none, but the kernel's mask is causal") {
		t.Errorf("none's block mask with a causal kernel: %v", err)
	}
	// Made by hand from FlexAttention's tensors: no provenance, accepted.
	in.BlockMask.Mask = ""
	if _, _, err := causal.RunCPU(in, sh); err != nil {
		t.Errorf("block mask without provenance: %v", err)
	}
	// The same mask spelled another way is the same mask.
	sw := compile("sliding_window(8, 0)", nil)
	in = build(sw, sh)
	in.BlockMask.Mask = "sliding_window(left=8, right=0)"
	if _, _, err := sw.RunCPU(in, sh); err != nil {
		t.Errorf("named arguments: %v", err)
	}
	// Built for one head: shared over heads only if the mask ignores h.
	one := sh
	one.Heads = 1
	if _, _, err := causal.RunCPU(withShape(build(causal, one), sh), sh); err != nil {
		t.Errorf("causal built for one head, run with two: %v", err)
	}
	perHead := compile("per_head", map[string]string{"h.fa": "mask per_head(b, h, q_idx, kv_idx) {\n    return kv_idx <= q_idx + 10 * h\n}\n"})
	if _, _, err := perHead.RunCPU(withShape(build(perHead, one), sh), sh); err == nil || !strings.Contains(err.Error(), "mask per_head reads h and the call has 2 heads") {
		t.Errorf("a mask reading h built for one head, run with two: %v", err)
	}
	// The mask-free variant computes whatever blocks it is given.
	full, err := causal.FullVariant()
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := full.RunCPU(build(none, sh), sh); err != nil {
		t.Errorf("full variant: %v", err)
	}
}

// withShape gives in the tensors of shape sh, keeping its block mask.
func withShape(in Inputs, sh Shape) Inputs {
	n := sh.Batch * sh.Heads * sh.SeqQ * sh.Dim
	return Inputs{Q: make([]float32, n), K: make([]float32, n), V: make([]float32, n), BlockMask: in.BlockMask}
}

// TestBlockMaskRecordsRuntimeParams: a block mask built for one value of a
// run-time parameter (a decode offset) is refused for a call with another,
// which would otherwise skip the wrong blocks silently.
func TestBlockMaskRecordsRuntimeParams(t *testing.T) {
	src := "mask decode_offset(b, h, q_idx, kv_idx, offset: i32) {\n    return kv_idx <= q_idx + offset\n}\n"
	fwd, err := CompileForward(Options{Mask: "decode_offset", Sources: map[string]string{"d.fa": src},
		Consts: map[string]string{"SPARSE_Q": "64", "SPARSE_K": "64"}}, 16)
	if err != nil {
		t.Fatal(err)
	}
	sh := Shape{Batch: 1, Heads: 1, SeqQ: 64, SeqK: 256, Dim: 16}
	bm, method, err := fwd.BuildBlockMask(sh, map[string]any{"offset": 5})
	if err != nil {
		t.Fatal(err)
	}
	if method != blockmask.MethodAnalytic || bm.Params["offset"] != "5" {
		t.Fatalf("method %v, params %v", method, bm.Params)
	}
	n := sh.SeqQ * sh.Dim
	in := Inputs{Q: make([]float32, n), K: make([]float32, 4*n), V: make([]float32, 4*n), BlockMask: bm, Scalars: map[string]any{"offset": 100}}
	if _, _, err := fwd.RunCPU(in, sh); err == nil || !strings.Contains(err.Error(), "offset=5") {
		t.Errorf("offset 100 with a block mask for offset 5: %v", err)
	}
	in.Scalars["offset"] = 5
	if _, _, err := fwd.RunCPU(in, sh); err != nil {
		t.Errorf("matching offset: %v", err)
	}
	bm2, _, err := CreateBlockMask(context.Background(), BlockMaskOptions{Mask: "decode_offset", Sources: map[string]string{"d.fa": src},
		SeqQ: 64, SeqK: 256, BlockQ: 64, BlockK: 64, Scalars: map[string]any{"offset": 5}})
	if err != nil || !bm2.Equal(bm) || bm2.Params["offset"] != "5" {
		t.Errorf("CreateBlockMask: %v, params %v", err, bm2.Params)
	}
}
