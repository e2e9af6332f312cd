package core

import "testing"

// TestRowRun checks the run of a row one warp instruction covers, which
// decides whether a store is worth converting (coalesceStore).
func TestRowRun(t *testing.T) {
	shape := []int{128, 128}
	for _, c := range []struct {
		name string
		lay  Layout
		want int
	}{
		// Accumulator fragments: 2 elements a thread, 4 lanes a row.
		{"mma", MMA{Version: 2, WarpsPerCTA: [2]int{8, 1}}, 8},
		// The default blocked layout: 4 elements a thread, 32 lanes a row.
		{"blocked", DefaultBlocked(shape, 8), 128},
		// The store layout for 16-bit elements: 8 a thread, 16 lanes a row.
		{"store", NewStoreVec(shape, 8, 8), 128},
	} {
		if got := rowRun(c.lay.Linear(shape, 8), 1); got != c.want {
			t.Errorf("%s: row run %d, want %d", c.name, got, c.want)
		}
	}
	if s := NewStoreVec(shape, 8, 8); s.SizePerThread[1] != 8 || s.String() == s.Blocked.String() {
		t.Errorf("StoreVec %v: want 8 elements a thread and its own name", s)
	}
}
