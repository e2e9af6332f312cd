package core

import (
	"math"
	"testing"

	"github.com/fac-compiler/fac/tir"
)

// TestIndexCmpOperands checks what indexCmp relies on: which values are a
// tile's index along one dimension (indexDim), and the bounds that decide
// whether x - base may wrap (valueRange; mask-range's clamp of a bound to
// [0, N] passes, a bare row value does not).
func TestIndexCmpOperands(t *testing.T) {
	const src = `kernel @k(%n: i32, %q: i32) attributes {num_warps = 4} {
  %j = arange {start = 0, end = 64} : tensor<64xi32>
  %jr = reshape %j : tensor<1x64xi32>
  %jb = broadcast %jr : tensor<32x64xi32>
  %a = arange {start = 8, end = 40} : tensor<32xi32>
  %ac = reshape %a : tensor<32x1xi32>
  %ab = broadcast %ac : tensor<32x64xi32>
  %s = splat %n : tensor<32x1xi32>
  %zero = const {value = 0} : tensor<32x1xi32>
  %sixtyfour = const {value = 64} : tensor<32x1xi32>
  %lo = max %s, %zero : tensor<32x1xi32>
  %cl = min %lo, %sixtyfour : tensor<32x1xi32>
  %clb = broadcast %cl : tensor<32x64xi32>
  %qs = splat %q : tensor<64xi32>
  %cols = add %qs, %j : tensor<64xi32>
  return
}`
	m, err := tir.Parse("index.tir", src)
	if err != nil {
		t.Fatal(err)
	}
	vals := map[string]*tir.Value{}
	names := []string{"j", "jr", "jb", "a", "ac", "ab", "s", "zero", "sixtyfour", "lo", "cl", "clb", "qs", "cols"}
	for i, op := range m.Funcs[0].Body.Ops[:len(names)] {
		vals[names[i]] = op.Result()
	}
	for _, c := range []struct {
		name  string
		ok    bool
		d     int
		start int64
		n     int
	}{
		{"j", true, 0, 0, 64},
		{"jr", true, 1, 0, 64},
		{"jb", true, 1, 0, 64},
		{"ab", true, 0, 8, 32},
		{"cols", false, 0, 0, 0}, // a scalar plus the index: not the index
		{"clb", false, 0, 0, 0},
	} {
		d, start, n, ok := indexDim(vals[c.name])
		if ok != c.ok || ok && (d != c.d || start != c.start || n != c.n) {
			t.Errorf("indexDim(%%%s) = %d, %d, %d, %v; want %d, %d, %d, %v", c.name, d, start, n, ok, c.d, c.start, c.n, c.ok)
		}
	}
	for _, c := range []struct {
		name   string
		lo, hi int64
	}{
		{"clb", 0, 64},
		{"lo", 0, math.MaxInt32},
		{"s", math.MinInt32, math.MaxInt32},
		{"ab", 8, 39},
		{"sixtyfour", 64, 64},
	} {
		if lo, hi := valueRange(vals[c.name]); lo != c.lo || hi != c.hi {
			t.Errorf("valueRange(%%%s) = [%d, %d], want [%d, %d]", c.name, lo, hi, c.lo, c.hi)
		}
	}
}
