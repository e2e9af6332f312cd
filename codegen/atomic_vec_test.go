package codegen

import (
	"context"
	"strings"
	"testing"
)

// TestVectorReductions: atomic_dot adds an mma accumulator (pairs of
// columns per thread) into a row-major tile, so sm90 emits
// red.global.add.v2.f32 behind a run-time alignment check, with the
// scalar adds as the fallback; sm_80 has no vector reductions. The
// simulator runs both paths' arithmetic (TestSimulate/atomic_dot).
func TestVectorReductions(t *testing.T) {
	tool := findLLCs(t)[0]
	m, names := loadKernels(t, "atomic_dot")
	for _, arch := range archs {
		ptx, _, err := CompilePTX(context.Background(), m, names[0], Options{Target: testTarget(arch)}, tool)
		if err != nil {
			t.Fatal(err)
		}
		s := string(ptx)
		vec := strings.Count(s, "red.relaxed.gpu.global.add.v2.f32")
		scalar := strings.Count(s, "red.relaxed.gpu.global.add.f32")
		switch {
		case arch == "sm_80" && vec != 0:
			t.Errorf("%s: %d vector reductions, want none", arch, vec)
		case arch != "sm_80" && (vec == 0 || scalar < 2*vec):
			t.Errorf("%s: %d vector and %d scalar reductions, want vectors and a scalar fallback for each", arch, vec, scalar)
		}
		if want := map[string]string{"sm_80": ".version 7.8", "sm_90": ".version 8.1", "sm_90a": ".version 8.1"}[arch]; !strings.Contains(s, want) {
			t.Errorf("%s: PTX lacks %q (vector reductions need ISA 8.1)", arch, want)
		}
	}
}
