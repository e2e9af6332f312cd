// Command forward shows fac embedded in a Go program: it runs sliding-window
// attention on the GPU when there is one, from a bundle built ahead of time
// and embedded in the binary (no llc needed), else on the CPU reference
// device, and checks the result against naive attention.
//
//	go run ./examples/forward
//
// The bundle was made with:
//
//	fac build --mask "sliding_window(255, 0)" --dtype bf16 --dim 64 --arch sm_90a -o examples/forward/attn.bundle
//
// A mask of your own is compiled from its source text, given by name in
// Options.Sources (examples/usermask runs one):
//
//	src, _ := os.ReadFile("mymask.fa")
//	fwd, err := fac.CompileForward(fac.Options{Sources: map[string]string{"mymask.fa": string(src)}, Mask: "my_mask", DType: "bf16"}, 64)
//
// A bundle then needs the kernel built from the same source: fac build
// mymask.fa --mask my_mask ...
package main

import (
	_ "embed"
	"fmt"
	"log"
	"math"
	"math/rand/v2"

	"github.com/fac-compiler/fac"
	"github.com/fac-compiler/fac/artifact/bundle"
)

//go:embed attn.bundle
var attnBundle []byte

func main() {
	sh := fac.Shape{Batch: 2, Heads: 8, KVHeads: 2, SeqQ: 1000, SeqK: 1000, Dim: 64}
	fwd, err := fac.CompileForward(fac.Options{Mask: "sliding_window(255, 0)", DType: "bf16"}, sh.Dim)
	if err != nil {
		log.Fatal(err)
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

	var o []float32
	device := "cuda"
	gpu, err := fac.OpenCUDA(0)
	if err == nil {
		b, err := bundle.Parse(attnBundle)
		if err != nil {
			log.Fatal(err)
		}
		gpu.AddBundle(b) // kernels for this GPU come from the bundle; others compile with llc
		o, _, err = fwd.RunCUDA(gpu, in, sh)
		if err != nil {
			log.Fatal(err)
		}
	} else {
		device = "cpu (" + err.Error() + ")"
		if o, _, err = fwd.RunCPU(in, sh); err != nil {
			log.Fatal(err)
		}
	}
	ref, _, err := fwd.Reference(in, sh)
	if err != nil {
		log.Fatal(err)
	}
	maxErr, maxRef := 0.0, 0.0
	for i := range o {
		maxErr = math.Max(maxErr, math.Abs(float64(o[i])-ref[i]))
		maxRef = math.Max(maxRef, math.Abs(ref[i]))
	}
	fmt.Printf("device %s: max |O - ref| / max |ref| = %.2e\n", device, maxErr/maxRef)
}
