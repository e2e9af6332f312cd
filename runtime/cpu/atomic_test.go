package cpu

import (
	"os"
	"strings"
	"testing"

	"github.com/fac-compiler/fac/tir"
)

// TestAtomicAdd runs tir/testdata/atomic.tir: 64 concurrent programs add
// their 16-element slices of x into one row twice (unmasked, then masked
// to the first n lanes). Integer-valued data keeps f32 sums exact whatever
// the order, so a lost update shows.
func TestAtomicAdd(t *testing.T) {
	src, err := os.ReadFile("../../tir/testdata/atomic.tir")
	if err != nil {
		t.Fatal(err)
	}
	m, err := tir.Parse("atomic.tir", string(src))
	if err != nil {
		t.Fatal(err)
	}
	const programs, n = 64, 5
	xs := make([]float32, programs*16)
	want := make([]float32, 16)
	for i := range xs {
		xs[i] = float32(i%7 - 3)
		want[i%16] += xs[i]
		if i%16 < n {
			want[i%16] += xs[i]
		}
	}
	acc := NewBuffer("acc", tir.F32, 16)
	if err := Launch(m, "accumulate", [3]int{programs, 1, 1}, FromF32("x", xs), acc, n); err != nil {
		t.Fatal(err)
	}
	if got := acc.F32(); !equalF32(got, want) {
		t.Errorf("acc = %v, want %v", got, want)
	}
	// Bounds are checked like a store's.
	short := NewBuffer("acc", tir.F32, 8)
	err = Launch(m, "accumulate", [3]int{1, 1, 1}, FromF32("x", xs), short, n)
	if err == nil || !strings.Contains(err.Error(), "atomic_add out of bounds") {
		t.Errorf("error %v, want an out-of-bounds atomic_add", err)
	}
}
