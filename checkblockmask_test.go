package fac

import (
	"strings"
	"testing"
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
