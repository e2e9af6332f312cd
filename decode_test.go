package fac_test

import (
	"math"
	"testing"

	"github.com/fac-compiler/fac"
)

// TestRotaryTables: RoPE's tables are [positions, rotaryDim/2] with the
// angle p · base^(−2i/rotaryDim): position 0 rotates nothing, pair 1 of
// an 8-column rotation at base 10000 turns by 0.1 a position, and the base
// is the caller's.
func TestRotaryTables(t *testing.T) {
	cos, sin := fac.RotaryTables(5, 8, 10000)
	if len(cos) != 5*4 || len(sin) != 5*4 {
		t.Fatalf("tables of %d and %d values, want 20", len(cos), len(sin))
	}
	for i := range 4 {
		if cos[i] != 1 || sin[i] != 0 {
			t.Errorf("position 0, pair %d: cos %v, sin %v; want 1, 0", i, cos[i], sin[i])
		}
	}
	near := func(got float32, want float64) bool { return math.Abs(float64(got)-want) < 1e-7 }
	if c, s := cos[3*4+1], sin[3*4+1]; !near(c, math.Cos(0.3)) || !near(s, math.Sin(0.3)) {
		t.Errorf("position 3, pair 1: cos %v, sin %v; want those of 0.3", c, s)
	}
	cos, sin = fac.RotaryTables(2, 4, 500000)
	if theta := 1 / math.Sqrt(500000); !near(cos[2+1], math.Cos(theta)) || !near(sin[2+1], math.Sin(theta)) {
		t.Errorf("base 500000, position 1, pair 1: cos %v, sin %v; want those of %v", cos[3], sin[3], theta)
	}
}
