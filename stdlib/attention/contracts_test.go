package attention_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/fac-compiler/fac/artifact"
	"github.com/fac-compiler/fac/compiler"
	"github.com/fac-compiler/fac/launch"
	"github.com/fac-compiler/fac/stdlib/attention"
)

// TestContractsMatchKernels checks every stdlib kernel's contract against
// its .fa signature: every kernel has a contract in a Go file beside its
// .fa, and the contract covers each parameter exactly once with the right
// kind, for mods with and without aux tensors (kernels taking a mask).
func TestContractsMatchKernels(t *testing.T) {
	prog, err := compiler.Load(nil)
	if err != nil {
		t.Fatal(err)
	}
	var withContract []string
	for _, c := range attention.Contracts() {
		withContract = append(withContract, c.Kernel)
	}
	kernels := prog.Kernels()
	slices.Sort(kernels)
	if !slices.Equal(kernels, withContract) {
		t.Fatalf("stdlib kernels %v, contracts %v: each kernel needs a contract beside its .fa", kernels, withContract)
	}
	for _, c := range attention.Contracts() {
		src := attention.Files()["stdlib/attention/"+c.File]
		if !strings.Contains(src, "kernel "+c.Kernel) {
			t.Errorf("contract of %s names file %s, which does not declare it", c.Kernel, c.File)
		}
		for _, mask := range []string{"", "document"} {
			if mask != "" && !slices.Contains(c.Mods, "mask") {
				continue // a kernel without a mask mod (flash_bwd_preprocess)
			}
			res, err := compiler.Compile(compiler.Request{Kernel: c.Kernel, Mask: mask})
			if err != nil {
				t.Fatalf("%s mask=%q: %v", c.Kernel, mask, err)
			}
			if err := c.CheckParams(res.Params()); err != nil {
				t.Errorf("%s mask=%q: %v", c.Kernel, mask, err)
			}
		}
	}
}

// TestContractRejectsDrift shows the check catching a contract that no
// longer matches its kernel: a renamed, a missing and an extra parameter.
func TestContractRejectsDrift(t *testing.T) {
	res, err := compiler.Compile(compiler.Request{Kernel: attention.FlashFwd.Kernel})
	if err != nil {
		t.Fatal(err)
	}
	params := res.Params()
	renamed := slices.Clone(params)
	renamed[0].Name = "query"
	extra := append(slices.Clone(params), artifact.Param{Name: "bias", Kind: artifact.KindPtr, Elem: "f32"})
	for name, ps := range map[string][]artifact.Param{"renamed": renamed, "missing": params[1:], "extra": extra} {
		if err := attention.FlashFwd.CheckParams(ps); err == nil {
			t.Errorf("%s parameter: contract check passed", name)
		}
	}
}

// TestGrids checks the grid formulas on a few shapes.
func TestGrids(t *testing.T) {
	p := launch.Problem{Shape: launch.Shape{Batch: 2, Heads: 3, SeqQ: 129, SeqK: 7, Dim: 64},
		Attrs: map[string]int64{"BLOCK_M": 64, "BLOCK_Q": 128, "BLOCK_K": 128}}
	if g := attention.FlashFwd.Grid(p); g != [3]int{3, 6, 1} {
		t.Errorf("flash_fwd grid %v", g)
	}
	if g := attention.BlockClassify.Grid(p); g != [3]int{2, 6, 1} {
		t.Errorf("block_classify grid %v", g)
	}
}
