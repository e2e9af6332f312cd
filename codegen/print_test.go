package codegen

import (
	"bytes"
	"regexp"
	"testing"
)

// TestPrintPhaseDecisions checks that each GPU phase that decides
// something leaves it in the IR that --print-ir-after shows, on the ops it
// decided for: a reader finds what select-async staged, what stayed
// resident, the layouts, the shared-memory plan, the pipelining, TMA, the
// producer's share, TMA stores and tensor reductions, phase by phase.
func TestPrintPhaseDecisions(t *testing.T) {
	for _, c := range []struct {
		kernel, opt, phase string
		want               *regexp.Regexp
	}{
		{"frontend_bwd_64x128_ws", "", "select-async", regexp.MustCompile(`(?m)^\s*%\d+ = load .* : tensor<64x128xbf16> // staged: operand B of %\d+ and B of %\d+$`)},
		{"frontend_bwd_64x128_ws", "", "stage-resident", regexp.MustCompile(`(?m)^\s*%\d+ = load .*// staged: operand A of %\d+ and A of %\d+, resident$`)},
		{"frontend_bwd_64x128_ws", "", "assign-layouts", regexp.MustCompile(`(?m)^\s*%\d+ = load .* : tensor<128x128xbf16> #blocked\{spt=\[1 8\], tpw=\[2 16\], wpc=\[8 1\], order=\[1 0\]\} // staged`)},
		{"frontend_bwd_64x128_ws", "", "plan-async", regexp.MustCompile(`(?m)// staged: operand A of %\d+ and A of %\d+, smem \[0, 32768\), resident$`)},
		{"frontend_bwd_64x128_ws", "", "pipeline-loads", regexp.MustCompile(`(?m)// staged: operand B .*, smem \[\d+, \d+\), 2 buffers 16384 apart, prefetched$`)},
		{"frontend_bwd_64x128_ws", "", "tma-loads", regexp.MustCompile(`(?m)// staged: operand B .*, prefetched, TMA$`)},
		{"frontend_bwd_64x128_ws", "", "warp-specialize", regexp.MustCompile(`(?m)// staged: operand B .*, prefetched, TMA, issued by the producer$`)},
		{"frontend_bwd_64x128_ws", "", "warp-specialize", regexp.MustCompile(`(?m)^\s*%\d+ = program_id \{axis = 1\} : i32 // producer too$`)},
		{"frontend_bwd_64x128_ws", "", "warp-specialize", regexp.MustCompile(`(?m)^\s*\} // producer: fills each buffer once the consumers emptied it$`)},
		{"frontend_flash_128x128_ws", "tma-store=on", "tma-store", regexp.MustCompile(`(?m)^\s*store .*// TMA store into o$`)},
		{"frontend_bwd_64x128_tma", "dq=tma", "tma-reduce", regexp.MustCompile(`(?m)^\s*atomic_add .*// TMA tensor reductions into dq_accum$`)},
	} {
		m, name := loadKernel(t, c.kernel)
		var out bytes.Buffer
		tc := wgmmaTarget
		if c.opt != "" {
			tc = withOpts(t, wgmmaTarget, c.opt)
		}
		if _, err := Lower(m, name, Options{Target: tc, PrintAfter: c.phase, Out: &out}); err != nil {
			t.Fatal(err)
		}
		if !c.want.Match(out.Bytes()) {
			t.Errorf("%s %s, after %s: no line matches %s", c.kernel, c.opt, c.phase, c.want)
		}
	}
}
