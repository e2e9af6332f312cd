package main

import (
	"testing"

	"github.com/fac-compiler/fac"
	"github.com/fac-compiler/fac/artifact/bundle"
	"github.com/fac-compiler/fac/codegen"
	"github.com/fac-compiler/fac/compiler"
)

// TestBundleIsCurrent fails when the embedded bundle no longer holds the
// kernel this program compiles (the kernel, its mods or the code generator
// changed): rebuild it with the command in main.go's comment.
func TestBundleIsCurrent(t *testing.T) {
	b, err := bundle.Parse(attnBundle)
	if err != nil {
		t.Fatal(err)
	}
	// What RunCUDA runs on an sm_90a GPU: the kernel tuned for it.
	fwd, err := fac.CompileForward(fac.Options{Mask: "sliding_window(255, 0)", DType: "bf16", Target: codegen.TargetConfig{Arch: "sm_90a"}}, 64)
	if err != nil {
		t.Fatal(err)
	}
	if id := compiler.Identity(fwd.Result(), "sm_90a", nil); !b.Has(id) {
		t.Errorf("attn.bundle has no kernel %s: rebuild it (see main.go)", id)
	}
}
