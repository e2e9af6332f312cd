package codegen

import (
	"bytes"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestPipelineLoads checks the pipeline-loads phase on sm_90a's wgmma path:
// the attention kernels' K and V (whose addresses come from the block-list
// walk, scalars of the induction variable) are double-buffered and issued
// twice (prologue and prefetch); disabling the phase gives the unpipelined
// kernel back; sm_80's table does not run it. TestSimulate runs the
// pipelined kernels (sm_90a, sm_90a+wgmma) against the interpreter.
func TestPipelineLoads(t *testing.T) {
	groups := func(ll string) int { return strings.Count(ll, "call void @llvm.nvvm.cp.async.commit.group()") }
	for _, name := range []string{"flash_fwd_d128_causal", "frontend_flash_document"} {
		m, kernels := loadKernels(t, name)
		k := kernels[0]
		var print bytes.Buffer
		res, err := Lower(m, k, Options{Target: wgmmaTarget, PrintAfter: "pipeline-loads", Out: &print})
		if err != nil {
			t.Fatal(err)
		}
		loops := kvLoops(m, k)
		if g := groups(res.LL); g != 1+4*loops {
			t.Errorf("%s: %d commit groups, want %d (resident Q; K and V in the prologue and the prefetch of each loop)", name, g, 1+4*loops)
		}
		if !strings.Contains(print.String(), "resident") {
			t.Errorf("%s: Q is not resident (stage-resident) in the print after pipeline-loads", name)
		}
		if n := strings.Count(print.String(), "2 buffers"); n != 2*loops {
			t.Errorf("%s: %d double-buffered tiles in the print after pipeline-loads, want %d:\n%s", name, n, 2*loops, print.String())
		}
		off, err := Lower(m, k, Options{Target: wgmmaTarget, Disable: map[string]bool{"pipeline-loads": true}})
		if err != nil {
			t.Fatal(err)
		}
		if g := groups(off.LL); g != 1+2*loops {
			t.Errorf("%s without pipeline-loads: %d commit groups, want %d (Q; K, V per loop)", name, g, 1+2*loops)
		}
		if off.SharedBytes >= res.SharedBytes {
			t.Errorf("%s: shared memory %d pipelined, %d not: want more when double-buffered", name, res.SharedBytes, off.SharedBytes)
		}
	}
	for _, arch := range []string{"sm_80"} {
		for _, n := range PhaseNames(arch) {
			if n == "pipeline-loads" {
				t.Errorf("%s runs pipeline-loads (it measured slower there, see docs/codegen.md)", arch)
			}
		}
	}
}

// TestPipelinePrintGolden compares the layout-annotated IR of a hand-written
// attention kernel after stage-resident and after pipeline-loads (sm_90a,
// wgmma) with testdata/golden/phases: Q resident, K and V double-buffered
// and prefetched.
func TestPipelinePrintGolden(t *testing.T) {
	m, k := loadKernel(t, "flash_fwd_d64")
	for _, phase := range []string{"stage-resident", "pipeline-loads"} {
		var out bytes.Buffer
		if _, err := Lower(m, k, Options{Target: wgmmaTarget, PrintAfter: phase, Out: &out}); err != nil {
			t.Fatal(err)
		}
		checkGolden(t, filepath.Join("testdata", "golden", "phases", "flash_fwd_d64.sm_90a-wgmma."+phase+".txt"), out.Bytes())
	}
}

// TestSiblingLoopsShareBuffers: the second of two pipelined loops at the
// kernel's top level takes the first one's buffers (placeStaged), and the
// first loop's exit then frees them with a CTA barrier even on cp.async
// (no release counters). TestSimulate runs the kernel.
func TestSiblingLoopsShareBuffers(t *testing.T) {
	m, k := loadKernel(t, "two_loops")
	var print bytes.Buffer
	res, err := Lower(m, k, Options{Target: testTarget("sm_90a"), PrintAfter: "pipeline-loads", Out: &print})
	if err != nil {
		t.Fatal(err)
	}
	places := regexp.MustCompile(`staged: [^\n]*smem (\[\d+, \d+\))`).FindAllStringSubmatch(print.String(), -1)
	if len(places) != 2 || places[0][1] != places[1][1] {
		t.Errorf("the two loops' tiles are placed at %v, want one place for both:\n%s", places, print.String())
	}
	i := strings.Index(res.LL, "\nfor.exit")
	if i < 0 {
		t.Fatal("no for.exit block")
	}
	block := res.LL[i+1:]
	if j := strings.Index(block, "\n\n"); j >= 0 {
		block = block[:j]
	}
	if !strings.Contains(block, "@llvm.nvvm.barrier0()") {
		t.Errorf("the first loop's exit has no CTA barrier before the second loop reuses its buffers:\n%s", block)
	}
}
