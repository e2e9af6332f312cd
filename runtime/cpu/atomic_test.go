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

// TestLastArrival runs tir/testdata/last_arrival.tir: each of splits
// concurrent programs of a tile writes its row, and the last to arrive
// sums every program's row. Launched again on the same counters (left at
// 0 by the last program), it gives the same sums; a counter that was not
// zeroed is an error.
func TestLastArrival(t *testing.T) {
	src, err := os.ReadFile("../../tir/testdata/last_arrival.tir")
	if err != nil {
		t.Fatal(err)
	}
	m, err := tir.Parse("last_arrival.tir", string(src))
	if err != nil {
		t.Fatal(err)
	}
	const tiles, splits = 3, 7
	want := make([]float32, tiles*16)
	for s := range splits {
		for i := range want {
			want[i] += float32((s*tiles+i/16)*16 + i%16)
		}
	}
	counters := FromI32("counters", make([]int32, tiles))
	for run := range 20 {
		part, out := NewBuffer("part", tir.F32, splits*tiles*16), NewBuffer("out", tir.F32, tiles*16)
		if err := Launch(m, "merge", [3]int{tiles, splits, 1}, part, out, counters, splits); err != nil {
			t.Fatal(err)
		}
		if got := out.F32(); !equalF32(got, want) {
			t.Fatalf("run %d: out = %v, want %v", run, got, want)
		}
		for i, c := range counters.I32() {
			if c != 0 {
				t.Fatalf("run %d: counter %d left at %d", run, i, c)
			}
		}
	}
	part, out := NewBuffer("part", tir.F32, splits*tiles*16), NewBuffer("out", tir.F32, tiles*16)
	err = Launch(m, "merge", [3]int{tiles, splits, 1}, part, out, FromI32("counters", []int32{0, splits, 0}), splits)
	if want := `counter "counters"[1] holds 7, not 0 to 6: it was not zeroed`; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("error %v, want %q", err, want)
	}
}
