package codegen

import (
	"bytes"
	"regexp"
	"testing"
)

// TestPrintTMAPlans checks that sm90's TMA stores and tensor reductions,
// which tma-store and tma-reduce decide, show in --print-ir-after on the
// ops they take.
func TestPrintTMAPlans(t *testing.T) {
	for _, c := range []struct {
		kernel, opt, phase string
		want               *regexp.Regexp
	}{
		{"frontend_flash_128x128_ws", "tma-store=on", "tma-store", regexp.MustCompile(`(?m)^\s*store .*// TMA store into o$`)},
		{"frontend_bwd_64x128_tma", "dq=tma", "tma-reduce", regexp.MustCompile(`(?m)^\s*atomic_add .*// TMA tensor reductions into dq_accum$`)},
	} {
		m, name := loadKernel(t, c.kernel)
		var out bytes.Buffer
		if _, err := Lower(m, name, Options{Target: withOpts(t, wgmmaTarget, c.opt), PrintAfter: c.phase, Out: &out}); err != nil {
			t.Fatal(err)
		}
		if !c.want.Match(out.Bytes()) {
			t.Errorf("%s with %s, after %s: no line matches %s", c.kernel, c.opt, c.phase, c.want)
		}
	}
}
