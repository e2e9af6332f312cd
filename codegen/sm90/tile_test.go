package sm90

import (
	"math/rand"
	"testing"
)

var tileShapes = [][2]int{{8, 16}, {8, 32}, {16, 64}, {32, 16}, {64, 64}, {64, 128}, {128, 64}, {16, 512}, {256, 256}}

// TestTileBijection checks that every tile is a bijection from elements to
// aligned 2-byte slots of its bytes, that 8-element chunks stay 16
// contiguous bytes (one cp.async), and that offsets are XOR-linear in
// coordinates with disjoint bits (what the emitted code relies on).
func TestTileBijection(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	for _, s := range tileShapes {
		tl, ok := newTile(s[0], s[1])
		if !ok {
			t.Fatalf("%v: no tile", s)
		}
		seen := make([]bool, tl.bytes()/2)
		for r := 0; r < tl.rows; r++ {
			for c := 0; c < tl.cols; c++ {
				o := tl.offset(r, c)
				if o < 0 || o >= tl.bytes() || o%2 != 0 || seen[o/2] {
					t.Fatalf("%s: (%d, %d) at %d: outside, misaligned or taken", tl, r, c, o)
				}
				seen[o/2] = true
				if c%8 != 0 && o != tl.offset(r, c-c%8)+2*(c%8) {
					t.Fatalf("%s: chunk of (%d, %d) not contiguous", tl, r, c)
				}
			}
		}
		for i := 0; i < 1000; i++ {
			r, c := rng.Intn(tl.rows), rng.Intn(tl.cols)
			rm, cm := rng.Intn(tl.rows), rng.Intn(tl.cols)
			r1, c1, r2, c2 := r&rm, c&cm, r&^rm, c&^cm
			if tl.offset(r, c) != tl.offset(r1, c1)^tl.offset(r2, c2) {
				t.Fatalf("%s: offset not XOR-linear at (%d, %d)", tl, r, c)
			}
		}
	}
	for _, s := range [][2]int{{8, 8}, {12, 64}, {4, 64}} {
		if _, ok := newTile(s[0], s[1]); ok {
			t.Errorf("%v accepted", s)
		}
	}
}

// TestDescriptorFields checks the bit layout of matrix descriptors.
func TestDescriptorFields(t *testing.T) {
	if d := descriptor(0x1230, 16, 1024, 1); d != 0x123|1<<16|64<<32|1<<62 {
		t.Errorf("descriptor = %#x", d)
	}
	if d := descriptor(0x40000+32, 0, 0, 2); d != 2|2<<62 {
		t.Errorf("start address beyond 18 bits: %#x", d)
	}
	for _, c := range []struct {
		rows, cols int
		kMajor     bool
		want       uint64
	}{
		{64, 128, true, 0x4000004000010000},  // K (QK^T's B): sw128, LBO 1 (unused), SBO 1024
		{64, 128, false, 0x4000004002000000}, // V (PV's B): sw128, LBO 64·128, SBO 1024
		{64, 32, true, 0x8000002000010000},   // sw64, SBO 512
		{32, 16, false, 0xc000001000400000},  // sw32, LBO 32·32, SBO 256
	} {
		tl, _ := newTile(c.rows, c.cols)
		if d := (view{tl, c.kMajor}).desc(); d != c.want {
			t.Errorf("%s kMajor=%v: desc %#x, want %#x", tl, c.kMajor, d, c.want)
		}
	}
}

// decode is the address of element (mn, k) (k < 16) of an operand read
// through descriptor d, from the PTX ISA's canonical layouts
// (§9.7.15.5.1.2.1.3), independently of view's methods.
func decode(d uint64, mnMajor bool, mn, k int) int {
	start := int(d&0x3FFF) << 4
	lbo := int(d>>16&0x3FFF) << 4
	sbo := int(d>>32&0x3FFF) << 4
	w := map[uint64]int{1: 128, 2: 64, 3: 32}[d>>62]
	var a int
	if mnMajor {
		a = start + 2*(mn%(w/2)) + (mn/(w/2))*lbo + (k%8)*w + (k/8)*sbo
	} else {
		a = start + (mn%8)*w + (mn/8)*sbo + 2*k
	}
	return a ^ (a>>7&(w/16-1))<<4
}

// TestDescriptorsReadTiles checks that, for a 1024-aligned tile, every
// k step and instruction start (MN coordinate) the descriptor reads what
// the tile stores at the operand's elements.
func TestDescriptorsReadTiles(t *testing.T) {
	const base = 3 * tileAlign
	for _, s := range tileShapes {
		tl, _ := newTile(s[0], s[1])
		for _, kMajor := range []bool{true, false} {
			v := view{tl, kMajor}
			K, MN := tl.cols, tl.rows // K-major: K is contiguous
			if !kMajor {
				K, MN = tl.rows, tl.cols
			}
			if K%16 != 0 {
				continue
			}
			nc := min(MN, 64)
			for m0 := 0; m0 < MN; m0 += nc {
				if !v.mnAligned(m0) {
					t.Fatalf("%s kMajor=%v: instruction at %d not aligned", tl, kMajor, m0)
				}
				for kk := 0; kk < K/16; kk++ {
					d := v.desc() + encode(base+v.kOff(kk)+v.mnOff(m0))
					for mn := 0; mn < nc; mn++ {
						for k := 0; k < 16; k++ {
							r, c := m0+mn, 16*kk+k // tile coordinates
							if !kMajor {
								r, c = c, r
							}
							if got, want := decode(d, !kMajor, mn, k), base+tl.offset(r, c); got != want {
								t.Fatalf("%s kMajor=%v m0=%d kk=%d (%d, %d): descriptor reads %d, tile has %d", tl, kMajor, m0, kk, mn, k, got, want)
							}
						}
					}
				}
			}
		}
	}
}
