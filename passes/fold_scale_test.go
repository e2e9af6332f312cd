package passes

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/fac-compiler/fac/runtime/cpu"
	"github.com/fac-compiler/fac/tir"
)

// TestFoldScaleMatchesInterpreter runs the golden softmax kernel before and
// after fold-scale: with a scale <= 0 (or NaN) the folded kernel computes
// the same thing bit for bit; with a positive scale it rounds the score's
// product with log2(e) once instead of twice, so the exponentials agree
// to a few ulps.
func TestFoldScaleMatchesInterpreter(t *testing.T) {
	const in = "testdata/fold-scale/softmax.tir"
	run := func(m *tir.Module, scale float32, n int32) []float64 {
		t.Helper()
		rng := rand.New(rand.NewPCG(3, 4))
		xs := make([]float32, 256)
		for i := range xs {
			xs[i] = float32(rng.NormFloat64() * 4)
		}
		out := cpu.NewBuffer("out", tir.F32, 256)
		if err := cpu.Launch(m, "softmax", [3]int{1, 1, 1}, cpu.FromF32("x", xs), out, scale, n); err != nil {
			t.Fatal(err)
		}
		return out.Vals
	}
	folded := parseFile(t, in)
	if err := foldScale(folded); err != nil {
		t.Fatal(err)
	}
	if err := tir.Verify(folded); err != nil {
		t.Fatal(err)
	}
	for _, scale := range []float32{0.125, 0.0883883, 3, 0, -0.5, float32(math.NaN())} {
		for _, n := range []int32{1, 3} {
			want, got := run(parseFile(t, in), scale, n), run(folded, scale, n)
			for i := range want {
				w, g := want[i], got[i]
				same := math.Float64bits(w) == math.Float64bits(g) || (w != w && g != g)
				if scale > 0 {
					if math.Abs(g-w) > 1e-5*math.Abs(w) && !same {
						t.Fatalf("scale %v, n %d: out[%d] = %v, unfolded %v", scale, n, i, g, w)
					}
				} else if !same {
					t.Fatalf("scale %v, n %d: out[%d] = %v, unfolded %v (bit for bit where the scale is not positive)", scale, n, i, g, w)
				}
			}
		}
	}
}

// TestFoldScaleUnsigned runs the golden two-score kernel (no max, no select
// of -inf) before and after fold-scale at scales of both signs: the
// multiply goes whatever the sign, and the results agree to a few ulps.
func TestFoldScaleUnsigned(t *testing.T) {
	const in = "testdata/fold-scale/twoscores.tir"
	run := func(m *tir.Module, scale float32) []float64 {
		t.Helper()
		rng := rand.New(rand.NewPCG(5, 6))
		xs := make([]float32, 16)
		for i := range xs {
			xs[i] = float32(rng.NormFloat64())
		}
		out := cpu.NewBuffer("out", tir.F32, 16)
		if err := cpu.Launch(m, "two", [3]int{1, 1, 1}, cpu.FromF32("x", xs), out, scale); err != nil {
			t.Fatal(err)
		}
		return out.Vals
	}
	folded := parseFile(t, in)
	if err := foldScale(folded); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(folded.String(), "if ") {
		t.Fatalf("an unsigned fold tests the scale's sign:\n%s", folded)
	}
	for _, scale := range []float32{0.125, 2, 0, -0.5, -3} {
		want, got := run(parseFile(t, in), scale), run(folded, scale)
		for i := range want {
			if math.Abs(got[i]-want[i]) > 1e-5*math.Abs(want[i]) {
				t.Fatalf("scale %v: out[%d] = %v, unfolded %v", scale, i, got[i], want[i])
			}
		}
	}
}
