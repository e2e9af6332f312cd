package passes

import (
	"testing"

	"github.com/fac-compiler/fac/tir"
)

// TestDCEKeepsEffects: stores, calls and returns all survive, and a second
// run finds nothing more to remove (dce reaches its fixpoint in one run).
func TestDCEKeepsEffects(t *testing.T) {
	effect := func(op *tir.Op) bool {
		return op.Kind == tir.OpStore || op.Kind == tir.OpCall || op.Kind == tir.OpReturn
	}
	for _, in := range allInputs(t) {
		m := parseFile(t, in)
		n := countOps(m, effect)
		if err := dce(m); err != nil {
			t.Fatal(err)
		}
		if err := tir.Verify(m); err != nil {
			t.Fatalf("%s: %v", in, err)
		}
		if got := countOps(m, effect); got != n {
			t.Errorf("%s: %d stores, calls and returns left of %d", in, got, n)
		}
		once := m.String()
		if err := dce(m); err != nil || m.String() != once {
			t.Errorf("%s: second dce: err %v, changed: %v", in, err, m.String() != once)
		}
	}
}
