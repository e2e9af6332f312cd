package cpu_test

import (
	"runtime"
	"testing"

	"github.com/fac-compiler/fac/runtime/cpu"
)

// TestPersistentPrograms: the reference device runs a persistent kernel on
// an odd number of programs, at least as many as it runs at once, each
// running two tiles or more.
func TestPersistentPrograms(t *testing.T) {
	procs := max(runtime.GOMAXPROCS(0)|1, 3)
	for _, tc := range []struct{ total, want int }{
		{0, 1}, {1, 1}, {2, 1}, {3, 1}, {5, 2}, {6, 3}, {16, min(procs, 8)}, {1000, procs},
	} {
		if got := cpu.PersistentPrograms(tc.total); got != tc.want {
			t.Errorf("PersistentPrograms(%d) = %d, want %d", tc.total, got, tc.want)
		}
	}
}
