//go:build gpu

package tests

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/fac-compiler/fac"
	"github.com/fac-compiler/fac/reference"
)

// TestGPUModPatterns runs the patterns of TestModPatterns on the GPU (bf16,
// head dim 64): aux tensors of every element type uploaded as declared,
// run-time parameters and sizes bound at launch, block masks built
// analytically or by the GPU classifier. Kernels come from FAC_BUNDLE.
func TestGPUModPatterns(t *testing.T) {
	gpu := openTestGPU(t)
	for pi, p := range modPatterns {
		fwd := compilePatternAs(t, p, "bf16", 64)
		for li, sl := range [][2]int{{150, 150}, {70, 150}, {150, 97}, {1000, 1000}} {
			sh := fac.Shape{Batch: 2, Heads: 4, KVHeads: 2, SeqQ: sl[0], SeqK: sl[1], Dim: 64}
			in := inputs(sh, uint64(10*pi+li))
			var aux, scalars map[string]any
			if p.values != nil {
				aux, scalars = p.values(sh, rand.New(rand.NewPCG(uint64(pi), uint64(li))))
			}
			in.Aux, in.Scalars = aux, scalars
			name := fmt.Sprintf("%s/%dx%d", p.name, sl[0], sl[1])
			o, lse, err := fwd.RunCUDA(gpu, in, sh)
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			var mf reference.MaskFunc
			var sf reference.ScoreFunc
			if p.goMask != nil {
				mf = p.goMask(sh, aux, scalars)
			}
			if p.goScore != nil {
				sf = p.goScore(sh, aux, scalars)
			}
			r := roundInputs(in, "bf16")
			ro, rlse := reference.Attention(to64(r.Q), to64(r.K), to64(r.V), reference.Shape{B: sh.Batch, H: sh.Heads, HKV: sh.KVHeads, Sq: sh.SeqQ, Sk: sh.SeqK, D: sh.Dim},
				float64(float32(0.125)), mf, sf)
			checkFlat(t, name, o, lse, ro, rlse, 2e-2)
		}
	}
}
