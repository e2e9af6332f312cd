// Command usermask compiles a mask of its own, written in fac's tile
// language and passed as source text through Options.Sources, and runs it
// on the CPU reference device, checking the result against naive float64
// attention. On a GPU, fwd.RunCUDA(gpu, in, sh) runs the same kernel
// (examples/forward shows it with a bundle).
//
//	go run ./examples/usermask
//
// The source could as well be read from a file (os.ReadFile("mymask.fa"));
// the map's key is the name errors give it (mymask.fa:3:12: ...).
package main

import (
	"fmt"
	"io"
	"log"
	"math"
	"math/rand/v2"
	"os"

	"github.com/fac-compiler/fac"
)

// userSource defines two mods: a mask with a compile-time parameter
// (window, given in the Mask expression) and a score mod. Mods see the
// query and key positions as tiles; && and || work on them element by
// element.
const userSource = `
// strided_local keeps, causally, every stride-th key of the last window keys.
mask strided_local<window: i32, stride: i32>(b, h, q_idx, kv_idx) {
    let d = q_idx - kv_idx
    return d >= 0 && d < window && d % stride == 0
}

// temperature divides the scores by t.
score temperature<t: f32>(s, b, h, q_idx, kv_idx) {
    return s / t
}
`

// Mask and Score are the mods' instances the kernel is compiled with.
const (
	Mask  = "strided_local(64, 2)"
	Score = "temperature(2.0)"
)

// run compiles the kernel with the user's mods, runs it on a random
// problem on the CPU device and reports the largest error against the
// float64 reference.
func run(w io.Writer) (relErr float64, err error) {
	sh := fac.Shape{Batch: 1, Heads: 4, KVHeads: 2, SeqQ: 200, SeqK: 200, Dim: 32}
	fwd, err := fac.CompileForward(fac.Options{
		Sources: map[string]string{"usermask.fa": userSource}, // name → source text
		Mask:    Mask,
		Score:   Score,
	}, sh.Dim)
	if err != nil {
		return 0, err // a mistake in the source is file:line:col: message
	}
	rng := rand.New(rand.NewPCG(1, 2))
	randn := func(n int) []float32 {
		x := make([]float32, n)
		for i := range x {
			x[i] = float32(rng.NormFloat64())
		}
		return x
	}
	nq, nk := sh.Batch*sh.Heads*sh.SeqQ*sh.Dim, sh.Batch*sh.KVHeads*sh.SeqK*sh.Dim
	in := fac.Inputs{Q: randn(nq), K: randn(nk), V: randn(nk)}
	o, _, err := fwd.RunCPU(in, sh)
	if err != nil {
		return 0, err
	}
	ref, _, err := fwd.Reference(in, sh)
	if err != nil {
		return 0, err
	}
	maxErr, maxRef := 0.0, 0.0
	for i := range o {
		maxErr = math.Max(maxErr, math.Abs(float64(o[i])-ref[i]))
		maxRef = math.Max(maxRef, math.Abs(ref[i]))
	}
	fmt.Fprintf(w, "kernel %s, mask %s, score %s on the CPU device: max |O - ref| / max |ref| = %.2e\n",
		fwd.Result().Kernel, fwd.Mask(), fwd.Score(), maxErr/maxRef)
	return maxErr / maxRef, nil
}

func main() {
	if _, err := run(os.Stdout); err != nil {
		log.Fatal(err)
	}
}
