package codegen

import (
	"context"
	"strings"
	"testing"

	"github.com/fac-compiler/fac/codegen/llc"
	"github.com/fac-compiler/fac/codegen/sm90"
)

// TestCTAsPerSM: FAC_CTAS_PER_SM=2 asks ptxas for two CTAs a
// multiprocessor (.minnctapersm 2) in a kernel of its own variant
// (wgmma-ctas2); a kernel with a producer warpgroup keeps one and says
// so; values under 2 or not integers change nothing.
func TestCTAsPerSM(t *testing.T) {
	t.Setenv(sm90.EnvWGMMA, "1")
	lower := func(kernel string) Result {
		t.Helper()
		m, name := loadKernel(t, kernel)
		res, err := Lower(m, name, Options{Arch: "sm_90a"})
		if err != nil {
			t.Fatal(err)
		}
		return *res
	}
	notes := func(r Result) string { return strings.Join(r.Notes, "\n") }
	t.Setenv(sm90.EnvCTAsPerSM, "2")
	if v := Variant("sm_90a"); v != "wgmma-ctas2" {
		t.Errorf("variant %q with %s=2", v, sm90.EnvCTAsPerSM)
	}
	r := lower("frontend_flash_128x128")
	if !strings.Contains(r.LL, `!"minctasm", i32 2}`) || !strings.Contains(notes(r), "ptxas is asked to fit 2 CTAs") {
		t.Errorf("no minctasm 2, or no note: %q", r.Notes)
	}
	r = lower("frontend_flash_128x128_ws")
	if !strings.Contains(r.LL, `!"minctasm", i32 1}`) || !strings.Contains(notes(r), "ignored: the producer warpgroup") {
		t.Errorf("producer kernel: want minctasm 1 and the note; notes %q", r.Notes)
	}
	if tool, err := llc.Find(); err == nil {
		m, name := loadKernel(t, "frontend_flash_128x128")
		ptx, _, err := CompilePTX(context.Background(), m, name, Options{Arch: "sm_90a"}, tool)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(ptx), ".minnctapersm 2") {
			t.Error("PTX without .minnctapersm 2")
		}
	}
	for _, v := range []string{"1", "two", ""} {
		t.Setenv(sm90.EnvCTAsPerSM, v)
		if got := Variant("sm_90a"); got != "wgmma" {
			t.Errorf("variant %q with %s=%q", got, sm90.EnvCTAsPerSM, v)
		}
		if r := lower("frontend_flash_128x128"); strings.Contains(r.LL, "minctasm") {
			t.Errorf("%s=%q: minctasm in the LLVM IR", sm90.EnvCTAsPerSM, v)
		}
	}
}
