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
		for _, wpc := range [][2]int{{4, 2}, {4, 1}} {
			if wpc[0]*wpc[1] == nw {
				m := MMA{WarpsPerCTA: wpc, Version: 3}
				lays = append(lays, m, DotOperand{0, m}, DotOperand{1, m}, Slice{0, m}, Slice{1, m})
			}
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

// TestMMAv3Fragments checks the wgmma accumulator (MMA version 3) against
// the PTX ISA's m64nNk16 D fragment: in warpgroup g, warp w%4, lane l,
// d[i] is at row 64g + 16(w%4) + l/4 + 8((i>>1)&1), column 8(i>>2) +
// 2(l%4) + (i&1), per instruction (M block of 64 rows per warpgroup, N
// columns); instruction (M block b, N chunk of nc columns from j0) owns
// registers b·N/2 + j0/2 .. + nc/2. It covers the tile exactly once; the
// RS A fragment is the m16n8k16 A fragment per warp.
func TestMMAv3Fragments(t *testing.T) {
	for _, c := range []struct{ nw, M, N int }{{4, 64, 64}, {4, 64, 128}, {4, 128, 64}, {8, 128, 128}, {8, 256, 32}, {4, 64, 512}} {
		m := MMA{WarpsPerCTA: [2]int{c.nw, 1}, Version: 3}
		acc := m.Linear([]int{c.M, c.N}, c.nw)
		if err := acc.Check(); err != nil {
			t.Errorf("%s on %dx%d: %v", m, c.M, c.N, err)
			continue
		}
		nWG := c.nw / 4
		seen := map[[2]int]int{}
		for w := 0; w < c.nw; w++ {
			g := w / 4
			for lane := 0; lane < 32; lane++ {
				for b := 0; b < c.M/(64*nWG); b++ {
					for j0 := 0; j0 < c.N; j0 += min(c.N, 256) {
						nc := min(c.N, 256)
						for i := 0; i < nc/2; i++ {
							r := b*c.N/2 + j0/2 + i
							want := []int{b*64*nWG + 64*g + 16*(w%4) + lane/4 + 8*((i>>1)&1), j0 + 8*(i>>2) + 2*(lane%4) + i&1}
							got := acc.coord(r, lane, w)
							if !EqualVec(got, want) {
								t.Fatalf("%s %dx%d: warp %d lane %d block %d chunk %d d%d: %v, want %v", m, c.M, c.N, w, lane, b, j0, i, got, want)
							}
							seen[[2]int{got[0], got[1]}]++
						}
					}
				}
			}
		}
		if len(seen) != c.M*c.N {
			t.Errorf("%s %dx%d: %d elements covered", m, c.M, c.N, len(seen))
		}
		for e, n := range seen {
			if n != 1 {
				t.Fatalf("%s: element %v held %d times", m, e, n)
			}
		}
		// P (the accumulator) is the RS A operand of the next dot in place.
		p := DotOperand{0, m}.Linear([]int{c.M, c.N}, c.nw)
		if _, ok := remap(nil2(acc.NumRegs()), acc, p, Identity); !ok {
			t.Errorf("%s %dx%d: accumulator -> A fragment is not free", m, c.M, c.N)
		}
	}
	if s := (MMA{WarpsPerCTA: [2]int{4, 1}, Version: 3}).String(); s != "mma{v3, wpc=[4 1]}" {
		t.Errorf("String() = %q", s)
	}
	if s := (MMA{WarpsPerCTA: [2]int{4, 1}}).String(); s != "mma{v2, wpc=[4 1]}" {
		t.Errorf("String() = %q", s)
	}
}

// TestMMAv3SplitN checks the wgmma accumulator with warpgroups along N
// (WarpsPerCTA [4a, b]) against the PTX ISA's D fragment per instruction:
// warpgroup g is at M block g%a and N block g/a; in it, d[i] of the
// instruction for M block blk and column chunk j0 (nc columns) is at row
// 64a·blk + 64(g%a) + 16(w%4) + l/4 + 8((i>>1)&1), column (g/a)·N/b + j0 +
// 8(i>>2) + 2(l%4) + (i&1), and is register blk·(N/b)/2 + j0/2 + i (an
// instruction's registers consecutive). The tile is covered once, each
// warpgroup's columns are one contiguous range, the A fragment is copied
// across the warpgroups along N and B's warps hold the accumulator's
// column ranges.
func TestMMAv3SplitN(t *testing.T) {
	for _, c := range []struct{ a, b, M, N int }{
		{1, 2, 64, 64}, {1, 2, 64, 128}, {1, 2, 64, 256}, {1, 2, 64, 512}, {1, 2, 128, 64},
		{1, 4, 64, 128}, {2, 2, 128, 64}, {2, 2, 256, 128}, {1, 2, 64, 16},
	} {
		nw := 4 * c.a * c.b
		m := MMA{WarpsPerCTA: [2]int{4 * c.a, c.b}, Version: 3}
		acc := m.Linear([]int{c.M, c.N}, nw)
		if err := acc.Check(); err != nil {
			t.Errorf("%s on %dx%d: %v", m, c.M, c.N, err)
			continue
		}
		nN := c.N / c.b
		nc := min(nN, 256)
		if want := c.M / (64 * c.a) * nN / 2; acc.NumRegs() != want {
			t.Errorf("%s %dx%d: %d registers, want %d", m, c.M, c.N, acc.NumRegs(), want)
		}
		seen := map[[2]int]int{}
		for w := 0; w < nw; w++ {
			g := w / 4
			lo, hi := c.N, -1
			for lane := 0; lane < 32; lane++ {
				for blk := 0; blk < c.M/(64*c.a); blk++ {
					for j0 := 0; j0 < nN; j0 += nc {
						for i := 0; i < nc/2; i++ {
							r := blk*nN/2 + j0/2 + i
							want := []int{64*c.a*blk + 64*(g%c.a) + 16*(w%4) + lane/4 + 8*((i>>1)&1),
								g/c.a*nN + j0 + 8*(i>>2) + 2*(lane%4) + i&1}
							got := acc.coord(r, lane, w)
							if !EqualVec(got, want) {
								t.Fatalf("%s %dx%d: warp %d lane %d block %d chunk %d d%d: %v, want %v", m, c.M, c.N, w, lane, blk, j0, i, got, want)
							}
							seen[[2]int{got[0], got[1]}]++
							lo, hi = min(lo, got[1]), max(hi, got[1])
						}
					}
				}
			}
			if lo != g/c.a*nN || hi != lo+nN-1 {
				t.Errorf("%s %dx%d: warp %d holds columns %d..%d, want %d..%d", m, c.M, c.N, w, lo, hi, g/c.a*nN, g/c.a*nN+nN-1)
			}
		}
		if len(seen) != c.M*c.N {
			t.Errorf("%s %dx%d: %d elements covered", m, c.M, c.N, len(seen))
		}
		for e, n := range seen {
			if n != 1 {
				t.Fatalf("%s: element %v held %d times", m, e, n)
			}
		}
		// The RS A fragment [M, 64]: per warp the m16n8k16 A fragment of
		// its M block's rows, the same in every warpgroup along N.
		K := 64
		a := DotOperand{0, m}.Linear([]int{c.M, K}, nw)
		if err := a.Check(); err != nil {
			t.Fatalf("%s: A fragment: %v", m, err)
		}
		for i, b := range a.WarpBases() {
			if along := i >= log2(4*c.a); along != isZero(b) {
				t.Errorf("%s: A fragment's warp bit %d is %v: a copy (zero) exactly for the warp bits along N", m, i, b)
			}
		}
		for w := 0; w < nw; w++ {
			g := w / 4
			for lane := 0; lane < 32; lane++ {
				for blk := 0; blk < c.M/(64*c.a); blk++ {
					for kk := 0; kk < K/16; kk++ {
						for e := 0; e < 8; e++ {
							want := []int{64*c.a*blk + 64*(g%c.a) + 16*(w%4) + lane/4 + 8*((e>>1)&1), 16*kk + 2*(lane%4) + e&1 + 8*(e>>2)}
							if got := a.coord(8*(blk*K/16+kk)+e, lane, w); !EqualVec(got, want) {
								t.Fatalf("%s A: warp %d lane %d block %d k%d e%d: %v, want %v", m, w, lane, blk, kk, e, got, want)
							}
						}
					}
				}
			}
		}
		// B [64, N]: each warp's columns are its warpgroup's range.
		bl := DotOperand{1, m}.Linear([]int{K, c.N}, nw)
		if err := bl.Check(); err != nil {
			t.Fatalf("%s: B fragment: %v", m, err)
		}
		for w := 0; w < nw; w++ {
			g := w / 4
			for lane := 0; lane < 32; lane++ {
				for r := 0; r < bl.NumRegs(); r++ {
					if col := bl.coord(r, lane, w)[1]; col/nN != g/c.a {
						t.Fatalf("%s B: warp %d holds column %d, outside its N block %d", m, w, col, g/c.a)
					}
				}
			}
		}
	}
}

// TestMMAWarpsAlongNInterleaved pins the layouts the split must leave as
// they are: version 2 with warps along N tiles 8-column atoms
// interleaved across the warps (warp w at M tile w%wm, N tile w/wm of
// each wm x wn group), and version 3 with all warps along M is version 2's.
func TestMMAWarpsAlongNInterleaved(t *testing.T) {
	for _, c := range []struct{ wm, wn, M, N int }{{2, 2, 64, 64}, {1, 4, 16, 128}, {4, 2, 64, 32}, {2, 4, 128, 128}} {
		nw := c.wm * c.wn
		m := MMA{WarpsPerCTA: [2]int{c.wm, c.wn}}
		acc := m.Linear([]int{c.M, c.N}, nw)
		tm, tn := c.M/(16*c.wm), c.N/(8*c.wn) // tiles per warp
		for w := 0; w < nw; w++ {
			for lane := 0; lane < 32; lane++ {
				for i := 0; i < tm; i++ {
					for j := 0; j < tn; j++ {
						for e := 0; e < 4; e++ {
							want := []int{16*(c.wm*i+w%c.wm) + lane/4 + 8*(e>>1), 8*(c.wn*j+w/c.wm) + 2*(lane%4) + e&1}
							if got := acc.coord(4*(i*tn+j)+e, lane, w); !EqualVec(got, want) {
								t.Fatalf("%s %dx%d: warp %d lane %d tile (%d, %d) c%d: %v, want %v", m, c.M, c.N, w, lane, i, j, e, got, want)
							}
						}
					}
				}
			}
		}
	}
	for _, nw := range []int{4, 8, 16} {
		for _, s := range [][]int{{64, 64}, {128, 256}, {256, 32}, {64, 1}, {1, 64}} {
			v2 := MMA{WarpsPerCTA: [2]int{nw, 1}}
			v3 := MMA{WarpsPerCTA: [2]int{nw, 1}, Version: 3}
			for _, p := range [][2]Layout{{v2, v3}, {DotOperand{0, v2}, DotOperand{0, v3}}, {DotOperand{1, v2}, DotOperand{1, v3}}, {Slice{1, v2}, Slice{1, v3}}} {
				shape := s
				if p[0].Rank() == 1 {
					shape = s[:1]
				}
				if a, b := p[0].Linear(shape, nw), p[1].Linear(shape, nw); !a.Equal(b) {
					t.Errorf("%s on %v: %s, but %s is %s", p[1], shape, b.key(), p[0], a.key())
				}
			}
		}
	}
}
