package sm90

import (
	"fmt"
	"testing"
)

// TestSplitLayout checks the accumulator layouts of dots whose M gives
// the warpgroups no 64-row block each: the most warpgroups along M that
// 64-row blocks allow, the rest along N, each with a multiple of 8
// columns; none where M has no 64-row block or N too few columns.
func TestSplitLayout(t *testing.T) {
	for _, c := range []struct {
		M, N, nWG int
		want      string // WarpsPerCTA, or "" for none
	}{
		{64, 64, 2, "[4 2]"}, {64, 256, 2, "[4 2]"}, {64, 16, 2, "[4 2]"}, {64, 8, 2, ""},
		{64, 128, 4, "[4 4]"}, {128, 64, 4, "[8 2]"}, {64, 16, 4, ""},
		{32, 64, 2, ""}, {96, 64, 2, ""}, {64, 64, 3, ""},
	} {
		m, ok := splitLayout(c.M, c.N, c.nWG)
		got := ""
		if ok {
			if m.Version != 3 {
				t.Errorf("%+v: version %d", c, m.Version)
			}
			got = fmt.Sprint(m.WarpsPerCTA)
		}
		if got != c.want {
			t.Errorf("splitLayout(%d, %d, %d) = %q, want %q", c.M, c.N, c.nWG, got, c.want)
		}
	}
}

// TestMNMajorSwizzle checks the tiles an MN-major B takes when its
// instructions are nc columns wide: every instruction starts on a panel
// (mnAligned) and the swizzle is the widest that allows it.
func TestMNMajorSwizzle(t *testing.T) {
	for _, c := range []struct{ rows, cols, nc, w int }{
		{64, 64, 32, 64}, {64, 64, 64, 128}, {32, 128, 64, 128}, {64, 32, 16, 32}, {16, 512, 256, 128},
	} {
		tl, ok := newTileMax(c.rows, c.cols, min(128, 2*c.nc))
		if !ok || tl.w != c.w {
			t.Errorf("%dx%d, %d-column instructions: tile %v (%v), want %d-byte swizzle", c.rows, c.cols, c.nc, tl, ok, c.w)
			continue
		}
		v := view{tl, false}
		for m0 := 0; m0 < c.cols; m0 += c.nc {
			if !v.mnAligned(m0) {
				t.Errorf("%s: an instruction cannot start at column %d", tl, m0)
			}
		}
	}
	if _, ok := newTileMax(64, 64, 16); ok {
		t.Error("a 16-byte swizzle (8-column panels) was allowed")
	}
}
