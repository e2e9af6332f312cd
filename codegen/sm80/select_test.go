package sm80

import (
	"testing"

	"github.com/fac-compiler/fac/codegen/core"
)

// TestChunkLayout checks that staged loads get a valid layout whose first
// three register bits are 8 consecutive elements of the last dim (one
// 16-byte cp.async per thread and group).
func TestChunkLayout(t *testing.T) {
	for _, nw := range []int{1, 2, 4, 8} {
		for _, s := range [][]int{{16, 16}, {64, 64}, {64, 128}, {128, 64}, {8, 8}} {
			x := ChunkLayout(s, nw).Linear(s, nw)
			if err := x.Check(); err != nil {
				t.Errorf("%v, %d warps: %v", s, nw, err)
				continue
			}
			if reg := x.RegBases(); len(reg) < 3 || !core.EqualBases(reg[:3], [][]int{{0, 1}, {0, 2}, {0, 4}}) {
				t.Errorf("%v, %d warps: registers %v are not 8-element chunks", s, nw, reg)
			}
		}
	}
}
