package fac_test

import (
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/fac-compiler/fac"
)

// A causal forward pass on the CPU reference device, checked against the
// float64 reference with the same mask.
func ExampleCompileForward() {
	fwd, err := fac.CompileForward(fac.Options{Mask: "causal"}, 16)
	if err != nil {
		fmt.Println(err)
		return
	}
	sh := fac.Shape{Batch: 1, Heads: 2, SeqQ: 40, SeqK: 40, Dim: 16}
	r := rand.New(rand.NewPCG(1, 2))
	randn := func(n int) []float32 {
		xs := make([]float32, n)
		for i := range xs {
			xs[i] = float32(r.NormFloat64())
		}
		return xs
	}
	n := sh.Batch * sh.Heads * sh.SeqQ * sh.Dim
	in := fac.Inputs{Q: randn(n), K: randn(n), V: randn(n)}
	o, lse, err := fwd.RunCPU(in, sh)
	if err != nil {
		fmt.Println(err)
		return
	}
	want, _, err := fwd.Reference(in, sh)
	if err != nil {
		fmt.Println(err)
		return
	}
	worst := 0.0
	for i := range o {
		worst = max(worst, math.Abs(float64(o[i])-want[i]))
	}
	fmt.Println(len(o), len(lse), worst < 1e-4)
	// Output: 1280 80 true
}
