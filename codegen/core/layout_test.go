package core

import (
	"testing"

	"github.com/llir/llvm/ir/value"
)

// coord is the tensor coordinate of (register r, lane, warp) in x.
func (x *Linear) coord(r, lane, warp int) []int {
	c := x.RegOffset(r)
	for i, b := range x.lane {
		if lane>>i&1 != 0 {
			xorInto(c, b)
		}
	}
	for i, b := range x.warp {
		if warp>>i&1 != 0 {
			xorInto(c, b)
		}
	}
	return c
}

// TestLayoutsCover checks the linear-layout invariants for every named
// layout on a range of shapes and warp counts.
func TestLayoutsCover(t *testing.T) {
	shapes2 := [][]int{{1, 1}, {1, 64}, {64, 1}, {16, 8}, {16, 16}, {32, 64}, {64, 64}, {64, 128}, {128, 64}, {128, 128}, {4, 8}}
	for _, nw := range []int{1, 2, 4, 8} {
		var lays []Layout
		for _, s := range shapes2 {
			lays = append(lays, DefaultBlocked(s, nw))
		}
		for _, s := range [][]int{{64, 64}, {128, 64}, {16, 64}, {64, 16}} {
			m := MMA{WarpsPerCTA: MMAWarps(s[0], s[1], nw)}
			lays = append(lays, m, DotOperand{0, m}, DotOperand{1, m}, Slice{0, m}, Slice{1, m})
		}
		for _, lay := range lays {
			for _, s := range shapes2 {
				shape := s
				if lay.Rank() == 1 {
					shape = s[:1]
				}
				x := lay.Linear(shape, nw)
				if err := x.Check(); err != nil {
					t.Errorf("%s on %v, %d warps: %v", lay, shape, nw, err)
				}
			}
		}
	}
	for _, s := range [][]int{{1024}, {64}, {4}, {1}, {2, 4, 8}} {
		x := DefaultBlocked(s, 4).Linear(s, 4)
		if err := x.Check(); err != nil {
			t.Errorf("blocked %v: %v", s, err)
		}
	}
}

// TestMMAFragments checks the mma layouts against the PTX ISA fragment
// tables of mma.m16n8k16 (g = lane/4, t = lane%4).
func TestMMAFragments(t *testing.T) {
	m := MMA{WarpsPerCTA: [2]int{4, 1}}
	acc := m.Linear([]int{64, 64}, 4)
	a := DotOperand{0, m}.Linear([]int{64, 32}, 4)
	b := DotOperand{1, m}.Linear([]int{32, 64}, 4)
	for w := 0; w < 4; w++ {
		for lane := 0; lane < 32; lane++ {
			g, tt := lane/4, lane%4
			for i := 0; i < 8; i++ { // n tiles
				for c := 0; c < 4; c++ {
					want := []int{16*w + g + 8*(c>>1), 8*i + 2*tt + c&1}
					if got := acc.coord(4*i+c, lane, w); !EqualVec(got, want) {
						t.Fatalf("acc warp %d lane %d tile %d c%d: %v, want %v", w, lane, i, c, got, want)
					}
				}
			}
			for kk := 0; kk < 2; kk++ {
				for e := 0; e < 8; e++ { // a0..a3 as 8 halves
					want := []int{16*w + g + 8*((e>>1)&1), 16*kk + 2*tt + e&1 + 8*(e>>2)}
					if got := a.coord(8*kk+e, lane, w); !EqualVec(got, want) {
						t.Fatalf("A warp %d lane %d k%d e%d: %v, want %v", w, lane, kk, e, got, want)
					}
				}
				for j := 0; j < 8; j++ {
					for e := 0; e < 4; e++ { // b0, b1 as 4 halves
						want := []int{16*kk + 2*tt + e&1 + 8*(e>>1), 8*j + g}
						if got := b.coord(4*kk+8*j+e, lane, w); !EqualVec(got, want) {
							t.Fatalf("B warp %d lane %d k%d n%d e%d: %v, want %v", w, lane, kk, j, e, got, want)
						}
					}
				}
			}
		}
	}
}

// TestSliceBroadcastFree checks that a row reduction of the accumulator
// broadcasts back without moving data (the softmax path).
func TestSliceBroadcastFree(t *testing.T) {
	m := MMA{WarpsPerCTA: [2]int{4, 1}}
	row := Slice{1, m}.Linear([]int{64}, 4)
	col := m.Linear([]int{64, 1}, 4)
	full := m.Linear([]int{64, 64}, 4)
	if _, ok := remap(nil2(row.NumRegs()), row, col, func(c []int) []int { return removeDim(c, 1) }); !ok {
		t.Errorf("expand [64] -> [64,1] is not free")
	}
	if _, ok := remap(nil2(col.NumRegs()), col, full, func(c []int) []int { return []int{c[0], 0} }); !ok {
		t.Errorf("broadcast [64,1] -> [64,64] is not free")
	}
	// The accumulator of one dot is the A operand of the next for free.
	p := DotOperand{0, m}.Linear([]int{64, 64}, 4)
	if _, ok := remap(nil2(full.NumRegs()), full, p, Identity); !ok {
		t.Errorf("mma accumulator -> A operand is not free")
	}
}

func nil2(n int) []value.Value { return make([]value.Value, n) }
