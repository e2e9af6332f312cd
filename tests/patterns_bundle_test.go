package tests

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/fac-compiler/fac"
	"github.com/fac-compiler/fac/artifact/bundle"
	"github.com/fac-compiler/fac/codegen/llc"
	"github.com/fac-compiler/fac/internal/version"
)

// TestWritePatternBundle writes the kernels of the mod patterns
// (TestGPUModPatterns: bf16, head dim 64, each tuned for its arch as
// RunCUDA compiles them) into the bundle FAC_WRITE_PATTERN_BUNDLE names,
// for the archs in FAC_PATTERN_ARCHS (default sm_90a,sm_80), so that the
// GPU machine, which has no llc, can run them (scripts/gpu-prepare). A
// no-op without the variable.
func TestWritePatternBundle(t *testing.T) {
	out := os.Getenv("FAC_WRITE_PATTERN_BUNDLE")
	if out == "" {
		t.Skip("FAC_WRITE_PATTERN_BUNDLE not set")
	}
	tool, err := llc.Find()
	if err != nil {
		t.Fatal(err)
	}
	archs := "sm_90a,sm_80"
	if a := os.Getenv("FAC_PATTERN_ARCHS"); a != "" {
		archs = a
	}
	b := &bundle.Bundle{Format: bundle.Format, FacVersion: version.Version}
	for _, arch := range strings.Split(archs, ",") {
		for _, p := range modPatterns {
			fwd := compilePatternAs(t, p, "bf16", 64)
			opts := fwd.Options()
			opts.Arch = arch
			tuned, err := fac.CompileForward(opts, 64)
			if err != nil {
				t.Fatalf("%s: %v", p.name, err)
			}
			ks, err := tuned.BundleKernels(context.Background(), nil, arch, tool)
			if err != nil {
				t.Fatalf("%s %s: %v", p.name, arch, err)
			}
			for _, k := range ks {
				if !b.Has(k.Ident) {
					b.Add(*k)
				}
			}
		}
	}
	data, err := bundle.Marshal(b)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(out, data, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("wrote %s: %d kernels", out, len(b.Kernels))
}
