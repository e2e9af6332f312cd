package passes

import (
	"testing"

	"github.com/fac-compiler/fac/tir"
)

// TestCSEIdempotent: what cse leaves has no duplicates left to find, and
// it never removes an op that is not pure.
func TestCSEIdempotent(t *testing.T) {
	for _, in := range allInputs(t) {
		m := parseFile(t, in)
		impure := countOps(m, func(op *tir.Op) bool { return !pure(op) })
		if err := cse(m); err != nil {
			t.Fatal(err)
		}
		if n := countOps(m, func(op *tir.Op) bool { return !pure(op) }); n != impure {
			t.Errorf("%s: %d ops that are not pure, %d before", in, n, impure)
		}
		once := m.String()
		if err := cse(m); err != nil || m.String() != once {
			t.Errorf("%s: second cse: err %v, changed: %v", in, err, m.String() != once)
		}
	}
}

func countOps(m *tir.Module, pred func(*tir.Op) bool) int {
	n := 0
	for _, f := range m.Funcs {
		f.Body.Walk(func(op *tir.Op) bool {
			if pred(op) {
				n++
			}
			return true
		})
	}
	return n
}
