package compiler

import (
	"regexp"
	"strings"
	"testing"

	"github.com/fac-compiler/fac/codegen"
)

// TestMaskSelect: in the stdlib kernels as the front end emits them, a
// select of -inf on a conjunction (the forward's mask on a partial block)
// takes its condition through one predicate move, so that llc keeps one
// select per element instead of one per condition, and every move feeds
// such a select; the backward's select of P (0 where masked) keeps the
// plain form (codegen/core's maskSelect).
func TestMaskSelect(t *testing.T) {
	moveRE := regexp.MustCompile(`(%\S+) = call i1 asm "mov\.pred \$0, \$1;"`)
	for _, c := range []struct {
		kernel, mask, arch string
		moves              bool
	}{
		{"flash_fwd", "sliding_window(32, 0)", "sm_90a", true},
		{"flash_fwd", "document", "sm_80", true},
		// mask-range leaves causal's partial block one compare (j < hi):
		// no conjunction, so no move.
		{"flash_fwd", "causal", "sm_90a", false},
		{"flash_bwd", "sliding_window(32, 0)", "sm_90a", false},
	} {
		t.Run(c.kernel+"/"+c.mask+"/"+c.arch, func(t *testing.T) {
			res, err := Compile(Request{Kernel: c.kernel, Mask: c.mask, Target: codegen.TargetConfig{Arch: c.arch},
				Consts: map[string]string{"DTYPE": "bf16", "HEAD_DIM": "64"}})
			if err != nil {
				t.Fatal(err)
			}
			out, err := codegen.Lower(res.Module, c.kernel, codegen.Options{Target: res.TargetFor(c.arch)})
			if err != nil {
				t.Fatal(err)
			}
			moves := moveRE.FindAllStringSubmatch(out.LL, -1)
			if got := len(moves) > 0; got != c.moves {
				t.Fatalf("%d predicate moves, want some: %v", len(moves), c.moves)
			}
			for _, mv := range moves {
				i := strings.Index(out.LL, "select i1 "+mv[1]+", float ")
				if i < 0 {
					t.Fatalf("predicate move %s feeds no float select", mv[1])
				}
				line := out.LL[i:]
				line = line[:strings.IndexByte(line, '\n')]
				if !strings.HasSuffix(line, "float 0xFFF0000000000000") {
					t.Fatalf("predicate move %s feeds %q, not a select of -inf", mv[1], line)
				}
			}
		})
	}
}
