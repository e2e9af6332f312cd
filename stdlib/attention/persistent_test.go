package attention_test

import (
	"slices"
	"testing"

	"github.com/fac-compiler/fac/compiler"
	"github.com/fac-compiler/fac/launch"
	"github.com/fac-compiler/fac/stdlib/attention"
	"github.com/fac-compiler/fac/tir"
)

// TestPersistentContracts: the forward kernels compiled with persistent =
// true take the grid parameters last, and their contracts accept them.
func TestPersistentContracts(t *testing.T) {
	for _, c := range []*launch.Contract{attention.FlashFwd, attention.FlashFwdSinks} {
		for _, mask := range []string{"", "document"} {
			res, err := compiler.Compile(compiler.Request{Kernel: c.Kernel, Mask: mask, Consts: map[string]string{"persistent": "true"}})
			if err != nil {
				t.Fatalf("%s mask=%q: %v", c.Kernel, mask, err)
			}
			var names []string
			for _, p := range res.Params() {
				names = append(names, p.Name)
			}
			if len(names) < 4 || !slices.Equal(names[len(names)-4:], tir.GridParams) {
				t.Errorf("%s mask=%q: parameters %v do not end with %v", c.Kernel, mask, names, tir.GridParams)
			}
			if err := c.CheckParams(res.Params()); err != nil {
				t.Errorf("%s mask=%q: %v", c.Kernel, mask, err)
			}
		}
	}
}
