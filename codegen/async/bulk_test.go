package async

import (
	"testing"

	"github.com/fac-compiler/fac/codegen/core"
)

// wgmmaAcc is the f32 accumulator layout of a [128, 64] wgmma result on
// two warpgroups: dimension 0 the rows (M), 1 the columns (N).
func wgmmaAcc() *core.Linear {
	return core.NewLinear([]int{128, 64},
		[][]int{{0, 1}, {8, 0}, {0, 8}, {0, 16}, {0, 32}},
		[][]int{{0, 2}, {0, 4}, {1, 0}, {2, 0}, {4, 0}},
		[][]int{{16, 0}, {32, 0}, {64, 0}})
}

// TestChooseRuns: the backward's dQᵀ tile (rows along dimension 0, stride
// 1; columns a row apart in global memory) is staged two rows a run with
// 32 bytes of padding, as conflict-free as one padded row a run at half
// the bulk reductions; one row a run when masked or when the rows are not
// consecutive in global memory.
func TestChooseRuns(t *testing.T) {
	lin := wgmmaAcc()
	if err := lin.Check(); err != nil {
		t.Fatal(err)
	}
	regs := lin.NumRegs()
	for _, c := range []struct {
		name     string
		strides  []int64
		masked   bool
		group    int
		runElems int
	}{
		{"contiguous", []int64{1, 128}, false, 2, 2*128 + 8},
		{"masked", []int64{1, 128}, true, 1, 128 + 4},
		{"rows apart", []int64{1, 256}, false, 1, 128 + 4},
	} {
		st := chooseRuns(lin, lin.Shape(), c.strides, 0, c.masked)
		if st.group != c.group || st.runElems != c.runElems || st.runs != 64/c.group {
			t.Errorf("%s: %d rows a run of %d f32 (%d runs), want %d of %d", c.name, st.group, st.runElems, st.runs, c.group, c.runElems)
		}
		if w := st.wavefronts(lin); w != regs {
			t.Errorf("%s: %d wavefronts a warp for %d registers, want one each", c.name, w, regs)
		}
		// Every element has its own word, inside its run, before the padding.
		seen := map[int]bool{}
		for d := range 128 {
			for q := range 64 {
				i := st.index([]int{d, q})
				if seen[i] || i%st.runElems >= st.group*128 || i/st.runElems >= st.runs {
					t.Fatalf("%s: element (%d, %d) at %d: taken, in the padding or past the runs", c.name, d, q, i)
				}
				seen[i] = true
			}
		}
	}
	// Unpadded rows a run put four lanes on each bank.
	one := runStaging{inner: 0, rowLen: 128, rowStride: []int64{0, 1}, group: 64, runElems: 64*128 + 4, runs: 1}
	if w := one.wavefronts(lin); w != 4*regs {
		t.Errorf("one run: %d wavefronts, want %d", w, 4*regs)
	}
}
