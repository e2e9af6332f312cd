package launch

import (
	"slices"
	"testing"
)

// TestTileOrder: every order is a permutation of the tiles; without costs
// it is the snake the persistent kernels computed themselves (odd full
// rounds mirrored); with costs each round keeps its tiles and balances the
// programs' work: on causal tiles (the forward's, S = 8192, 32 heads, 132
// programs) within 5% of the mean, where the snake is 14% over.
func TestTileOrder(t *testing.T) {
	for _, c := range []struct{ n, p int }{{0, 1}, {1, 1}, {7, 3}, {12, 4}, {2048, 132}, {5, 9}} {
		for _, costs := range [][]float64{nil, causalCosts(c.n)} {
			o := tileOrder(c.n, c.p, costs)
			seen := make([]bool, c.n)
			for s, tile := range o {
				if tile < 0 || int(tile) >= c.n || seen[tile] {
					t.Fatalf("n %d, p %d, costs %v: slot %d runs tile %d again or out of range: %v", c.n, c.p, costs != nil, s, tile, o)
				}
				seen[tile] = true
				if r := s / c.p; int(tile)/c.p != r {
					t.Fatalf("n %d, p %d: slot %d (round %d) runs tile %d of another round", c.n, c.p, s, r, tile)
				}
			}
		}
	}
	if got, want := tileOrder(7, 3, nil), []int32{0, 1, 2, 5, 4, 3, 6}; !slices.Equal(got, want) {
		t.Errorf("snake of 7 tiles on 3 programs: %v, want %v", got, want)
	}
	const n, p = 64 * 32, 132
	costs := causalCosts(n)
	for _, c := range []struct {
		name  string
		costs []float64
		most  float64
	}{{"snake", nil, 1.2}, {"round LPT", costs, 1.05}} {
		load := make([]float64, p)
		total := 0.0
		for s, tile := range tileOrder(n, p, c.costs) {
			load[s%p] += costs[tile]
			total += costs[tile]
		}
		ratio := slices.Max(load) / (total / p)
		if ratio > c.most || (c.costs == nil && ratio < 1.1) {
			t.Errorf("%s: the busiest program has %.3f of the mean's work, want at most %.2f", c.name, ratio, c.most)
		}
	}
}

// causalCosts are the forward's tile costs under a causal mask at 128-row
// tiles, 64 of them per head (the last q tile first): its kv blocks, the
// diagonal one twice, plus 2.5 blocks of overhead.
func causalCosts(n int) []float64 {
	c := make([]float64, n)
	for t := range c {
		pm := 63 - t%64
		c[t] = float64(pm) + 2 + 2.5
	}
	return c
}
