package passes

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/fac-compiler/fac/runtime/cpu"
	"github.com/fac-compiler/fac/tir"
)

// TestPassesPreserveResults runs kernels through the interpreter after
// every pass of the Table and compares what they store with the run of the
// unoptimized module, bit for bit: no pass may change a result, not even by
// rounding. The .full variants made by specialize-mask are compared, after
// each later pass, with their run right after specialize-mask.
func TestPassesPreserveResults(t *testing.T) {
	type launch struct {
		file, kernel string
		grid         int
		n            int32 // the kernel's last param
		bufs         []int // sizes of its f32 buffer params, in order
	}
	for _, l := range []launch{
		{"testdata/pipeline/masked_loop.tir", "masked_sum", 3, 10, []int{12, 12}},
		{"testdata/pipeline/flash_fwd.tir", "flash_fwd", 3, 5, []int{12, 12, 12, 12}},
		// overlap = true: overlap-softmax rotates P·V (odd and one-block lengths).
		{"testdata/overlap-softmax/flash_fwd.tir", "flash_fwd", 3, 5, []int{12, 12, 12, 12}},
		{"testdata/overlap-softmax/flash_fwd.tir", "flash_fwd", 3, 2, []int{12, 12, 12, 12}},
		{"testdata/pipeline/softmax.tir", "softmax", 2, 3, []int{8, 8}},
		{"../tir/testdata/sample.tir", "sample", 2, 8, []int{64, 8}},
		// pad-dims: tiles of 12 and 24 lanes computed in 16 and 32.
		{"testdata/pad-dims/rowsum.tir", "rowsum", 1, 7, []int{48, 48}},
		{"testdata/pad-dims/loop.tir", "acc", 1, 3, []int{24, 24}},
		{"testdata/pad-dims/pv.tir", "pv", 1, 0, []int{256, 192, 192}},
	} {
		run := func(m *tir.Module, kernel string) [][]float64 {
			t.Helper()
			rng := rand.New(rand.NewPCG(1, 2))
			var args []any
			var bufs []*cpu.Buffer
			for _, n := range l.bufs {
				xs := make([]float32, n)
				for i := range xs {
					xs[i] = float32(rng.NormFloat64())
				}
				b := cpu.FromF32("b", xs)
				bufs = append(bufs, b)
				args = append(args, b)
			}
			if err := cpu.Launch(m, kernel, [3]int{l.grid, 1, 1}, append(args, l.n)...); err != nil {
				t.Fatalf("%s: %v", l.file, err)
			}
			var out [][]float64
			for _, b := range bufs {
				out = append(out, b.Vals)
			}
			return out
		}
		want := run(parseFile(t, l.file), l.kernel)
		var wantFull [][]float64
		for _, name := range Names() {
			m := parseFile(t, l.file)
			if err := RunUntil(m, Options{VerifyEach: true}, name); err != nil {
				t.Fatal(err)
			}
			if got := run(m, l.kernel); !sameBuffers(got, want) {
				t.Errorf("%s: @%s after %s stores %v, want %v", l.file, l.kernel, name, got, want)
			}
			if m.Func(l.kernel+".full") == nil {
				continue
			}
			got := run(m, l.kernel+".full")
			if wantFull == nil {
				wantFull = got
			} else if !sameBuffers(got, wantFull) {
				t.Errorf("%s: @%s.full after %s stores %v, want %v", l.file, l.kernel, name, got, wantFull)
			}
		}
		if wantFull == nil && !slices.Contains([]string{"softmax", "sample", "rowsum", "acc", "pv"}, l.kernel) {
			t.Errorf("%s: no .full variant to check", l.file)
		}
	}
}

func sameBuffers(a, b [][]float64) bool {
	for i := range a {
		for j, x := range a[i] {
			y := b[i][j]
			if math.Float64bits(x) != math.Float64bits(y) && !(x != x && y != y) {
				return false
			}
		}
	}
	return len(a) == len(b)
}
