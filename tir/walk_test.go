package tir

import (
	"os"
	"testing"
)

// TestAny checks Block.Any against a full Walk: it finds ops in nested
// regions, reports false when none matches, and stops at the first match.
func TestAny(t *testing.T) {
	src, err := os.ReadFile("testdata/attn_fwd.tir")
	if err != nil {
		t.Fatal(err)
	}
	m, err := Parse("attn_fwd.tir", string(src))
	if err != nil {
		t.Fatal(err)
	}
	body := m.Funcs[0].Body
	for _, k := range []Kind{OpFor, OpDot, OpStore, OpCall, OpAtomicAdd} {
		want := false
		body.Walk(func(op *Op) bool {
			want = want || op.Kind == k
			return true
		})
		if got := body.Any(func(op *Op) bool { return op.Kind == k }); got != want {
			t.Errorf("Any(kind %v) = %v, Walk found %v", k, got, want)
		}
	}
	n := 0
	body.Any(func(*Op) bool { n++; return true })
	if n != 1 {
		t.Errorf("Any visited %d ops after a match, want 1", n)
	}
}
