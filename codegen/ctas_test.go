package codegen

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/fac-compiler/fac/codegen/llc"
)

// TestCTAsPerSM: ctas-per-sm=2 asks ptxas for two CTAs a multiprocessor
// (.minnctapersm 2) in a kernel of its own variant (wgmma-ctas2); a kernel
// with a producer warpgroup keeps one and says so; values under 2 change
// nothing. A kernel's own ctas_per_sm argument does the same (the switch
// overrides it), and values out of 1 to 32 are refused.
func TestCTAsPerSM(t *testing.T) {
	t.Parallel()
	lower := func(kernel string, target TargetConfig) Result {
		t.Helper()
		m, name := loadKernel(t, kernel)
		res, err := Lower(m, name, Options{Target: target})
		if err != nil {
			t.Fatal(err)
		}
		return *res
	}
	notes := func(r Result) string { return strings.Join(r.Notes, "\n") }
	two := withOpts(t, wgmmaTarget, "ctas-per-sm=2")
	if v := two.Variant(); v != "wgmma-ctas2" {
		t.Errorf("variant %q with ctas-per-sm=2", v)
	}
	r := lower("frontend_flash_128x128", two)
	if !strings.Contains(r.LL, `!"minctasm", i32 2}`) || !strings.Contains(notes(r), "ptxas is asked to fit 2 CTAs") {
		t.Errorf("no minctasm 2, or no note: %q", r.Notes)
	}
	r = lower("frontend_flash_128x128_ws", two)
	if !strings.Contains(r.LL, `!"minctasm", i32 1}`) || !strings.Contains(notes(r), "ignored: the producer warpgroup") {
		t.Errorf("producer kernel: want minctasm 1 and the note; notes %q", r.Notes)
	}
	if tool, err := llc.Find(); err == nil {
		m, name := loadKernel(t, "frontend_flash_128x128")
		ptx, _, err := CompilePTX(context.Background(), m, name, Options{Target: two}, tool)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(ptx), ".minnctapersm 2") {
			t.Error("PTX without .minnctapersm 2")
		}
	}
	for _, n := range []int{0, 1} {
		c := wgmmaTarget
		c.CTAsPerSM = n
		if got := c.Variant(); got != "wgmma" {
			t.Errorf("variant %q with CTAsPerSM %d", got, n)
		}
		if r := lower("frontend_flash_128x128", c); strings.Contains(r.LL, "minctasm") {
			t.Errorf("CTAsPerSM %d: minctasm in the LLVM IR", n)
		}
	}
	// The kernel's own ctas_per_sm asks the same without the switch, and
	// the switch, where set, overrides it.
	withArg := func(kernel string, n int64, target TargetConfig) (Result, error) {
		m, name := loadKernel(t, kernel)
		m.Func(name).SetAttr("ctas_per_sm", n)
		res, err := Lower(m, name, Options{Target: target})
		if err != nil {
			return Result{}, err
		}
		return *res, nil
	}
	if r, err := withArg("frontend_flash_128x128", 2, wgmmaTarget); err != nil || !strings.Contains(r.LL, `!"minctasm", i32 2}`) || !strings.Contains(notes(r), "ctas_per_sm = 2: ptxas is asked") {
		t.Errorf("ctas_per_sm = 2: err %v, notes %q", err, r.Notes)
	}
	if r, err := withArg("frontend_flash_128x128", 1, wgmmaTarget); err != nil || strings.Contains(r.LL, "minctasm") {
		t.Errorf("ctas_per_sm = 1: err %v, or minctasm in the LLVM IR", err)
	}
	if r, err := withArg("frontend_flash_128x128_ws", 2, wgmmaTarget); err != nil || !strings.Contains(r.LL, `!"minctasm", i32 1}`) {
		t.Errorf("producer kernel with ctas_per_sm = 2: err %v, want minctasm 1", err)
	}
	if r, err := withArg("frontend_flash_128x128", 2, withOpts(t, wgmmaTarget, "ctas-per-sm=3")); err != nil || !strings.Contains(r.LL, `!"minctasm", i32 3}`) {
		t.Errorf("ctas-per-sm=3 over ctas_per_sm = 2: err %v", err)
	}
	for _, n := range []int64{0, -1, 33} {
		if _, err := withArg("frontend_flash_128x128", n, wgmmaTarget); err == nil || !strings.Contains(err.Error(), fmt.Sprintf("ctas_per_sm = %d: want 1", n)) {
			t.Errorf("ctas_per_sm = %d: err %v, want the range", n, err)
		}
	}
}
